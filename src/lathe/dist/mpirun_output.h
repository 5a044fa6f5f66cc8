// What the output of an mpirun job says about why it ended: a rank killed by a signal (mpirun's own
// report), a collective timeout naming the ranks that did not answer (dist/communicator.cc), a rank's
// error line ("lathe CMD: error: ..."), and the checkpoint the job resumed from. Read by `lathe launch`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::dist {

struct JobReport {
  std::string failure;            // the most telling cause seen, in words ("" when none was recognised)
  std::vector<int> failed_ranks;  // ranks the cause names (killed or silent)
  int cause_weight = 0;           // how telling `failure` is: 0 none, 1 a rank's error, 2 a signal, 3 a timeout
  std::string resumed_from;       // "resumed from DIR at step N": DIR
  int64_t resumed_step = -1;      // ... and N
};

// Reads one line of the job's output (a rank's or mpirun's) into `r`. The most telling cause wins: a
// timeout names who stopped answering; a rank killed by a signal explains its peers' errors (their
// partner vanished); else the first rank's error.
void scan_job_line(const std::string& line, JobReport& r);

}  // namespace lathe::dist
