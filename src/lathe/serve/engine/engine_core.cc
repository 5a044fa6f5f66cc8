#include "lathe/serve/engine/engine_core.h"

#include <algorithm>
#include <utility>

#include "lathe/serve/kv_capacity.h"

namespace lathe {
namespace {

SchedulerConfig resolved(SchedulerConfig s, const ModelConfig& c) {
  if (s.max_model_len == 0) s.max_model_len = c.max_positions;
  if (s.eos_token_ids.empty()) s.eos_token_ids.assign(c.eos_token_ids.begin(), c.eos_token_ids.end());
  return s;
}

KvLayout layout_of(const ModelConfig& c) {
  const PagedKvStoreConfig s = paged_kv_store_config(c, 1);
  return {s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim};
}

}  // namespace

int64_t engine_kv_blocks(int64_t bytes, const KvLayout& layout, int block_size, DType kv_dtype,
                         int64_t max_num_seqs, int64_t max_model_len) {
  LATHE_CHECK_ARG(bytes >= 0, "[engine] kv_cache_memory must be >= 0 (0: the default), got ", bytes);
  if (bytes == 0) {
    // Full contexts for every sequence, plus the null block, is all the pool could ever use.
    const int64_t need =
        (max_num_seqs * kv_blocks_for(max_model_len, block_size) + 1) * kv_block_bytes(layout, block_size, kv_dtype);
    bytes = std::min(kDefaultCpuKvCacheBytes, need);
  }
  return kv_blocks_for_bytes(bytes, layout, block_size, kv_dtype);
}

int64_t engine_kv_pool_bytes(const Model& model, const EngineConfig& config) {
  const SchedulerConfig s = resolved(config.scheduler, model.config());
  const DType dtype = resolve_kv_cache_dtype(config.kv_cache_dtype, model);
  const KvLayout layout = layout_of(model.config());
  return engine_kv_blocks(config.kv_cache_memory, layout, config.block_size, dtype, s.max_num_seqs, s.max_model_len) *
         kv_block_bytes(layout, config.block_size, dtype);
}

EngineCore::EngineCore(const Model& model, const EngineConfig& config)
    : model_(model),
      sched_config_(resolved(config.scheduler, model.config())),
      kv_dtype_(resolve_kv_cache_dtype(config.kv_cache_dtype, model)),
      n_blocks_(engine_kv_blocks(config.kv_cache_memory, layout_of(model.config()), config.block_size, kv_dtype_,
                                 sched_config_.max_num_seqs, sched_config_.max_model_len)),
      block_size_(config.block_size),
      rng_{.key = derive_key(config.seed, hash_name("engine.request_seeds"))},
      kv_({.n_blocks = n_blocks_, .block_size = config.block_size,
           .enable_prefix_caching = config.enable_prefix_caching,
           .hash_seed = derive_key(config.seed, hash_name("engine.prefix_cache"))}),
      scheduler_(sched_config_, kv_,
                 [log = config.log](const PreemptionEvent& e) {
                   if (log) log(format_preemption(e));
                 }),
      runner_(model, {.n_blocks = n_blocks_, .block_size = config.block_size, .kv_dtype = kv_dtype_,
                      .eos_token_ids = sched_config_.eos_token_ids, .loras = &loras_}) {}

void EngineCore::add_request(uint64_t request_id, EngineRequest r) {
  check_engine_request(r, model_.config(), sched_config_.max_model_len);
  r.sampling.seed = resolve_seed(r.sampling, rng_);
  const int64_t adapter = r.cache_keys.adapter_id;
  const int n = r.sampling.n;
  if (adapter != 0) loras_.check_loaded(adapter);
  scheduler_.add_request(sched_request(request_id, std::move(r)));
  if (adapter != 0) {
    loras_.acquire(adapter, n);
    lora_holds_[request_id] = {.adapter_id = adapter, .open = n};
  }
}

void EngineCore::release_lora(uint64_t request_id) {
  const auto it = lora_holds_.find(request_id);
  if (it == lora_holds_.end()) return;
  loras_.release(it->second.adapter_id);
  if (--it->second.open == 0) lora_holds_.erase(it);
}

std::vector<EngineOutput> EngineCore::ended_outside_a_step(const std::vector<SeqOutput>& ended, FinishReason reason) {
  std::vector<EngineOutput> outs;
  for (const SeqOutput& o : ended) {
    prompt_logprobs_.erase(o.seq_id);
    outs.push_back({.request_id = o.request_id, .index = o.index, .finish = reason});
    release_lora(o.request_id);
  }
  return outs;
}

std::vector<EngineOutput> EngineCore::abort_request(uint64_t request_id) {
  return ended_outside_a_step(scheduler_.abort_request(request_id), FinishReason::kAbort);
}

std::vector<EngineOutput> EngineCore::finish_choice(uint64_t request_id, int index, FinishReason reason) {
  return ended_outside_a_step(scheduler_.finish_choice(request_id, index, reason), reason);
}

ServedLora EngineCore::add_lora(const std::string& name, const std::string& path, LoraFolder folder) {
  const int64_t id = loras_.add(name, path, std::move(folder));
  return {.name = name, .path = path, .id = id};
}

int64_t EngineCore::remove_lora(const std::string& name) { return loras_.remove(name); }

std::vector<EngineOutput> EngineCore::step() {
  const SchedulerOutput sched = scheduler_.schedule();
  ModelRunnerOutput ran = runner_.execute(sched);
  for (auto& [seq, lps] : ran.prompt_logprobs) {
    std::vector<SampledLogprobs>& pending = prompt_logprobs_[seq];
    pending.insert(pending.end(), std::make_move_iterator(lps.begin()), std::make_move_iterator(lps.end()));
  }
  std::vector<EngineOutput> outs;
  for (const SeqOutput& o : scheduler_.update_from_output(sched, ran)) {
    EngineOutput e{.request_id = o.request_id, .index = o.index, .token = o.new_token, .finish = o.finish,
                   .stop_token = o.stop_token, .n_cached_prompt = o.n_cached_prompt};
    if (const auto lp = ran.logprobs.find(o.seq_id); lp != ran.logprobs.end()) e.logprobs = lp->second;
    // The runner lists a sequence whose chunk samples its first token (its prompt ends there), so its
    // prompt logprobs are complete with this token.
    if (o.new_token && ran.prompt_logprobs.count(o.seq_id)) {
      const auto pl = prompt_logprobs_.find(o.seq_id);
      e.prompt_logprobs = std::move(pl->second);
      prompt_logprobs_.erase(pl);
    }
    outs.push_back(std::move(e));
    if (o.finish) release_lora(o.request_id);
  }
  ++n_steps_;
  return outs;
}

EngineCoreStats EngineCore::stats() const {
  const int64_t total = kv_.n_usable_blocks();
  return {.n_running = scheduler_.n_running(),
          .n_waiting = scheduler_.n_waiting(),
          .kv_blocks_total = total,
          .kv_blocks_used = total - kv_.n_free_blocks(),
          .kv_cache_usage = kv_.usage(),
          .prefix_cache_queries = kv_.stats().prefix_cache_queries,
          .prefix_cache_hits = kv_.stats().prefix_cache_hits,
          .num_preemptions = scheduler_.stats().num_preemptions,
          .n_steps = n_steps_};
}

std::string EngineCore::capacity_summary() const {
  return kv_capacity_summary(n_blocks_, block_size_, layout_of(model_.config()), kv_dtype_);
}

}  // namespace lathe
