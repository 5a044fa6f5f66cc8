// Collective communication between the processes of a data-parallel job (specs/pretrain.md §4). One
// interface, several engines: MPI for CPU processes launched with `mpirun` (here), NCCL for GPUs later.
// lathe writes no transport of its own (DESIGN.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lathe/base/error.h"

namespace lathe::dist {

// A collective that did not complete within the communicator's timeout (a rank stopped, hung or cut off
// by the network). The message names the ranks that did not answer a roll call. MPI cannot recover from
// it: the process must end with Communicator::abort(), since MPI_Finalize would wait for the silent rank.
class CollectiveTimeout : public Error {
 public:
  using Error::Error;
};

// A collective in flight. Its buffer must stay untouched (and alive) until wait() returns or test()
// returns true. Without a progress thread MPI moves data only inside MPI calls, so a caller that overlaps
// communication with compute calls test() now and then.
class Request {
 public:
  virtual ~Request() = default;
  virtual bool test() = 0;  // progresses the transfer; true once complete
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Processes of this job on this machine (thread budgeting).
  virtual int local_size() const = 0;
  // Whether a non-blocking collective moves data without the caller's compute threads (NCCL's own stream,
  // an MPI progress thread on spare cores): only then does overlapping it with compute pay.
  virtual bool progresses_in_background() const = 0;

  // In place over all ranks, in a fixed order (deterministic for a given world size).
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  virtual void all_reduce_sum(double* data, int64_t n) = 0;
  // The same, non-blocking (MPI_Iallreduce): the sum lands in data once the request completes. Every rank
  // must start its non-blocking collectives in the same order.
  virtual std::unique_ptr<Request> iall_reduce_sum(float* data, int64_t n) = 0;
  // In place: rank r's counts[r] elements, at offset counts[0] + ... + counts[r - 1] of data, reach every
  // rank (MPI_Allgatherv). The total must fit an int.
  virtual void all_gather(float* data, const std::vector<int64_t>& counts) = 0;

  // Seconds a collective (or a request's wait) may take before it throws CollectiveTimeout; 0: wait
  // forever (MPI's blocking calls). Every rank should set the same value.
  virtual void set_timeout(double /*seconds*/) {}
  // Ends every process of the job (MPI_Abort): the way out after a CollectiveTimeout.
  [[noreturn]] virtual void abort(int code);
};

// MPI when the process was started by mpirun / srun (their environment variables are present), else a
// single-process communicator whose collectives are no-ops. The first call initialises MPI.
Communicator& world();

// The single-process communicator (tests; and the fallback of world()).
std::unique_ptr<Communicator> make_single_process();

// True when this process was started by an MPI launcher.
bool launched_by_mpi();

}  // namespace lathe::dist
