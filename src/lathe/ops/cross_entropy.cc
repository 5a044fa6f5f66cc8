// cross_entropy and linear_cross_entropy: fronts and gradient rules (row kernels in softmax_rows.cc, the
// chunk loops in chunked_head.cc).
#include "lathe/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/ops/chunked_head.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/softmax_rows.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_labels(const char* op, const Tensor& labels, int64_t n, int64_t v, int ignore_index) {
  LATHE_CHECK_ARG(labels.defined() && labels.dtype() == DType::kI32 && labels.dim() == 1 && labels.size(0) == n,
                  "[", op, "] labels must be i32 [", n, "], got ",
                  labels.defined() ? shape_str(labels.shape()) : "undefined");
  const int32_t* lp = labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK_ARG(lp[i] == ignore_index || (lp[i] >= 0 && lp[i] < v), "[", op, "] label ", lp[i], " at row ", i,
                    " is outside [0, ", v, ") and is not ignore_index ", ignore_index);
}

// Mean of per-row losses over the counted rows, summed in double in row order (deterministic).
Tensor mean_loss(const std::vector<float>& row_loss, const int32_t* labels, int ignore_index, int64_t* count) {
  double total = 0;
  *count = 0;
  for (size_t i = 0; i < row_loss.size(); ++i)
    if (labels[i] != ignore_index) {
      total += row_loss[i];
      ++*count;
    }
  return Tensor::full({}, static_cast<float>(total / static_cast<double>(*count)));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& labels_in, int ignore_index) {
  LATHE_CHECK_ARG(logits_in.defined() && logits_in.dtype() == DType::kF32 && logits_in.dim() == 2,
                  "[cross_entropy] logits must be f32 [N, V], got ",
                  logits_in.defined() ? shape_str(logits_in.shape()) : "undefined");
  const Tensor logits = logits_in.contiguous(), labels = labels_in.contiguous();
  const int64_t n = logits.size(0), v = logits.size(1);
  check_labels("cross_entropy", labels, n, v, ignore_index);
  const float* x = logits.data<float>();
  const int32_t* lab = labels.data<int32_t>();
  Tensor lse = Tensor::empty({n});  // [N], kept for backward
  float* lsep = lse.data<float>();
  std::vector<float> row_loss(n, 0.f);
  parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (lab[i] == ignore_index) continue;
      lsep[i] = row_logsumexp(x + i * v, v);
      row_loss[i] = lsep[i] - x[i * v + lab[i]];
    }
  });
  int64_t count = 0;
  Tensor loss = mean_loss(row_loss, lab, ignore_index, &count);

  if (needs_grad({&logits_in})) {
    Tensor xs = logits.detach(), ls = labels.detach();
    record(loss, "cross_entropy", {logits_in}, [=](const Tensor& g) -> std::vector<Tensor> {
      // Gradient: dlogits[i] = (softmax(logits[i]) − onehot(labels[i]))·g/count; ignored rows 0.
      const float scale = g.item() / static_cast<float>(count);
      Tensor dx = Tensor::empty({n, v});
      const float *xp = xs.data<float>(), *lp = lse.data<float>();
      const int32_t* lb = ls.data<int32_t>();
      float* d = dx.data<float>();
      parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          if (lb[i] == ignore_index)
            std::fill(d + i * v, d + (i + 1) * v, 0.f);
          else
            row_softmax_backward(xp + i * v, lp[i], scale, lb[i], d + i * v, v);
        }
      });
      return {dx};
    });
  }
  return loss;
}

Tensor linear_cross_entropy(const Tensor& hidden_in, const Tensor& weight_in, const Tensor& labels_in,
                            const LinearCrossEntropyOptions& opt) {
  const bool grad = needs_grad({&hidden_in, &weight_in});
  const ChunkedHead hd = make_chunked_head(
      "linear_cross_entropy", hidden_in, weight_in,
      {.final_softcap = opt.final_softcap, .chunk_size = opt.chunk_size, .keep_logits_bytes = opt.keep_logits_bytes},
      grad);
  const Tensor labels = labels_in.contiguous();
  const int64_t n = hd.n, v = hd.v;
  const int ignore = opt.ignore_index;
  const float cap = hd.cap;
  check_labels("linear_cross_entropy", labels, n, v, ignore);
  const int32_t* lab = labels.data<int32_t>();

  // Online log-sum-exp per row: running max m and Σ exp(z − m), rescaled when the max grows.
  std::vector<float> run_max(n, kNegInf), run_sum(n, 0.f), target(n, 0.f);
  chunked_head_forward(hd, [&](int64_t i, int64_t v0, int64_t vc, float* z) {
    row_logsumexp_update(z, vc, &run_max[i], &run_sum[i]);
    if (lab[i] >= v0 && lab[i] < v0 + vc) target[i] = z[lab[i] - v0];
  });
  Tensor lse = Tensor::empty({n});  // [N], kept for backward
  float* lsep = lse.data<float>();
  std::vector<float> row_loss(n, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    lsep[i] = run_max[i] + std::log(run_sum[i]);
    row_loss[i] = lsep[i] - target[i];
  }
  int64_t count = 0;
  Tensor loss = mean_loss(row_loss, lab, ignore, &count);

  if (grad) {
    const bool want_h = hidden_in.requires_grad(), want_w = weight_in.requires_grad();
    check_chunked_head_weight_grad("linear_cross_entropy", weight_in);
    Tensor ls = labels.detach();
    record(loss, "linear_cross_entropy", {hidden_in, weight_in}, [=](const Tensor& g) -> std::vector<Tensor> {
      // Gradient per chunk: dz = (softmax − onehot)·g/count (0 on ignored rows); through the cap
      // da = dz·(1 − (z/cap)²); then dhidden += da · w_chunk and dweight_chunk = daᵀ · hidden.
      const float scale = g.item() / static_cast<float>(count);
      const float* lp = lse.data<float>();
      const int32_t* lb = ls.data<int32_t>();
      Tensor dh, dw;
      const auto row = [&](int64_t i, int64_t v0, int64_t vc, float* zr) {
        if (lb[i] == ignore) {
          std::fill(zr, zr + vc, 0.f);
          return;
        }
        const int64_t t = lb[i] >= v0 && lb[i] < v0 + vc ? lb[i] - v0 : -1;  // label column, if here
        if (cap > 0.f) {
          const float inv_cap = 1.f / cap;
          const float t_label = t >= 0 ? zr[t] * inv_cap : 0.f;  // read before zr is overwritten
#pragma omp simd
          for (int64_t j = 0; j < vc; ++j) {
            const float u = zr[j] * inv_cap;
            zr[j] = scale * vec::exp(zr[j] - lp[i]) * (1.f - u * u);
          }
          if (t >= 0) zr[t] -= scale * (1.f - t_label * t_label);  // the one-hot term through the cap
        } else {
          row_softmax_backward(zr, lp[i], scale, t, zr, vc);
        }
      };
      chunked_head_backward(hd, row, want_h, want_w, &dh, &dw);
      return {dh, dw};
    });
  }
  return loss;
}

}  // namespace lathe
