// Google Benchmark of the serving KV block manager's per-token costs (serve/kv_cache_manager.h), to
// hold prefix caching under the spec's "< 1% throughput at 0% hits":
//
//   BM_KvBlockHash/P:<P>                 hashing a 512-token prompt's chain of full blocks
//   BM_KvCacheManager_Request/caching:<0|1>  a 512-token request at 0% hits, one block size 16: admission
//                                        (prefix lookup + allocate_slots), commit of its full blocks,
//                                        free; caching:0 does the same bookkeeping without hashes
// Counters: items = tokens, so items_per_second inverted is the cost per token; compare with a forward's
// time per token (e.g. the 110M model's prefill, docs/benchmarks.md).
// Run: build/release/kv_cache_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "bench_defaults.h"
#include "lathe/serve/kv_cache_manager.h"

namespace {

constexpr int64_t kPromptTokens = 512;

std::vector<int32_t> prompt_tokens() {
  std::vector<int32_t> t(kPromptTokens);
  std::iota(t.begin(), t.end(), 1000);
  return t;
}

void hash_chain(benchmark::State& st, int P) {
  const lathe::KvBlockHasher h(1);
  const std::vector<int32_t> t = prompt_tokens();
  const uint64_t extra = h.extra_keys_hash({.cache_salt = "bench"});
  for (auto _ : st) {
    lathe::KvBlockHash parent = lathe::KvBlockHasher::kNoParent;
    for (int64_t b = 0; b + P <= kPromptTokens; b += P)
      parent = h.block_hash(parent, std::span<const int32_t>(t).subspan(b, P), extra);
    benchmark::DoNotOptimize(parent);
  }
  st.SetItemsProcessed(st.iterations() * kPromptTokens);
}

// Every iteration's first token differs (a fresh prompt), so no lookup ever hits.
void request_cycle(benchmark::State& st, bool caching) {
  lathe::KvCacheManager kv({.n_blocks = 4096, .block_size = 16, .enable_prefix_caching = caching, .hash_seed = 1});
  std::vector<int32_t> t = prompt_tokens();
  uint64_t id = 0;
  for (auto _ : st) {
    t[0] = static_cast<int32_t>(id);
    const lathe::KvPrefixHit hit = kv.find_cached_prefix(t, {});
    if (!kv.allocate_slots({.id = id, .tokens = t}, kPromptTokens - hit.n_tokens, &hit)) st.SkipWithError("full");
    kv.commit_full_blocks({.id = id, .tokens = t, .n_computed = kPromptTokens});
    kv.free(id);
    ++id;
  }
  st.SetItemsProcessed(st.iterations() * kPromptTokens);
}

}  // namespace

int main(int argc, char** argv) {
  for (const int P : {16, 32})
    benchmark::RegisterBenchmark(("BM_KvBlockHash/P:" + std::to_string(P)).c_str(),
                                 [P](benchmark::State& st) { hash_chain(st, P); });
  for (const int caching : {0, 1})
    benchmark::RegisterBenchmark(("BM_KvCacheManager_Request/caching:" + std::to_string(caching)).c_str(),
                                 [caching](benchmark::State& st) { request_cycle(st, caching != 0); });
  std::vector<std::string> storage;
  std::vector<char*> args = lathe::bench::args_with_median_defaults(argc, argv, storage);
  int args_n = static_cast<int>(args.size());
  benchmark::Initialize(&args_n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
