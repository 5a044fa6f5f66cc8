// The machine's measured fp32 FMA peak, the denominator of MFU (PERF.md: "% of measured peak"): the
// widest fp32 FMA probe of machine_limits.h the CPU has (AVX-512, else AVX2 + FMA, else a portable loop
// in the build's vectors). bench/peak_fma.cc is the stand-alone version used by the benchmark scripts.
#pragma once

#include "lathe/base/thread_pool.h"

namespace lathe::cpu {

// GFLOP/s of fp32 FMAs on all the pool's workers, measured for about `seconds` on the workers' own CPU
// time (RoundClock::kWorkerCpu), so that a busy host does not shrink it.
double measure_fma_peak_gflops(const ThreadPool& pool, double seconds = 0.2);

}  // namespace lathe::cpu
