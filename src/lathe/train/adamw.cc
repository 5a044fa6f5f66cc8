#include "lathe/train/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lathe/backend/cpu/cpu_tier.h"
#include "lathe/base/error.h"
#include "lathe/train/adamw_update.h"

namespace lathe::train {

AdamW::AdamW(std::vector<OptimParam> params, AdamWConfig cfg, ElementRange owned)
    : params_(std::move(params)), cfg_(cfg) {
  LATHE_CHECK_ARG(cfg.beta1 >= 0 && cfg.beta1 < 1 && cfg.beta2 >= 0 && cfg.beta2 < 1, "adamw: betas must be in [0, 1)");
  LATHE_CHECK_ARG(cfg.eps > 0, "adamw: eps must be positive");
  LATHE_CHECK_ARG(owned.begin >= 0 && owned.begin <= owned.end, "adamw: bad owned range");
  int64_t offset = 0;  // of the parameter in the concatenation
  for (const OptimParam& p : params_) {
    LATHE_CHECK_ARG(p.value.dtype() == DType::kF32 && p.value.is_contiguous(), "adamw: parameter ", p.name,
                    " must be f32 and contiguous (master weights)");
    const int64_t n = p.value.numel();
    const int64_t b = std::clamp(owned.begin - offset, int64_t{0}, n), e = std::clamp(owned.end - offset, int64_t{0}, n);
    parts_.push_back({b, std::max(b, e)});
    const Shape shape = b == 0 && e == n ? p.value.shape() : Shape{std::max<int64_t>(0, e - b)};
    m_.push_back(Tensor::zeros(shape));
    v_.push_back(Tensor::zeros(shape));
    offset += n;
  }
}

void AdamW::step(double lr, float grad_scale, const ThreadPool& pool) {
  const int64_t t = ++steps_;
  const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2);
  // m^ / (sqrt(v^) + eps) = (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps): one division and one square root
  // per element (the update is memory-bound only once the divisions are few).
  const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(cfg_.eps);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].value.grad();
    const auto [first, last] = parts_[i];
    if (!g.defined() || first == last) continue;
    LATHE_ASSERT(g.dtype() == DType::kF32 && g.is_contiguous() && g.numel() == params_[i].value.numel());
    const float decay = params_[i].decay ? static_cast<float>(lr * cfg_.weight_decay) : 0.f;  // lr_t · lambda
    float* __restrict theta = params_[i].value.data<float>() + first;
    float* __restrict m = m_[i].data<float>();
    float* __restrict v = v_[i].data<float>();
    const float* __restrict grad = g.data<float>() + first;
    const int64_t n = last - first;
    constexpr int64_t kChunk = 1 << 16;  // elementwise and memory-bound: large contiguous chunks per worker
    const AdamWScalars sc{grad_scale, b1, b2, step_size, inv_sqrt_bc2, eps, decay};
    const cpu::CpuTier tier = cpu::cpu_tier();
    pool.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c, int) {
      const int64_t j0 = c * kChunk, len = std::min(n, j0 + kChunk) - j0;
      adamw_update(tier, theta + j0, m + j0, v + j0, grad + j0, len, sc);
    });
  }
}

double global_grad_norm(const std::vector<OptimParam>& params, const ThreadPool& pool) {
  double total = 0;
  for (const OptimParam& p : params) {
    const Tensor g = p.value.grad();
    if (!g.defined()) continue;
    const float* x = g.data<float>();
    const int64_t n = g.numel();
    constexpr int64_t kChunk = 1 << 16;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(chunks);
    pool.parallel_for(chunks, [&](int64_t c, int) {
      const int64_t end = std::min(n, (c + 1) * kChunk);
      // Eight explicit lanes: the summation order is fixed by the code, not by how the compiler
      // vectorises this copy of the loop, so every thread count gives the same bits.
      double lane[8] = {};
      int64_t j = c * kChunk;
      for (; j + 8 <= end; j += 8)
        for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(x[j + l]) * x[j + l];
      for (; j < end; ++j) lane[0] += static_cast<double>(x[j]) * x[j];
      partial[c] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    });
    for (double s : partial) total += s;  // fixed order: independent of the thread count
  }
  return std::sqrt(total);
}

}  // namespace lathe::train
