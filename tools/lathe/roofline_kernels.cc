#include "roofline_kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "lathe/backend/cpu/cpu_tier.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/ops/attention.h"
#include "lathe/ops/rms_norm.h"
#include "lathe/tensor/dtype.h"
#include "lathe/train/adamw.h"

namespace lathe::cli {

namespace {

using Clock = std::chrono::steady_clock;

// rms_norm is the compiler's vectorisation of portable C++: it runs the widest vectors the build compiles
// for. (AdamW dispatches on cpu::cpu_tier() like the GEMM.)
const char* build_isa() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#else
  return "scalar";
#endif
}

// Median seconds per call of fn, after one warm-up call; at least min_reps calls and min_seconds.
template <class Fn>
double median_seconds(Fn&& fn, const KernelRunOptions& opt, int& reps) {
  fn();
  std::vector<double> times;
  const auto start = Clock::now();
  while (static_cast<int>(times.size()) < opt.min_reps ||
         (std::chrono::duration<double>(Clock::now() - start).count() < opt.min_seconds && times.size() < 1000)) {
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  reps = static_cast<int>(times.size());
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

// Deterministic values in [-0.5, 0.5): cheap to write (hundreds of MB), never denormal.
void fill(float* x, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((static_cast<uint32_t>(i) * 2654435761u + seed) >> 16 & 0xffff) / 65536.f - 0.5f;
}

std::string dims(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

struct GemmCase {
  std::string name;
  bool trans_a, trans_b;
  int64_t m, n, k;
  bool bf16_weights = false;  // B holds bf16 (f32 activations): the bf16 checkpoint path
};

// C[M, N] = op(A) · op(B), f32 accumulation, beta = 0: A, B read once and C written once.
KernelTiming time_gemm(const GemmCase& g, const KernelRunOptions& opt, const ThreadPool& pool) {
  std::vector<float> a(static_cast<size_t>(g.m * g.k)), c(static_cast<size_t>(g.m * g.n));
  std::vector<float> b(static_cast<size_t>(g.k * g.n));
  fill(a.data(), a.size(), 1);
  fill(b.data(), b.size(), 2);
  const int64_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  KernelTiming t{.name = g.name + " " + dims(g.m, g.n, g.k), .kind = "gemm", .tier = cpu::gemm_isa()};
  t.flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  t.bytes_written = 4.0 * static_cast<double>(c.size());
  if (g.bf16_weights) {
    std::vector<bf16> bh(b.size());
    for (size_t i = 0; i < b.size(); ++i) bh[i] = f32_to_bf16(b[i]);
    const cpu::GemmArgs<float, bf16> args{.trans_a = g.trans_a, .trans_b = g.trans_b, .m = g.m, .n = g.n, .k = g.k,
                                          .a = a.data(), .lda = lda, .b = bh.data(), .ldb = ldb, .c = c.data(),
                                          .ldc = g.n};
    t.bytes_read = 4.0 * static_cast<double>(a.size()) + 2.0 * static_cast<double>(bh.size());
    t.seconds = median_seconds([&] { cpu::gemm(args, pool); }, opt, t.reps);
  } else {
    const cpu::GemmArgs<float, float> args{.trans_a = g.trans_a, .trans_b = g.trans_b, .m = g.m, .n = g.n, .k = g.k,
                                           .a = a.data(), .lda = lda, .b = b.data(), .ldb = ldb, .c = c.data(),
                                           .ldc = g.n};
    t.bytes_read = 4.0 * static_cast<double>(a.size() + b.size());
    t.seconds = median_seconds([&] { cpu::gemm(args, pool); }, opt, t.reps);
  }
  return t;
}

// Batch-1 decode: y[1, N] = x[1, K] · W^T, W [N, K] a Linear weight. Copies of W rotate so that every call
// reads its weights from DRAM (stream_bytes of copies in all).
template <class TW>
KernelTiming time_gemv(const std::string& name, int64_t n, int64_t k, const KernelRunOptions& opt,
                       const ThreadPool& pool) {
  const size_t w_elems = static_cast<size_t>(n * k), w_bytes = w_elems * sizeof(TW);
  const size_t copies = std::max<size_t>(2, (opt.stream_bytes + w_bytes - 1) / w_bytes);
  std::vector<TW> w(w_elems * copies);
  {
    std::vector<float> w0(w_elems);
    fill(w0.data(), w_elems, 3);
    for (size_t i = 0; i < w_elems; ++i) {
      if constexpr (std::is_same_v<TW, float>) w[i] = w0[i];
      else w[i] = f32_to_bf16(w0[i]);
    }
    for (size_t c = 1; c < copies; ++c) std::memcpy(w.data() + c * w_elems, w.data(), w_bytes);
  }
  std::vector<float> x(static_cast<size_t>(k)), y(static_cast<size_t>(n));
  fill(x.data(), x.size(), 4);
  size_t next = 0;
  KernelTiming t{.name = name + " " + dims(1, n, k), .kind = "gemv", .tier = cpu::gemm_isa()};
  t.flops = 2.0 * static_cast<double>(n) * static_cast<double>(k);
  t.bytes_read = static_cast<double>(w_bytes) + 4.0 * static_cast<double>(k);
  t.bytes_written = 4.0 * static_cast<double>(n);
  t.seconds = median_seconds(
      [&] {
        const cpu::GemmArgs<float, TW> args{.trans_b = true, .m = 1, .n = n, .k = k, .a = x.data(), .lda = k,
                                            .b = w.data() + next * w_elems, .ldb = k, .c = y.data(), .ldc = n};
        cpu::gemm(args, pool);
        next = (next + 1) % copies;
      },
      opt, t.reps);
  return t;
}

// Causal self-attention over one prompt: q, k, v [1, T, H, D] -> [1, T, H, D]. Useful flops: q·k and p·v
// over the causal triangle, 2 x 2·D per (query, visible key) pair and head; the softmax's exps not counted.
KernelTiming time_attention(int64_t t_len, int64_t heads, int64_t d, const KernelRunOptions& opt) {
  const Shape shape{1, t_len, heads, d};
  Tensor q = Tensor::empty(shape), k = Tensor::empty(shape), v = Tensor::empty(shape);
  fill(q.data<float>(), static_cast<size_t>(q.numel()), 5);
  fill(k.data<float>(), static_cast<size_t>(k.numel()), 6);
  fill(v.data<float>(), static_cast<size_t>(v.numel()), 7);
  KernelTiming t{.name = "attention causal prefill T=" + std::to_string(t_len) + " H=" + std::to_string(heads) +
                         " D=" + std::to_string(d),
                 .kind = "attention",
                 .tier = cpu::gemm_isa()};
  const double pairs = static_cast<double>(t_len) * static_cast<double>(t_len + 1) / 2;
  t.flops = 4.0 * static_cast<double>(d) * static_cast<double>(heads) * pairs;
  t.bytes_read = 3.0 * 4 * static_cast<double>(q.numel());
  t.bytes_written = 4.0 * static_cast<double>(q.numel());
  t.seconds = median_seconds([&] { (void)scaled_dot_product_attention(q, k, v); }, opt, t.reps);
  return t;
}

// y = rms_norm(x) over rows of C = 2048 (the Llama-1B width); stream_bytes of x.
KernelTiming time_rms_norm(const KernelRunOptions& opt) {
  constexpr int64_t kC = 2048;
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(opt.stream_bytes / (4 * kC)));
  Tensor x = Tensor::empty({rows, kC}), w = Tensor::empty({kC});
  fill(x.data<float>(), static_cast<size_t>(x.numel()), 8);
  fill(w.data<float>(), kC, 9);
  KernelTiming t{.name = "rms_norm " + std::to_string(rows) + "x" + std::to_string(kC), .kind = "rms_norm",
                 .tier = build_isa()};
  // Per element: square-and-add, then the two scalings; the per-row root is negligible.
  t.flops = 4.0 * static_cast<double>(x.numel());
  t.bytes_read = 4.0 * static_cast<double>(x.numel() + kC);
  t.bytes_written = 4.0 * static_cast<double>(x.numel());
  t.seconds = median_seconds([&] { (void)rms_norm(x, w, 1e-5f); }, opt, t.reps);
  return t;
}

// One AdamW step over n parameters: reads theta, grad, m, v and writes theta, m, v (28 bytes each); 16 flops
// per element by train/adamw.h's update (sqrt and divide count 1 each).
KernelTiming time_adamw(const KernelRunOptions& opt, const ThreadPool& pool) {
  const int64_t n = std::max<int64_t>(1024, static_cast<int64_t>(opt.stream_bytes / 16));
  Tensor theta = Tensor::empty({n}), grad = Tensor::empty({n});
  fill(theta.data<float>(), static_cast<size_t>(n), 10);
  fill(grad.data<float>(), static_cast<size_t>(n), 11);
  theta.set_requires_grad(true);
  theta.impl()->grad = grad;
  train::AdamW adamw({train::OptimParam{.name = "w", .value = theta}}, train::AdamWConfig{.weight_decay = 0.1});
  KernelTiming t{.name = "adamw step " + std::to_string(n) + " params", .kind = "adamw", .tier = cpu::cpu_tier_name(cpu::cpu_tier())};
  t.flops = 16.0 * static_cast<double>(n);
  t.bytes_read = 16.0 * static_cast<double>(n);
  t.bytes_written = 12.0 * static_cast<double>(n);
  t.seconds = median_seconds([&] { adamw.step(1e-4, 1.f, pool); }, opt, t.reps);
  return t;
}

}  // namespace

std::vector<KernelTiming> time_lathe_kernels(const KernelRunOptions& opt, Context& ctx,
                                             const std::function<void(const std::string&)>& progress) {
  ContextScope scope(ctx);
  const ThreadPool& pool = ctx.pool;
  // Token counts: GPT-2 124M B*T = 4*64, Llama-110M 4*256, a Llama-1B pp128 prompt; /8 for --quick.
  const int64_t div = opt.quick ? 8 : 1;
  const int64_t gpt2 = 256 / div, llama = 1024 / div, prompt = 128 / div, square = 1024 / div;
  // Linear W [out, in]: forward y = x·W^T, input gradient dX = dY·W, weight gradient dW = dY^T·X.
  const std::vector<GemmCase> gemms = {
      {"gemm square", false, false, square, 1024, 1024},
      {"gemm gpt2 fwd fc", false, true, gpt2, 3072, 768},
      {"gemm gpt2 dX fc", false, false, gpt2, 768, 3072},
      {"gemm gpt2 dW fc", true, false, 3072, 768, gpt2},
      {"gemm llama110m fwd up", false, true, llama, 2048, 768},
      {"gemm llama110m dX up", false, false, llama, 768, 2048},
      {"gemm llama110m dW up", true, false, 2048, 768, llama},
      {"gemm prefill 1B up f32", false, true, prompt, 8192, 2048},
      {"gemm prefill 1B up bf16w", false, true, prompt, 8192, 2048, true},
  };
  std::vector<KernelTiming> out;
  const auto done = [&](KernelTiming t) {
    char line[256];
    std::snprintf(line, sizeof(line), "%-44s %-10s %9.3f ms  %8.1f GFLOP/s  %7.1f GB/s", t.name.c_str(),
                  t.tier.c_str(), t.seconds * 1e3, t.flops / t.seconds / 1e9,
                  (t.bytes_read + t.bytes_written) / t.seconds / 1e9);
    progress(line);
    out.push_back(std::move(t));
  };
  for (const GemmCase& g : gemms) done(time_gemm(g, opt, pool));
  done(time_attention(512 / div, 12, 64, opt));
  done(time_gemv<float>("gemv decode 1B f32", 8192, 2048, opt, pool));
  done(time_gemv<bf16>("gemv decode 1B bf16", 8192, 2048, opt, pool));
  done(time_rms_norm(opt));
  done(time_adamw(opt, pool));
  return out;
}

}  // namespace lathe::cli
