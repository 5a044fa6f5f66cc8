// Gradient averaging overlapped with the backward pass (specs/pretrain.md §4, "overlap gradient
// communication with the backward pass, bucketed by layer"; the idea of PyTorch DDP's Reducer). The
// parameters are grouped, in reverse order, into buckets of about bucket_bytes: a decoder's backward
// finishes the last layer's gradients first, so the first buckets fill early. A bucket starts its
// non-blocking all-reduce as soon as all of its gradients are final (autograd's LeafGradHook), while the
// backward computes the rest.
//
// Deterministic: buckets start in index order on every rank (MPI needs one collective order), each
// element is summed by the same MPI algorithm every run, and the average is the same `sum * (1 / W)` as
// the one flat all-reduce's (on 2 ranks a + b: bit-identical to it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/dist/communicator.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

// run.overlap_allreduce: "on", "off" or "auto" (on only when the communicator progresses collectives in
// the background; see the definition for the measurement behind it). Never with one rank.
bool overlap_allreduce_enabled(const std::string& mode, const dist::Communicator& comm);

// The flat-buffer halves of gradient averaging, shared by the bucketer and the one flat all-reduce:
// dst[0, numel) = p's gradient (zeros when it has none) ...
void copy_grad_to(const OptimParam& p, float* dst);
// ... and p's gradient = src[0, numel) * scale (created when p has none).
void set_grad_from(const OptimParam& p, const float* src, float scale);

// Without overlap: every parameter's gradient averaged over the ranks by one all-reduce of a flat buffer
// (one call instead of one per tensor; a fixed layout, so the reduction is deterministic). `buf` is
// scratch, kept between steps.
void average_gradients(const std::vector<OptimParam>& params, dist::Communicator& comm, std::vector<float>& buf);

class GradBucketer {
 public:
  // params: the optimizer's parameters (f32, contiguous), whose .grad() is averaged in place.
  GradBucketer(const std::vector<OptimParam>& params, dist::Communicator& comm, int64_t bucket_bytes);
  GradBucketer(const GradBucketer&) = delete;
  GradBucketer& operator=(const GradBucketer&) = delete;

  // From the last micro-batch's backward (install with LeafGradHookScope): leaf's gradient is final.
  // Leaves that are not parameters (a recomputed region's detached input) are ignored.
  void on_grad_ready(const TensorImpl& leaf);

  // After that backward: starts the buckets still waiting (a parameter without a gradient counts as
  // zero), waits for every bucket and writes the averaged gradients back. Ready for the next step.
  void finish();

  int64_t n_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;               // indices into params_, reverse parameter order
    std::vector<int64_t> offsets;             // of each parameter's gradient in flat
    std::vector<float> flat;                  // [sum of the parameters' numel]
    size_t n_waiting = 0;                     // gradients not final yet this step
    std::unique_ptr<dist::Request> request;   // while in flight
  };
  void copy_in(Bucket& b, size_t slot);
  void start_ready_buckets();
  void progress();

  std::vector<OptimParam> params_;
  dist::Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const TensorImpl*, std::pair<size_t, size_t>> slot_of_;  // leaf -> (bucket, slot)
  std::vector<bool> ready_;          // per parameter, this step
  size_t next_to_start_ = 0;         // buckets [0, next_to_start_) are in flight or done
};

}  // namespace lathe::train
