// AdamW with decoupled weight decay, exactly as specs/pretrain.md §2.1 (llm.c's adamw_update, PyTorch's
// AdamW): with t = steps done + 1 and gradients already scaled by the clip factor,
//   m <- b1 m + (1 - b1) g          v <- b2 v + (1 - b2) g^2
//   m^ = m / (1 - b1^t)             v^ = v / (1 - b2^t)
//   theta <- theta - lr_t (m^ / (sqrt(v^) + eps) + lambda theta)
// The decay lambda is multiplied by the scheduled learning rate lr_t (PyTorch's convention; Loshchilov &
// Hutter scale it by the schedule multiplier instead). Master weights, m and v are f32.
#pragma once

#include <cstdint>
#include <utility>
#include <string>
#include <vector>

#include "lathe/base/thread_pool.h"
#include "lathe/tensor/tensor.h"

namespace lathe::train {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.0;
};

struct OptimParam {
  std::string name;        // for checkpoints ("exp_avg.<name>")
  Tensor value;            // f32, contiguous; updated in place
  bool decay = true;       // weight decay applies (matrices; not norms, biases or, by default, embeddings)
};

// Elements [begin, end) of the parameters concatenated in optimizer order: the part of the state one
// ZeRO-1 rank owns (train/zero.h). The default is every element.
struct ElementRange {
  int64_t begin = 0, end = INT64_MAX;
};

class AdamW {
 public:
  // Keeps m and v for the elements of `owned` only, and updates only those (ZeRO-1).
  AdamW(std::vector<OptimParam> params, AdamWConfig cfg, ElementRange owned = {});

  // One update from each parameter's accumulated gradient (value.grad()) times grad_scale (the clip
  // factor, and 1/N normalisation if the caller summed); parameters without a gradient are skipped.
  void step(double lr, float grad_scale, const ThreadPool& pool);

  int64_t steps_done() const { return steps_; }
  void set_steps_done(int64_t t) { steps_ = t; }
  const std::vector<OptimParam>& params() const { return params_; }
  // Where parameter i's owned elements lie: [begin, end) of its own elements (empty when begin == end).
  std::pair<int64_t, int64_t> owned_part(size_t i) const { return parts_[i]; }
  // m and v, one per parameter (non-const: a resume copies the checkpoint's values in): the parameter's
  // shape when it is wholly owned, else its owned elements, flat ([end - begin] of owned_part).
  std::vector<Tensor>& exp_avg() { return m_; }
  std::vector<Tensor>& exp_avg_sq() { return v_; }
  const std::vector<Tensor>& exp_avg() const { return m_; }
  const std::vector<Tensor>& exp_avg_sq() const { return v_; }
  const AdamWConfig& config() const { return cfg_; }

 private:
  std::vector<OptimParam> params_;
  AdamWConfig cfg_;
  std::vector<std::pair<int64_t, int64_t>> parts_;  // per parameter
  std::vector<Tensor> m_, v_;
  int64_t steps_ = 0;
};

// sqrt(sum over every gradient of g^2), accumulated in double over fixed chunks in a fixed order, so the
// result does not depend on the thread count. Parameters without a gradient count as zero.
double global_grad_norm(const std::vector<OptimParam>& params, const ThreadPool& pool);

}  // namespace lathe::train
