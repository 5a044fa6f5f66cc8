#include "lathe/train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/train/checkpoint.h"
#include "lathe/io/file_read.h"
#include "lathe/io/line_reader.h"

namespace lathe::train {

namespace fs = std::filesystem;

namespace {

// Files lathe pretrain writes at the top of a run folder (checkpoints/ aside).
constexpr const char* kRunFiles[] = {"metrics.jsonl", "recipe.yaml", "recipe.json", "loss.svg"};

bool is_run_file(const std::string& name) {
  for (const char* f : kRunFiles) {
    const std::string base = f;
    if (name == base || name.rfind(base + ".tmp.", 0) == 0) return true;  // write_file_atomic temporaries
  }
  return false;
}

// Checkpoint folders and the temporaries save_checkpoint writes them under.
bool is_checkpoint_entry(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  return e.is_directory() && (name.rfind("step_", 0) == 0 || name.rfind(".tmp.step_", 0) == 0);
}

}  // namespace

RunLock RunLock::acquire(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "lock").string();
  RunLock l;
  // No O_TRUNC: the holder's pid stays readable until this process owns the lock.
  // O_NONBLOCK: whatever is in the lock file's place, the open never waits. The holder's pid is read back
  // through this same descriptor, once it is known to be a regular file.
  l.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (l.fd_ < 0) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw IoError(not_regular_file_message(path, st.st_mode));
    throw IoError(str_cat(path, ": cannot open the run folder's lock file: ", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(l.fd_, &st) != 0) throw IoError(str_cat(path, ": cannot stat the lock file: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw IoError(not_regular_file_message(path, st.st_mode));
  if (::flock(l.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char buf[32] = {};
      const ssize_t n = ::pread(l.fd_, buf, sizeof(buf) - 1, 0);
      std::string pid(buf, n > 0 ? static_cast<size_t>(n) : 0);
      pid = pid.substr(0, pid.find('\n'));
      if (pid.find_first_not_of("0123456789") != std::string::npos) pid.clear();  // not a pid lathe wrote
      throw IoError(str_cat("run folder ", run_dir, " is in use by another lathe process",
                            pid.empty() ? std::string() : " (pid " + pid + ")", " that holds ", path,
                            "; wait for it to finish, stop it, or choose another run.dir"));
    }
    throw IoError(str_cat(path, ": cannot lock the run folder: ", std::strerror(err)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(l.fd_, 0) != 0 || ::pwrite(l.fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    throw IoError(str_cat(path, ": cannot record the pid in the lock file: ", std::strerror(errno)));
  return l;
}

RunLock::RunLock(RunLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::vector<std::string> earlier_run_contents(const std::string& run_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const fs::path& p : checkpoint_folders(fs::path(run_dir) / "checkpoints"))
    out.push_back("checkpoints/" + p.filename().string());
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  if (fs::is_regular_file(metrics, ec) && fs::file_size(metrics, ec) > 0) {
    LineReader in = LineReader::open(metrics.string());
    size_t lines = 0;
    for (std::string line; in.next(line);) ++lines;
    out.push_back(str_cat("metrics.jsonl (", lines, lines == 1 ? " line)" : " lines)"));
  }
  return out;
}

void remove_earlier_run(const std::string& run_dir) {
  const fs::path dir = run_dir;
  const fs::path ckpts = dir / "checkpoints";
  try {
    if (fs::is_symlink(ckpts) || (fs::exists(ckpts) && !fs::is_directory(ckpts)))
      throw IoError(str_cat(ckpts.string(), " is not a checkpoint folder of lathe's; not removed (--overwrite)"));
    if (fs::is_directory(ckpts)) {
      for (const auto& e : fs::directory_iterator(ckpts))
        if (!is_checkpoint_entry(e) || e.is_symlink())
          throw IoError(str_cat(e.path().string(), " was not written by lathe; --overwrite removes only lathe's files: ",
                                "move it away first"));
      fs::remove_all(ckpts);
    }
    for (const auto& e : fs::directory_iterator(dir))
      if (!e.is_directory() && is_run_file(e.path().filename().string())) fs::remove(e.path());
  } catch (const fs::filesystem_error& e) {
    throw IoError(str_cat(run_dir, ": cannot remove the earlier run (--overwrite): ", e.what()));
  }
}

std::string new_run_id() {
  std::random_device rd;
  const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

}  // namespace lathe::train
