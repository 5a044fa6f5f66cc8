#include "lathe/train/rank_sync.h"

#include <exception>
#include <filesystem>

#include "lathe/base/error.h"

namespace lathe::train {

bool any_rank_failed(dist::Communicator& comm, bool mine) {
  double failed = mine ? 1 : 0;
  comm.all_reduce_sum(&failed, 1);
  return failed > 0;
}

void on_lead(dist::Communicator& comm, const std::string& what, const std::function<void()>& fn) {
  std::exception_ptr error;
  if (comm.rank() == 0) {
    try {
      fn();
    } catch (const std::filesystem::filesystem_error& e) {
      error = std::make_exception_ptr(IoError(str_cat(what, ": ", e.what())));
    } catch (...) {
      error = std::current_exception();
    }
  }
  const bool failed = any_rank_failed(comm, error != nullptr);
  if (error) std::rethrow_exception(error);
  if (failed) throw IoError(str_cat(what, ": failed on rank 0 (see its error)"));
}

}  // namespace lathe::train
