// Measures this machine's compute peaks for each vector ISA the CPU has (fp32 FMA on AVX2 and AVX-512,
// the bf16 dot vdpbf16ps, the int8 dot vpdpbusd of AVX-512 VNNI and AVX-VNNI) at 1 and 2 threads (or the
// thread counts given as arguments), skipping the ones it lacks, and prints one JSON line; a table with
// the ISA beside every figure goes to stderr. The loops are lathe's own (machine_limits_loops.h), so
// the figures match `lathe bench roofline`. Runs on any x86-64 CPU.
// Stand-alone (no lathe library): g++ -O2 -fopenmp bench/peak_fma.cc -o peak_fma; ./peak_fma [THREADS...]
// JSON keys: "<probe>_<n>t" per probe and thread count (GFLOP/s, int8: GOP/s), "absent": the probes
// skipped, and "fp32_fma_gflops_<n>t" / "fp32_fma_tier": the widest fp32 FMA the CPU has (the MFU peak).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../src/lathe/backend/cpu/machine_limits_loops.h"

namespace {

namespace loops = lathe::cpu::peak_loops;

constexpr long kIters = 20'000'000;  // ~0.1-0.3 s per thread and run

// Best of 5 runs of loop on n_threads threads, in G(FL)OP/s over all threads.
double measure(int n_threads, const loops::Loop& loop) {
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(n_threads)
    { sink = sink + loop.run(kIters, static_cast<float>(omp_get_thread_num())); }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double g = loop.ops_per_iter * kIters * n_threads / s / 1e9;
    if (g > best) best = g;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads;
  for (int i = 1; i < argc; ++i) threads.push_back(std::max(1, std::atoi(argv[i])));
  if (threads.empty()) threads = {1, 2};
  std::string json = "{", absent;
  std::string widest;  // the widest fp32 FMA probe present: later entries of kLoops are wider
  std::vector<double> widest_values;
  for (const loops::Loop& loop : loops::kLoops) {
    if (!loop.cpu_has()) {
      std::fprintf(stderr, "%-20s %-20s absent on this CPU: skipped\n", loop.name, loop.instruction);
      absent += std::string(absent.empty() ? "" : ", ") + "\"" + loop.name + "\"";
      continue;
    }
    std::vector<double> values;
    std::fprintf(stderr, "%-20s %-20s", loop.name, loop.instruction);
    for (int t : threads) {
      values.push_back(measure(t, loop));
      std::fprintf(stderr, "  %8.1f %s (%d thread%s)", values.back(), loop.unit, t, t == 1 ? "" : "s");
      char item[96];
      std::snprintf(item, sizeof(item), "\"%s_%dt\": %.1f, ", loop.name, t, values.back());
      json += item;
    }
    std::fprintf(stderr, "\n");
    if (std::string(loop.name).rfind("fp32_fma_", 0) == 0) widest = loop.name + 9, widest_values = values;
  }
  for (size_t i = 0; i < widest_values.size(); ++i) {
    char item[64];
    std::snprintf(item, sizeof(item), "\"fp32_fma_gflops_%dt\": %.1f, ", threads[i], widest_values[i]);
    json += item;
  }
  json += "\"fp32_fma_tier\": \"" + (widest.empty() ? std::string("none") : widest) + "\", \"absent\": [" + absent + "]}";
  std::printf("%s\n", json.c_str());
  return 0;
}
