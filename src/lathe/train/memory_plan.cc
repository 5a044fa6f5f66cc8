#include "lathe/train/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace lathe::train {

int64_t memory_plan_activation_bytes(const MemoryPlanInputs& in) {
  const int64_t per_token_per_layer = 6 * in.hidden + 3 * in.intermediate + in.heads * in.seq_len;
  return 4 * in.batch * in.seq_len * in.layers * per_token_per_layer;
}

std::vector<MemoryPlanItem> memory_plan_items(const MemoryPlanInputs& in) {
  std::vector<MemoryPlanItem> items;
  items.push_back({"policy weights", in.total_params * in.weight_bytes_per_param});
  items.push_back({"gradients (trainable, f32)", 4 * in.trainable_params});
  items.push_back({"AdamW state (2 x f32)", 8 * in.trainable_params});
  if (in.reference_params > 0)
    items.push_back({"reference model", in.reference_params * in.weight_bytes_per_param});
  if (in.teacher_params > 0)
    items.push_back({"teacher model", in.teacher_params * in.weight_bytes_per_param});
  if (in.cached_ref_logprobs > 0)
    items.push_back({"cached reference log-probs", 4 * in.cached_ref_logprobs});
  items.push_back({"activations (estimate, one micro-batch)", memory_plan_activation_bytes(in)});
  items.push_back({"log-prob / CE chunk", 4 * in.logprob_chunk_rows * in.vocab});
  return items;
}

int64_t memory_plan_total(const std::vector<MemoryPlanItem>& items) {
  int64_t total = 0;
  for (const auto& it : items) total += it.bytes;
  return total;
}

std::string memory_plan_table(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes) {
  std::string out;
  char line[160];
  auto row = [&](const std::string& name, int64_t b) {
    std::snprintf(line, sizeof line, "  %-42s %10.1f MiB\n", name.c_str(),
                  static_cast<double>(b) / (1024.0 * 1024.0));
    out += line;
  };
  for (const auto& it : items) row(it.name, it.bytes);
  row("total", memory_plan_total(items));
  row("budget", budget_bytes);
  return out;
}

int64_t memory_plan_parse_meminfo(const std::string& meminfo_text) {
  std::istringstream is(meminfo_text);
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (is >> key >> kb) {
    std::getline(is, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

std::string memory_plan_check(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes) {
  if (memory_plan_total(items) <= budget_bytes) return {};
  std::vector<MemoryPlanItem> sorted = items;
  std::sort(sorted.begin(), sorted.end(),
            [](const MemoryPlanItem& a, const MemoryPlanItem& b) { return a.bytes > b.bytes; });
  std::string msg = "memory plan exceeds the budget:\n" + memory_plan_table(items, budget_bytes);
  msg += "biggest: " + sorted[0].name;
  if (sorted.size() > 1) msg += ", " + sorted[1].name;
  msg += "\nknobs: micro-batch size, sequence length, LoRA instead of full fine-tuning, "
         "reference mode (adapter off or cached log-probs), memory.budget / memory.check: false\n";
  return msg;
}

}  // namespace lathe::train
