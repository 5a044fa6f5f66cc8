// The W4A4 question (issue 15, the APEX4 paper): do int4 activations x int4 weights pay on this CPU against
// int8 activations (W4A8: lathe's VNNI kernels) and float activations (the f32-FMA kernels on dequantised
// codes: "W4A32", the A16 stand-in: a bf16 x would only add a widening)? Llama-1B's gate/up shape
// W [8192, 2048] in int4 (Q4_0 rules), W rotated over 256 MiB of copies (from DRAM), decode M = 1 and
// prefill M = 128.
//
// x86 has no 4-bit dot product: vpdpbusd multiplies bytes, so int4 activations must be widened to int8
// before they meet the weights, and W4A4 costs W4A8's products plus the widening. This benchmark times the
// most favourable W4A4 pipeline: x already stored as packed int4 codes (as if the previous op wrote them),
// widened once per call into the int8 layout the W4A8 kernel reads (not per block inside the kernel, which
// could only add work), then the same kernel. Its error: x rounded to 15 levels per 32 values instead of
// 255. Counters: rel_err = ||y - y_exact|| / ||y_exact|| (y_exact: f32 x times the dequantised W, in double).
//   build/release/w4a4_bench --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/ref/quant.h"

namespace {

using lathe::QuantFormat;
using lathe::QuantSpec;
using lathe::ThreadPool;
namespace cpu = lathe::cpu;

constexpr int64_t kN = 8192, kK = 2048, kUnits = kK / 32;
const QuantSpec kSpec{QuantFormat::kInt4, 32};

struct Packed {
  std::vector<uint8_t> codes;
  std::vector<lathe::f16> scales;
};

Packed pack_w() {
  std::mt19937 rng(10);
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<float> row(static_cast<size_t>(kK));
  const int64_t rb = lathe::quant_row_bytes(kSpec.format, kK);
  Packed p{std::vector<uint8_t>(static_cast<size_t>(kN * rb)), std::vector<lathe::f16>(static_cast<size_t>(kN * kUnits))};
  for (int64_t j = 0; j < kN; ++j) {
    for (float& v : row) v = dist(rng);
    lathe::ref::quantize_row(kSpec, row.data(), kK, p.codes.data() + j * rb, p.scales.data() + j * kUnits, nullptr);
  }
  return p;
}

// Activations with a transformer's heavy tail: normal, 1% of them 10x larger.
std::vector<float> make_x(int64_t m) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * kK));
  for (float& v : x) v = dist(rng) * (u(rng) < 0.01f ? 10.f : 1.f);
  return x;
}

// int4 activations: per unit of 32, dx = max|x| / 7, q = nearbyint(x / dx) in [-7, 7], two codes per byte
// (low nibble input j, high nibble input j + 16, offset by 8), as the weights are packed.
struct X4 {
  std::vector<uint8_t> codes;  // [m][k / 2]
  std::vector<float> dx;       // [m][units]
};

X4 quantize_x4(const std::vector<float>& x, int64_t m) {
  X4 q{std::vector<uint8_t>(static_cast<size_t>(m * kK / 2)), std::vector<float>(static_cast<size_t>(m * kUnits))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t u = 0; u < kUnits; ++u) {
      const float* src = x.data() + i * kK + u * 32;
      float amax = 0.f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[j]));
      const float dx = amax / 7.f, id = dx != 0.f ? 1.f / dx : 0.f;
      q.dx[i * kUnits + u] = dx;
      uint8_t* dst = q.codes.data() + i * kK / 2 + u * 16;
      for (int j = 0; j < 16; ++j) {
        const int lo = static_cast<int>(std::nearbyint(src[j] * id)) + 8;
        const int hi = static_cast<int>(std::nearbyint(src[j + 16] * id)) + 8;
        dst[j] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  return q;
}

// Widens int4 activations into the W4A8 decode kernel's int8 layout (QuantActivations for int4 weights:
// per block of 4 units, the units' inputs 0-15 then 16-31), with the scales and per-group sums it reads.
void widen_x4(const X4& q, int64_t m, cpu::QuantActivations& a) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t u = 0; u < kUnits; ++u) {
      const int64_t b = u / 4, s = u % 4;
      int8_t* blk = a.xq + (i * a.blocks + b) * a.block_bytes;
      const uint8_t* src = q.codes.data() + i * kK / 2 + u * 16;
      int sum = 0;
      for (int j = 0; j < 16; ++j) {
        const int lo = (src[j] & 15) - 8, hi = (src[j] >> 4) - 8;
        blk[s * 16 + j] = static_cast<int8_t>(lo);
        blk[64 + s * 16 + j] = static_cast<int8_t>(hi);
        sum += lo + hi;
      }
      const float dx = q.dx[i * kUnits + u];
      for (int l = 0; l < 4; ++l) a.dx[(i * a.blocks + b) * 16 + s * 4 + l] = dx;
      a.t[i * a.groups + u] = dx * static_cast<float>(sum);
    }
}

// y_exact in double against y.
double rel_err(const std::vector<float>& y, const std::vector<double>& exact) {
  double d = 0, e = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    d += (y[i] - exact[i]) * (y[i] - exact[i]);
    e += exact[i] * exact[i];
  }
  return std::sqrt(d / e);
}

std::vector<double> exact_y(const Packed& w, const std::vector<float>& x, int64_t m) {
  std::vector<double> y(static_cast<size_t>(m * kN), 0.0);
  std::vector<float> row(static_cast<size_t>(kK));
  const cpu::QuantMatrix mat{kSpec, kN, kK, w.codes.data(), w.scales.data(), nullptr};
  for (int64_t j = 0; j < kN; ++j) {
    cpu::quant_dequantize_rows(mat, j, j + 1, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (int64_t p = 0; p < kK; ++p) acc += static_cast<double>(row[p]) * x[i * kK + p];
      y[i * kN + j] = acc;
    }
  }
  return y;
}

enum class Variant { kW4A32, kW4A8, kW4A4 };

void run(benchmark::State& st, Variant v, int64_t m) {
  const ThreadPool pool(static_cast<int>(st.range(0)));
  static const Packed one = pack_w();
  const int64_t bytes = static_cast<int64_t>(one.codes.size() + 2 * one.scales.size());
  const int n_copies = static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / bytes));
  static const std::vector<Packed> ws(n_copies, one);
  const std::vector<float> x = make_x(m);
  const X4 x4 = quantize_x4(x, m);
  std::vector<float> y(static_cast<size_t>(m * kN));
  // W4A4 decode: the W4A8 kernel's activation buffers, filled by widening the int4 codes.
  cpu::QuantActivations a;
  a.m = static_cast<int>(m);
  a.blocks = kUnits / 4;
  a.block_bytes = 128;
  a.groups = kUnits;
  std::vector<int8_t> xq(static_cast<size_t>(m * a.blocks * a.block_bytes) + 64);
  std::vector<float> dx(static_cast<size_t>(m * a.blocks * 16) + 16), t(static_cast<size_t>(m * kUnits));
  a.xq = reinterpret_cast<int8_t*>((reinterpret_cast<uintptr_t>(xq.data()) + 63) & ~uintptr_t{63});
  a.dx = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(dx.data()) + 63) & ~uintptr_t{63});
  a.t = t.data();
  std::vector<float> x4_floats;  // W4A4 prefill: the int4-rounded x the W4A8 GEMM requantises (timing only)
  if (v == Variant::kW4A4 && m > cpu::kQuantGemvMaxM) {
    x4_floats.resize(x.size());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t u = 0; u < kUnits; ++u)
        for (int j = 0; j < 16; ++j) {
          const uint8_t c = x4.codes[i * kK / 2 + u * 16 + j];
          const float d = x4.dx[i * kUnits + u];
          x4_floats[i * kK + u * 32 + j] = d * static_cast<float>((c & 15) - 8);
          x4_floats[i * kK + u * 32 + j + 16] = d * static_cast<float>((c >> 4) - 8);
        }
  }
  int next = 0;
  const auto once = [&](const Packed& w) {
    const cpu::QuantMatrix mat{kSpec, kN, kK, w.codes.data(), w.scales.data(), nullptr};
    switch (v) {
      case Variant::kW4A32:
        cpu::quant_gemm_with(cpu::CpuTier::kAvx512, m, x.data(), kK, mat, y.data(), kN, false, pool);
        break;
      case Variant::kW4A8:
        cpu::quant_gemm(m, x.data(), kK, mat, y.data(), kN, false, pool);
        break;
      case Variant::kW4A4:
        if (m <= cpu::kQuantGemvMaxM) {
          widen_x4(x4, m, a);
          cpu::quant_gemv_avx512_vnni(a, mat, 0, kN, y.data(), kN, false);
        } else {
          // Prefill: the W4A8 GEMM on x4's values; its own f32 -> int8 pass stands for the int4 -> int8
          // widening (both O(m·k), against the GEMM's O(m·n·k)).
          cpu::quant_gemm(m, x4_floats.data(), kK, mat, y.data(), kN, false, pool);
        }
        break;
    }
  };
  if (v == Variant::kW4A4 && m <= cpu::kQuantGemvMaxM && pool.n_threads() > 1) {
    st.SkipWithError("the W4A4 decode path here is single-threaded (it calls the kernel directly)");
    return;
  }
  for (auto _ : st) {
    once(ws[next]);
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % n_copies;
  }
  st.SetBytesProcessed(st.iterations() * bytes);
  st.counters["FLOP/s"] = benchmark::Counter(2.0 * m * kN * kK * st.iterations(), benchmark::Counter::kIsRate);
  // Accuracy against f32 x times the dequantised W (W4A4 prefill: x4's values through the W4A8 GEMM, whose
  // int8 re-rounding of 15-level values adds little to their own error).
  static std::vector<double> exact_decode, exact_prefill;
  std::vector<double>& exact = m <= cpu::kQuantGemvMaxM ? exact_decode : exact_prefill;
  if (exact.empty()) exact = exact_y(one, x, m);
  once(one);
  st.counters["rel_err"] = rel_err(y, exact);
}

void register_all() {
  for (int64_t m : {int64_t{1}, int64_t{128}})
    for (auto [name, v] : {std::pair{"W4A32_f32fma", Variant::kW4A32}, std::pair{"W4A8_vnni", Variant::kW4A8},
                           std::pair{"W4A4_vnni", Variant::kW4A4}}) {
      if (v != Variant::kW4A32 && !cpu::quant_cpu_has_vnni()) continue;
      benchmark::RegisterBenchmark((std::string("BM_") + name + "/N8192_K2048/M" + std::to_string(m)).c_str(),
                                   [v, m](benchmark::State& st) { run(st, v, m); })
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime();
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
