// Keeping the ranks of a data-parallel run in step when something fails: rank 0 alone writes the run
// folder, yet every rank must learn of its failure and stop at the same point instead of waiting in the
// next collective for a rank that has thrown.
#pragma once

#include <functional>
#include <string>

#include "lathe/dist/communicator.h"

namespace lathe::train {

// Whether any rank's `mine` is true (a collective: every rank calls it at the same point).
bool any_rank_failed(dist::Communicator& comm, bool mine);

// Runs `fn` on rank 0 only; every rank learns whether it threw, so all of them stop together (rank 0 with
// its own error, a filesystem_error as IoError prefixed by `what`; the others with a pointer to it).
void on_lead(dist::Communicator& comm, const std::string& what, const std::function<void()>& fn);

}  // namespace lathe::train
