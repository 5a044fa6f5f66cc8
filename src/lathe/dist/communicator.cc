#include "lathe/dist/communicator.h"

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

// One request per kMaxCount chunk of the buffer (MPI counts are int).
class MpiRequest final : public Request {
 public:
  explicit MpiRequest(std::vector<MPI_Request> parts) : parts_(std::move(parts)) {}
  ~MpiRequest() override {
    // A request dropped unfinished would leave MPI writing into a freed buffer.
    if (!parts_.empty()) MPI_Waitall(static_cast<int>(parts_.size()), parts_.data(), MPI_STATUSES_IGNORE);
  }
  bool test() override {
    if (parts_.empty()) return true;
    int done = 0;
    check(MPI_Testall(static_cast<int>(parts_.size()), parts_.data(), &done, MPI_STATUSES_IGNORE), "test");
    if (done) parts_.clear();
    return done != 0;
  }
  void wait() override {
    if (parts_.empty()) return;
    check(MPI_Waitall(static_cast<int>(parts_.size()), parts_.data(), MPI_STATUSES_IGNORE), "wait");
    parts_.clear();
  }

 private:
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
    std::vector<MPI_Request> parts;
    for (int64_t off = 0; off < n; off += kMaxCount) {
      const int count = static_cast<int>(std::min<int64_t>(kMaxCount, n - off));
      parts.push_back(MPI_REQUEST_NULL);
      check(MPI_Iallreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &parts.back()),
            "iall_reduce");
    }
    return std::make_unique<MpiRequest>(std::move(parts));
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
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, count.data(), displ.data(), MPI_FLOAT,
                         MPI_COMM_WORLD),
          "all_gather");
  }

 private:
  static constexpr int64_t kMaxCount = 1 << 30;  // MPI counts are int
  void reduce(void* data, int64_t n, MPI_Datatype type) {
    int size = 0;
    MPI_Type_size(type, &size);
    for (int64_t off = 0; off < n; off += kMaxCount) {
      const int count = static_cast<int>(std::min<int64_t>(kMaxCount, n - off));
      check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * size, count, type, MPI_SUM, MPI_COMM_WORLD),
            "all_reduce");
    }
  }
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

}  // namespace

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
