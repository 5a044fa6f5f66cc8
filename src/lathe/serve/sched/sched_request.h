// One sequence the scheduler drives: a prompt, the tokens sampled after it, how many of them have K/V
// (num_computed_tokens) and the limits that end it. A client request with n > 1 becomes n of these
// (its choices), which share the prompt's cached KV blocks (scheduler.h says how).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "lathe/infer/sampling_params.h"
#include "lathe/serve/kv_block_hash.h"

namespace lathe {

// Per-request limits the scheduler enforces (spec serving.md §6); stop strings are the frontend's
// (its detokenizer sees text), sampling options are passed through to the runner untouched.
struct SchedRequestParams {
  int n = 1;                             // choices: child sequences sharing the prompt's blocks
  int64_t max_tokens = 16;               // output cap (clamped to max_model_len - prompt)
  int64_t min_tokens = 0;                // EOS and stop_token_ids do not stop before this many outputs
  bool ignore_eos = false;               // keep generating past EOS (benchmarks)
  std::vector<int32_t> stop_token_ids;   // stop on any of these (the token stays in the output)
  SamplingParams sampling;               // the runner's sampler; the scheduler checks its ranges and carries it
};

// A client request as the engine hands it to Scheduler::add_request.
struct SchedRequest {
  uint64_t request_id = 0;       // the client's id, unique among unfinished requests
  std::vector<int32_t> prompt;   // [T] token ids, non-empty
  SchedRequestParams params;
  KvCacheKeys cache_keys;        // adapter id and cache_salt: what a prefix hit must also match
};

// FinishReason is the sampler's (infer/sampling_params.h); kNone is never reported here.
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort" (the API's names)

enum class SeqStatus : uint8_t { kWaiting, kRunning, kCount };  // a finished sequence is dropped

// The scheduler's state of one sequence (one choice of a request).
struct SchedSeq {
  uint64_t seq_id = 0;       // the scheduler's id (KV manager and runner key); increasing = FCFS order
  uint64_t request_id = 0;
  int index = 0;             // choice index in [0, n)
  std::vector<int32_t> tokens;  // the prompt, then every sampled token
  int64_t n_prompt = 0;
  int64_t max_output = 0;    // min(max_tokens, max_model_len - n_prompt)
  std::shared_ptr<const SchedRequestParams> params;  // shared by the request's choices
  KvCacheKeys cache_keys;

  SeqStatus status = SeqStatus::kWaiting;
  int64_t num_computed_tokens = 0;  // tokens whose K/V its blocks hold; the target is tokens.size()
  int64_t n_cached_prompt = 0;      // prompt tokens the prefix cache held at its first admission (usage)
  int64_t reserved_blocks = 0;      // its output reservation while running (sched_policy.h)
  // Choices 1.. wait for choice 0's prompt to be computed (and cached) before their admission.
  std::optional<uint64_t> wait_for_prompt_of;
  bool prompt_computed = false;     // num_computed_tokens reached n_prompt at least once

  // What the runner has been told (SchedulerOutput is a diff against it).
  bool sent_to_runner = false;
  bool resumed = false;             // preempted since it was last scheduled
  int64_t n_blocks_sent = 0;
  int n_preemptions = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - n_prompt; }
  int64_t remaining_tokens() const { return num_tokens() - num_computed_tokens; }
};

// The stop check after one token was appended (vLLM's order: min_tokens first, then EOS unless
// ignore_eos, stop_token_ids, then the length caps). nullopt: keep going.
std::optional<FinishReason> check_stop(const SchedSeq& s, std::span<const int32_t> eos_token_ids, int64_t max_model_len);

}  // namespace lathe
