#include "lathe/rollout/tool_call_eval.h"

#include "lathe/base/error.h"
#include "lathe/rollout/engine_completion_sampler.h"
#include "lathe/rollout/prompt_encoding.h"
#include "lathe/rollout/tool_call_match.h"

namespace lathe::rollout {

ToolCallEvalResult eval_tool_calls(const Model& model, const posttrain::ExampleEncoder& enc, const posttrain::Dataset& d,
                                   const ToolCallEvalOptions& o) {
  LATHE_CHECK_ARG(!d.examples.empty() && d.kind == posttrain::DatasetKind::kPromptOnly,
                  d.examples.empty() ? std::string("eval --tool-calls") : d.examples[0].where,
                  ": expected prompt-only rows (a prompt column and the expected `", o.column, "`)");
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<ToolCall>> want;
  for (const posttrain::Example& e : d.examples) {
    LATHE_CHECK_ARG(e.extra.contains(o.column) && !e.extra[o.column].is_null(), e.where, ": no `", o.column,
                    "` column (the expected tool calls)");
    want.push_back(expected_tool_calls(e.extra[o.column], str_cat(e.where, ": ", o.column)));
    prompts.push_back(encode_prompt(enc, e, o.max_prompt_length).ids);
  }
  EngineCompletionSampler sampler;
  const std::vector<std::vector<int32_t>> out =
      sampler.sample(model, prompts, {.max_new_tokens = o.max_new_tokens, .temperature = 0.0});  // greedy
  ToolCallEvalResult r;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::vector<uint32_t> ids(out[i].begin(), out[i].end());
    std::string text = enc.tokenizer().decode(ids, /*skip_special_tokens=*/false);
    const std::vector<ToolCall> got = parse_tool_calls(text, o.format);
    const ToolCallMatch m = match_tool_calls(got, want[i]);
    r.n += 1;
    r.exact += m.exact() ? 1 : 0;
    r.with_call += got.empty() ? 0 : 1;
    r.partial_sum += m.fraction();
    r.completions.push_back(std::move(text));
  }
  return r;
}

}  // namespace lathe::rollout
