#include "lathe/backend/cpu/machine_limits.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <vector>

#include <immintrin.h>

#include "lathe/backend/cpu/cache_info.h"
#include "lathe/backend/cpu/machine_limits_loops.h"
#include "lathe/base/error.h"

namespace lathe::cpu {

CpuFeatures CpuFeatures::detect() {
  return {.avx2_fma = peak_loops::has_avx2_fma(),
          .avx512f = peak_loops::has_avx512f(),
          .avx512_bf16 = peak_loops::has_avx512_bf16(),
          .avx512_vnni = peak_loops::has_avx512_vnni(),
          .avx_vnni = peak_loops::has_avx_vnni()};
}

static_assert(std::size(peak_loops::kLoops) == static_cast<size_t>(ComputePeak::kCount), "one loop per ComputePeak");

const ComputePeakInfo& compute_peak_info(ComputePeak p) {
  static const auto kInfo = [] {
    std::array<ComputePeakInfo, static_cast<size_t>(ComputePeak::kCount)> info;
    for (size_t i = 0; i < info.size(); ++i)
      info[i] = {peak_loops::kLoops[i].name, peak_loops::kLoops[i].instruction, peak_loops::kLoops[i].unit};
    return info;
  }();
  return kInfo[static_cast<size_t>(p)];
}

bool compute_peak_supported(ComputePeak p, const CpuFeatures& cpu) {
  switch (p) {
    case ComputePeak::kFp32FmaAvx2: return cpu.avx2_fma;
    case ComputePeak::kFp32FmaAvx512: return cpu.avx512f;
    case ComputePeak::kBf16DotAvx512: return cpu.avx512_bf16;
    case ComputePeak::kInt8DotAvx512Vnni: return cpu.avx512_vnni;
    case ComputePeak::kInt8DotAvxVnni: return cpu.avx_vnni;
    default: return false;
  }
}

namespace {

// Iterations per round: ~1 ms of work per worker, so the two barriers around a round cost < 1%.
constexpr int64_t kIters = 400000;

// Range of worker w of n over count elements, in 64-element (256-byte) blocks.
void chunk(size_t count, int w, int n, size_t& begin, size_t& end) {
  const size_t blocks = count / 64;
  begin = blocks * static_cast<size_t>(w) / static_cast<size_t>(n) * 64;
  end = w + 1 == n ? count : blocks * static_cast<size_t>(w + 1) / static_cast<size_t>(n) * 64;
}

// Sum of x[0, n) read as kStreams interleaved sequential streams (one cache line of each per step): one
// stream per core leaves DRAM idle between the hardware prefetcher's requests (measured on Ice Lake: 7
// GB/s for 1 stream, 11 for 8, one thread), and kernels such as the GEMVs read several rows at once.
typedef float Vec8 __attribute__((vector_size(32)));
constexpr int kStreams = 8;
float sum_range(const float* x, size_t n) {
  Vec8 acc[kStreams] = {};
  const size_t part = n / kStreams / 16 * 16;  // whole 64-byte lines per stream
  for (size_t i = 0; i < part; i += 16) {
    for (int s = 0; s < kStreams; ++s) {
      Vec8 v[2];
      std::memcpy(v, x + static_cast<size_t>(s) * part + i, sizeof(v));
      acc[s] += v[0] + v[1];
    }
  }
  float total = 0;
  for (int s = 0; s < kStreams; ++s)
    for (int l = 0; l < 8; ++l) total += acc[s][l];
  for (size_t i = kStreams * part; i < n; ++i) total += x[i];
  return total;
}

// a[i] = b[i] + s * c[i] for i in [begin, end), begin a multiple of 4 floats from 64-byte aligned arrays.
// Non-temporal stores (SSE, every x86-64 CPU) write a without first reading it, as bandwidth-bound
// kernels that stream their output do (AdamW): the triad roof is what the memory system can take.
void triad_range(float* __restrict a, const float* __restrict b, const float* __restrict c, float s, size_t begin,
                 size_t end) {
  size_t i = begin;
  const __m128 vs = _mm_set1_ps(s);
  for (; i + 4 <= end; i += 4) _mm_stream_ps(a + i, _mm_add_ps(_mm_load_ps(b + i), _mm_mul_ps(vs, _mm_load_ps(c + i))));
  _mm_sfence();  // the streamed lines are visible before the pool's join
  for (; i < end; ++i) a[i] = b[i] + s * c[i];
}

using Clock = std::chrono::steady_clock;

// The calling thread's CPU time (RoundClock::kWorkerCpu).
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

double best_round_rate(const ThreadPool& pool, int n_workers, double seconds, int64_t iters,
                       double units_per_iter, float (*run)(int64_t iters, float seed), RoundClock clock) {
  const int n = std::clamp(n_workers, 1, pool.n_threads());
  const double units = units_per_iter * static_cast<double>(iters);
  std::atomic<float> sink{0};
  std::vector<double> cpu_s(static_cast<size_t>(n));  // each worker's thread CPU time in the round
  double best = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    Clock::time_point t0, t1;
    pool.run_on_workers(n, [&](int w, int nw) {
      if (nw > 1) pool.barrier();
      if (w == 0) t0 = Clock::now();
      const double c0 = thread_cpu_seconds();
      sink.store(run(iters, static_cast<float>(w + 1)), std::memory_order_relaxed);
      cpu_s[static_cast<size_t>(w)] = thread_cpu_seconds() - c0;
      if (nw > 1) pool.barrier();
      if (w == 0) t1 = Clock::now();
    });
    double rate = 0;
    if (clock == RoundClock::kWall) {
      rate = units * n / std::chrono::duration<double>(t1 - t0).count();
    } else {
      for (const double s : cpu_s) rate += units / std::max(s, 1e-9);
    }
    best = std::max(best, rate);
  } while (Clock::now() < end);
  return best / 1e9;
}

double measure_compute_peak(ComputePeak p, const ThreadPool& pool, int n_workers, double seconds,
                            const CpuFeatures& cpu, RoundClock clock) {
  if (!compute_peak_supported(p, cpu)) return 0;
  const peak_loops::Loop& loop = peak_loops::kLoops[static_cast<size_t>(p)];
  return best_round_rate(pool, n_workers, seconds, kIters, loop.ops_per_iter, loop.run, clock);
}

size_t last_level_cache_bytes() {
  const CacheInfo& caches = cache_info();
  return static_cast<size_t>(caches.l3 > 0 ? caches.l3 : caches.l2);
}

size_t stream_bytes_for_cache(size_t cache_bytes) {
  return std::clamp(8 * cache_bytes, size_t{256} << 20, size_t{1} << 30);
}

struct BandwidthProbe::Arrays {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<float[], Free>;
  static Buffer allocate(size_t n) {
    const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw Error(str_cat("bandwidth probe: cannot allocate ", bytes, " bytes"));
    return Buffer(p);
  }
  size_t n_read = 0, n_triad = 0;
  Buffer read, a, b, c;
};

BandwidthProbe::BandwidthProbe(size_t read_bytes, const ThreadPool& pool) : arrays_(std::make_unique<Arrays>()) {
  Arrays& s = *arrays_;
  s.n_read = std::max<size_t>(read_bytes / sizeof(float), 64);
  s.n_triad = std::max<size_t>(s.n_read / 4, 64);
  s.read = Arrays::allocate(s.n_read);
  s.a = Arrays::allocate(s.n_triad);
  s.b = Arrays::allocate(s.n_triad);
  s.c = Arrays::allocate(s.n_triad);
  pool.run_on_workers(pool.n_threads(), [&](int w, int n) {  // first touch: pages spread over the workers
    size_t b, e;
    chunk(s.n_read, w, n, b, e);
    std::fill(s.read.get() + b, s.read.get() + e, 1.0f);
    chunk(s.n_triad, w, n, b, e);
    std::fill(s.a.get() + b, s.a.get() + e, 0.f);
    std::fill(s.b.get() + b, s.b.get() + e, 1.f);
    std::fill(s.c.get() + b, s.c.get() + e, 2.f);
  });
}

BandwidthProbe::~BandwidthProbe() = default;

size_t BandwidthProbe::read_bytes() const { return arrays_->n_read * sizeof(float); }

double BandwidthProbe::read_gbps(const ThreadPool& pool, int n_workers, int passes) const {
  const Arrays& s = *arrays_;
  const int n = std::clamp(n_workers, 1, pool.n_threads());
  std::vector<float> partial(static_cast<size_t>(n), 0.f);
  double best = 0;
  for (int p = 0; p < std::max(passes, 1); ++p) {
    const auto t0 = Clock::now();
    pool.run_on_workers(n, [&](int w, int nw) {
      size_t b, e;
      chunk(s.n_read, w, nw, b, e);
      partial[static_cast<size_t>(w)] = sum_range(s.read.get() + b, e - b);
    });
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    volatile float total = 0;
    for (float x : partial) total = total + x;
    best = std::max(best, static_cast<double>(s.n_read * sizeof(float)) / dt / 1e9);
  }
  return best;
}

double BandwidthProbe::triad_gbps(const ThreadPool& pool, int n_workers, int passes) {
  Arrays& s = *arrays_;
  const int n = std::clamp(n_workers, 1, pool.n_threads());
  const float scale = 1.0001f;
  double best = 0;
  for (int p = 0; p < std::max(passes, 1); ++p) {
    const auto t0 = Clock::now();
    pool.run_on_workers(n, [&](int w, int nw) {
      size_t b, e;
      chunk(s.n_triad, w, nw, b, e);
      triad_range(s.a.get(), s.b.get(), s.c.get(), scale, b, e);
    });
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 3.0 * static_cast<double>(s.n_triad * sizeof(float)) / dt / 1e9);
  }
  volatile float keep = s.a[s.n_triad / 2];
  (void)keep;
  return best;
}

}  // namespace lathe::cpu
