#include "lathe/rollout/prompt_encoding.h"

#include "lathe/base/error.h"

namespace lathe::rollout {

EncodedPrompt encode_prompt(const posttrain::ExampleEncoder& enc, const posttrain::Example& e, int64_t max_prompt_length) {
  const bool chat = e.prompt.conversational;
  EncodedPrompt p{.text = chat ? enc.render(e.prompt.messages, true, e.tools) : e.prompt.text};
  const std::vector<uint32_t> ids = enc.tokenizer().encode_ids(p.text, !chat);
  LATHE_CHECK_ARG(!ids.empty(), e.where, ": the prompt has no tokens");
  const size_t skip = ids.size() > static_cast<size_t>(max_prompt_length) ? ids.size() - max_prompt_length : 0;
  p.ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(skip), ids.end());
  return p;
}

}  // namespace lathe::rollout
