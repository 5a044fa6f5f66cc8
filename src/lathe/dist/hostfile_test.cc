#include "lathe/dist/hostfile.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"

namespace lathe::dist {
namespace {

TEST(Hostfile, ParsesSlotsCommentsAndMergesRepeatedHosts) {
  const auto hosts = parse_hostfile("# cluster\nnode1 slots=4 max_slots=8\n\nnode2   # one slot\nnode1 slots=2\n", "hf");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "node1");
  EXPECT_EQ(hosts[0].slots, 6);
  EXPECT_EQ(hosts[1].host, "node2");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(total_slots(hosts), 7);
}

TEST(Hostfile, RejectsMalformedLinesNamingTheLine) {
  for (const char* bad : {"a slots=0\n", "a\nb slots=x\n", "a slots=2 gpus=1\n", "a slots=\n"}) {
    try {
      parse_hostfile(bad, "hf");
      ADD_FAILURE() << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("hf:"), std::string::npos) << e.what();
    }
  }
}

TEST(Hostfile, TakesTheFirstSlotsInHostOrder) {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}, {"c", 1}};
  const auto three = take_slots(hosts, 3);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three[1].host, "b");
  EXPECT_EQ(three[1].slots, 1);
  EXPECT_EQ(format_hostfile(three), "a slots=2\nb slots=1\n");
  EXPECT_TRUE(take_slots(hosts, 0).empty());
}

TEST(Hostfile, KnowsLocalNames) {
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_FALSE(is_local_host("node-that-is-not-here.example"));
}

}  // namespace
}  // namespace lathe::dist
