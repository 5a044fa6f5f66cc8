// A prompt-only row as the engine's rollouts take it (GRPO, `lathe eval --tool-calls`): conversations rendered
// by the chat template with the row's `tools` and the generation prompt, text prompts as they are; then its
// last `max_prompt_length` tokens (TRL truncates prompts on the left).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/posttrain/dataset.h"
#include "lathe/posttrain/example_encoder.h"

namespace lathe::rollout {

struct EncodedPrompt {
  std::string text;          // as rendered (what reward functions see as the prompt)
  std::vector<int32_t> ids;  // [<= max_prompt_length], non-empty
};

// InvalidArgument naming the row when the prompt has no tokens.
EncodedPrompt encode_prompt(const posttrain::ExampleEncoder& enc, const posttrain::Example& e, int64_t max_prompt_length);

}  // namespace lathe::rollout
