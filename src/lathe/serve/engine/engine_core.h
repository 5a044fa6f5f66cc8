// The engine's single-threaded core (spec serving.md §1): one step() = scheduler.schedule() ->
// runner.execute() -> scheduler.update_from_output(). It owns the KV manager, the scheduler and the model
// runner (whose store holds the blocks the manager hands out). Not thread-safe: Engine (engine.h) runs
// it on its loop thread and is the only caller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/base/rng.h"
#include "lathe/models/model.h"
#include "lathe/serve/engine/engine_config.h"
#include "lathe/serve/engine/engine_request.h"
#include "lathe/serve/engine/lora_registry.h"
#include "lathe/serve/engine/model_runner.h"
#include "lathe/serve/kv_cache_manager.h"
#include "lathe/serve/sched/scheduler.h"

namespace lathe {

// Blocks of the KV pool for a budget of `bytes` (0: kDefaultCpuKvCacheBytes capped at what max_num_seqs
// sequences of max_model_len tokens need), the null block included. InvalidArgument, naming both sizes,
// when the budget holds fewer than 2 blocks.
int64_t engine_kv_blocks(int64_t bytes, const KvLayout& layout, int block_size, DType kv_dtype,
                         int64_t max_num_seqs, int64_t max_model_len);

// Bytes of the KV pool an EngineCore(model, config) allocates (the memory plans of training jobs that sample).
int64_t engine_kv_pool_bytes(const Model& model, const EngineConfig& config);

struct EngineCoreStats {
  int64_t n_running = 0, n_waiting = 0;
  int64_t kv_blocks_total = 0;  // usable blocks (the null block excluded)
  int64_t kv_blocks_used = 0;   // held by running sequences
  double kv_cache_usage = 0;    // used / total, in [0, 1]
  int64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // tokens
  int64_t num_preemptions = 0;
  int64_t n_steps = 0;
};

class EngineCore {
 public:
  // The model must outlive the core. InvalidArgument on a bad config, or when one sequence of
  // max_model_len tokens cannot fit in the KV budget (naming both numbers).
  EngineCore(const Model& model, const EngineConfig& config);
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Checks the request (check_engine_request), resolves its seed from the engine generator when it has
  // none, and queues its choices. InvalidArgument naming the field; request_id must be unused.
  void add_request(uint64_t request_id, EngineRequest r);
  // Frees every choice of the request: one kAbort output per unfinished choice (none if unknown).
  std::vector<EngineOutput> abort_request(uint64_t request_id);
  // Ends one choice of a request (Scheduler::finish_choice): its output carries `reason`, no token.
  std::vector<EngineOutput> finish_choice(uint64_t request_id, int index, FinishReason reason);
  // One step: what the scheduler picks runs through the model; the new tokens and finishes come back.
  std::vector<EngineOutput> step();

  // Served LoRA adapters (lora_registry.h). add_lora installs a folder read against the model
  // (read_lora_folder) as `name`: its ServedLora, whose id requests put in KvCacheKeys::adapter_id.
  // remove_lora unloads `name`: the number of request choices still running with it (it is freed after
  // them). InvalidArgument for a name taken (add) or unknown (remove). A request of an adapter that is not
  // loaded is refused by add_request (InvalidArgument).
  ServedLora add_lora(const std::string& name, const std::string& path, LoraFolder folder);
  int64_t remove_lora(const std::string& name);
  std::vector<ServedLora> loras() const { return loras_.served(); }

  bool has_unfinished() const { return scheduler_.has_unfinished(); }
  EngineCoreStats stats() const;
  const ModelConfig& model_config() const { return model_.config(); }
  const SchedulerConfig& scheduler_config() const { return sched_config_; }
  int64_t n_blocks() const { return n_blocks_; }  // the pool, the null block included
  DType kv_dtype() const { return kv_dtype_; }   // the pool's K and V: kF32, kBF16 or kI8
  // "KV cache (bf16): N blocks of P tokens = T tokens (X MiB)"
  std::string capacity_summary() const;
  const ModelRunner& runner() const { return runner_; }

 private:
  // A choice of request_id ended: its adapter (if any) is released once per choice.
  void release_lora(uint64_t request_id);
  // Choices the scheduler ended between steps (an abort, a choice the frontend finished): one output each
  // with `reason` and no token; their pending prompt logprobs dropped and their adapter released.
  std::vector<EngineOutput> ended_outside_a_step(const std::vector<SeqOutput>& ended, FinishReason reason);

  const Model& model_;
  SchedulerConfig sched_config_;
  DType kv_dtype_;
  int64_t n_blocks_ = 0;
  int block_size_ = kDefaultKvBlockSize;
  CounterRng rng_;  // seeds of unseeded requests, in arrival order
  KvCacheManager kv_;
  Scheduler scheduler_;
  LoraRegistry loras_;  // before the runner, which reads adapters' slots from it
  struct LoraHold {
    int64_t adapter_id = 0;
    int open = 0;  // unfinished choices
  };
  std::unordered_map<uint64_t, LoraHold> lora_holds_;  // requests with an adapter, by request id
  ModelRunner runner_;
  int64_t n_steps_ = 0;
  // Prompt logprobs of sequences whose prompt is still being prefilled (sent with their first token).
  std::unordered_map<uint64_t, std::vector<SampledLogprobs>> prompt_logprobs_;
};

}  // namespace lathe
