// The roofline model (Williams, Waterman & Patterson, CACM 2009) for `lathe bench roofline`: a kernel
// doing F flops over B bytes (intensity I = F / B) cannot exceed min(compute peak, I x bandwidth). The
// machine's limits come from backend/cpu/machine_limits.h; this file places timed kernels against them
// and writes the picture (SVG) and the numbers (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe::cli {

struct ComputeRoof {
  std::string name;         // "fp32_fma_avx512" (machine_limits.h's ComputePeakInfo)
  std::string instruction;  // "vfmadd231ps zmm"
  std::string unit;         // "GFLOP/s" or "GOP/s"
  bool present = false;     // the CPU has the ISA; absent roofs have value 0 and are not drawn
  double value = 0;         // at MachineLimits::threads
};

struct BandwidthRow {
  int threads = 0;
  double read_gbps = 0, triad_gbps = 0;
};

struct MachineLimits {
  std::string cpu_model;
  int threads = 0;                     // the pool the kernels ran on
  double cache_bytes = 0;              // last-level cache the OS reports
  double stream_bytes = 0;             // the probes' and streaming kernels' working set
  std::vector<ComputeRoof> compute;    // one per ISA probe, present or not
  std::vector<BandwidthRow> bandwidth;  // 1..threads workers, measured before the kernels
  BandwidthRow after;                  // `threads` workers again, after the kernels (drift check)
  // The bandwidth roofs at `threads`: the best of the measurements before and after the kernels.
  double read_roof() const;
  double triad_roof() const;
};

// One kernel timed through lathe's public API. Bytes are the compulsory traffic: every operand read once
// and every output written once (a cache-blocked kernel re-reads panels from cache, not DRAM).
struct KernelTiming {
  std::string name;     // "gemm gpt2 fwd fc 256x3072x768"
  std::string kind;     // "gemm", "gemv", "attention", "rms_norm", "adamw"
  std::string tier;     // the instruction tier that ran: cpu::gemm_isa(), cpu_tier() (AdamW), or the build's ISA
  double flops = 0;     // useful flops per call (FMA = 2; sqrt and divide count 1)
  double bytes_read = 0, bytes_written = 0;
  double seconds = 0;   // median per call
  int reps = 0;         // timed calls (after one warm-up)
};

struct RooflinePoint {
  KernelTiming k;
  double gflops = 0, gbps = 0, intensity = 0;  // achieved FLOP/s and bytes/s (1e9), flops per byte
  std::string compute_roof;  // the fp32 roof of the tier that ran
  double compute_roof_gflops = 0;
  std::string memory_roof;   // "read" when the kernel writes under 10% of its bytes, else "triad"
  double memory_roof_gbps = 0;
  double roof_gflops = 0;    // min(compute roof, intensity x memory roof)
  bool compute_bound = false;
  double fraction = 0;       // gflops / roof_gflops
};

// The fp32 roof for a tier name ("avx512", "avx512bf16", "avx2"; anything else: the best present one).
const ComputeRoof* fp32_roof_for_tier(const MachineLimits& m, const std::string& tier);

RooflinePoint place_on_roofline(const KernelTiming& k, const MachineLimits& m);

nlohmann::json roofline_json(const MachineLimits& m, const std::vector<RooflinePoint>& points);

// Log-log picture: a horizontal line per present compute roof, a slanted line per bandwidth roof (read,
// triad at `threads`), one numbered point per kernel and a legend with its figures.
std::string roofline_svg(const MachineLimits& m, const std::vector<RooflinePoint>& points);

}  // namespace lathe::cli
