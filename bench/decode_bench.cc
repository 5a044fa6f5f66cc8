// Decode speed over the paged KV store against the memory-bandwidth roofline: one sequence, or B
// sequences decoding together (one ForwardBatch of B rows per step, so the weights are read once per step).
//
//   BM_Bandwidth_ReadOnly_1GB/threads:N   sum over a 1 GiB f32 array (best of 3 passes)
//   BM_Bandwidth_Triad/threads:N          a[i] = b[i] + s*c[i] over 3 x 512 MiB (STREAM counting: 3 arrays)
//   BM_Decode_Llama1B_<DT>/threads:N      generate(): a 16-token prompt, then 64 new tokens, greedy
//   BM_Decode_Llama1B_<DT>/batch:B/threads:N  generate_batch() of B such prompts (different tokens)
//   BM_Decode_Llama1B_<DT>[/batch:B]/kv:<KV>/threads:N  the same with the KV cache in KV = f32 or bf16
//                                         (--kv_dtype; without it the cache is auto: bf16 for bf16 weights)
//
// Every decode repetition is bracketed by a read-only probe and a triad probe on the same thread count
// (right before and right after the generate call), so each tokens/s is printed next to the bandwidth
// measured around it:
//   roofline tokens/s = B x bandwidth / weight bytes per step (B = 1: per token)
//   weight bytes per step = the bytes of every matrix read once per step, in its loaded dtype:
//       per layer q, k, v, o, gate, up, down; plus the head (the tied embedding, V x C) once.
//     Not counted (each < 0.1% here): the embedding row gathered, the norm vectors, the KV cache read
//     (16 layers x 2 x 512 x <= 80 positions x 4 B <= 5.2 MB at the end of the run; 2 B with a bf16 cache).
//     With long prompts and batches it is not small (--prompt=320 --batch=8: ~170 MB f32 per step, as much as
//     the bf16 weights): --kv_dtype=f32,bf16 compares the two caches.
//   roofline_pct_read  = decode tokens/s / (read-only bandwidth / bytes per token) x 100   (the stricter)
//   roofline_pct_triad = the same against the triad bandwidth
// The bandwidth used is the mean of the probes before and after; bw_drift_pct reports how far they
// differ (over 10%: the host's bandwidth moved during the run, rerun).
// decode tokens/s = B (new tokens - 1) / GenerateResult::decode_seconds: the first new token comes from
// the prefill logits, so the decode loop runs new - 1 forwards of B rows. A step reads the weights once
// for its B rows, so the roofline is B x bandwidth / weight bytes per step (roofline_pct compares the
// steps/s), and achieved_GB/s counts the weights once per step.
//
// Model folders: --f32=DIR --bf16=DIR --f16=DIR, or LATHE_BENCH_LLAMA1B_F32 / _BF16 / _F16 (f32 and bf16
// written by ../shared/tools/make_bench_model.py --shape llama-1B --dtype f32|bf16; an F16 folder is any
// checkpoint stored in F16, kept f16 in memory; --int8=DIR / --int4=DIR: folders written by `lathe quantize`,
// whose Linears count their codes + scales); absent ones are skipped.
// The benchmark names say Llama1B whatever the folder holds (bench/summarize.py parses them); the label
// names the CPU tier that ran (cpu=avx2 under LATHE_CPU=avx2). Prefill of P tokens: --prompt=P --new=2
// (prefill_tok/s).
// Other flags: --threads=1,2 --batch=1,8 (default 1) --prompt=16 --new=64 --kv_dtype=auto,f32,bf16,int8 (default auto)
// --no_probe_benchmarks. Default 3 repetitions, medians. The label names the KV dtype that ran (kv=bf16).
#include <benchmark/benchmark.h>

#include "bench_defaults.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "lathe/backend/cpu/gemm.h"
#include "lathe/base/context.h"
#include "lathe/base/memory_region.h"
#include "lathe/infer/generate.h"
#include "lathe/models/kv_cache_dtype.h"
#include "lathe/models/model.h"

namespace {

using lathe::Context;
using lathe::ContextScope;
using lathe::Model;

using Clock = std::chrono::steady_clock;

// 64-byte aligned float buffer, first-touched by the workers that will read it.
struct Buffer {
  float* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t count) : n(count) {
    p = static_cast<float*>(std::aligned_alloc(64, count * sizeof(float)));
    if (!p) {
      std::fprintf(stderr, "decode_bench: cannot allocate %zu MB\n", count * sizeof(float) >> 20);
      std::exit(1);
    }
  }
  ~Buffer() { std::free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

float sum_range(const float* x, size_t n) {
#if defined(__AVX512F__)
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(x + i + 48));
  }
  // (not _mm512_reduce_add_ps: GCC 12 warns about an uninitialised variable inside it under -Werror)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0;
  for (float l : lanes) s += l;
  for (; i < n; ++i) s += x[i];
  return s;
#else
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  float s = 0;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += x[i];
  return s;
#endif
}

// Range of worker w of n over count elements, in 64-element (256-byte) blocks.
void chunk(size_t count, int w, int n, size_t& begin, size_t& end) {
  const size_t blocks = count / 64;
  begin = blocks * w / n * 64;
  end = w + 1 == n ? count : blocks * (w + 1) / n * 64;
}

// The bandwidth probes. Arrays are allocated on first use and kept for the process.
class Probe {
 public:
  static constexpr size_t kReadBytes = size_t{1} << 30, kTriadBytes = size_t{512} << 20;

  // Read-only: GB/s of the best of `passes` sums over 1 GiB.
  double read_gbps(Context& ctx, int passes = 3) {
    ensure(ctx);
    double best = 0;
    for (int p = 0; p < passes; ++p) {
      std::vector<float> partial(ctx.pool.n_threads(), 0.f);
      const auto t0 = Clock::now();
      ctx.pool.run_on_workers(ctx.pool.n_threads(), [&](int w, int n) {
        size_t b, e;
        chunk(read_->n, w, n, b, e);
        partial[w] = sum_range(read_->p + b, e - b);
      });
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      float total = 0;
      for (float x : partial) total += x;
      benchmark::DoNotOptimize(total);
      best = std::max(best, static_cast<double>(kReadBytes) / s / 1e9);
    }
    return best;
  }

  // Triad a = b + s*c: GB/s (3 arrays counted, as STREAM) of the best of `passes`.
  double triad_gbps(Context& ctx, int passes = 3) {
    ensure(ctx);
    double best = 0;
    const float s = 1.0001f;
    for (int p = 0; p < passes; ++p) {
      const auto t0 = Clock::now();
      ctx.pool.run_on_workers(ctx.pool.n_threads(), [&](int w, int n) {
        size_t b, e;
        chunk(a_->n, w, n, b, e);
        float* __restrict a = a_->p;
        const float* __restrict bb = b_->p;
        const float* __restrict c = c_->p;
        for (size_t i = b; i < e; ++i) a[i] = bb[i] + s * c[i];
      });
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      benchmark::DoNotOptimize(a_->p[a_->n / 2]);
      best = std::max(best, 3.0 * static_cast<double>(kTriadBytes) / t / 1e9);
    }
    return best;
  }

 private:
  void ensure(Context& ctx) {
    if (read_) return;
    read_ = std::make_unique<Buffer>(kReadBytes / sizeof(float));
    a_ = std::make_unique<Buffer>(kTriadBytes / sizeof(float));
    b_ = std::make_unique<Buffer>(kTriadBytes / sizeof(float));
    c_ = std::make_unique<Buffer>(kTriadBytes / sizeof(float));
    ctx.pool.run_on_workers(ctx.pool.n_threads(), [&](int w, int n) {
      size_t b, e;
      chunk(read_->n, w, n, b, e);
      for (size_t i = b; i < e; ++i) read_->p[i] = 1.0f;
      chunk(a_->n, w, n, b, e);
      for (size_t i = b; i < e; ++i) a_->p[i] = 0.f, b_->p[i] = 1.f, c_->p[i] = 2.f;
    });
  }
  std::unique_ptr<Buffer> read_, a_, b_, c_;
};

struct Flags {
  std::string f32_dir, bf16_dir, f16_dir, int8_dir, int4_dir;
  std::vector<int> threads = {1, 2};
  std::vector<int> batch = {1};  // sequences decoding together
  int prompt = 16, new_tokens = 64;
  std::vector<lathe::KvCacheDtype> kv = {lathe::KvCacheDtype::kAuto};  // one run per KV cache dtype
  bool probe_benchmarks = true;
};

std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// "1,2,4" -> {1, 2, 4}.
std::vector<int> int_list(const std::string& v) {
  std::vector<int> out;
  for (size_t p = 0; p < v.size();) {
    size_t q = v.find(',', p);
    if (q == std::string::npos) q = v.size();
    out.push_back(std::stoi(v.substr(p, q - p)));
    p = q + 1;
  }
  return out;
}

bool parse_flags(int argc, char** argv, Flags& f) {
  f.f32_dir = env_or("LATHE_BENCH_LLAMA1B_F32");
  f.bf16_dir = env_or("LATHE_BENCH_LLAMA1B_BF16");
  f.f16_dir = env_or("LATHE_BENCH_LLAMA1B_F16");
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key, std::string& out) {
      const std::string k = std::string("--") + key + "=";
      if (a.rfind(k, 0) != 0) return false;
      out = a.substr(k.size());
      return true;
    };
    std::string v;
    if (value("f32", f.f32_dir) || value("bf16", f.bf16_dir) || value("f16", f.f16_dir) || value("int8", f.int8_dir) ||
        value("int4", f.int4_dir))
      continue;
    if (value("prompt", v)) { f.prompt = std::stoi(v); continue; }
    if (value("new", v)) { f.new_tokens = std::stoi(v); continue; }
    if (a == "--no_probe_benchmarks") { f.probe_benchmarks = false; continue; }
    if (value("threads", v)) {
      f.threads = int_list(v);
      continue;
    }
    if (value("batch", v)) {
      f.batch = int_list(v);
      continue;
    }
    if (value("kv_dtype", v)) {
      f.kv.clear();
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        try {
          f.kv.push_back(lathe::parse_kv_cache_dtype(v.substr(p, q - p)));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "decode_bench: --kv_dtype: %s\n", e.what());
          return false;
        }
        p = q + 1;
      }
      continue;
    }
    std::fprintf(stderr, "decode_bench: unknown flag %s\n", a.c_str());
    return false;
  }
  const auto positive = [](const std::vector<int>& v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](int x) { return x >= 1; });
  };
  return f.prompt >= 1 && f.new_tokens >= 2 && positive(f.threads) && positive(f.batch);
}

// Bytes of every matrix read once per decoded token (see the header comment).
// A Linear's matrix bytes as held: its weight, or its quantised codes + scales (+ mins).
size_t linear_bytes(const lathe::Linear& l) { return l.quant.defined() ? l.quant.nbytes() : l.weight.nbytes(); }
const void* linear_data(const lathe::Linear& l) {
  return l.quant.defined() ? l.quant.codes.raw_data() : l.weight.raw_data();
}

double weight_bytes_per_token(const Model& m) {
  double bytes = 0;
  // Every Linear's weight: per layer q, k, v, o and the MLP projections, then the head (tied or not).
  lathe::for_each_linear_module(m.weights(), [&](const lathe::Linear& l) { bytes += static_cast<double>(linear_bytes(l)); });
  return bytes;
}

// Where the matrices read per token sit (/proc/self/smaps): the mappings holding them, whether those are
// advised for transparent huge pages (the model's arena: base/huge_page_arena.h) and how many of their
// bytes are on 2 MiB pages (AnonHugePages), so a run shows the weights' page size next to its speed.
void report_weight_pages(const std::string& label, const Model& m) {
  std::map<uintptr_t, lathe::MemoryRegion> regions;
  double bytes = 0;
  bool found = true;
  lathe::for_each_linear_module(m.weights(), [&](const lathe::Linear& l) {
    bytes += static_cast<double>(linear_bytes(l));
    const std::optional<lathe::MemoryRegion> r = lathe::memory_region_of(linear_data(l));
    if (r) regions.emplace(r->begin, *r);
    found = found && r.has_value();
  });
  if (!found) return;  // no smaps here
  double huge = 0, mapped = 0;
  bool advised = true;
  for (const auto& [begin, r] : regions) {
    huge += static_cast<double>(r.anon_huge_bytes);
    mapped += static_cast<double>(r.end - r.begin);
    advised = advised && r.huge_page_advised;
  }
  std::fprintf(stderr,
               "decode_bench: %s matrices: %.1f MB in %zu mapping(s) of %.1f MB%s, %.1f MB of those on huge pages "
               "(THP mode %s)\n",
               label.c_str(), bytes / 1e6, regions.size(), mapped / 1e6, advised ? ", advised MADV_HUGEPAGE" : "",
               huge / 1e6, lathe::transparent_huge_page_mode().c_str());
}

void register_probes(const std::shared_ptr<Probe>& probe, const std::vector<int>& threads, const char* when) {
  for (int n : threads) {
    benchmark::RegisterBenchmark(
        (std::string("BM_Bandwidth_ReadOnly_1GB/") + when + "/threads:" + std::to_string(n)).c_str(),
        [probe, n](benchmark::State& st) {
          Context ctx(n);
          double gbps = 0;
          for (auto _ : st) {
            gbps = probe->read_gbps(ctx);
            st.SetIterationTime(static_cast<double>(Probe::kReadBytes) / (gbps * 1e9));
          }
          st.counters["GB/s"] = gbps;
          st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * Probe::kReadBytes));
        })
        ->UseManualTime()
        ->Iterations(1);
    benchmark::RegisterBenchmark(
        (std::string("BM_Bandwidth_Triad/") + when + "/threads:" + std::to_string(n)).c_str(),
        [probe, n](benchmark::State& st) {
          Context ctx(n);
          double gbps = 0;
          for (auto _ : st) {
            gbps = probe->triad_gbps(ctx);
            st.SetIterationTime(3.0 * static_cast<double>(Probe::kTriadBytes) / (gbps * 1e9));
          }
          st.counters["GB/s"] = gbps;
          st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * 3 * Probe::kTriadBytes));
        })
        ->UseManualTime()
        ->Iterations(1);
  }
}

void register_decode(const std::string& label, const std::string& dir, const Flags& f,
                     const std::shared_ptr<Probe>& probe) {
  if (dir.empty()) {
    std::string flag = label;  // F32 -> --f32
    std::transform(flag.begin(), flag.end(), flag.begin(), [](unsigned char ch) { return std::tolower(ch); });
    std::fprintf(stderr, "decode_bench: skipping %s (no model folder: pass --%s=DIR or set LATHE_BENCH_LLAMA1B_%s)\n",
                 label.c_str(), flag.c_str(), label.c_str());
    return;
  }
  std::shared_ptr<Model> model;
  try {
    model = Model::load(dir);  // weights keep their stored dtype (f32, bf16 or f16), in the huge-page arena
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: skipping %s: cannot load %s: %s\n", label.c_str(), dir.c_str(), e.what());
    return;
  }
  const double wbytes = weight_bytes_per_token(*model);
  std::fprintf(stderr, "decode_bench: %s model from %s: %lld params, %.3f GB of weights read per token\n",
               label.c_str(), dir.c_str(), static_cast<long long>(model->n_params()), wbytes / 1e9);
  report_weight_pages(label, *model);
  const int new_tokens = f.new_tokens;
  for (int B : f.batch) {
    std::mt19937 rng(42);  // prompt 0 is the same at every batch size
    std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(model->config().vocab_size - 1));
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(B), std::vector<int32_t>(static_cast<size_t>(f.prompt)));
    for (auto& p : prompts)
      for (auto& x : p) x = dist(rng);
    const std::string batch_part = B == 1 ? "" : "/batch:" + std::to_string(B);
    for (const lathe::KvCacheDtype kv : f.kv) {
      for (int n : f.threads) {
        const std::string kv_part =
            kv == lathe::KvCacheDtype::kAuto ? "" : "/kv:" + std::string(lathe::kv_cache_dtype_name(kv));
        const std::string kv_ran(lathe::kv_store_dtype_name(lathe::resolve_kv_cache_dtype(kv, *model)));
        auto warmed = std::make_shared<bool>(false);
        benchmark::RegisterBenchmark(
            ("BM_Decode_Llama1B_" + label + batch_part + kv_part + "/threads:" + std::to_string(n)).c_str(),
            [model, probe, prompts, new_tokens, wbytes, n, B, kv, kv_ran, warmed](benchmark::State& st) {
              Context ctx(n);
              ContextScope scope(ctx);
              lathe::GenerateOptions opts;
              opts.max_new_tokens = new_tokens;  // greedy (default sampling), no stop tokens
              opts.kv_cache_dtype = kv;
              if (!*warmed) {  // pages the mapped weights in and settles the allocator; untimed
                lathe::GenerateOptions w = opts;
                w.max_new_tokens = 4;
                benchmark::DoNotOptimize(lathe::generate_batch(*model, prompts, w).size());
                *warmed = true;
              }
              const double read0 = probe->read_gbps(ctx), triad0 = probe->triad_gbps(ctx);
              lathe::GenerateResult r;
              for (auto _ : st) {
                r = lathe::generate_batch(*model, prompts, opts)[0];
                st.SetIterationTime(r.decode_seconds);
              }
              const double read1 = probe->read_gbps(ctx), triad1 = probe->triad_gbps(ctx);
              const int64_t n_new = static_cast<int64_t>(r.tokens.size()) - r.n_prompt;
              const double steps = static_cast<double>(n_new - 1) / r.decode_seconds;  // forwards per second
              const double tps = B * steps;
              const double read = 0.5 * (read0 + read1), triad = 0.5 * (triad0 + triad1);
              st.counters["decode_tok/s"] = tps;
              st.counters["prefill_tok/s"] = static_cast<double>(B * r.n_prompt) / r.prefill_seconds;
              st.counters["weight_GB/tok"] = wbytes / 1e9 / B;
              st.counters["read_GB/s"] = read;
              st.counters["triad_GB/s"] = triad;
              st.counters["achieved_GB/s"] = steps * wbytes / 1e9;
              st.counters["roofline_pct_read"] = 100.0 * steps / (read * 1e9 / wbytes);
              st.counters["roofline_pct_triad"] = 100.0 * steps / (triad * 1e9 / wbytes);
              st.counters["bw_drift_pct"] = 100.0 * std::fabs(read1 - read0) / std::max(read0, read1);
              st.counters["read_before_GB/s"] = read0;  // which side of the run a drift came from
              st.counters["read_after_GB/s"] = read1;
              st.counters["threads"] = n;
              st.counters["batch"] = B;
              // The tier that ran (LATHE_CPU caps it) and the KV cache's dtype.
              st.SetLabel(std::string("cpu=") + lathe::cpu::gemm_isa() + " kv=" + kv_ran);
            })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Iterations(1);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> default_flags;
  std::vector<char*> args = lathe::bench::args_with_median_defaults(argc, argv, default_flags);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  Flags f;
  if (!parse_flags(n, args.data(), f)) return 2;
  auto probe = std::make_shared<Probe>();
  if (f.probe_benchmarks) register_probes(probe, f.threads, "before");
  register_decode("F32", f.f32_dir, f, probe);
  register_decode("BF16", f.bf16_dir, f, probe);
  register_decode("F16", f.f16_dir, f, probe);
  register_decode("INT8", f.int8_dir, f, probe);
  register_decode("INT4", f.int4_dir, f, probe);
  if (f.probe_benchmarks) register_probes(probe, f.threads, "after");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
