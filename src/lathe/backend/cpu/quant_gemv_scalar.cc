// The scalar tier of the quantised decode GEMV, and the row dequantiser of the prefill panels: each weight
// dequantised in f32 exactly as the SIMD tiers do (int8 d·q; int4 fma(q, d, -8d); int6 fma(q, d, -32d);
// int4-asym fma(q, d, m); nf4 nf4[q]·absmax), each output summed in f32 in increasing k.
#include <cmath>
#include <memory>

#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/ref/nf4.h"
#include "lathe/ref/quant.h"

namespace lathe::cpu {
namespace {

// Row j's weights [k] in f32.
void dequantize_row_f32(const QuantMatrix& w, int64_t j, float* out) {
  if (w.spec.format == QuantFormat::kNf4) {  // the flattened weight's elements j·k .. j·k + k - 1
    for (int64_t p = 0; p < w.k; ++p) out[p] = ref::nf4_dequantize_at(w.codes, w.absmax, w.spec.group, j * w.k + p);
    return;
  }
  const int64_t groups = w.k / w.spec.group;
  const uint8_t* c = w.codes + j * quant_row_bytes(w.spec.format, w.k);
  const f16* sc = w.scales + j * groups;
  const f16* mn = w.mins ? w.mins + j * groups : nullptr;
  for (int64_t p = 0; p < w.k; ++p) {
    const float q = static_cast<float>(ref::quant_code(w.spec.format, c, w.k, p));
    const float d = f16_to_f32(sc[p / w.spec.group]);
    switch (w.spec.format) {
      case QuantFormat::kInt8:
        out[p] = q * d;
        break;
      case QuantFormat::kInt4:
        out[p] = std::fma(q, d, -8.f * d);
        break;
      case QuantFormat::kInt6:
        out[p] = std::fma(q, d, -32.f * d);
        break;
      default:
        out[p] = std::fma(q, d, f16_to_f32(mn[p / w.spec.group]));
        break;
    }
  }
}

}  // namespace

void quant_dequantize_rows(const QuantMatrix& w, int64_t j0, int64_t j1, float* dst) {
  for (int64_t j = j0; j < j1; ++j) dequantize_row_f32(w, j, dst + (j - j0) * w.k);
}

void quant_gemv_scalar(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                       int64_t ldy, bool accumulate) {
  std::unique_ptr<float[]> row(new float[static_cast<size_t>(w.k)]);
  for (int64_t j = j0; j < j1; ++j) {
    dequantize_row_f32(w, j, row.get());
    for (int i = 0; i < m; ++i) {
      float acc = 0.f;
      for (int64_t p = 0; p < w.k; ++p) acc = std::fma(x[i * ldx + p], row[p], acc);
      float& out = y[i * ldy + j];
      out = accumulate ? out + acc : acc;
    }
  }
}

}  // namespace lathe::cpu
