// Learning-rate schedules (specs/pretrain.md §2.2). `step` is 0-based; S = total steps, W = warmup steps.
//   warmup (all):  lr = peak * (step + 1) / W                                  for step < W
//   constant:      lr = peak
//   cosine:        p = (step - W) / (S - W);  lr = min + (1 + cos(pi p)) / 2 * (peak - min),  min = final_fraction * peak
//   linear:        lr = peak - p * (peak - min)
//   wsd:           peak until the decay start D = S - decay_fraction * S, then with p = (step - D) / (S - D):
//                  "1-sqrt": min + (1 - sqrt(p)) (peak - min);  "linear": min + (1 - p) (peak - min);
//                  "cosine": min + (1 + cos(pi p)) / 2 (peak - min)
#pragma once

#include <cstdint>
#include <string>

namespace lathe::train {

struct LrSchedule {
  std::string kind = "cosine";     // constant | cosine | linear | wsd
  double peak = 3e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double final_fraction = 0.1;     // min = final_fraction * peak (cosine, linear, wsd)
  double decay_fraction = 0.2;     // wsd: the last 20% of the steps decay (llm.c: D = 0.8 S)
  std::string decay_style = "1-sqrt";  // wsd: 1-sqrt | linear | cosine

  void validate() const;  // throws InvalidArgument on unknown kinds or inconsistent step counts
  double at(int64_t step) const;
};

}  // namespace lathe::train
