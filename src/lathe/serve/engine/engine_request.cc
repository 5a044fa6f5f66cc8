#include "lathe/serve/engine/engine_request.h"

#include <utility>

#include "lathe/base/error.h"
#include "lathe/models/model.h"

namespace lathe {

void check_engine_request(const EngineRequest& r, const ModelConfig& c, int64_t max_model_len) {
  LATHE_CHECK_ARG(!r.prompt.empty(), "[engine] prompt must not be empty");
  check_token_ids(r.prompt, c.vocab_size, "[engine] prompt");
  LATHE_CHECK_ARG(static_cast<int64_t>(r.prompt.size()) < max_model_len, "[engine] prompt has ", r.prompt.size(),
                  " tokens; the context of ", max_model_len, " tokens (max_model_len) leaves no room for output");
  check_sampling_params(r.sampling, c.vocab_size);
}

SchedRequest sched_request(uint64_t request_id, EngineRequest r) {
  const SamplingParams& p = r.sampling;
  SchedRequestParams params{.n = p.n, .max_tokens = p.max_tokens, .min_tokens = p.min_tokens,
                            .ignore_eos = p.ignore_eos, .stop_token_ids = p.stop_token_ids, .sampling = p};
  return {.request_id = request_id, .prompt = std::move(r.prompt), .params = std::move(params),
          .cache_keys = std::move(r.cache_keys)};
}

}  // namespace lathe
