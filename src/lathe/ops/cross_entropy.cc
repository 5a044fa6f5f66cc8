// cross_entropy and linear_cross_entropy: fronts, row kernels (stable log-sum-exp) and gradient rules.
#include "lathe/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/ops/pool_tasks.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/softcap.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The ternary (not std::max, which GCC 12 leaves scalar here: 9x slower) vectorises to vmaxps. A NaN
// entry may be skipped by the max, but it still makes Σ exp, hence the row's lse, NaN.
float row_max(const float* x, int64_t v) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < v; ++j) m = m > x[j] ? m : x[j];
  return m;
}

// Σ_j exp(x[j] − m).
float row_sum_exp(const float* x, float m, int64_t v) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < v; ++j) s += vec::exp(x[j] - m);
  return s;
}

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

// c[m, n] = a[m, k] · op(w) (+ beta·c) for w f32 or bf16 (the head weight [V, C], or the hidden states for
// the head's dW); w_offset selects rows.
void gemm_head(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const Tensor& w, int64_t w_offset, int64_t ldb, float* c, int64_t ldc, float beta,
               const ThreadPool& pool = current_context().pool) {
  if (w.dtype() == DType::kBF16)
    cpu::gemm(cpu::GemmArgs<float, bf16>{trans_a, trans_b, m, n, k, a, lda, w.data<bf16>() + w_offset, ldb, c, ldc,
                                          1.f, beta},
              pool);
  else
    cpu::gemm(cpu::GemmArgs<float, float>{trans_a, trans_b, m, n, k, a, lda, w.data<float>() + w_offset, ldb, c,
                                           ldc, 1.f, beta},
              pool);
}

// logits chunk [n, vc] = hidden [n, c] · weight[v0 : v0 + vc, :]ᵀ, soft-capped when cap > 0. hidden f32,
// or bf16 with a bf16 weight (bf16 compute).
void chunk_logits(const Tensor& h, const Tensor& w, int64_t n, int64_t c, int64_t v0, int64_t vc, float cap,
                  float* buf) {
  if (h.dtype() == DType::kBF16)
    cpu::gemm(cpu::GemmArgs<bf16, bf16>{false, true, n, vc, c, h.data<bf16>(), c, w.data<bf16>() + v0 * c, c, buf,
                                         vc, 1.f, 0.f},
              current_context().pool);
  else
    gemm_head(false, true, n, vc, c, h.data<float>(), c, w, v0 * c, c, buf, vc, 0.f);
  if (cap > 0.f)
    parallel_rows(n, vc, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) softcap_forward(buf + i * vc, buf + i * vc, vc, cap);
    });
}

}  // namespace

float row_logsumexp(const float* x, int64_t v) {
  const float m = row_max(x, v);
  if (m == kNegInf) return kNegInf;  // every entry masked out: log 0
  return m + std::log(row_sum_exp(x, m, v));
}

void row_softmax_backward(const float* x, float lse, float scale, int64_t target, float* d, int64_t v) {
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) d[j] = scale * vec::exp(x[j] - lse);
  if (target >= 0) d[target] -= scale;
}

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
  LATHE_CHECK_ARG(hidden_in.defined() && hidden_in.dim() == 2 &&
                      (hidden_in.dtype() == DType::kF32 ||
                       (hidden_in.dtype() == DType::kBF16 && weight_in.dtype() == DType::kBF16)),
                  "[linear_cross_entropy] hidden must be f32 [N, C] (or bf16 with a bf16 weight), got ",
                  hidden_in.defined() ? shape_str(hidden_in.shape()) : "undefined");
  LATHE_CHECK_ARG(weight_in.defined() && weight_in.dim() == 2 && weight_in.size(1) == hidden_in.size(1) &&
                      (weight_in.dtype() == DType::kF32 || weight_in.dtype() == DType::kBF16),
                  "[linear_cross_entropy] weight must be f32 or bf16 [V, ", hidden_in.size(1), "], got ",
                  weight_in.defined() ? shape_str(weight_in.shape()) : "undefined");
  LATHE_CHECK_ARG(opt.chunk_size > 0, "[linear_cross_entropy] chunk_size must be > 0, got ", opt.chunk_size);
  LATHE_CHECK_ARG(opt.final_softcap >= 0.f, "[linear_cross_entropy] final_softcap must be >= 0 (0: off), got ",
                  opt.final_softcap);
  const Tensor h = hidden_in.contiguous(), w = weight_in.contiguous(), labels = labels_in.contiguous();
  const int64_t n = h.size(0), c = h.size(1), v = w.size(0), chunk = std::min(opt.chunk_size, std::max<int64_t>(v, 1));
  const int ignore = opt.ignore_index;
  const float cap = opt.final_softcap;
  check_labels("linear_cross_entropy", labels, n, v, ignore);
  const int32_t* lab = labels.data<int32_t>();

  // Online log-sum-exp per row: running max m and Σ exp(z − m), rescaled when the max grows.
  std::vector<float> run_max(n, kNegInf), run_sum(n, 0.f), target(n, 0.f);
  // Chunk c's logits [N, vc] live at kept + n * v0 when kept for the backward, else in buf.
  const bool keep = needs_grad({&hidden_in, &weight_in}) && n * v * static_cast<int64_t>(sizeof(float)) <= opt.keep_logits_bytes;
  Tensor kept = keep ? Tensor::empty({n * v}) : Tensor();
  std::vector<float> buf(keep ? 0 : static_cast<size_t>(n) * chunk);  // [N, chunk]
  for (int64_t v0 = 0; v0 < v; v0 += chunk) {
    const int64_t vc = std::min(chunk, v - v0);
    float* zc = keep ? kept.data<float>() + n * v0 : buf.data();
    chunk_logits(h, w, n, c, v0, vc, cap, zc);
    parallel_rows(n, vc, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* z = zc + i * vc;
        const float m_new = std::max(run_max[i], row_max(z, vc));
        if (m_new == kNegInf) continue;
        run_sum[i] = run_sum[i] * std::exp(run_max[i] - m_new) + row_sum_exp(z, m_new, vc);
        run_max[i] = m_new;
        if (lab[i] >= v0 && lab[i] < v0 + vc) target[i] = z[lab[i] - v0];
      }
    });
  }
  Tensor lse = Tensor::empty({n});  // [N], kept for backward
  float* lsep = lse.data<float>();
  std::vector<float> row_loss(n, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    lsep[i] = run_max[i] + std::log(run_sum[i]);
    row_loss[i] = lsep[i] - target[i];
  }
  int64_t count = 0;
  Tensor loss = mean_loss(row_loss, lab, ignore, &count);

  if (needs_grad({&hidden_in, &weight_in})) {
    const bool want_h = hidden_in.requires_grad(), want_w = weight_in.requires_grad();
    // A bf16 weight gets a gradient only as the compute copy of an f32 master (bf16_compute_weight).
    LATHE_CHECK_ARG(!want_w || w.dtype() == DType::kF32 || weight_in.grad_fn(),
                    "[linear_cross_entropy] gradients need an f32 weight or a bf16 compute copy");
    Tensor hs = h.detach(), ws = w.detach(), ls = labels.detach();
    record(loss, "linear_cross_entropy", {hidden_in, weight_in}, [=](const Tensor& g) -> std::vector<Tensor> {
      // Gradient per chunk: dz = (softmax − onehot)·g/count (0 on ignored rows); through the cap
      // da = dz·(1 − (z/cap)²); then dhidden += da · w_chunk and dweight_chunk = daᵀ · hidden.
      const float scale = g.item() / static_cast<float>(count);
      const float* lp = lse.data<float>();
      const int32_t* lb = ls.data<int32_t>();
      Tensor dh = want_h ? Tensor::empty({n, c}) : Tensor(), dw = want_w ? Tensor::empty({v, c}) : Tensor();
      if (want_h && v == 0) dh.fill(0.f);
      std::vector<float> scratch(keep ? 0 : static_cast<size_t>(n) * chunk);  // [N, chunk]
      for (int64_t v0 = 0; v0 < v; v0 += chunk) {
        const int64_t vc = std::min(chunk, v - v0);
        // The chunk's logits, turned into dlogits in place (the kept ones are not needed afterwards).
        float* const da = keep ? kept.data<float>() + n * v0 : scratch.data();
        if (!keep) chunk_logits(hs, ws, n, c, v0, vc, cap, da);
        parallel_rows(n, vc, [&](int64_t, int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            float* zr = da + i * vc;
            if (lb[i] == ignore) {
              std::fill(zr, zr + vc, 0.f);
              continue;
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
          }
        });
        // dh (+)= da · w_chunk (task 0) and dw_chunk = daᵀ · hidden (task 1): independent, equal FLOPs.
        const auto product = [&](int64_t task, const ThreadPool& pool) {
          if (task == 0 && want_h)
            gemm_head(false, false, n, c, vc, da, vc, ws, v0 * c, c, dh.data<float>(), c, v0 ? 1.f : 0.f, pool);
          if (task == 1 && want_w)
            gemm_head(true, false, vc, c, n, da, vc, hs, 0, c, dw.data<float>() + v0 * c, c, 0.f, pool);
        };
        run_gemm_pair(want_h && want_w, product);
      }
      return {dh, dw};
    });
  }
  return loss;
}

}  // namespace lathe
