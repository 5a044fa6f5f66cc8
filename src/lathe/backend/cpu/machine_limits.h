// This machine's limits, measured: the compute peak of each vector ISA the CPU has (fp32 FMA on AVX2 and
// AVX-512, the bf16 dot vdpbf16ps, the int8 dot vpdpbusd of AVX-512 VNNI and AVX-VNNI) and the streaming
// memory bandwidth (read-only and STREAM triad) on any number of the pool's workers. `lathe bench
// roofline` places lathe's kernels against these roofs; peak_flops.h's MFU denominator is the widest fp32
// probe. A probe for an ISA the CPU lacks executes nothing and returns 0, so every caller runs on any
// x86-64 CPU. The loops themselves are in machine_limits_loops.h (shared with bench/peak_fma.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lathe/base/thread_pool.h"

namespace lathe::cpu {

// The instruction-set extensions the probes need (__builtin_cpu_supports).
struct CpuFeatures {
  bool avx2_fma = false;     // avx2 and fma
  bool avx512f = false;
  bool avx512_bf16 = false;  // avx512f + avx512bf16 (vdpbf16ps)
  bool avx512_vnni = false;  // avx512f + avx512vnni (vpdpbusd zmm)
  bool avx_vnni = false;     // avx2 + avxvnni (VEX vpdpbusd ymm: Alder Lake, Zen 5)
  static CpuFeatures detect();
};

enum class ComputePeak : uint8_t {
  kFp32FmaAvx2,        // vfmadd231ps ymm: 8 lanes x 2 flops
  kFp32FmaAvx512,      // vfmadd231ps zmm: 16 lanes x 2 flops
  kBf16DotAvx512,      // vdpbf16ps zmm: 16 lanes x 2 products x 2 flops
  kInt8DotAvx512Vnni,  // vpdpbusd zmm: 16 lanes x 4 u8*s8 products x 2 ops
  kInt8DotAvxVnni,     // vpdpbusd ymm (VEX): 8 lanes x 4 products x 2 ops
  kCount
};

struct ComputePeakInfo {
  const char* name;         // "fp32_fma_avx512": the key in lathe bench roofline's JSON
  const char* instruction;  // "vfmadd231ps zmm"
  const char* unit;         // "GFLOP/s", or "GOP/s" for the int8 dot
};
const ComputePeakInfo& compute_peak_info(ComputePeak p);
bool compute_peak_supported(ComputePeak p, const CpuFeatures& cpu);

// How a probe times its rounds. kWall: the round's wall time, what the machine gives a job now (the
// roofline). kWorkerCpu: each worker's rate over its own thread CPU time, summed over the workers, what the
// cores give while they run (MFU's denominator: a host busy while the probe runs must not shrink the peak and
// push MFU past 100%; where two vCPUs share a core and the host runs them in turn it reads up to 2x high).
enum class RoundClock { kWall, kWorkerCpu };

// G(FL)OP/s of `p` on min(n_workers, pool.n_threads()) workers, the best round over about `seconds`.
// Every worker runs the same independent chains between two barriers; by default the round's wall time
// counts (timing each worker alone would overstate the peak where two vCPUs share a core). Returns 0, having
// executed nothing, when `cpu` lacks the ISA; pass a CpuFeatures with a flag cleared to skip a probe.
double measure_compute_peak(ComputePeak p, const ThreadPool& pool, int n_workers, double seconds,
                            const CpuFeatures& cpu = CpuFeatures::detect(), RoundClock clock = RoundClock::kWall);

// The best rate, in units per second / 1e9, of rounds in which each of n workers (1..pool.n_threads())
// runs run(iters, seed) between two barriers, over about `seconds` (at least one round); a round does
// units_per_iter * iters units per worker. The timing loop of every compute probe (and of peak_flops.cc's
// portable fallback).
double best_round_rate(const ThreadPool& pool, int n_workers, double seconds, int64_t iters,
                       double units_per_iter, float (*run)(int64_t iters, float seed),
                       RoundClock clock = RoundClock::kWall);

// The last-level cache size of cache_info() (L3, else L2).
size_t last_level_cache_bytes();

// Streaming bandwidth over arrays far larger than the caches: read-only (a sum over one array, 8
// interleaved streams per worker) and STREAM triad a[i] = b[i] + s*c[i] (3 arrays, 12 bytes per element as
// STREAM counts them; a is written with non-temporal stores, so no write-allocate read is hidden). The
// arrays are allocated once and first touched in parallel.
class BandwidthProbe {
 public:
  // read_bytes for the read array, read_bytes / 4 for each triad array (>= 2x the last-level cache keeps
  // every pass in DRAM; stream_bytes_for_cache below picks such a size).
  BandwidthProbe(size_t read_bytes, const ThreadPool& pool);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  // GB/s (1e9 bytes) on min(n_workers, pool.n_threads()) workers, the best of `passes` passes.
  double read_gbps(const ThreadPool& pool, int n_workers, int passes) const;
  double triad_gbps(const ThreadPool& pool, int n_workers, int passes);
  size_t read_bytes() const;

 private:
  struct Arrays;
  std::unique_ptr<Arrays> arrays_;
};

// 8x the last-level cache, within [256 MiB, 1 GiB]: a streaming working set no cache holds.
size_t stream_bytes_for_cache(size_t cache_bytes);

}  // namespace lathe::cpu
