#include "lathe/train/grad_bucketer.h"

#include <algorithm>

#include "lathe/base/error.h"

namespace lathe::train {

bool overlap_allreduce_enabled(const std::string& mode, const dist::Communicator& comm) {
  LATHE_CHECK_ARG(mode == "auto" || mode == "on" || mode == "off", "run.overlap_allreduce must be auto, on or off, got '",
                  mode, "'");
  if (comm.size() <= 1 || mode == "off") return false;
  // auto: measured with mpirun -np 2 on 2 cores (llama-110M, one core per rank), overlap moved the
  // all-reduce's copies into the backward (+0.6 s) as much as it took off after it (-0.5 s): with no
  // progress thread MPI's shared-memory copies run on the core that computes. It pays only when the
  // transport progresses on its own.
  return mode == "on" || comm.progresses_in_background();
}

void copy_grad_to(const OptimParam& p, float* dst) {
  const Tensor g = p.value.grad();
  if (g.defined()) {
    LATHE_ASSERT(g.dtype() == DType::kF32 && g.is_contiguous() && g.numel() == p.value.numel());
    std::copy(g.data<float>(), g.data<float>() + g.numel(), dst);
  } else {
    std::fill(dst, dst + p.value.numel(), 0.f);
  }
}

void set_grad_from(const OptimParam& p, const float* src, float scale) {
  Tensor g = p.value.grad();
  if (!g.defined()) {
    g = Tensor::zeros(p.value.shape());
    p.value.impl()->grad = g;
  }
  float* d = g.data<float>();
  for (int64_t i = 0; i < g.numel(); ++i) d[i] = src[i] * scale;
}

void average_gradients(const std::vector<OptimParam>& params, dist::Communicator& comm, std::vector<float>& buf) {
  int64_t total = 0;
  for (const OptimParam& p : params) total += p.value.numel();
  buf.resize(total);
  int64_t off = 0;
  for (const OptimParam& p : params) {
    copy_grad_to(p, buf.data() + off);
    off += p.value.numel();
  }
  comm.all_reduce_sum(buf.data(), total);
  const float inv = 1.f / static_cast<float>(comm.size());
  off = 0;
  for (const OptimParam& p : params) {
    set_grad_from(p, buf.data() + off, inv);
    off += p.value.numel();
  }
}

GradBucketer::GradBucketer(const std::vector<OptimParam>& params, dist::Communicator& comm, int64_t bucket_bytes)
    : params_(params), comm_(comm), ready_(params.size(), false) {
  LATHE_CHECK_ARG(bucket_bytes > 0, "run.allreduce_bucket_mb must be positive");
  // Reverse order: the order a decoder's backward finishes its gradients (head and last layer first; the
  // embedding, tied or not, last).
  for (size_t k = params_.size(); k-- > 0;) {
    if (buckets_.empty() || static_cast<int64_t>(buckets_.back().flat.size() * sizeof(float)) >= bucket_bytes)
      buckets_.emplace_back();
    Bucket& b = buckets_.back();
    slot_of_[params_[k].value.impl()] = {buckets_.size() - 1, b.params.size()};
    b.params.push_back(k);
    b.offsets.push_back(static_cast<int64_t>(b.flat.size()));
    b.flat.resize(b.flat.size() + static_cast<size_t>(params_[k].value.numel()));
  }
  for (Bucket& b : buckets_) b.n_waiting = b.params.size();
}

void GradBucketer::copy_in(Bucket& b, size_t slot) {
  copy_grad_to(params_[b.params[slot]], b.flat.data() + b.offsets[slot]);
}

void GradBucketer::on_grad_ready(const TensorImpl& leaf) {
  const auto it = slot_of_.find(&leaf);
  if (it == slot_of_.end()) return;
  const auto [bucket, slot] = it->second;
  Bucket& b = buckets_[bucket];
  const size_t k = b.params[slot];
  // A second completion would add to a gradient whose bucket may already be on the wire.
  if (ready_[k])
    throw Error(str_cat("gradient of ", params_[k].name,
                        " completed twice in one backward (a parameter used in two recomputed regions?): set "
                        "run.overlap_allreduce=off"));
  ready_[k] = true;
  copy_in(b, slot);  // now, while the gradient is still in cache
  --b.n_waiting;
  start_ready_buckets();
  progress();
}

void GradBucketer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].n_waiting == 0) {
    Bucket& b = buckets_[next_to_start_++];
    b.request = comm_.iall_reduce_sum(b.flat.data(), static_cast<int64_t>(b.flat.size()));
  }
}

// OpenMPI without a progress thread moves a non-blocking collective forward only inside MPI calls.
// (test() on a completed request returns at once.)
void GradBucketer::progress() {
  for (size_t i = 0; i < next_to_start_; ++i) buckets_[i].request->test();
}

void GradBucketer::finish() {
  for (size_t i = next_to_start_; i < buckets_.size(); ++i) {  // those not started: the rest count as final
    Bucket& b = buckets_[i];
    for (size_t s = 0; s < b.params.size(); ++s)
      if (!ready_[b.params[s]]) copy_in(b, s);
    b.n_waiting = 0;
  }
  start_ready_buckets();
  const float inv = 1.f / static_cast<float>(comm_.size());
  for (Bucket& b : buckets_) {
    b.request->wait();
    for (size_t s = 0; s < b.params.size(); ++s) set_grad_from(params_[b.params[s]], b.flat.data() + b.offsets[s], inv);
    b.request.reset();
    b.n_waiting = b.params.size();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_to_start_ = 0;
}

}  // namespace lathe::train
