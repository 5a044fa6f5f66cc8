// Google Benchmark of the CPU gemm: a square 1024^3 product, the GPT-2 124M (B*T = 256 tokens, C = 768) and
// Llama tiny-110M (B*T = 1024 and 2048 tokens) training-step shapes (forward, dX and dW), batch-1 decode GEMVs
// with Llama-1B shapes, and batched decode (M = 1..32 sequences, BM_Decode_*) on GPT-2 / 110M / 1B shapes.
// Counters: FLOP/s for the products, weight bytes/s for the GEMVs. The thread count is the last Arg.
// BM_PeakFma/<probe> is the compute peak of each ISA the CPU has (fp32_fma_avx2, fp32_fma_avx512,
// bf16_dot_avx512bf16; as bench/peak_fma.cc) on the same ThreadPool, labelled with its tier as the GEMMs
// are with theirs (bench/gemm_peak_pct.py divides each GEMM by the peak of its tier). On a shared host,
// run it in the same invocation with random interleaving so that peak and GEMMs meet the same load, e.g.
//   build/release/gemm_bench --benchmark_filter='BM_(PeakFma|Gemm_F32)/' --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2
// GCC 12 flags the intrinsics' internal _mm512_undefined_*() as uninitialized once inlined (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "lathe/backend/cpu/gemm.h"
#include "lathe/backend/cpu/machine_limits_loops.h"

namespace {

using lathe::bf16;
using lathe::ThreadPool;
using lathe::cpu::GemmArgs;

// Operands on 64-byte boundaries, as lathe's tensors are (base/allocator.h). With std::vector's 16 bytes,
// every other 32-byte load of the skinny kernels straddled two cache lines: batch-8 decode on Zen 2 measured
// 39 instead of 50 GFLOP/s with the weights in cache.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  // Blocks of 2 MiB and more: 2 MiB aligned on transparent huge pages, as base/allocator.h gives tensors
  // (with 4 KiB pages, each 4 KiB W row of a Llama-1B GEMV is a TLB miss of its own).
  static constexpr size_t kHuge = size_t{2} << 20;
  static std::align_val_t alignment(size_t bytes) { return std::align_val_t{bytes >= kHuge ? kHuge : 64}; }
  T* allocate(size_t n) {
    void* p = ::operator new(n * sizeof(T), alignment(n * sizeof(T)));
    if (n * sizeof(T) >= kHuge) madvise(p, (n * sizeof(T) + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { ::operator delete(p, alignment(n * sizeof(T))); }
  template <class U>
  bool operator==(const Aligned64<U>&) const { return true; }
};
template <class T>
using AlignedVector = std::vector<T, Aligned64<T>>;

template <class T>
AlignedVector<T> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  AlignedVector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, float>) x = dist(rng);
    else x = lathe::f32_to_bf16(dist(rng));
  }
  return v;
}

// Compute peak of one probe (machine_limits_loops.h: fp32 FMA per ISA, bf16 dot) on n workers of the pool:
// ~5 ms of work per worker per iteration. The label is the tier the probe runs (avx2, avx512, ...).
void bench_peak(benchmark::State& st, const lathe::cpu::peak_loops::Loop& loop, const char* tier) {
  const ThreadPool pool(static_cast<int>(st.range(0)));
  constexpr int64_t kIters = 1'000'000;
  std::vector<float> sink(pool.n_threads());
  for (auto _ : st) {
    pool.run_on_workers(pool.n_threads(), [&](int w, int) { sink[w] = loop.run(kIters, static_cast<float>(w)); });
    benchmark::DoNotOptimize(sink.data());
  }
  st.counters["FLOP/s"] = benchmark::Counter(loop.ops_per_iter * kIters * pool.n_threads() * st.iterations(),
                                             benchmark::Counter::kIsRate);
  st.SetLabel(tier);
}

struct GemmShape {
  std::string name;
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// C[M, N] = op(A) · op(B); A and B hold TA / TB. Reports FLOP/s (2·M·N·K per call).
template <class TA, class TB>
void bench_gemm(benchmark::State& st, const GemmShape& s) {
  const ThreadPool pool(static_cast<int>(st.range(0)));
  const auto a = random_vector<TA>(s.m * s.k, 1);
  const auto b = random_vector<TB>(s.k * s.n, 2);
  AlignedVector<float> c(s.m * s.n);
  const GemmArgs<TA, TB> g{.trans_a = s.trans_a, .trans_b = s.trans_b, .m = s.m, .n = s.n, .k = s.k,
                           .a = a.data(), .lda = s.trans_a ? s.m : s.k, .b = b.data(),
                           .ldb = s.trans_b ? s.k : s.n, .c = c.data(), .ldc = s.n};
  for (auto _ : st) {
    lathe::cpu::gemm(g, pool);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  st.counters["FLOP/s"] = benchmark::Counter(2.0 * s.m * s.n * s.k * st.iterations(), benchmark::Counter::kIsRate);
  st.SetLabel(lathe::cpu::gemm_isa());
}

// y[M, N] = x[M, K] · W^T with W [N, K] (a Linear weight), x in TX: M decoding sequences. Weight copies rotate
// so that the bytes read per call come from DRAM, not the (large) L3: at least `total_bytes` of weights in
// all (copies of one random matrix: filling each with its own random numbers took seconds).
template <class TX, class TW>
void bench_gemv(benchmark::State& st, int64_t m, int64_t n, int64_t k, int64_t total_bytes) {
  const ThreadPool pool(static_cast<int>(st.range(0)));
  const int64_t w_bytes = n * k * static_cast<int64_t>(sizeof(TW));
  const int n_copies = static_cast<int>(std::max<int64_t>(1, total_bytes / w_bytes));
  std::vector<AlignedVector<TW>> ws(n_copies, random_vector<TW>(n * k, 10));
  const auto x = random_vector<TX>(m * k, 3);
  AlignedVector<float> y(m * n);
  int next = 0;
  for (auto _ : st) {
    const GemmArgs<TX, TW> g{.trans_b = true, .m = m, .n = n, .k = k, .a = x.data(), .lda = k,
                                .b = ws[next].data(), .ldb = k, .c = y.data(), .ldc = n};
    lathe::cpu::gemm(g, pool);
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % n_copies;
  }
  st.SetBytesProcessed(st.iterations() * w_bytes);
  st.counters["FLOP/s"] = benchmark::Counter(2.0 * m * n * k * st.iterations(), benchmark::Counter::kIsRate);
  st.SetLabel(lathe::cpu::gemm_isa());
}

// GPT-2 124M, B*T = 256 tokens, C = 768: each Linear W [out, in] appears as forward y = x·W^T, input
// gradient dX = dY·W and weight gradient dW = dY^T·X.
std::vector<GemmShape> gpt2_shapes() {
  constexpr int64_t kTokens = 256, kC = 768;
  struct Linear {
    const char* name;
    int64_t out, in;
  };
  const Linear linears[] = {{"qkv", 3 * kC, kC}, {"attn_proj", kC, kC}, {"fc", 4 * kC, kC},
                            {"fc_proj", kC, 4 * kC}, {"lm_head", 50257, kC}};
  std::vector<GemmShape> shapes;
  for (const Linear& l : linears) {
    shapes.push_back({std::string("fwd_") + l.name, false, true, kTokens, l.out, l.in});
    shapes.push_back({std::string("dX_") + l.name, false, false, kTokens, l.in, l.out});
    shapes.push_back({std::string("dW_") + l.name, true, false, l.out, l.in, kTokens});
  }
  return shapes;
}

// Llama-style tiny-110M (dim 768, FFN 2048, vocab 32000; ../shared/tools/make_bench_model.py), B*T tokens:
// 4 * 256 = 1024 ("llama_") or 8 * 256 = 2048 (the training recipe's B = 8, "llama8_"): q/k/v/o [768, 768],
// gate/up [2048, 768], down [768, 2048], lm head [32000, 768].
std::vector<GemmShape> llama110m_shapes(int64_t batch) {
  const int64_t kTokens = batch * 256, kC = 768, kF = 2048;
  const std::string prefix = batch == 4 ? "llama_" : "llama" + std::to_string(batch) + "_";
  struct Linear {
    const char* name;
    int64_t out, in;
  };
  const Linear linears[] = {{"attn", kC, kC}, {"up", kF, kC}, {"down", kC, kF}, {"lm_head", 32000, kC}};
  std::vector<GemmShape> shapes;
  for (const Linear& l : linears) {
    shapes.push_back({prefix + "fwd_" + l.name, false, true, kTokens, l.out, l.in});
    shapes.push_back({prefix + "dX_" + l.name, false, false, kTokens, l.in, l.out});
    shapes.push_back({prefix + "dW_" + l.name, true, false, l.out, l.in, kTokens});
  }
  return shapes;
}

// The six products of a LoRA adapter (rank r) on the same Linears at 8 * 256 tokens ("lora8_"), in the
// rank-major layout ops/linear.cc keeps (hT = scaling · A·Xᵀ [r, tokens]): forward hT = A·Xᵀ and
// Y += hTᵀ·Bᵀ; backward dhT = Bᵀ·dYᵀ, dX += dhTᵀ·A, dA = dhT·X and dBᵀ = hT·dY (A [r, in], B [out, r]).
std::vector<GemmShape> lora_shapes(int64_t rank) {
  const int64_t kTokens = 8 * 256, kC = 768, kF = 2048;
  struct Linear {
    const char* name;
    int64_t out, in;
  };
  const Linear linears[] = {{"attn", kC, kC}, {"up", kF, kC}, {"down", kC, kF}};
  std::vector<GemmShape> shapes;
  for (const Linear& l : linears) {
    const std::string prefix = "lora8_r" + std::to_string(rank) + "_";
    shapes.push_back({prefix + "fwdA_" + l.name, false, true, rank, kTokens, l.in});
    shapes.push_back({prefix + "fwdB_" + l.name, true, true, kTokens, l.out, rank});
    shapes.push_back({prefix + "dH_" + l.name, true, true, rank, kTokens, l.out});
    shapes.push_back({prefix + "dX_" + l.name, true, false, kTokens, l.in, rank});
    shapes.push_back({prefix + "dA_" + l.name, false, false, rank, l.in, kTokens});
    shapes.push_back({prefix + "dB_" + l.name, false, false, rank, l.out, kTokens});
  }
  return shapes;
}

void register_all() {
  auto threads = [](benchmark::internal::Benchmark* b) { b->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond); };
  // BM_PeakFma/<probe>/<threads> for each probe the CPU has (the others would die with SIGILL: skipped).
  namespace loops = lathe::cpu::peak_loops;
  const std::pair<const loops::Loop*, const char*> peaks[] = {
      {&loops::kLoops[0], "avx2"}, {&loops::kLoops[1], "avx512"}, {&loops::kLoops[2], "avx512bf16"}};
  for (const auto& [loop, tier] : peaks) {
    if (!loop->cpu_has()) {
      std::fprintf(stderr, "gemm_bench: BM_PeakFma/%s skipped: this CPU lacks %s\n", loop->name, loop->instruction);
      continue;
    }
    benchmark::RegisterBenchmark((std::string("BM_PeakFma/") + loop->name).c_str(),
                                 [loop, tier](benchmark::State& st) { bench_peak(st, *loop, tier); })
        ->Apply(threads);
  }
  std::vector<GemmShape> shapes = {{"1024x1024x1024", false, false, 1024, 1024, 1024}};
  for (const GemmShape& s : gpt2_shapes()) shapes.push_back(s);
  for (int64_t batch : {4, 8})
    for (const GemmShape& s : llama110m_shapes(batch)) shapes.push_back(s);
  for (const GemmShape& s : lora_shapes(16)) shapes.push_back(s);
  for (const GemmShape& s : shapes) {
    benchmark::RegisterBenchmark(("BM_Gemm_F32/" + s.name).c_str(),
                                 [s](benchmark::State& st) { bench_gemm<float, float>(st, s); })
        ->Apply(threads);
  }
  // bf16 weights (f32 activations) and bf16 x bf16 on the square and the MLP up-projection (fwd_fc).
  for (const GemmShape& s : {shapes[0], gpt2_shapes()[6]}) {
    benchmark::RegisterBenchmark(("BM_Gemm_F32xBf16/" + s.name).c_str(),
                                 [s](benchmark::State& st) { bench_gemm<float, bf16>(st, s); })
        ->Apply(threads);
    benchmark::RegisterBenchmark(("BM_Gemm_Bf16/" + s.name).c_str(),
                                 [s](benchmark::State& st) { bench_gemm<bf16, bf16>(st, s); })
        ->Apply(threads);
  }
  // Llama-1B decode (batch 1): q/o-like [8192 x 2048] up, [2048 x 8192] down, lm head [128256 x 2048].
  struct Gemv {
    const char* name;
    int64_t n, k;
  };
  for (const Gemv& v : {Gemv{"N8192_K2048", 8192, 2048}, Gemv{"N2048_K8192", 2048, 8192},
                        Gemv{"N128256_K2048", 128256, 2048}}) {
    benchmark::RegisterBenchmark((std::string("BM_Gemv_F32/") + v.name).c_str(),
                                 [v](benchmark::State& st) { bench_gemv<float, float>(st, 1, v.n, v.k, int64_t{1} << 30); })
        ->Apply(threads);
    benchmark::RegisterBenchmark((std::string("BM_Gemv_Bf16/") + v.name).c_str(),
                                 [v](benchmark::State& st) { bench_gemv<float, bf16>(st, 1, v.n, v.k, int64_t{1} << 30); })
        ->Apply(threads);
  }
  // Batched decode, M sequences: GPT-2 124M q/k/v-like [768 x 768], fc [3072 x 768], fc_proj [768 x 3072],
  // lm head [50257 x 768]; 110M up [2048 x 768] / down [768 x 2048]; Llama-1B [8192 x 2048]. 256 MiB of
  // weight copies (over 5x this host's L3). Names: BM_Decode_<dtype>/N<n>_K<k>/M<m>/<threads>; F32 and Bf16
  // take f32 x, Bf16xBf16 bf16 x (the vdpbf16ps kernel on AVX-512 BF16) against the same bf16 weights.
  for (const Gemv& v : {Gemv{"N768_K768", 768, 768}, Gemv{"N3072_K768", 3072, 768}, Gemv{"N768_K3072", 768, 3072},
                        Gemv{"N2048_K768", 2048, 768}, Gemv{"N768_K2048", 768, 2048},
                        Gemv{"N50257_K768", 50257, 768}, Gemv{"N8192_K2048", 8192, 2048}}) {
    for (int64_t m : {1, 2, 4, 5, 8, 12, 16, 24, 32, 48, 64}) {
      const std::string suffix = std::string(v.name) + "/M" + std::to_string(m);
      benchmark::RegisterBenchmark(
          ("BM_Decode_F32/" + suffix).c_str(),
          [v, m](benchmark::State& st) { bench_gemv<float, float>(st, m, v.n, v.k, int64_t{256} << 20); })
          ->Apply(threads);
      benchmark::RegisterBenchmark(
          ("BM_Decode_Bf16/" + suffix).c_str(),
          [v, m](benchmark::State& st) { bench_gemv<float, bf16>(st, m, v.n, v.k, int64_t{256} << 20); })
          ->Apply(threads);
      benchmark::RegisterBenchmark(
          ("BM_Decode_Bf16xBf16/" + suffix).c_str(),
          [v, m](benchmark::State& st) { bench_gemv<bf16, bf16>(st, m, v.n, v.k, int64_t{256} << 20); })
          ->Apply(threads);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
