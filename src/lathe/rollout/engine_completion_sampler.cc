#include "lathe/rollout/engine_completion_sampler.h"

#include <algorithm>
#include <limits>

#include "lathe/base/error.h"
#include "lathe/models/paged_kv_store.h"
#include "lathe/rollout/engine_rollout.h"
#include "lathe/serve/engine/engine_config.h"
#include "lathe/serve/kv_capacity.h"

namespace lathe::rollout {

namespace {

// Every sequence's whole context at once, in f32 (a bf16 pool of the same bytes holds twice the tokens), and
// the null block: the engine's own default would size for max_num_seqs sequences, up to 2 GiB, every call.
int64_t sampling_kv_bytes(const Model& model, int64_t prompts, int64_t longest_prompt, int64_t max_new_tokens) {
  const PagedKvStoreConfig kv = paged_kv_store_config(model.config(), 1);
  const KvLayout layout{kv.n_layers, kv.n_heads, kv.n_kv_heads, kv.head_dim};
  const int64_t blocks = prompts * kv_blocks_for(longest_prompt + max_new_tokens, kDefaultKvBlockSize) + 1;
  return blocks * kv_block_bytes(layout, kDefaultKvBlockSize, DType::kF32);
}

}  // namespace

int64_t EngineCompletionSampler::memory_bytes(const Model& model, int64_t prompts, int64_t longest_prompt,
                                              int64_t max_new_tokens) const {
  return sampling_kv_bytes(model, prompts, longest_prompt, max_new_tokens);
}

std::vector<std::vector<int32_t>> EngineCompletionSampler::sample(const Model& model,
                                                                  const std::vector<std::vector<int32_t>>& prompts,
                                                                  const posttrain::CompletionSampling& s) {
  LATHE_CHECK_ARG(!prompts.empty(), "[EngineCompletionSampler] no prompts");
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  EngineRolloutOptions o{.max_completion_length = s.max_new_tokens,
                         .stop_token_ids = s.stop_token_ids,
                         .kv_cache_memory = sampling_kv_bytes(model, static_cast<int64_t>(prompts.size()),
                                                              static_cast<int64_t>(longest), s.max_new_tokens),
                         .seed = s.seed};
  o.sampling.temperature = static_cast<float>(s.temperature);  // no top-k / top-p: TRL GKD samples with top_k 0
  // EngineRollout scores every trajectory; distillation has no reward, so one that is not applicable (NaN).
  RewardFn no_reward = [](int64_t, std::span<const posttrain::Trajectory> group) {
    return std::vector<std::vector<double>>(group.size(),
                                            std::vector<double>{std::numeric_limits<double>::quiet_NaN()});
  };
  EngineRollout rollout(prompts, {"none"}, std::move(no_reward), std::move(o));
  std::vector<posttrain::Trajectory> trs = rollout.generate(model, 0, static_cast<int64_t>(prompts.size()), 1);
  std::vector<std::vector<int32_t>> out;
  out.reserve(trs.size());
  for (posttrain::Trajectory& t : trs) out.push_back(std::move(t.completion));
  return out;
}

}  // namespace lathe::rollout
