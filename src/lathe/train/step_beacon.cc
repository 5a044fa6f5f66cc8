#include "lathe/train/step_beacon.h"

#include <chrono>
#include <cstdlib>

#include "lathe/base/error.h"

namespace lathe::train {

StepBeacon::StepBeacon(bool lead) {
  const char* path = std::getenv(kStepBeaconEnv);
  if (!lead || !path || !*path) return;
  f_ = std::fopen(path, "a");
  if (!f_) throw IoError(str_cat(kStepBeaconEnv, "=", path, ": cannot open for appending"));
}

StepBeacon::~StepBeacon() {
  if (f_) std::fclose(f_);
}

void StepBeacon::step_done(int64_t step) {
  if (!f_) return;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A failed write only blinds the supervisor (it then sees no progress); training goes on.
  std::fprintf(f_, "%lld %.6f\n", static_cast<long long>(step), now);
  std::fflush(f_);
}

bool parse_beacon_line(const std::string& line, BeaconLine& out) {
  long long step = 0;
  double t = 0;
  char end = 0;
  if (std::sscanf(line.c_str(), "%lld %lf%c", &step, &t, &end) < 2) return false;
  out = {.step = step, .unix_time = t};
  return true;
}

}  // namespace lathe::train
