// The contract between scheduler and model runner (spec serving.md §1): SchedulerOutput says what to
// compute this step, ModelRunnerOutput what was sampled, RequestOutput what goes back to the frontend.
// A sequence is named by its seq_id (SchedSeq); the runner keeps each sequence's tokens and block
// table from the first time it appears until it is in finished_ids.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "lathe/infer/sampling_state.h"
#include "lathe/serve/sched/sched_request.h"

namespace lathe {

// A sequence the runner has not seen: everything it needs, once.
struct NewSeqData {
  uint64_t seq_id = 0;
  uint64_t request_id = 0;
  int index = 0;                     // choice index (a per-choice sampling seed derives from it)
  std::vector<int32_t> token_ids;    // [T] its prompt
  std::shared_ptr<const SchedRequestParams> params;
  int64_t adapter_id = 0;
  std::vector<int32_t> block_ids;    // its whole block table
  int64_t num_computed_tokens = 0;   // prefix-cache hit: tokens already in its first blocks
};

// A sequence the runner knows: the diff since its last step.
struct CachedSeqData {
  uint64_t seq_id = 0;
  // Preempted since its last step: block_ids is its whole new table (replacing the old one), and
  // its K/V must be recomputed from num_computed_tokens; the runner keeps its tokens (it sampled them).
  bool resumed = false;
  std::vector<int32_t> block_ids;    // not resumed: blocks appended to its table
  int64_t num_computed_tokens = 0;
};

struct SchedulerOutput {
  int64_t step = 0;                        // matches update_from_output to its schedule()
  std::vector<NewSeqData> new_seqs;        // in scheduling order
  std::vector<CachedSeqData> cached_seqs;  // in scheduling order
  // Tokens [num_computed_tokens, + n) of each scheduled sequence. A sequence whose chunk reaches its
  // last known token has its next token sampled; the others (partial prefills) sample nothing.
  std::map<uint64_t, int64_t> num_scheduled_tokens;
  int64_t total_num_scheduled_tokens = 0;
  std::vector<uint64_t> preempted_ids;     // lost their blocks this step; they come back as resumed
  std::vector<uint64_t> finished_ids;      // finished or aborted since the last step: drop their state
};

// Log-probabilities of one sampled token, for a sequence whose request set SamplingParams::logprobs.
struct SampledLogprobs {
  float logprob = 0.f;          // of the sampled token (raw or processed, per the request's logprobs_mode)
  int64_t rank = 0;             // 1 + tokens with a larger logprob
  std::vector<TopLogprob> top;  // top_logprobs, best first, + the sampled token when not among them
};

struct ModelRunnerOutput {
  // One sampled token for each sequence whose chunk reached its last known token, none for the others.
  std::map<uint64_t, int32_t> sampled;
  std::map<uint64_t, SampledLogprobs> logprobs;  // the sampled ones that asked; the scheduler ignores it
  // Choice 0 of a request that set SamplingParams::prompt_logprobs: the prompt tokens this step's rows
  // predicted, in order, continuing where the last step stopped (prompt tokens 1..T-1 over all steps,
  // each once; raw logits, as vLLM). Listed (maybe empty) in the step that samples its first token.
  // The scheduler ignores it.
  std::map<uint64_t, std::vector<SampledLogprobs>> prompt_logprobs;
};

// What one step produced for one sequence (to stream, detokenise and check stop strings).
struct SeqOutput {
  uint64_t seq_id = 0;
  uint64_t request_id = 0;
  int index = 0;
  std::optional<int32_t> new_token;     // absent for an abort or a finish_choice
  std::optional<FinishReason> finish;   // set on the sequence's last output
  std::optional<int32_t> stop_token;    // the EOS or stop id that ended it (finish kStop)
  int64_t n_cached_prompt = 0;          // prompt tokens served from the prefix cache (SchedSeq::n_cached_prompt)
};

}  // namespace lathe
