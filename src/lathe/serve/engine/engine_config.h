// The engine's knobs: KV memory, prefix caching, the scheduler's budget, the engine seed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "lathe/base/context.h"
#include "lathe/models/kv_cache_dtype.h"
#include "lathe/models/kv_store.h"
#include "lathe/serve/sched/scheduler_config.h"

namespace lathe {

// The default KV budget on CPU when none is given: 2 GiB, or less when max_num_seqs full contexts need
// less. KV blocks live in host RAM beside the weights; 2 GiB holds ~29k tokens of a 110M f32 model
// (12 layers, 12 KV heads of 64: 72 KiB per token), enough for 8 streams of 2048 tokens with room for
// a shared prefix, and is small next to the RAM of any machine that serves such a model.
inline constexpr int64_t kDefaultCpuKvCacheBytes = int64_t{2} << 30;

struct EngineConfig {
  int64_t kv_cache_memory = 0;           // bytes of the KV pool (`--kv-cache-memory`); 0: the default above
  // K and V in f32, bf16 or int8 (`--kv-cache-dtype`); auto: bf16 when the model's matrices are bf16. A bf16
  // pool holds twice the tokens of an f32 one in the same kv_cache_memory, an int8 one 4·D / (D + 4) times.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  int block_size = kDefaultKvBlockSize;  // P
  bool enable_prefix_caching = true;
  // max_model_len 0: the model's max_positions; eos_token_ids empty: the model's config (eos_token_id).
  SchedulerConfig scheduler;
  uint64_t seed = 0;  // the engine generator: seeds of unseeded requests, the prefix-cache hash seed
  Context* context = nullptr;  // threads and memory the loop runs on (nullptr: the process default)
  std::function<void(const std::string&)> log;  // structured lines (preemptions); unset: dropped
};

}  // namespace lathe
