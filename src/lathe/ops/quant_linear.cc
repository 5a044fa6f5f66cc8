// quantize_weight / dequantize_weight / linear over a QuantWeight: validate, size, call the CPU kernels.
#include "lathe/ops/quant_linear.h"

#include <cstring>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/base/context.h"
#include "lathe/ref/nf4.h"
#include "lathe/ref/quant.h"

namespace lathe {
namespace {
cpu::QuantMatrix view_of(const QuantWeight& w) {
  if (w.spec.format == QuantFormat::kNf4)
    return {w.spec, w.out, w.in, static_cast<const uint8_t*>(w.codes.raw_data()), nullptr, nullptr,
            w.scales.data<float>()};
  return {w.spec,
          w.out,
          w.in,
          static_cast<const uint8_t*>(w.codes.raw_data()),
          w.scales.data<f16>(),
          w.mins.defined() ? w.mins.data<f16>() : nullptr};
}
Tensor tensor_of(const void* data, size_t bytes, Shape shape, DType dtype) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  std::memcpy(t.raw_data(), data, bytes);
  return t;
}

// bitsandbytes' quant_state "dtype" names (str(torch.dtype) without "torch.").
const char* torch_dtype_name(DType d) {
  return d == DType::kBF16 ? "bfloat16" : d == DType::kF16 ? "float16" : "float32";
}

QuantWeight quantize_nf4(const Tensor& w_in, const QuantSpec& spec) {
  const Tensor w = w_in.dtype() == DType::kF32 ? w_in.contiguous() : w_in.to(DType::kF32).contiguous();
  const int64_t out = w.size(0), in = w.size(1);
  const ref::Nf4Quantized q = ref::nf4_quantize(w.data<float>(), out * in, spec.group);
  Nf4Stats st;
  st.nested = true;
  st.absmax = tensor_of(q.absmax_codes.data(), q.absmax_codes.size(), {static_cast<int64_t>(q.absmax_codes.size())},
                        DType::kU8);
  st.nested_absmax = tensor_of(q.nested_absmax.data(), q.nested_absmax.size() * sizeof(float),
                               {static_cast<int64_t>(q.nested_absmax.size())}, DType::kF32);
  st.nested_quant_map = tensor_of(ref::kDynamicMap8, sizeof(ref::kDynamicMap8), {256}, DType::kF32);
  st.nested_blocksize = ref::kNf4NestedBlocksize;
  st.offset = q.offset;
  st.dtype = torch_dtype_name(w_in.dtype());
  QuantWeight r;
  r.spec = spec;
  r.out = out;
  r.in = in;
  r.codes = tensor_of(q.packed.data(), q.packed.size(), {static_cast<int64_t>(q.packed.size()), 1}, DType::kU8);
  r.scales = tensor_of(q.absmax_used.data(), q.absmax_used.size() * sizeof(float),
                       {static_cast<int64_t>(q.absmax_used.size())}, DType::kF32);
  r.nf4 = std::move(st);
  return r;
}

}  // namespace

QuantWeight nf4_weight(int64_t out, int64_t in, int64_t blocksize, Tensor codes, Nf4Stats stats,
                       const std::string& where) {
  QuantWeight r;
  r.spec = {QuantFormat::kNf4, blocksize};
  r.out = out;
  r.in = in;
  r.codes = std::move(codes);
  r.nf4 = std::move(stats);
  check_quant_spec(r.spec);
  const int64_t blocks = nf4_blocks(out * in, blocksize);
  const Nf4Stats& s = r.nf4;
  if (s.nested) {
    LATHE_CHECK_ARG(s.absmax.defined() && s.absmax.dtype() == DType::kU8 && s.absmax.numel() == blocks &&
                        s.nested_absmax.defined() && s.nested_absmax.dtype() == DType::kF32 &&
                        s.nested_absmax.numel() == nf4_blocks(blocks, s.nested_blocksize) &&
                        s.nested_quant_map.defined() && s.nested_quant_map.dtype() == DType::kF32 &&
                        s.nested_quant_map.numel() == 256,
                    where, ": nested nf4 statistics do not fit ", blocks, " blocks (absmax u8 [", blocks,
                    "], nested_absmax f32 [", nf4_blocks(blocks, s.nested_blocksize), "], nested_quant_map f32 [256])");
    Tensor used = Tensor::empty({blocks});
    const Tensor codes8 = s.absmax.contiguous(), nested = s.nested_absmax.contiguous(),
                 map = s.nested_quant_map.contiguous();
    for (int64_t b = 0; b < blocks; ++b)
      used.data<float>()[b] =
          ref::nf4_nested_absmax_at(map.data<float>(), static_cast<const uint8_t*>(codes8.raw_data()),
                                    nested.data<float>(), s.nested_blocksize, s.offset, b);
    r.scales = used;
  } else {
    LATHE_CHECK_ARG(s.absmax.defined() && s.absmax.dtype() == DType::kF32 && s.absmax.numel() == blocks, where,
                    ": nf4 absmax must be f32 [", blocks, "]");
    r.scales = s.absmax.contiguous();
  }
  r.check(where);
  return r;
}

QuantWeight quantize_weight(const Tensor& w_in, const QuantSpec& spec) {
  check_quant_spec(spec);
  LATHE_CHECK_ARG(w_in.dim() == 2 && dtype_is_float(w_in.dtype()),
                  "[quantize] weight must be 2-D [out, in] f32, bf16 or f16, got ", dtype_name(w_in.dtype()), " ",
                  shape_str(w_in.shape()));
  if (spec.format == QuantFormat::kNf4) return quantize_nf4(w_in, spec);
  const int64_t out = w_in.size(0), in = w_in.size(1);
  LATHE_CHECK_ARG(in > 0 && in % spec.group == 0, "[quantize] weight ", shape_str(w_in.shape()), ": its input size ",
                  in, " is not a multiple of the group size ", spec.group, " of format ", quant_spec_name(spec),
                  " (skip this weight, or pick a format whose group divides it)");
  const Tensor w = w_in.dtype() == DType::kF32 ? w_in.contiguous() : w_in.to(DType::kF32).contiguous();
  QuantWeight q;
  q.spec = spec;
  q.out = out;
  q.in = in;
  const int64_t row_bytes = quant_row_bytes(spec.format, in), groups = in / spec.group;
  q.codes = Tensor::empty({out, row_bytes}, spec.format == QuantFormat::kInt8 ? DType::kI8 : DType::kU8);
  q.scales = Tensor::empty({out, groups}, DType::kF16);
  if (quant_has_mins(spec.format)) q.mins = Tensor::empty({out, groups}, DType::kF16);
  uint8_t* codes = static_cast<uint8_t*>(q.codes.raw_data());
  f16* scales = q.scales.data<f16>();
  f16* mins = q.mins.defined() ? q.mins.data<f16>() : nullptr;
  const float* src = w.data<float>();
  current_context().pool.parallel_for(out, [&](int64_t j, int) {
    ref::quantize_row(spec, src + j * in, in, codes + j * row_bytes, scales + j * groups,
                      mins ? mins + j * groups : nullptr);
  });
  return q;
}

Tensor dequantize_weight(const QuantWeight& w) {
  w.check("[dequantize]");
  Tensor out = Tensor::empty({w.out, w.in});
  const cpu::QuantMatrix m = view_of(w);
  float* dst = out.data<float>();
  current_context().pool.parallel_for(w.out,
                                      [&](int64_t j, int) { cpu::quant_dequantize_rows(m, j, j + 1, dst + j * w.in); });
  return out;
}

namespace {

// y = x · deq(W)ᵀ + b without autograd. exact: the tier's f32 kernels on the dequantised codes (what a
// training step differentiates); else quant_gemm's integer-dot paths where the CPU has them (x rounded to
// int8 per 32, as llama.cpp's Q8_0 / Q4_0 products).
Tensor quant_product(const Tensor& x_in, const QuantWeight& w, const Tensor& b, bool exact) {
  LATHE_CHECK_ARG(w.defined(), "[linear] the quantised weight is empty");
  LATHE_CHECK_ARG(
      x_in.dim() >= 1 && x_in.size(-1) == w.in && (x_in.dtype() == DType::kF32 || x_in.dtype() == DType::kBF16),
      "[linear] input ", dtype_name(x_in.dtype()), " ", shape_str(x_in.shape()),
      " does not match the quantised weight [out, in] = [", w.out, ", ", w.in, "] (f32 input)");
  LATHE_CHECK_ARG(!b.defined() || (b.dim() == 1 && b.size(0) == w.out && b.dtype() == DType::kF32),
                  "[linear] bias must be f32 [", w.out, "], got ", b.defined() ? shape_str(b.shape()) : "");
  const Tensor x = (x_in.dtype() == DType::kF32 ? x_in : x_in.to(DType::kF32)).contiguous();
  const int64_t n = x.numel() / w.in;
  Shape out_shape = x.shape();
  out_shape.back() = w.out;
  Tensor y = Tensor::empty(out_shape);
  float* yp = y.data<float>();
  if (b.defined()) {  // seed every row with the bias; the kernel accumulates onto it
    const Tensor bc = b.contiguous();
    for (int64_t r = 0; r < n; ++r) std::memcpy(yp + r * w.out, bc.data<float>(), w.out * sizeof(float));
  }
  if (exact)
    cpu::quant_gemm_with(cpu::cpu_tier(), n, x.data<float>(), w.in, view_of(w), yp, w.out, b.defined(),
                         current_context().pool);
  else
    cpu::quant_gemm(n, x.data<float>(), w.in, view_of(w), yp, w.out, b.defined(), current_context().pool);
  return y;
}

}  // namespace

Tensor linear(const Tensor& x_in, const QuantWeight& w, const Tensor& b) {
  // Training (a gradient wanted) takes the exact product, so the forward is the function its backward
  // differentiates; inference the integer-dot paths.
  const bool training = needs_grad({&x_in, &b});
  Tensor y = quant_product(x_in, w, b, training);
  const int64_t n = x_in.numel() / w.in;
  if (training) {
    // The weight is frozen (QLoRA): dx[n, in] = g[n, out] · deq(W) and db = Σ_rows g; no weight gradient.
    const bool want_x = x_in.requires_grad(), want_b = b.defined() && b.requires_grad();
    const Shape x_shape = x_in.shape();
    const QuantWeight wq = w;  // shares the tensors: the codes live as long as the graph
    record(y, "quant_linear", {x_in, b}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();  // [n, out]
      Tensor dx, db;
      if (want_x) {
        dx = Tensor::empty(x_shape);
        cpu::quant_gemm_dx(n, g.data<float>(), wq.out, view_of(wq), dx.data<float>(), wq.in, false,
                           current_context().pool);
      }
      if (want_b) {
        db = Tensor::zeros({wq.out});
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < wq.out; ++j) db.data<float>()[j] += g.data<float>()[r * wq.out + j];
      }
      return {dx, db};
    });
  }
  return y;
}

Tensor linear(const Tensor& x_in, const QuantWeight& w, const Tensor& b, const LowRankTerm& term) {
  const Tensor ta = term.a.contiguous(), tb = term.b.contiguous();
  LATHE_CHECK_ARG(x_in.dtype() == DType::kF32 && term.x.dtype() == DType::kF32 && ta.dtype() == DType::kF32 &&
                      tb.dtype() == DType::kF32 && term.x.shape() == x_in.shape() && ta.dim() == 2 && tb.dim() == 2 &&
                      ta.size(1) == w.in && tb.size(0) == w.out && tb.size(1) == ta.size(0),
                  "[linear] low-rank term on a quantised weight [", w.out, ", ", w.in, "]: a ", shape_str(ta.shape()),
                  ", b ", shape_str(tb.shape()), ", x ", shape_str(term.x.shape()), " (all f32) do not fit x ",
                  shape_str(x_in.shape()));
  // The base product (this op records the whole), exact when a gradient is wanted.
  Tensor y = quant_product(x_in, w, b, needs_grad({&x_in, &b, &term.x, &term.a, &term.b}));
  const ThreadPool& pool = current_context().pool;
  const int64_t n = x_in.numel() / w.in, in = w.in, out = w.out, r = ta.size(0);
  const bool shares = term.x.impl() == x_in.impl();
  const Tensor tx = term.x.contiguous();
  const float s = term.scaling;
  using Args = cpu::GemmArgs<float, float>;
  // hT[R, n] = s · a[R, in] · txᵀ; y[n, out] += hTᵀ · bᵀ.
  Tensor ht = Tensor::empty({r, n});
  cpu::gemm(Args{false, true, r, n, in, ta.data<float>(), in, tx.data<float>(), in, ht.data<float>(), n, s, 0.f}, pool);
  cpu::gemm(Args{true, true, n, out, r, ht.data<float>(), n, tb.data<float>(), r, y.data<float>(), out, 1.f, 1.f},
            pool);
  if (!needs_grad({&x_in, &b, &term.x, &term.a, &term.b})) return y;
  const bool want_x = x_in.requires_grad(), want_b = b.defined() && b.requires_grad();
  const bool want_tx = shares ? want_x : term.x.requires_grad();
  const bool want_ta = term.a.requires_grad(), want_tb = term.b.requires_grad();
  const Shape x_shape = x_in.shape();
  const QuantWeight wq = w;
  const Tensor txs = tx.detach(), tas = ta.detach(), tbs = tb.detach(), hts = ht;
  std::vector<Tensor> inputs = {x_in, b, term.a, term.b};
  if (!shares) inputs.push_back(term.x);
  record(y, "quant_linear_low_rank", std::move(inputs), [=](const Tensor& g_in) -> std::vector<Tensor> {
    const Tensor g = g_in.contiguous();  // [n, out]
    const ThreadPool& pool = current_context().pool;
    Tensor dht, dx, db, dta, dtb, dtx;
    if (want_tx || want_ta) {  // dhT[R, n] = s · bᵀ[R, out] · gᵀ
      dht = Tensor::empty({r, n});
      cpu::gemm(Args{true, true, r, n, out, tbs.data<float>(), r, g.data<float>(), out, dht.data<float>(), n, s, 0.f},
                pool);
    }
    if (want_x) {  // dx = g · deq(W) (+ dhTᵀ · a when the term reads x itself)
      dx = Tensor::empty(x_shape);
      cpu::quant_gemm_dx(n, g.data<float>(), out, view_of(wq), dx.data<float>(), in, false, pool);
      if (shares)
        cpu::gemm(
            Args{true, false, n, in, r, dht.data<float>(), n, tas.data<float>(), in, dx.data<float>(), in, 1.f, 1.f},
            pool);
    }
    if (want_tx && !shares) {
      dtx = Tensor::empty(txs.shape());
      cpu::gemm(
          Args{true, false, n, in, r, dht.data<float>(), n, tas.data<float>(), in, dtx.data<float>(), in, 1.f, 0.f},
          pool);
    }
    if (want_ta) {  // da[R, in] = dhT · tx
      dta = Tensor::empty({r, in});
      cpu::gemm(
          Args{false, false, r, in, n, dht.data<float>(), n, txs.data<float>(), in, dta.data<float>(), in, 1.f, 0.f},
          pool);
    }
    if (want_tb) {  // dbᵀ[R, out] = hT · g, transposed into db[out, R]
      const Tensor dtbt = Tensor::empty({r, out});
      cpu::gemm(
          Args{false, false, r, out, n, hts.data<float>(), n, g.data<float>(), out, dtbt.data<float>(), out, 1.f, 0.f},
          pool);
      dtb = Tensor::empty({out, r});
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < out; ++j) dtb.data<float>()[j * r + i] = dtbt.data<float>()[i * out + j];
    }
    if (want_b) {
      db = Tensor::zeros({out});
      for (int64_t row = 0; row < n; ++row)
        for (int64_t j = 0; j < out; ++j) db.data<float>()[j] += g.data<float>()[row * out + j];
    }
    std::vector<Tensor> grads = {dx, db, dta, dtb};
    if (!shares) grads.push_back(dtx);
    return grads;
  });
  return y;
}

}  // namespace lathe
