// `lathe eval MODEL --tool-calls FILE`: held-out exact tool-call accuracy. Each prompt of a prompt-only JSON
// Lines file (conversations rendered with the chat template and the row's `tools`) gets one greedy completion
// from the serving engine, all prompts batched; the completion's calls (the serving parser, tool_call_match.h)
// are matched against the row's expected calls as the `tool_call` reward does.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lathe/models/model.h"
#include "lathe/posttrain/dataset.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/serve/frontend/tool_call_parser.h"

namespace lathe::rollout {

struct ToolCallEvalOptions {
  std::string column = "tool_call";  // the expected calls (tool_call_match.h's forms)
  serve::ToolCallFormat format = serve::ToolCallFormat::kHermes;
  int64_t max_new_tokens = 128;  // a byte-level model's call takes ~100
  int64_t max_prompt_length = 512;   // longer prompts keep their last tokens, as GRPO's
};

struct ToolCallEvalResult {
  int64_t n = 0;                     // prompts scored
  int64_t exact = 0;                 // completions whose calls match exactly
  int64_t with_call = 0;             // completions with at least one well-formed call
  double partial_sum = 0;            // sum of the fractions of checks passed
  std::vector<std::string> completions;  // decoded, special tokens kept, in file order

  double accuracy() const { return n ? static_cast<double>(exact) / n : 0; }
  double accuracy_stderr() const { return n ? std::sqrt(accuracy() * (1 - accuracy()) / n) : 0; }  // binomial
  double call_rate() const { return n ? static_cast<double>(with_call) / n : 0; }
  double partial() const { return n ? partial_sum / n : 0; }
};

// InvalidArgument naming the row when the file is not prompt-only or a row lacks `column` (or holds no call form).
ToolCallEvalResult eval_tool_calls(const Model& model, const posttrain::ExampleEncoder& enc, const posttrain::Dataset& d,
                                   const ToolCallEvalOptions& o);

}  // namespace lathe::rollout
