// rope front, kernel and gradient. Rounding follows transformers' f32 path step by step (angle, cos/sin,
// then q·cos + rotate_half(q)·sin with each product rounded), so FMA contraction is switched off here.
#include "lathe/ops/rope.h"

#include <cmath>
#include <memory>
#include <numbers>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#define LATHE_ROPE_NO_FMA
#elif defined(__GNUC__)
// -march=native lets GCC fuse a·b + c into one FMA (one rounding instead of two): not what torch does.
#define LATHE_ROPE_NO_FMA __attribute__((optimize("fp-contract=off")))
#else
#define LATHE_ROPE_NO_FMA
#endif

namespace lathe {
namespace {

// cos/sin of the f32 angle: torch rounds position·inv_freq to f32, then takes an f32 cos of it. The
// double evaluation rounded once is the correctly rounded f32 value (torch's SLEEF cosf is within 1 ulp).
LATHE_ROPE_NO_FMA void rope_cos_sin(float position, const float* inv_freq, int64_t half, float* cos_out,
                                     float* sin_out) {
  for (int64_t i = 0; i < half; ++i) {
    const float angle = position * inv_freq[i];
    cos_out[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    sin_out[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
}

// One token's heads x [n_heads, head_dim] -> y (may alias x). Forward: y1 = x1·c − x2·s, y2 = x2·c + x1·s;
// inverse (the transpose, used by the gradient): y1 = x1·c + x2·s, y2 = x2·c − x1·s. Dims >= 2·half copy.
LATHE_ROPE_NO_FMA void rope_rotate_heads(const float* x, float* y, int64_t n_heads, int64_t head_dim,
                                          const float* cos, const float* sin, int64_t half, bool inverse) {
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* xh = x + h * head_dim;
    float* yh = y + h * head_dim;
    if (!inverse) {
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = xh[i], x2 = xh[i + half];
        yh[i] = x1 * cos[i] - x2 * sin[i];
        yh[i + half] = x2 * cos[i] + x1 * sin[i];
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = xh[i], x2 = xh[i + half];
        yh[i] = x1 * cos[i] + x2 * sin[i];
        yh[i + half] = x2 * cos[i] - x1 * sin[i];
      }
    }
    if (yh != xh)
      for (int64_t i = 2 * half; i < head_dim; ++i) yh[i] = xh[i];
  }
}

// Below this many elements a parallel loop costs more than it saves (decode-sized inputs).
constexpr int64_t kRopeParallelMin = int64_t{1} << 15;

// cos and sin tables [n_positions, half] for every position row.
struct RopeTables {
  std::vector<float> cos, sin;
};

// Applies the rotation to every token of x [B, T, H, D] (contiguous) into y.
void rope_apply(const float* x, float* y, const Shape& shape, const RopeTables& tab, bool per_batch,
                int64_t half, bool inverse) {
  const int64_t n_batch = shape[0], n_tokens = shape[1], n_heads = shape[2], head_dim = shape[3];
  const auto row_fn = [&](int64_t row, int) {
    const int64_t p = per_batch ? row : row % n_tokens;
    const int64_t off = row * n_heads * head_dim;
    rope_rotate_heads(x + off, y + off, n_heads, head_dim, tab.cos.data() + p * half, tab.sin.data() + p * half,
                      half, inverse);
  };
  if (shape_numel(shape) < kRopeParallelMin) {
    for (int64_t row = 0; row < n_batch * n_tokens; ++row) row_fn(row, 0);
  } else {
    current_context().pool.parallel_for(n_batch * n_tokens, row_fn);
  }
}

}  // namespace

LATHE_ROPE_NO_FMA std::vector<float> rope_inv_freq(const RopeConfig& cfg) {
  LATHE_CHECK_ARG(cfg.rotary_dim > 0 && cfg.rotary_dim % 2 == 0, "[rope_inv_freq] rotary_dim must be even and > 0, got ",
                  cfg.rotary_dim);
  LATHE_CHECK_ARG(cfg.theta > 0.f && cfg.factor > 0.f, "[rope_inv_freq] theta and factor must be > 0, got ", cfg.theta,
                  ", ", cfg.factor);
  LATHE_CHECK_ARG(cfg.scaling < RopeScaling::kCount,
                  "[rope_inv_freq] unknown scaling ", static_cast<int>(cfg.scaling));
  const int half = cfg.rotary_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // torch: arange(0, R, 2).float() / R, then theta ** e (f32 pow), then 1.0 / that (f32 reciprocal).
    const float e = static_cast<float>(2 * i) / static_cast<float>(cfg.rotary_dim);
    const float p = static_cast<float>(std::pow(static_cast<double>(cfg.theta), static_cast<double>(e)));
    inv[i] = 1.f / p;
  }
  if (cfg.scaling == RopeScaling::kLinear) {
    for (float& f : inv) f = f / cfg.factor;
  } else if (cfg.scaling == RopeScaling::kLlama3) {
    LATHE_CHECK_ARG(cfg.high_freq_factor != cfg.low_freq_factor && cfg.low_freq_factor > 0.f,
                    "[rope_inv_freq] llama3 needs 0 < low_freq_factor != high_freq_factor, got ", cfg.low_freq_factor,
                    ", ", cfg.high_freq_factor);
    // transformers _compute_llama3_parameters; Python-scalar operands enter torch's f32 ops as f32, and
    // `a / tensor` is evaluated as tensor.reciprocal() * a (Tensor.__rtruediv__).
    const double orig = cfg.original_max_position;
    const float low_wavelen = static_cast<float>(orig / cfg.low_freq_factor);
    const float high_wavelen = static_cast<float>(orig / cfg.high_freq_factor);
    const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
    const float band = static_cast<float>(static_cast<double>(cfg.high_freq_factor) - cfg.low_freq_factor);
    for (float& f : inv) {
      const float wavelen = (1.f / f) * two_pi;
      if (wavelen > low_wavelen) {
        f = f / cfg.factor;
      } else if (!(wavelen < high_wavelen)) {  // medium band: interpolate between scaled and unscaled
        const float smooth = ((1.f / wavelen) * static_cast<float>(orig) - cfg.low_freq_factor) / band;
        f = (1.f - smooth) * f / cfg.factor + smooth * f;
      }
    }
  }
  return inv;
}

Tensor rope(const Tensor& x_in, const Tensor& positions_in, std::span<const float> inv_freq) {
  LATHE_CHECK_ARG(x_in.dim() == 4 && x_in.dtype() == DType::kF32, "[rope] x must be f32 [B, T, H, D], got ",
                  shape_str(x_in.shape()), " ", dtype_name(x_in.dtype()));
  const int64_t n_batch = x_in.size(0), n_tokens = x_in.size(1), head_dim = x_in.size(3);
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  LATHE_CHECK_ARG(half > 0 && 2 * half <= head_dim, "[rope] inv_freq has ", half, " entries; need 1..", head_dim / 2,
                  " for head_dim ", head_dim);
  LATHE_CHECK_ARG(positions_in.dtype() == DType::kI32, "[rope] positions must be i32, got ",
                  dtype_name(positions_in.dtype()));
  const bool per_batch = positions_in.dim() == 2;
  LATHE_CHECK_ARG((positions_in.dim() == 1 && positions_in.size(0) == n_tokens) ||
                      (per_batch && positions_in.size(0) == n_batch && positions_in.size(1) == n_tokens),
                  "[rope] positions must be [", n_tokens, "] or [", n_batch, ", ", n_tokens, "], got ",
                  shape_str(positions_in.shape()));
  const Tensor x = x_in.contiguous(), positions = positions_in.contiguous();
  const int32_t* pos = positions.data<int32_t>();
  const int64_t n_pos = positions.numel();
  auto tab = std::make_shared<RopeTables>();
  tab->cos.resize(n_pos * half);
  tab->sin.resize(n_pos * half);
  const auto table_fn = [&](int64_t p, int) {  // double cos/sin: ~30 ns each, worth spreading too
    rope_cos_sin(static_cast<float>(pos[p]), inv_freq.data(), half, tab->cos.data() + p * half,
                 tab->sin.data() + p * half);
  };
  if (n_pos * half * 64 < kRopeParallelMin) {
    for (int64_t p = 0; p < n_pos; ++p) table_fn(p, 0);
  } else {
    current_context().pool.parallel_for(n_pos, table_fn);
  }
  Tensor y = Tensor::empty(x.shape());
  rope_apply(x.data<float>(), y.data<float>(), x.shape(), *tab, per_batch, half, /*inverse=*/false);

  if (needs_grad({&x_in})) {
    const Shape shape = x.shape();
    record(y, "rope", {x_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor dx = Tensor::empty(shape);  // rotation is orthogonal: dx = Rᵀ·g
      rope_apply(g.data<float>(), dx.data<float>(), shape, *tab, per_batch, half, /*inverse=*/true);
      return {dx};
    });
  }
  return y;
}

LATHE_ROPE_NO_FMA void rope_inplace(float* x, int n_heads, int head_dim, int64_t position,
                                    std::span<const float> inv_freq) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  LATHE_ASSERT(half > 0 && 2 * half <= head_dim, "rope_inplace: inv_freq [", half, "] vs head_dim ", head_dim);
  const float pos = static_cast<float>(position);
  for (int64_t i = 0; i < half; ++i) {  // one angle at a time: no scratch needed
    float c, s;
    rope_cos_sin(pos, inv_freq.data() + i, 1, &c, &s);
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + static_cast<int64_t>(h) * head_dim;
      const float x1 = xh[i], x2 = xh[i + half];
      xh[i] = x1 * c - x2 * s;
      xh[i + half] = x2 * c + x1 * s;
    }
  }
}

}  // namespace lathe
