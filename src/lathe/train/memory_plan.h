#pragma once
// Memory plan before step 1 (issue 13 item 4): pure estimates over config numbers.
// Not yet wired into run_fine_tune / recipes (see the follow-up list in the commit message).
#include <cstdint>
#include <string>
#include <vector>

namespace lathe::train {

struct MemoryPlanInputs {
  int64_t total_params = 0;      // policy parameters as loaded
  int64_t weight_bytes_per_param = 4;  // dtype as loaded (f32 4, bf16 2)
  int64_t trainable_params = 0;  // LoRA: adapters only
  int64_t reference_params = 0;  // separate frozen reference copy; 0 when "adapter off"
  int64_t teacher_params = 0;    // distillation teacher; 0 when none
  int64_t cached_ref_logprobs = 0;  // number of cached f32 reference log-probs
  // One micro-batch, for the activation estimate.
  int64_t batch = 0;        // B
  int64_t seq_len = 0;      // T
  int64_t hidden = 0;       // C
  int64_t layers = 0;       // L
  int64_t intermediate = 0; // F
  int64_t heads = 0;        // H
  int64_t vocab = 0;        // V
  int64_t logprob_chunk_rows = 0;  // rows per chunked log-prob / CE buffer
};

struct MemoryPlanItem {
  std::string name;
  int64_t bytes = 0;
};

// Activation estimate (f32, saved for backward, per layer, per token):
// 6C (norms, q/k/v/o, residual) + 3F (gate, up, act) + H*T (attention probs).
// Times B*T*L; an estimate, not a measurement.
int64_t memory_plan_activation_bytes(const MemoryPlanInputs& in);
std::vector<MemoryPlanItem> memory_plan_items(const MemoryPlanInputs& in);
int64_t memory_plan_total(const std::vector<MemoryPlanItem>& items);
std::string memory_plan_table(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes);
// MemAvailable in bytes from /proc/meminfo text ("MemAvailable: N kB"); -1 when absent.
int64_t memory_plan_parse_meminfo(const std::string& meminfo_text);
// Empty when the plan fits; otherwise an error with the table, the two biggest items and the knobs.
std::string memory_plan_check(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes);

}  // namespace lathe::train
