#include "lathe/dist/mpirun_output.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lathe::dist {
namespace {

JobReport scan(const std::vector<std::string>& lines) {
  JobReport r;
  for (const std::string& l : lines) scan_job_line(l, r);
  return r;
}

// Lines as OpenMPI 4.1 and lathe print them.
TEST(MpirunOutput, AKilledRankIsTheCauseEvenAfterItsPeersErrors) {
  const JobReport r = scan({"resumed from runs/a/checkpoints/step_00000020 at step 20",
                            "lathe pretrain: error: MPI all_reduce failed: MPI_ERR_OTHER",
                            "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."});
  EXPECT_EQ(r.failure, "rank 1 (on vm) exited on signal 9 (Killed)");
  EXPECT_EQ(r.failed_ranks, std::vector<int>{1});
  EXPECT_EQ(r.resumed_from, "runs/a/checkpoints/step_00000020");
  EXPECT_EQ(r.resumed_step, 20);
}

TEST(MpirunOutput, ATimeoutNamesTheSilentRanks) {
  const JobReport one = scan({"lathe pretrain: error: collective timeout: all_reduce did not complete within 3 s on "
                              "rank 0 of 2; rank 1 did not answer (stopped, hung or unreachable) (during step 13)",
                              "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD"});
  EXPECT_EQ(one.failed_ranks, std::vector<int>{1});
  EXPECT_EQ(one.failure.rfind("collective timeout: all_reduce", 0), 0u) << one.failure;
  const JobReport two = scan({"lathe sft: error: something else",
                              "lathe sft: error: collective timeout: all_gather did not complete within 600 s on rank "
                              "0 of 4; ranks 2,3 did not answer (stopped, hung or unreachable)"});
  EXPECT_EQ(two.failed_ranks, (std::vector<int>{2, 3}));
  const JobReport slow = scan({"lathe pretrain: error: collective timeout: all_reduce did not complete within 3 s on "
                               "rank 0 of 2; every rank answered (one is slow: raise run.collective_timeout)"});
  EXPECT_TRUE(slow.failed_ranks.empty());
  EXPECT_NE(slow.failure.find("every rank answered"), std::string::npos);
}

TEST(MpirunOutput, OtherwiseTheFirstRankError) {
  const JobReport r = scan({"step 3/40 loss 4.1", "lathe pretrain: error: training diverged: loss nan at step 4",
                            "lathe pretrain: error: training diverged: loss nan at step 4 (rank 1)"});
  EXPECT_EQ(r.failure, "training diverged: loss nan at step 4");
  EXPECT_TRUE(r.failed_ranks.empty());
  EXPECT_TRUE(scan({"done: 40 steps"}).failure.empty());
}

}  // namespace
}  // namespace lathe::dist
