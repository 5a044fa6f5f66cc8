// Google Benchmark of the quantised GEMM (backend/cpu/quant_gemm.h) on Llama-1B decode shapes: batched decode
// of M = 1..16 sequences (the GEMV) and prefill at M = 32 and 128 (the tier's dequantised panels + the f32 GEMM;
// BM_QuantGemvVnni_*: the int8 prefill GEMM on repacked panels), per format, with the
// packed weights rotated over 256 MiB of copies so that they come from DRAM. Bytes/s counts the packed bytes
// read (codes + scales + mins); compare with gemm_bench's BM_Decode_F32 / BM_Decode_Bf16 at the same shape.
// The tier is cpu_tier()'s (LATHE_CPU=avx2|scalar lowers it). Names: BM_QuantGemv_<format>/N<n>_K<k>/M<m>/<threads>;
// BM_QuantGemvVnni_* is the integer-dot kernel (activations quantised to int8) where the CPU has AVX-512 VNNI:
// what quant_gemm runs there at every M. BM_QuantGemvAvx2Int_*: the AVX2 integer-dot decode kernel (vpmaddubsw),
// what CPUs without AVX-512 VNNI run for decode (at M > 16: its prefill GEMM, vpmaddubsw on repacked panels;
// BM_QuantGemvAvxVnni_*: that GEMM in AVX-VNNI's vpdpbusd, where the CPU has it).
// BM_QuantGemv*Hot_*: one copy of a 2048 x 2048 W, which stays
// in cache: the kernel's compute ceiling at M = 1.
//   build/release/quant_gemv_bench --benchmark_filter='BM_QuantGemv_.*/M1/' --benchmark_min_time=0.3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/ref/quant.h"

namespace {

using lathe::QuantSpec;
using lathe::ThreadPool;

struct Packed {
  std::vector<uint8_t> codes;
  std::vector<lathe::f16> scales, mins;
};

Packed pack(const QuantSpec& s, int64_t n, int64_t k) {
  std::mt19937 rng(10);
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<float> row(static_cast<size_t>(k));
  const int64_t rb = lathe::quant_row_bytes(s.format, k), groups = k / s.group;
  Packed p{std::vector<uint8_t>(static_cast<size_t>(n * rb)), std::vector<lathe::f16>(static_cast<size_t>(n * groups)),
           std::vector<lathe::f16>(lathe::quant_has_mins(s.format) ? static_cast<size_t>(n * groups) : 0)};
  for (int64_t j = 0; j < n; ++j) {
    for (float& v : row) v = dist(rng);
    lathe::ref::quantize_row(s, row.data(), k, p.codes.data() + j * rb, p.scales.data() + j * groups,
                             p.mins.empty() ? nullptr : p.mins.data() + j * groups);
  }
  return p;
}

// vnni: the integer-dot kernel (x quantised to int8 per 32; what quant_gemm runs for decode on a VNNI CPU)
// instead of the tier's f32 FMA one.
enum class Kernel { kTier, kVnni, kAvx2Int, kAvxVnni };

// hot: one copy of W, so it stays in cache (L2 + L3) between calls: the kernel's compute ceiling.
void bench_quant(benchmark::State& st, const QuantSpec& s, int64_t m, int64_t n, int64_t k, Kernel kernel,
                 bool hot = false) {
  const bool vnni = kernel == Kernel::kVnni;
  const ThreadPool pool(static_cast<int>(st.range(0)));
  const Packed one = pack(s, n, k);
  const int64_t bytes = static_cast<int64_t>(one.codes.size() + 2 * (one.scales.size() + one.mins.size()));
  const int n_copies = hot ? 1 : static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / bytes));
  const std::vector<Packed> ws(n_copies, one);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  int next = 0;
  for (auto _ : st) {
    const Packed& w = ws[next];
    const lathe::cpu::QuantMatrix mat{
        s, n, k, w.codes.data(), w.scales.data(), w.mins.empty() ? nullptr : w.mins.data()};
    if ((kernel == Kernel::kAvx2Int || kernel == Kernel::kAvxVnni) && m > lathe::cpu::kQuantGemvMaxM)
      lathe::cpu::quant_gemm_avx2_prefill_with(kernel == Kernel::kAvxVnni, m, x.data(), k, mat, y.data(), n, false,
                                               pool);
    else if (kernel == Kernel::kAvx2Int)
      lathe::cpu::quant_gemm_avx2_int(m, x.data(), k, mat, y.data(), n, false, pool);
    else if (vnni && m > lathe::cpu::kQuantGemvMaxM)
      lathe::cpu::quant_gemm_vnni_prefill(m, x.data(), k, mat, y.data(), n, false, pool);
    else if (vnni)
      lathe::cpu::quant_gemm_vnni(m, x.data(), k, mat, y.data(), n, false, pool);
    else
      lathe::cpu::quant_gemm_with(lathe::cpu::cpu_tier(), m, x.data(), k, mat, y.data(), n, false, pool);
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % n_copies;
  }
  st.SetBytesProcessed(st.iterations() * bytes);
  st.counters["FLOP/s"] = benchmark::Counter(2.0 * m * n * k * st.iterations(), benchmark::Counter::kIsRate);
  st.SetLabel(vnni                          ? "avx512vnni"
              : kernel == Kernel::kAvx2Int  ? "avx2-int8dot"
              : kernel == Kernel::kAvxVnni ? "avx-vnni"
                                            : lathe::cpu::cpu_tier_name(lathe::cpu::cpu_tier()));
}

void register_all() {
  const auto threads = [](benchmark::internal::Benchmark* b) { b->Arg(1)->Arg(2)->UseRealTime(); };
  struct Shape {
    const char* name;
    int64_t n, k;
    int64_t max_m;  // the largest M benchmarked
  };
  // Llama-1B's MLP shapes at every M; tiny-110M's (C 768, F 2048) at M = 1 only: calls of 0.3-0.9 MB, where
  // each call's start (the helper's wake-up, the first rows' misses) weighs more.
  const Shape shapes[] = {{"N8192_K2048", 8192, 2048, 128},
                          {"N2048_K8192", 2048, 8192, 128},
                          {"N768_K768", 768, 768, 1},
                          {"N2048_K768", 2048, 768, 1},
                          {"N768_K2048", 768, 2048, 1}};
  for (const char* format : {"int8", "int4", "int4-g32", "int4-g128", "int6"})
    for (const Shape& sh : shapes)
      for (int64_t m : {1, 4, 16, 32, 128}) {
        if (m > sh.max_m) break;
        const QuantSpec s = lathe::parse_quant_spec(format);
        const std::string name = std::string("BM_QuantGemv_") + format + "/" + sh.name + "/M" + std::to_string(m);
        benchmark::RegisterBenchmark(name.c_str(), [s, m, sh](benchmark::State& st) {
          bench_quant(st, s, m, sh.n, sh.k, Kernel::kTier);
        })->Apply(threads);
        if (lathe::cpu::cpu_max_tier() >= lathe::cpu::CpuTier::kAvx2)
          benchmark::RegisterBenchmark(("BM_QuantGemvAvx2Int_" + name.substr(13)).c_str(), [s, m, sh](benchmark::State& st) {
            bench_quant(st, s, m, sh.n, sh.k, Kernel::kAvx2Int);
          })->Apply(threads);
        if (m > lathe::cpu::kQuantGemvMaxM && lathe::cpu::cpu_has_avx_vnni())
          benchmark::RegisterBenchmark(("BM_QuantGemvAvxVnni_" + name.substr(13)).c_str(), [s, m, sh](benchmark::State& st) {
            bench_quant(st, s, m, sh.n, sh.k, Kernel::kAvxVnni);
          })->Apply(threads);
        if (!lathe::cpu::quant_cpu_has_vnni()) continue;
        benchmark::RegisterBenchmark(("BM_QuantGemvVnni_" + name.substr(13)).c_str(), [s, m, sh](benchmark::State& st) {
          bench_quant(st, s, m, sh.n, sh.k, Kernel::kVnni);
        })->Apply(threads);
      }
  // W in cache (2048 x 2048: 2-4 MiB of codes), M = 1: how fast each decode kernel computes when memory is
  // not the limit. Against the DRAM rows above: a kernel near its hot rate there is compute-bound.
  for (const char* format : {"int8", "int4", "int6"}) {
    const QuantSpec s = lathe::parse_quant_spec(format);
    const std::string shape = std::string(format) + "/N2048_K2048/M1";
    benchmark::RegisterBenchmark(("BM_QuantGemvHot_" + shape).c_str(), [s](benchmark::State& st) {
      bench_quant(st, s, 1, 2048, 2048, Kernel::kTier, true);
    })->Apply(threads);
    if (lathe::cpu::cpu_max_tier() >= lathe::cpu::CpuTier::kAvx2)
      benchmark::RegisterBenchmark(("BM_QuantGemvAvx2IntHot_" + shape).c_str(), [s](benchmark::State& st) {
        bench_quant(st, s, 1, 2048, 2048, Kernel::kAvx2Int, true);
      })->Apply(threads);
    if (lathe::cpu::quant_cpu_has_vnni())
      benchmark::RegisterBenchmark(("BM_QuantGemvVnniHot_" + shape).c_str(), [s](benchmark::State& st) {
        bench_quant(st, s, 1, 2048, 2048, Kernel::kVnni, true);
      })->Apply(threads);
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
