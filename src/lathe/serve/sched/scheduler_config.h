// The scheduler's knobs (spec serving.md §4; defaults are vLLM's for a small server) and the admission
// mode that decides whether running requests can ever be preempted.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

enum class AdmissionMode : uint8_t {
  // Admit a request only if its prompt blocks plus ceil(min(max_tokens, max_model_len - prompt) / P)
  // output blocks fit, with those of every running request, under the watermark: running requests
  // can always grow, so preemption never happens (TensorRT-LLM's GUARANTEED_NO_EVICT). The default.
  kReserveOutput,
  // Admit whenever this step's chunk fits above the watermark (vLLM's behaviour, "max utilisation"):
  // more requests run at once, and a request that later runs out of blocks preempts the newest one.
  kLoose,
  kCount
};

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;   // token budget of one step
  int64_t max_num_seqs = 256;              // running sequences
  int64_t max_num_partial_prefills = 1;    // sequences per step given a chunk that leaves them unfinished
  int64_t long_prefill_token_threshold = 0;  // per-sequence chunk cap; 0: none
  int64_t max_model_len = 0;               // context length: prompt + outputs (> 0, required)
  std::vector<int32_t> eos_token_ids;      // the model's end-of-sequence ids (several for Llama 3)
  AdmissionMode admission = AdmissionMode::kReserveOutput;
  double watermark = 0.01;                 // fraction of usable blocks admission keeps free, in [0, 1)
};

}  // namespace lathe
