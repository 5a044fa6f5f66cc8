// linear / matmul fronts: validate, size the output, call the CPU GEMM, record the gradient rule.
#include "lathe/ops/linear.h"

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/base/context.h"
#include "lathe/ops/pool_tasks.h"

namespace lathe {
namespace {

// out[M, N] (=|+=) op(a)·op(b), all contiguous row-major: a and b f32, a f32 and b bf16 or f16 (16-bit
// checkpoints), or both bf16 (bf16 compute); f32 accumulation in every case.
void gemm_into(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a, const Tensor& b,
               float* out, float beta, const ThreadPool& pool = current_context().pool, float alpha = 1.f) {
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (a.dtype() == DType::kBF16) {
    LATHE_ASSERT(b.dtype() == DType::kBF16, "bf16 x f32 GEMM is not provided");
    cpu::gemm(cpu::GemmArgs<bf16, bf16>{trans_a, trans_b, m, n, k, a.data<bf16>(), lda, b.data<bf16>(), ldb, out, n,
                                         alpha, beta},
              pool);
  } else if (b.dtype() == DType::kBF16) {
    cpu::gemm(cpu::GemmArgs<float, bf16>{trans_a, trans_b, m, n, k, a.data<float>(), lda, b.data<bf16>(), ldb,
                                          out, n, alpha, beta},
              pool);
  } else if (b.dtype() == DType::kF16) {
    cpu::gemm(cpu::GemmArgs<float, f16>{trans_a, trans_b, m, n, k, a.data<float>(), lda, b.data<f16>(), ldb,
                                         out, n, alpha, beta},
              pool);
  } else {
    cpu::gemm(cpu::GemmArgs<float, float>{trans_a, trans_b, m, n, k, a.data<float>(), lda, b.data<float>(), ldb,
                                           out, n, alpha, beta},
              pool);
  }
}

// dst[cols, rows] = srcᵀ of a row-major src [rows, cols].
void transpose_into(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * rows + r] = src[r * cols + c];
}

// dw[out, in] = gᵀ[out, n] · x[n, in]. With few input features (a LoRA B [out, r]) the product is formed
// as dwᵀ[in, out] = xᵀ · g and transposed: its output is then [r, out] wide rows, not [out, r] columns of
// r, which left most of the blocked kernel's 32-column tiles empty and packed all of g transposed.
void weight_grad(const Tensor& g, const Tensor& x, int64_t n, int64_t in, int64_t out, Tensor& dw,
                 const ThreadPool& pool) {
  constexpr int64_t kNarrowIn = 16;
  if (in > kNarrowIn || in >= out || x.dtype() != DType::kF32)
    return gemm_into(true, false, out, in, n, g, x, dw.data<float>(), 0.f, pool);
  const Tensor dwt = Tensor::empty({in, out});  // from the context's allocator, like every other buffer here
  gemm_into(true, false, in, out, n, x, g, dwt.data<float>(), 0.f, pool);
  transpose_into(dwt.data<float>(), in, out, dw.data<float>());
}

}  // namespace

namespace {

void check_linear_args(const Tensor& x_in, const Tensor& w, const Tensor& b) {
  const DType wt = w.dtype();
  LATHE_CHECK_ARG(w.dim() == 2 && (wt == DType::kF32 || wt == DType::kBF16 || wt == DType::kF16),
                  "[linear] weight must be 2-D f32, bf16 or f16, got ", shape_str(w.shape()), " ", dtype_name(wt));
  LATHE_CHECK_ARG(x_in.dtype() == DType::kF32 || (x_in.dtype() == DType::kBF16 && w.dtype() == DType::kBF16),
                  "[linear] input must be f32 (or bf16 with a bf16 weight), got ", dtype_name(x_in.dtype()),
                  " with a ", dtype_name(w.dtype()), " weight");
  LATHE_CHECK_ARG(x_in.dim() >= 1 && x_in.size(-1) == w.size(1), "[linear] input ", shape_str(x_in.shape()),
                  " does not match weight [out, in] = ", shape_str(w.shape()));
  LATHE_CHECK_ARG(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0) && b.dtype() == DType::kF32),
                  "[linear] bias must be f32 [", w.size(0), "], got ", b.defined() ? shape_str(b.shape()) : "");
}

void check_low_rank_term(const Tensor& x, const Tensor& w, const LowRankTerm& t) {
  const int64_t in = w.size(1), out = w.size(0);
  LATHE_CHECK_ARG(t.a.dim() == 2 && t.b.dim() == 2 && t.a.size(1) == in && t.b.size(0) == out &&
                      t.b.size(1) == t.a.size(0),
                  "[linear] low-rank term a ", shape_str(t.a.shape()), ", b ", shape_str(t.b.shape()),
                  " does not fit weight [out, in] = ", shape_str(w.shape()));
  LATHE_CHECK_ARG(t.x.shape() == x.shape() && t.x.dtype() == x.dtype(), "[linear] low-rank term input ",
                  shape_str(t.x.shape()), " does not match x ", shape_str(x.shape()));
  LATHE_CHECK_ARG(t.a.dtype() == t.x.dtype() && t.b.dtype() == DType::kF32,
                  "[linear] low-rank term: a must have x's dtype (", dtype_name(t.x.dtype()), ") and b be f32, got ",
                  dtype_name(t.a.dtype()), " and ", dtype_name(t.b.dtype()));
}

// One linear of a validated, contiguous x: y = x · wᵀ + b (+ a low-rank term) sized here, computed by
// compute(pool) on any pool (linear_pair runs two side by side), and its gradient rule recorded by finish().
struct LinearJob {
  Tensor x_in, x, w, wc, b, y;
  int64_t in = 0, out = 0, n = 0;
  // The low-rank term, when there is one: its input (tx_in as given, tx contiguous; the same as x when
  // tx_shares_x), a [R, in], b [out, R], and hT = scaling · a·txᵀ [R, n] (saved for the backward).
  bool has_term = false, tx_shares_x = false;
  Tensor tx_in, tx, ta, tb, ht;
  float scaling = 1.f;

  LinearJob(const Tensor& x_in_, const Tensor& x_, const Tensor& w_, const Tensor& b_,
            const LowRankTerm* term = nullptr)
      : x_in(x_in_), x(x_), w(w_), wc(w_.contiguous()), b(b_) {
    in = w.size(1);
    out = w.size(0);
    n = x.numel() / in;
    Shape out_shape = x.shape();
    out_shape.back() = out;
    y = Tensor::empty(out_shape);
    if (term) {
      check_low_rank_term(x_in, w, *term);
      has_term = true;
      tx_shares_x = term->x.impl() == x_in.impl();
      tx_in = term->x;
      tx = tx_shares_x ? x : term->x.contiguous();
      ta = term->a.contiguous();
      tb = term->b.contiguous();
      scaling = term->scaling;
    }
  }
  int64_t rank() const { return ta.size(0); }

  void compute(const ThreadPool& pool) {
    float* yp = y.data<float>();
    float beta = 0.f;
    if (b.defined()) {  // seed every row with the bias, then accumulate the product onto it
      const float* bp = b.contiguous().data<float>();
      for (int64_t r = 0; r < n; ++r) std::memcpy(yp + r * out, bp, out * sizeof(float));
      beta = 1.f;
    }
    gemm_into(false, true, n, out, in, x, wc, yp, beta, pool);
    if (!has_term) return;
    // hT[R, n] = scaling · a[R, in] · txᵀ; then y[n, out] += hTᵀ · bᵀ[R, out].
    ht = Tensor::empty({rank(), n});
    gemm_into(false, true, rank(), n, in, ta, tx, ht.data<float>(), 0.f, pool, scaling);
    gemm_into(true, true, n, out, rank(), ht, tb, yp, 1.f, pool);
  }

  Tensor finish() {
    const bool term_grad = has_term && needs_grad({&tx_in, &ta, &tb});
    if (!needs_grad({&x_in, &w, &b}) && !term_grad) return y;
    const bool want_x = x_in.requires_grad(), want_w = w.requires_grad(), want_b = b.defined() && b.requires_grad();
    // A bf16 weight gets a gradient only as the compute copy of an f32 master (bf16_compute_weight), which
    // takes the f32 dw on to the master; a bf16 or f16 leaf (a 16-bit checkpoint, inference only) would need
    // a 16-bit gradient. dx through a 16-bit weight is fine.
    LATHE_CHECK_ARG(!want_w || w.dtype() == DType::kF32 || w.grad_fn(),
                    "[linear] gradients need an f32 weight or a bf16 compute copy (bf16_compute_weight), got a ",
                    dtype_name(w.dtype()), " weight");
    Tensor xs = x.detach(), ws = wc.detach();  // bf16 in bf16 compute: half the saved bytes
    const int64_t n_ = n, in_ = in, out_ = out;
    std::vector<Tensor> inputs = {x_in, w, b};
    if (!has_term) {
      record(y, "linear", std::move(inputs), [=](const Tensor& g_in) -> std::vector<Tensor> {
        const int64_t n = n_, in = in_, out = out_;
        const Tensor g = g_in.contiguous();  // [n, out]
        Tensor dx = want_x ? Tensor::empty(xs.shape()) : Tensor(), dw = want_w ? Tensor::empty(ws.shape()) : Tensor();
        // dx[n, in] = g[n, out] · w[out, in] (task 0); dw[out, in] = gᵀ[out, n] · x[n, in] (task 1).
        const auto product = [&](int64_t task, const ThreadPool& pool) {
          if (task == 0 && want_x) gemm_into(false, false, n, in, out, g, ws, dx.data<float>(), 0.f, pool);
          if (task == 1 && want_w) weight_grad(g, xs, n, in, out, dw, pool);
        };
        run_gemm_pair(want_x && want_w, product);
        return {dx, dw, bias_grad(want_b, g, n, out)};
      });
      return y;
    }
    // With the term: inputs {x, w, b, a, b_term} (+ its own input when it is not x).
    inputs.push_back(ta);
    inputs.push_back(tb);
    if (!tx_shares_x) inputs.push_back(tx_in);
    const bool want_tx = tx_shares_x ? want_x : tx_in.requires_grad();
    const bool want_ta = ta.requires_grad(), want_tb = tb.requires_grad();
    const bool shares = tx_shares_x;
    const float s = scaling;
    Tensor txs = tx.detach(), tas = ta.detach(), tbs = tb.detach(), hts = ht.detach();
    record(y, "linear_low_rank", std::move(inputs), [=](const Tensor& g_in) -> std::vector<Tensor> {
      const int64_t n = n_, in = in_, out = out_, r = tas.size(0);
      const Tensor g = g_in.contiguous();  // [n, out]
      const ThreadPool& pool = current_context().pool;
      // dhT[R, n] = scaling · bᵀ[R, out] · gᵀ: the gradient of a·txᵀ.
      Tensor dht;
      if (want_tx || want_ta) {
        dht = Tensor::empty({r, n});
        gemm_into(true, true, r, n, out, tbs, g, dht.data<float>(), 0.f, pool, s);
      }
      Tensor dx, dw, dta, dtb, dtx;
      if (want_x) {  // dx = g · w, and + dhTᵀ · a when the term reads x itself
        dx = Tensor::empty(xs.shape());
        gemm_into(false, false, n, in, out, g, ws, dx.data<float>(), 0.f, pool);
        if (shares) gemm_into(true, false, n, in, r, dht, tas, dx.data<float>(), 1.f, pool);
      }
      if (want_tx && !shares) {
        dtx = Tensor::empty(txs.shape());
        gemm_into(true, false, n, in, r, dht, tas, dtx.data<float>(), 0.f, pool);
      }
      if (want_w) {
        dw = Tensor::empty(ws.shape());
        weight_grad(g, xs, n, in, out, dw, pool);
      }
      if (want_ta) {  // da[R, in] = dhT · tx
        dta = Tensor::empty(tas.shape());
        gemm_into(false, false, r, in, n, dht, txs, dta.data<float>(), 0.f, pool);
      }
      if (want_tb) {  // dbᵀ[R, out] = hT · g, transposed into db[out, R]
        const Tensor dtbt = Tensor::empty({r, out});
        gemm_into(false, false, r, out, n, hts, g, dtbt.data<float>(), 0.f, pool);
        dtb = Tensor::empty(tbs.shape());
        transpose_into(dtbt.data<float>(), r, out, dtb.data<float>());
      }
      std::vector<Tensor> grads = {dx, dw, bias_grad(want_b, g, n, out), dta, dtb};
      if (!shares) grads.push_back(dtx);
      return grads;
    });
    return y;
  }

  // db[out] = Σ_rows g, or nothing.
  static Tensor bias_grad(bool want, const Tensor& g, int64_t n, int64_t out) {
    if (!want) return Tensor();
    Tensor db = Tensor::zeros({out});
    float* dbp = db.data<float>();
    const float* gp = g.data<float>();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) dbp[j] += gp[r * out + j];
    return db;
  }
};

}  // namespace

namespace {
Tensor run_linear(const Tensor& x_in, const Tensor& w, const Tensor& b, const LowRankTerm* term) {
  check_linear_args(x_in, w, b);
  LinearJob job(x_in, x_in.contiguous(), w, b, term);
  job.compute(current_context().pool);
  return job.finish();
}
}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& w, const Tensor& b) { return run_linear(x_in, w, b, nullptr); }

Tensor linear(const Tensor& x_in, const Tensor& w, const Tensor& b, const LowRankTerm& term) {
  return run_linear(x_in, w, b, &term);
}

std::pair<Tensor, Tensor> linear_pair(const Tensor& x_in, const Tensor& w0, const Tensor& w1, const Tensor& b0,
                                      const Tensor& b1, const LowRankTerm* t0, const LowRankTerm* t1) {
  check_linear_args(x_in, w0, b0);
  check_linear_args(x_in, w1, b1);
  const Tensor x = x_in.contiguous();
  LinearJob j0(x_in, x, w0, b0, t0), j1(x_in, x, w1, b1, t1);
  // Side by side only when the two GEMMs are equal (else one thread would idle part of the time).
  const bool equal = w0.shape() == w1.shape() && (t0 == nullptr) == (t1 == nullptr) &&
                     (!t0 || t0->a.size(0) == t1->a.size(0));
  run_gemm_pair(equal, [&](int64_t task, const ThreadPool& pool) { (task == 0 ? j0 : j1).compute(pool); });
  return {j0.finish(), j1.finish()};
}

std::pair<Tensor, Tensor> linear_pair(const Tensor& x_in, const Tensor& w0, const Tensor& w1, const Tensor& b0,
                                      const Tensor& b1) {
  return linear_pair(x_in, w0, w1, b0, b1, nullptr, nullptr);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  LATHE_CHECK_ARG(a_in.dim() == 2 && b_in.dim() == 2 && a_in.size(1) == b_in.size(0), "[matmul] shapes ",
                  shape_str(a_in.shape()), " and ", shape_str(b_in.shape()), " do not chain");
  LATHE_CHECK_ARG(a_in.dtype() == DType::kF32 && b_in.dtype() == DType::kF32, "[matmul] needs f32 inputs");
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor c = Tensor::empty({m, n});
  gemm_into(false, false, m, n, k, a, b, c.data<float>(), 0.f);
  if (needs_grad({&a_in, &b_in})) {
    const bool want_a = a_in.requires_grad(), want_b = b_in.requires_grad();
    Tensor as = a.detach(), bs = b.detach();
    record(c, "matmul", {a_in, b_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();  // [m, n]
      Tensor da, db;
      if (want_a) {  // da[m, k] = g · bᵀ
        da = Tensor::empty({m, k});
        gemm_into(false, true, m, k, n, g, bs, da.data<float>(), 0.f);
      }
      if (want_b) {  // db[k, n] = aᵀ · g
        db = Tensor::empty({k, n});
        gemm_into(true, false, k, n, m, as, g, db.data<float>(), 0.f);
      }
      return {da, db};
    });
  }
  return c;
}

}  // namespace lathe
