#include "lathe/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "lathe/base/error.h"

namespace lathe::train {

void LrSchedule::validate() const {
  LATHE_CHECK_ARG(kind == "constant" || kind == "cosine" || kind == "linear" || kind == "wsd",
                  "schedule: unknown kind '", kind, "' (constant, cosine, linear or wsd)");
  LATHE_CHECK_ARG(decay_style == "1-sqrt" || decay_style == "linear" || decay_style == "cosine",
                  "schedule: unknown wsd decay_style '", decay_style, "' (1-sqrt, linear or cosine)");
  LATHE_CHECK_ARG(peak >= 0, "schedule: negative learning rate ", peak);
  LATHE_CHECK_ARG(total_steps > 0, "schedule: total steps must be positive, got ", total_steps);
  LATHE_CHECK_ARG(warmup_steps >= 0 && warmup_steps <= total_steps, "schedule: warmup_steps (", warmup_steps,
                  ") must be in [0, total steps = ", total_steps, "]");
  LATHE_CHECK_ARG(final_fraction >= 0 && final_fraction <= 1, "schedule: final_fraction must be in [0, 1]");
  LATHE_CHECK_ARG(decay_fraction >= 0 && decay_fraction <= 1, "schedule: decay_fraction must be in [0, 1]");
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double lo = final_fraction * peak;
  const auto decayed = [&](double p, const std::string& style) {
    p = std::clamp(p, 0.0, 1.0);
    if (style == "cosine") return lo + 0.5 * (1.0 + std::cos(M_PI * p)) * (peak - lo);
    if (style == "1-sqrt") return lo + (1.0 - std::sqrt(p)) * (peak - lo);
    return lo + (1.0 - p) * (peak - lo);  // linear
  };
  if (kind == "constant") return peak;
  if (kind == "wsd") {
    const double decay_start =
        static_cast<double>(total_steps) - decay_fraction * static_cast<double>(total_steps);
    if (static_cast<double>(step) < decay_start || decay_start >= static_cast<double>(total_steps)) return peak;
    return decayed((static_cast<double>(step) - decay_start) / (static_cast<double>(total_steps) - decay_start),
                   decay_style);
  }
  const int64_t span = total_steps - warmup_steps;
  if (span <= 0) return peak;
  return decayed(static_cast<double>(step - warmup_steps) / static_cast<double>(span), kind);
}

}  // namespace lathe::train
