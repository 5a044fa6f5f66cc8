// Tells a supervisor (`lathe launch`, tools/lathe/cmd_launch.cc) how far a run has got: when the
// environment variable LATHE_STEP_BEACON names a file, rank 0 appends one line per finished optimizer
// step, "STEP UNIX_TIME\n" (UNIX_TIME in seconds, microsecond resolution). The supervisor reads it to
// know the step a failure happened at and to time the restart (failure -> first new step).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lathe::train {

inline constexpr const char* kStepBeaconEnv = "LATHE_STEP_BEACON";

class StepBeacon {
 public:
  explicit StepBeacon(bool lead);  // opens $LATHE_STEP_BEACON for appending on the lead rank, if set
  ~StepBeacon();
  StepBeacon(const StepBeacon&) = delete;
  StepBeacon& operator=(const StepBeacon&) = delete;
  void step_done(int64_t step);  // flushed at once: the reader polls the file

 private:
  std::FILE* f_ = nullptr;
};

// One line of a beacon file.
struct BeaconLine {
  int64_t step = 0;
  double unix_time = 0;
};

// Parses "STEP UNIX_TIME"; false for a malformed (e.g. half-written) line.
bool parse_beacon_line(const std::string& line, BeaconLine& out);

}  // namespace lathe::train
