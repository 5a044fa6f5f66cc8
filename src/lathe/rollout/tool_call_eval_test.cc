// `lathe eval --tool-calls` (tool_call_eval.h) on the fixture Llama, which makes no calls: rows that expect
// none count as exact, rows that expect one do not; the figures follow from those counts, the completions are
// the engine's greedy ones, and a row without the column is refused by name.
#include "lathe/rollout/tool_call_eval.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/rollout/engine_completion_sampler.h"
#include "lathe/rollout/tool_call_match.h"
#include "lathe/train/byte_tokenizer.h"

namespace lathe::rollout {
namespace {

struct Fixture {
  // Its own folder per test: CTest runs the tests of this file in parallel.
  std::string dir = testing::scratch_dir(std::string("tool_call_eval_") +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::unique_ptr<Model> model = Model::load(testing::fixtures_root() + "/models/llama");
  std::unique_ptr<posttrain::ExampleEncoder> enc;
  Fixture() {
    train::write_byte_level_tokenizer(dir + "/tokenizer");
    enc = std::make_unique<posttrain::ExampleEncoder>(tokenizer::read_tokenizer_files(dir + "/tokenizer"),
                                                      posttrain::EncoderOptions{});
  }
  posttrain::Dataset write(const std::string& lines) {
    std::ofstream(dir + "/eval.jsonl") << lines;
    return posttrain::load_dataset(dir + "/eval.jsonl");
  }
};

TEST(ToolCallEval, CountsFollowTheMatchesOfGreedyCompletions) {
  Context ctx(2);
  ContextScope scope(ctx);
  NoGradGuard no_grad;
  Fixture f;
  const posttrain::Dataset d = f.write(
      R"({"prompt": [{"role": "user", "content": "Hello there."}], "tool_call": []})" "\n"
      R"({"prompt": [{"role": "user", "content": "I had two eggs for breakfast."}], "tool_call": {"name": "log_food", "arguments": {"item": "egg", "quantity": 2, "meal": "breakfast"}}})" "\n"
      R"({"prompt": [{"role": "user", "content": "Thanks!"}], "tool_call": "[]"})" "\n");
  const ToolCallEvalOptions o{.max_new_tokens = 12};
  const ToolCallEvalResult r = eval_tool_calls(*f.model, *f.enc, d, o);
  ASSERT_EQ(r.n, 3);
  ASSERT_EQ(r.completions.size(), 3u);
  // The scores recomputed from the completions it returns.
  int64_t exact = 0, with_call = 0;
  double partial = 0;
  for (size_t i = 0; i < r.completions.size(); ++i) {
    const std::vector<ToolCall> got = parse_tool_calls(r.completions[i], o.format);
    const ToolCallMatch m = match_tool_calls(got, expected_tool_calls(d.examples[i].extra["tool_call"], "row"));
    exact += m.exact();
    with_call += !got.empty();
    partial += m.fraction();
  }
  EXPECT_EQ(r.exact, exact);
  EXPECT_EQ(r.with_call, with_call);
  EXPECT_DOUBLE_EQ(r.partial(), partial / 3);
  EXPECT_DOUBLE_EQ(r.accuracy(), static_cast<double>(exact) / 3);
  EXPECT_DOUBLE_EQ(r.accuracy_stderr(), std::sqrt(r.accuracy() * (1 - r.accuracy()) / 3));
  // A random 2-layer model makes no well-formed call: the two rows expecting none are exact, the other is not.
  EXPECT_EQ(r.with_call, 0);
  EXPECT_EQ(r.exact, 2);

  // The completions are the engine's greedy ones (the same call twice gives the same text).
  EXPECT_EQ(eval_tool_calls(*f.model, *f.enc, d, o).completions, r.completions);
}

TEST(ToolCallEval, RowWithoutTheColumnIsNamed) {
  Context ctx(1);
  ContextScope scope(ctx);
  NoGradGuard no_grad;
  Fixture f;
  const posttrain::Dataset d = f.write(R"({"prompt": [{"role": "user", "content": "Hi"}], "answer": 3})" "\n");
  try {
    eval_tool_calls(*f.model, *f.enc, d, {});
    FAIL() << "accepted a row without tool_call";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("eval.jsonl:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tool_call"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe::rollout
