// What a frontend submits to the engine (a tokenised prompt and its sampling parameters) and what the
// engine streams back: one EngineOutput per sampled token of each choice, the last one of a choice
// carrying its finish reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/infer/sampling_params.h"
#include "lathe/models/config.h"
#include "lathe/serve/kv_block_hash.h"
#include "lathe/serve/sched/scheduler_output.h"

namespace lathe {

// A served LoRA adapter as requests name it (multi-LoRA serving, lora_registry.h).
struct ServedLora {
  std::string name;  // the "model" a request names
  std::string path;  // the PEFT folder it was loaded from
  int64_t id = 0;    // KvCacheKeys::adapter_id of its requests: unique per load, never reused
};

struct EngineRequest {
  std::vector<int32_t> prompt;  // [T] token ids, T >= 1, each in [0, V)
  SamplingParams sampling;      // n, max_tokens, min_tokens, ignore_eos, stop ids and the sampler's knobs
  KvCacheKeys cache_keys;       // adapter id (a ServedLora's; 0: the base) and cache_salt: what a prefix hit must match
};

struct EngineOutput {
  uint64_t request_id = 0;
  int index = 0;                           // the choice, in [0, n)
  std::optional<int32_t> token;            // the new token; absent for an abort, an error or a finish_choice
  std::optional<SampledLogprobs> logprobs;  // with the token, when the request set logprobs
  // On choice 0's first token, when the request set prompt_logprobs: entry i is prompt token i + 1 given
  // the tokens before it (T - 1 entries; raw logprobs, its top prompt_logprobs, + the token if not among them).
  std::optional<std::vector<SampledLogprobs>> prompt_logprobs;
  std::optional<FinishReason> finish;      // set on the choice's last output
  std::optional<int32_t> stop_token;       // the EOS or stop id that ended it (finish kStop)
  std::string error;                       // non-empty: the request failed (finish kAbort)
  int64_t n_cached_prompt = 0;             // with a token: prompt tokens the prefix cache served this choice
};

// Throws InvalidArgument naming the field when the request cannot run on a model of config `c` with a
// context of max_model_len tokens: an empty prompt, ids outside the vocabulary, a prompt that leaves no
// room for output, or sampling parameters outside their ranges.
void check_engine_request(const EngineRequest& r, const ModelConfig& c, int64_t max_model_len);

// The scheduler's request for it (the seed must already be resolved: the runner samples with it).
SchedRequest sched_request(uint64_t request_id, EngineRequest r);

}  // namespace lathe
