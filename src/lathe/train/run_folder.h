// A run folder (run.dir) belongs to one run: an advisory lock (flock on <run>/lock) is held while a
// process trains in it, a fresh start refuses a folder that already holds a run, and --overwrite removes
// only the files lathe itself writes there (docs/recipes.md "The run folder").
#pragma once

#include <string>
#include <vector>

namespace lathe::train {

// flock(LOCK_EX) on <run_dir>/lock for the lifetime of the object; the file records the holder's pid.
// The kernel releases the lock when the process dies (even by SIGKILL), so a stale lock file is harmless.
class RunLock {
 public:
  // Throws IoError naming the folder (and the holder's pid) when another process holds it.
  static RunLock acquire(const std::string& run_dir);
  RunLock(RunLock&& o) noexcept;
  RunLock& operator=(RunLock&&) = delete;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

 private:
  RunLock() = default;
  int fd_ = -1;
};

// What in `run_dir` belongs to an earlier run: checkpoint folders and a non-empty metrics.jsonl (e.g.
// "checkpoints/step_00000006", "metrics.jsonl (12 lines)"); empty when the folder holds no run.
std::vector<std::string> earlier_run_contents(const std::string& run_dir);

// Deletes the earlier run's files: checkpoints/ (refused when it holds anything but checkpoint folders),
// metrics.jsonl, recipe.yaml, recipe.json, loss.svg and their temporaries. Other entries of the folder
// are left alone. Throws IoError naming the entry that stops it.
void remove_earlier_run(const std::string& run_dir);

// A new random run id (16 hex digits): checkpoints record it, and pruning deletes only the current run's.
std::string new_run_id();

}  // namespace lathe::train
