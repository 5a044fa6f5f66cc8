#include "lathe/dist/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

#include "lathe/base/error.h"

namespace lathe::dist {

namespace {

// One process: the sum over one rank is the data itself, complete at once.
class DoneRequest final : public Request {
 public:
  bool test() override { return true; }
  void wait() override {}
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  bool progresses_in_background() const override { return false; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  std::unique_ptr<Request> iall_reduce_sum(float*, int64_t) override { return std::make_unique<DoneRequest>(); }
  void all_gather(float*, const std::vector<int64_t>&) override {}
};

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(str_cat("MPI ", what, " failed: ", std::string(msg, len)));
  }
}

class Mpi;

// One request per kMaxCount chunk of the buffer (MPI counts are int).
class MpiRequest final : public Request {
 public:
  MpiRequest(Mpi& comm, std::vector<MPI_Request> parts) : comm_(comm), parts_(std::move(parts)) {}
  ~MpiRequest() override;
  bool test() override {
    if (parts_.empty()) return true;
    int done = 0;
    check(MPI_Testall(static_cast<int>(parts_.size()), parts_.data(), &done, MPI_STATUSES_IGNORE), "test");
    if (done) parts_.clear();
    return done != 0;
  }
  void wait() override;

 private:
  Mpi& comm_;
  std::vector<MPI_Request> parts_;
};

class Mpi final : public Communicator {
 public:
  Mpi() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) check(MPI_Init(nullptr, nullptr), "init");
    // Errors come back as return codes, turned into exceptions (the default aborts without a message).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "split");
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    // The roll call after a timeout travels on its own communicator, apart from the collectives.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &watch_), "dup");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  // OpenMPI (Debian's build) has no progress thread; on shared memory the copies run on the calling core.
  bool progresses_in_background() const override { return false; }
  void all_reduce_sum(float* data, int64_t n) override { reduce(data, n, MPI_FLOAT); }
  void all_reduce_sum(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE); }
  std::unique_ptr<Request> iall_reduce_sum(float* data, int64_t n) override {
    return std::make_unique<MpiRequest>(*this, start_reduce(data, n, MPI_FLOAT));
  }
  void all_gather(float* data, const std::vector<int64_t>& counts) override {
    LATHE_ASSERT(static_cast<int>(counts.size()) == size_, "all_gather: one count per rank");
    std::vector<int> count(size_), displ(size_);
    int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
      LATHE_CHECK_ARG(off + counts[r] <= kMaxCount, "all_gather: ", off + counts[r], " elements exceed MPI's int count");
      count[r] = static_cast<int>(counts[r]);
      displ[r] = static_cast<int>(off);
      off += counts[r];
    }
    if (timeout_s_ <= 0) {
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, count.data(), displ.data(), MPI_FLOAT,
                           MPI_COMM_WORLD),
            "all_gather");
      return;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, count.data(), displ.data(), MPI_FLOAT,
                          MPI_COMM_WORLD, &req),
          "all_gather");
    wait_all(&req, 1, "all_gather");
  }

  void set_timeout(double seconds) override { timeout_s_ = seconds; }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
  }
  bool broken() const { return broken_; }

  // Waits for `reqs`; with a timeout, polls (MPI_Testall, answering roll calls meanwhile) and throws
  // CollectiveTimeout naming the silent ranks once it passes.
  void wait_all(MPI_Request* reqs, int n, const char* what) {
    if (timeout_s_ <= 0) {
      check(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE), what);
      return;
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      int done = 0;
      check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what);
      if (done) return;
      answer_roll_calls();
      if (Clock::now() > deadline) throw timed_out(what);
    }
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kMaxCount = 1 << 30;  // MPI counts are int
  static constexpr int kPingTag = 1, kPongTag = 2;

  // Blocking without a timeout (MPI's own algorithm, as before); else the non-blocking collective, polled.
  // For 2 ranks both sum a + b: the same bits (tests/e2e/mpi_test.cc compares them).
  void reduce(void* data, int64_t n, MPI_Datatype type) {
    if (timeout_s_ <= 0) {
      int size = 0;
      MPI_Type_size(type, &size);
      for (int64_t off = 0; off < n; off += kMaxCount) {
        const int count = static_cast<int>(std::min<int64_t>(kMaxCount, n - off));
        check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * size, count, type, MPI_SUM, MPI_COMM_WORLD),
              "all_reduce");
      }
      return;
    }
    std::vector<MPI_Request> parts = start_reduce(data, n, type);
    wait_all(parts.data(), static_cast<int>(parts.size()), "all_reduce");
  }
  std::vector<MPI_Request> start_reduce(void* data, int64_t n, MPI_Datatype type) {
    int size = 0;
    MPI_Type_size(type, &size);
    std::vector<MPI_Request> parts;
    for (int64_t off = 0; off < n; off += kMaxCount) {
      const int count = static_cast<int>(std::min<int64_t>(kMaxCount, n - off));
      parts.push_back(MPI_REQUEST_NULL);
      check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * size, count, type, MPI_SUM, MPI_COMM_WORLD,
                           &parts.back()),
            "iall_reduce");
    }
    return parts;
  }

  // A rank waiting in a collective answers every roll call at once, so a rank that timed out learns it is
  // alive; a stopped or cut-off rank cannot answer.
  void answer_roll_calls() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, watch_, &flag, &st);
      if (!flag) return;
      int ping = 0;
      MPI_Recv(&ping, 1, MPI_INT, st.MPI_SOURCE, kPingTag, watch_, MPI_STATUS_IGNORE);
      MPI_Request r;
      MPI_Isend(&rank_, 1, MPI_INT, st.MPI_SOURCE, kPongTag, watch_, &r);  // rank_ outlives the send
      MPI_Request_free(&r);
    }
  }

  // The roll call: ping every other rank and wait a grace period (half the timeout, 1 to 10 s) for the
  // answers; the ranks that stay silent are named. The communicator is broken from here on.
  CollectiveTimeout timed_out(const char* what) {
    broken_ = true;
    std::vector<int> pong(size_, -1);
    std::vector<MPI_Request> recvs(size_, MPI_REQUEST_NULL);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request s;
      MPI_Isend(&rank_, 1, MPI_INT, r, kPingTag, watch_, &s);
      MPI_Request_free(&s);
      MPI_Irecv(&pong[r], 1, MPI_INT, r, kPongTag, watch_, &recvs[r]);
    }
    const double grace = std::clamp(timeout_s_ / 2, 1.0, 10.0);
    const auto until = Clock::now() + std::chrono::duration<double>(grace);
    int done = 0;
    while (!done && Clock::now() < until) {
      MPI_Testall(size_, recvs.data(), &done, MPI_STATUSES_IGNORE);
      answer_roll_calls();  // another rank that timed out too learns that this one is alive
    }
    std::string silent;
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && pong[r] != r) silent += (silent.empty() ? "" : ",") + std::to_string(r);
    const std::string who =
        silent.empty() ? "every rank answered (one is slow: raise run.collective_timeout above the longest pause "
                         "between collectives, e.g. a checkpoint write)"
                       : str_cat(silent.find(',') == std::string::npos ? "rank " : "ranks ", silent,
                                 " did not answer (stopped, hung or unreachable)");
    return CollectiveTimeout(str_cat("collective timeout: ", what, " did not complete within ", timeout_s_,
                                     " s on rank ", rank_, " of ", size_, "; ", who));
  }

  int rank_ = 0, size_ = 1, local_size_ = 1;
  double timeout_s_ = 0;  // 0: blocking collectives, no timeout
  bool broken_ = false;   // a collective timed out: pending requests are abandoned, not waited for
  MPI_Comm watch_ = MPI_COMM_NULL;
};

MpiRequest::~MpiRequest() {
  // A request dropped unfinished would leave MPI writing into a freed buffer; after a timeout the job is
  // being aborted and waiting would hang.
  if (!parts_.empty() && !comm_.broken())
    MPI_Waitall(static_cast<int>(parts_.size()), parts_.data(), MPI_STATUSES_IGNORE);
}

void MpiRequest::wait() {
  if (parts_.empty()) return;
  comm_.wait_all(parts_.data(), static_cast<int>(parts_.size()), "all_reduce");
  parts_.clear();
}

}  // namespace

void Communicator::abort(int code) { std::_Exit(code); }

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

std::unique_ptr<Communicator> make_single_process() { return std::make_unique<SingleProcess>(); }

Communicator& world() {
  static std::unique_ptr<Communicator> comm = launched_by_mpi() ? std::unique_ptr<Communicator>(new Mpi())
                                                                : make_single_process();
  return *comm;
}

}  // namespace lathe::dist
