// The kernels `lathe bench roofline` times, each through lathe's public API with its flops and compulsory
// bytes counted: GEMMs of the training and prefill shapes (cpu::gemm), causal prefill attention
// (scaled_dot_product_attention), batch-1 decode GEMVs with f32 and bf16 weights (cpu::gemm, M = 1),
// rms_norm and an AdamW step (train::AdamW).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "lathe/base/context.h"
#include "roofline.h"

namespace lathe::cli {

struct KernelRunOptions {
  bool quick = false;        // GEMM and attention rows / 8, 2 timed calls: a smoke run of a few seconds
  size_t stream_bytes = 0;   // working set of the memory-bound kernels (far beyond the caches)
  double min_seconds = 0.5;  // per kernel, after one warm-up call
  int min_reps = 5;
};

// Times every kernel on ctx's pool (set as the current context); `progress` gets one line per kernel.
std::vector<KernelTiming> time_lathe_kernels(const KernelRunOptions& opt, Context& ctx,
                                             const std::function<void(const std::string&)>& progress);

}  // namespace lathe::cli
