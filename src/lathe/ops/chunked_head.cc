// Vocabulary-chunked head: validation, chunk logits (GEMM + soft-cap), and the chunk loops of the
// forward and of the backward (dlogits rows, then dhidden and dweight GEMMs side by side).
#include "lathe/ops/chunked_head.h"

#include <algorithm>
#include <vector>

#include "lathe/backend/cpu/gemm.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/pool_tasks.h"
#include "lathe/ops/softcap.h"

namespace lathe {
namespace {

// c[m, n] = a[m, k] · op(w) (+ beta·c) for w f32, bf16 or f16 (the head weight [V, C], or the hidden states
// for the head's dW); w_offset selects rows.
void gemm_head(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const Tensor& w, int64_t w_offset, int64_t ldb, float* c, int64_t ldc, float beta,
               const ThreadPool& pool = current_context().pool) {
  if (w.dtype() == DType::kBF16)
    cpu::gemm(cpu::GemmArgs<float, bf16>{trans_a, trans_b, m, n, k, a, lda, w.data<bf16>() + w_offset, ldb, c, ldc,
                                          1.f, beta},
              pool);
  else if (w.dtype() == DType::kF16)
    cpu::gemm(cpu::GemmArgs<float, f16>{trans_a, trans_b, m, n, k, a, lda, w.data<f16>() + w_offset, ldb, c, ldc,
                                         1.f, beta},
              pool);
  else
    cpu::gemm(cpu::GemmArgs<float, float>{trans_a, trans_b, m, n, k, a, lda, w.data<float>() + w_offset, ldb, c,
                                           ldc, 1.f, beta},
              pool);
}

// logits chunk [n, vc] = hidden [n, c] · weight[v0 : v0 + vc, :]ᵀ, soft-capped when cap > 0. hidden f32,
// or bf16 with a bf16 weight (bf16 compute).
void chunk_logits(const ChunkedHead& hd, int64_t v0, int64_t vc, float* buf) {
  const int64_t n = hd.n, c = hd.c;
  const float cap = hd.cap;
  if (hd.hidden.dtype() == DType::kBF16)
    cpu::gemm(cpu::GemmArgs<bf16, bf16>{false, true, n, vc, c, hd.hidden.data<bf16>(), c,
                                         hd.weight.data<bf16>() + v0 * c, c, buf, vc, 1.f, 0.f},
              current_context().pool);
  else
    gemm_head(false, true, n, vc, c, hd.hidden.data<float>(), c, hd.weight, v0 * c, c, buf, vc, 0.f);
  if (cap > 0.f)
    parallel_rows(n, vc, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) softcap_forward(buf + i * vc, buf + i * vc, vc, cap);
    });
}

// Runs fn on every row of the chunk z [n, vc].
void for_rows(const ChunkedHead& hd, int64_t v0, int64_t vc, float* z, const ChunkRowFn& fn) {
  parallel_rows(hd.n, vc, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i, v0, vc, z + i * vc);
  });
}

}  // namespace

ChunkedHead make_chunked_head(const char* op, const Tensor& hidden_in, const Tensor& weight_in,
                              const ChunkedHeadOptions& opt, bool for_backward) {
  LATHE_CHECK_ARG(hidden_in.defined() && hidden_in.dim() == 2 &&
                      (hidden_in.dtype() == DType::kF32 ||
                       (hidden_in.dtype() == DType::kBF16 && weight_in.dtype() == DType::kBF16)),
                  "[", op, "] hidden must be f32 [N, C] (or bf16 with a bf16 weight), got ",
                  hidden_in.defined() ? shape_str(hidden_in.shape()) : "undefined");
  LATHE_CHECK_ARG(weight_in.defined() && weight_in.dim() == 2 && weight_in.size(1) == hidden_in.size(1) &&
                      (weight_in.dtype() == DType::kF32 || weight_in.dtype() == DType::kBF16 ||
                       weight_in.dtype() == DType::kF16),
                  "[", op, "] weight must be f32, bf16 or f16 [V, ", hidden_in.size(1), "], got ",
                  weight_in.defined() ? shape_str(weight_in.shape()) : "undefined");
  LATHE_CHECK_ARG(opt.chunk_size > 0, "[", op, "] chunk_size must be > 0, got ", opt.chunk_size);
  LATHE_CHECK_ARG(opt.final_softcap >= 0.f, "[", op, "] final_softcap must be >= 0 (0: off), got ",
                  opt.final_softcap);
  // Detached: the backward closure keeps the data, not the inputs' autograd history.
  ChunkedHead hd{.hidden = hidden_in.contiguous().detach(), .weight = weight_in.contiguous().detach()};
  hd.n = hd.hidden.size(0);
  hd.c = hd.hidden.size(1);
  hd.v = hd.weight.size(0);
  hd.chunk = std::min(opt.chunk_size, std::max<int64_t>(hd.v, 1));
  hd.cap = opt.final_softcap;
  if (for_backward && hd.n * hd.v * static_cast<int64_t>(sizeof(float)) <= opt.keep_logits_bytes)
    hd.kept = Tensor::empty({hd.n * hd.v});
  return hd;
}

void check_chunked_head_weight_grad(const char* op, const Tensor& weight_in) {
  LATHE_CHECK_ARG(!weight_in.requires_grad() || weight_in.dtype() == DType::kF32 || weight_in.grad_fn(), "[", op,
                  "] gradients need an f32 weight or a bf16 compute copy");
}

void chunked_head_forward(const ChunkedHead& hd, const ChunkRowFn& fn) {
  const bool keep = hd.kept.defined();
  std::vector<float> buf(keep ? 0 : static_cast<size_t>(hd.n) * hd.chunk);  // [N, chunk]
  for (int64_t v0 = 0; v0 < hd.v; v0 += hd.chunk) {
    const int64_t vc = std::min(hd.chunk, hd.v - v0);
    float* zc = keep ? hd.kept.data<float>() + hd.n * v0 : buf.data();
    chunk_logits(hd, v0, vc, zc);
    for_rows(hd, v0, vc, zc, fn);
  }
}

void chunked_head_backward(const ChunkedHead& hd, const ChunkRowFn& fn, bool want_h, bool want_w, Tensor* dh,
                           Tensor* dw) {
  const int64_t n = hd.n, c = hd.c, v = hd.v;
  const bool keep = hd.kept.defined();
  *dh = want_h ? Tensor::empty({n, c}) : Tensor();
  *dw = want_w ? Tensor::empty({v, c}) : Tensor();
  if (want_h && v == 0) dh->fill(0.f);
  std::vector<float> scratch(keep ? 0 : static_cast<size_t>(n) * hd.chunk);  // [N, chunk]
  for (int64_t v0 = 0; v0 < v; v0 += hd.chunk) {
    const int64_t vc = std::min(hd.chunk, v - v0);
    // The chunk's logits, turned into dlogits in place (the kept ones are not needed afterwards).
    float* const da = keep ? hd.kept.data<float>() + n * v0 : scratch.data();
    if (!keep) chunk_logits(hd, v0, vc, da);
    for_rows(hd, v0, vc, da, fn);
    // dh (+)= da · w_chunk (task 0) and dw_chunk = daᵀ · hidden (task 1): independent, equal FLOPs.
    const auto product = [&](int64_t task, const ThreadPool& pool) {
      if (task == 0 && want_h)
        gemm_head(false, false, n, c, vc, da, vc, hd.weight, v0 * c, c, dh->data<float>(), c, v0 ? 1.f : 0.f, pool);
      if (task == 1 && want_w)
        gemm_head(true, false, vc, c, n, da, vc, hd.hidden, 0, c, dw->data<float>() + v0 * c, c, 0.f, pool);
    };
    run_gemm_pair(want_h && want_w, product);
  }
}

}  // namespace lathe
