#include "lathe/infer/stop_strings.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"

namespace lathe {
namespace {

// Feeds `pieces` one at a time; returns what was emitted, piece by piece, and the final flush.
std::vector<std::string> feed(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.push_back(m.push(p).text);
  out.push_back(m.flush());
  return out;
}

TEST(StopStrings, NoStopEmitsEverythingAtOnce) {
  StopStringMatcher m({});
  EXPECT_EQ(feed(m, {"a", "bc", ""}), (std::vector<std::string>{"a", "bc", "", ""}));
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, StopInsideOnePieceCutsBeforeIt) {
  StopStringMatcher m({"END"});
  const StopStringMatcher::Output o = m.push("abcENDxyz");
  EXPECT_EQ(o.text, "abc");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(m.push("more").text, "");  // nothing after a stop
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, StopAcrossPiecesIsHeldBackThenCut) {
  StopStringMatcher m({"</s>"});
  EXPECT_EQ(m.push("hi <").text, "hi ");  // "<" may begin the stop string
  EXPECT_EQ(m.push("/").text, "");
  const StopStringMatcher::Output o = m.push("s> tail");
  EXPECT_EQ(o.text, "");
  EXPECT_TRUE(o.stopped);
}

TEST(StopStrings, HeldTextIsReleasedWhenTheStopDoesNotFollow) {
  StopStringMatcher m({"</s>"});
  EXPECT_EQ(m.push("a </").text, "a ");
  EXPECT_EQ(m.push("b>").text, "</b>");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("x<").text, "x");
  EXPECT_EQ(m.flush(), "<");  // generation ended: the held text is output after all
}

TEST(StopStrings, EarliestMatchWinsAndIncludeKeepsIt) {
  StopStringMatcher m({"cd", "bcd", "x"}, /*include_stop=*/true);
  const StopStringMatcher::Output o = m.push("abcdx");
  EXPECT_EQ(o.text, "abcd");  // "bcd" starts first
  EXPECT_TRUE(o.stopped);
}

TEST(StopStrings, ConcatenationOfOutputsIsThePrefixBeforeTheStop) {
  // Every split of the same text into pieces gives the same output.
  const std::string text = "one two <|im_end|> three";
  const std::string want = "one two ";
  for (size_t cut1 = 0; cut1 <= text.size(); ++cut1)
    for (size_t cut2 = cut1; cut2 <= text.size(); cut2 += 3) {
      StopStringMatcher m({"<|im_end|>", "<|endoftext|>"});
      std::string got;
      for (const std::string& part : {text.substr(0, cut1), text.substr(cut1, cut2 - cut1), text.substr(cut2)})
        got += m.push(part).text;
      got += m.flush();
      ASSERT_EQ(got, want) << cut1 << " " << cut2;
      ASSERT_TRUE(m.stopped());
    }
}

TEST(StopStrings, EmptyStopStringIsRejected) {
  EXPECT_THROW(StopStringMatcher({"a", ""}), InvalidArgument);
}

}  // namespace
}  // namespace lathe
