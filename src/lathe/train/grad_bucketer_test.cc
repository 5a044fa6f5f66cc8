#include "lathe/train/grad_bucketer.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"

namespace lathe::train {
namespace {

// Two ranks holding the same gradients: the sum is 2x, so the average must give the gradient back. Records
// the order collectives start and completes each only when the test says so.
class TwoIdenticalRanks final : public dist::Communicator {
 public:
  struct Pending final : dist::Request {
    float* data;
    int64_t n;
    bool* released;
    bool test() override {
      if (!*released) return false;
      wait();
      return true;
    }
    void wait() override {
      for (int64_t i = 0; i < n; ++i) data[i] *= 2.f;
      n = 0;
    }
  };
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_size() const override { return 2; }
  bool progresses_in_background() const override { return background; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  std::unique_ptr<dist::Request> iall_reduce_sum(float* data, int64_t n) override {
    started.push_back(n);
    auto r = std::make_unique<Pending>();
    r->data = data;
    r->n = n;
    r->released = &released;
    return r;
  }
  void all_gather(float*, const std::vector<int64_t>&) override {}

  std::vector<int64_t> started;  // element counts, in start order
  bool released = false;
  bool background = false;
};

std::vector<OptimParam> make_params(const std::vector<int64_t>& sizes) {
  std::vector<OptimParam> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back({"p" + std::to_string(i), Tensor::zeros({sizes[i]}), true});
  return out;
}

void set_grad(OptimParam& p, float base) {
  Tensor g = Tensor::empty(p.value.shape());
  for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = base + static_cast<float>(i);
  p.value.impl()->grad = g;
}

// Buckets of >= 8 floats in reverse order: {p3, p2} (4 + 4), {p1} (16), {p0} (2).
TEST(GradBucketer, StartsBucketsInOrderAsTheirGradientsBecomeFinal) {
  TwoIdenticalRanks comm;
  std::vector<OptimParam> params = make_params({2, 16, 4, 4});
  GradBucketer b(params, comm, 8 * sizeof(float));
  ASSERT_EQ(b.n_buckets(), 3);
  for (int step = 0; step < 2; ++step) {
    comm.started.clear();
    for (size_t i = 0; i < params.size(); ++i) set_grad(params[i], 10.f * static_cast<float>(i + step));
    b.on_grad_ready(*params[3].value.impl());
    EXPECT_TRUE(comm.started.empty()) << "bucket 0 still waits for p2";
    b.on_grad_ready(*params[1].value.impl());
    EXPECT_TRUE(comm.started.empty()) << "bucket 1 is ready but must start after bucket 0";
    b.on_grad_ready(*params[2].value.impl());
    EXPECT_EQ(comm.started, (std::vector<int64_t>{8, 16}));
    // p0 has no final gradient this pass (e.g. unused): finish() sends what it holds.
    comm.released = true;
    b.finish();
    EXPECT_EQ(comm.started, (std::vector<int64_t>{8, 16, 2}));
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> g = params[i].value.grad().to_vector();
      for (size_t j = 0; j < g.size(); ++j) EXPECT_EQ(g[j], 10.f * static_cast<float>(i + step) + j) << i;
    }
    comm.released = false;
  }
}

TEST(GradBucketer, ParameterWithoutGradientGetsZeros) {
  TwoIdenticalRanks comm;
  std::vector<OptimParam> params = make_params({3, 5});
  GradBucketer b(params, comm, 1 << 20);
  set_grad(params[1], 1.f);
  b.on_grad_ready(*params[1].value.impl());
  b.finish();
  EXPECT_EQ(params[0].value.grad().to_vector(), std::vector<float>(3, 0.f));
  EXPECT_EQ(params[1].value.grad().to_vector(), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(GradBucketer, SecondCompletionInOneBackwardIsAnError) {
  TwoIdenticalRanks comm;
  std::vector<OptimParam> params = make_params({3});
  GradBucketer b(params, comm, 1 << 20);
  set_grad(params[0], 1.f);
  b.on_grad_ready(*params[0].value.impl());
  EXPECT_THROW(b.on_grad_ready(*params[0].value.impl()), Error);
  comm.released = true;
  b.finish();
}

TEST(GradBucketer, OverlapModes) {
  TwoIdenticalRanks comm;
  EXPECT_FALSE(overlap_allreduce_enabled("on", *dist::make_single_process()));
  EXPECT_TRUE(overlap_allreduce_enabled("on", comm));
  EXPECT_FALSE(overlap_allreduce_enabled("off", comm));
  EXPECT_FALSE(overlap_allreduce_enabled("auto", comm)) << "no background progress: overlap does not pay";
  comm.background = true;
  EXPECT_TRUE(overlap_allreduce_enabled("auto", comm));
  EXPECT_THROW(overlap_allreduce_enabled("sometimes", comm), InvalidArgument);
}

}  // namespace
}  // namespace lathe::train
