// `lathe data synth --tool-calls` (tools/lathe/food_log_tasks.h): the same seed writes the same files, no
// held-out prompt appears in the SFT or GRPO data, no GRPO prompt in the SFT data, every food has the same
// share of the GRPO prompts (within one), every expected call says
// what its sentence says, and the SFT answers are well-formed calls the tool_call reward's parser reads back
// as the expected call.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ranges>
#include <set>
#include <sstream>

#include "lathe/io/file_read.h"
#include "lathe/io/test_paths.h"
#include "lathe/rollout/tool_call_match.h"
#include "cli_run.h"

namespace lathe::testing {
namespace {

using Json = nlohmann::ordered_json;

std::vector<Json> rows(const std::string& path) {
  std::vector<Json> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

std::string synth(const std::string& dir, int seed) {
  const auto [rc, out] = run_shell(lathe_bin() + " data synth --out " + dir + " --documents 10 --tool-calls --seed " +
                                   std::to_string(seed) + " --sft-examples 600 --grpo-prompts 200 --eval-prompts 150");
  EXPECT_EQ(rc, 0) << out;
  return dir;
}

const char* kNumberWords[] = {"", "a", "two", "three", "four", "five"};

TEST(FoodLogTasks, DeterministicHeldOutDisjointAndConsistent) {
  const std::string a = synth(scratch_dir("food_log_a"), 3), b = synth(scratch_dir("food_log_b"), 3),
                    c = synth(scratch_dir("food_log_c"), 4);
  for (const char* f : {"/food_sft.jsonl", "/food_grpo.jsonl", "/food_eval.jsonl"}) {
    EXPECT_EQ(read_file(a + f), read_file(b + f)) << f;
    EXPECT_NE(read_file(a + f), read_file(c + f)) << f;  // another seed, another draw
  }
  std::set<std::string> seen, foods;  // user sentences of the training files, the items of the SFT calls
  for (const Json& r : rows(a + "/food_sft.jsonl")) {
    const std::string user = r["messages"][0]["content"];
    seen.insert(user);
    const std::vector<rollout::ToolCall> got =
        rollout::parse_tool_calls(r["messages"][1]["content"].get<std::string>(), serve::ToolCallFormat::kHermes);
    ASSERT_EQ(got.size(), 1u) << r.dump();
    EXPECT_EQ(got[0].name, "log_food");
    foods.insert(got[0].arguments["item"].get<std::string>());
  }
  const std::set<std::string> sft_users = seen;
  const std::vector<Json> grpo = rows(a + "/food_grpo.jsonl");
  ASSERT_EQ(grpo.size(), 200u);
  std::map<std::string, int> grpo_per_food;
  for (const Json& r : grpo) {
    const std::string user = r["prompt"][0]["content"];
    EXPECT_FALSE(sft_users.contains(user)) << "GRPO prompt in the SFT data: " << user;
    seen.insert(user);
    ++grpo_per_food[r["tool_call"]["arguments"]["item"].get<std::string>()];
  }
  EXPECT_EQ(grpo_per_food.size(), foods.size()) << Json(grpo_per_food).dump();
  const auto [fewest, most] = std::ranges::minmax(grpo_per_food | std::views::values);
  EXPECT_LE(most - fewest, 1) << "GRPO prompts per food: " << Json(grpo_per_food).dump();
  const std::vector<Json> eval = rows(a + "/food_eval.jsonl");
  ASSERT_EQ(eval.size(), 150u);
  std::set<std::string> eval_users;
  for (const Json& r : eval) {
    const std::string user = r["prompt"][0]["content"];
    EXPECT_FALSE(seen.contains(user)) << "held-out prompt in the training data: " << user;
    EXPECT_TRUE(eval_users.insert(user).second) << "repeated held-out prompt: " << user;
    const Json& args = r["tool_call"]["arguments"];
    const int q = args["quantity"];
    ASSERT_TRUE(q >= 1 && q <= 5) << r.dump();
    const std::string item = args["item"], meal = args["meal"];
    EXPECT_NE(user.find(meal), std::string::npos) << user;
    // "a egg" / "an egg" for one; the number word and a plural otherwise (the plural starts like the item).
    const std::string stem = item.substr(0, item.find(' ') == std::string::npos ? item.size() - 1 : item.find(' '));
    EXPECT_NE(user.find(std::string(kNumberWords[q]) + (q == 1 && std::string("aeiou").find(item[0]) != std::string::npos ? "n " : " ") + stem),
              std::string::npos)
        << user << " / " << r["tool_call"].dump();
  }
}

}  // namespace
}  // namespace lathe::testing
