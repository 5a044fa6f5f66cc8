#include "lathe/rollout/engine_rollout.h"

#include <algorithm>
#include <map>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/serve/engine/engine_core.h"

namespace lathe::rollout {

EngineConfig rollout_engine_config(const EngineRolloutOptions& o, int64_t max_prompt_tokens) {
  EngineConfig ec{.kv_cache_memory = o.kv_cache_memory, .seed = o.seed};
  ec.scheduler.max_model_len = max_prompt_tokens + o.max_completion_length;
  return ec;
}

EngineRollout::EngineRollout(std::vector<std::vector<int32_t>> prompts, std::vector<std::string> reward_names,
                             RewardFn rewards, EngineRolloutOptions o)
    : prompts_(std::move(prompts)), reward_names_(std::move(reward_names)), rewards_(std::move(rewards)),
      opts_(std::move(o)) {
  LATHE_CHECK_ARG(!prompts_.empty(), "[EngineRollout] no prompts");
  for (size_t i = 0; i < prompts_.size(); ++i)
    LATHE_CHECK_ARG(!prompts_[i].empty(), "[EngineRollout] prompt ", i, " has no tokens");
  LATHE_CHECK_ARG(!reward_names_.empty() && rewards_, "[EngineRollout] no reward function");
  LATHE_CHECK_ARG(opts_.max_completion_length >= 1, "[EngineRollout] max_completion_length must be >= 1, got ",
                  opts_.max_completion_length);
}

EngineRollout::~EngineRollout() = default;

int64_t EngineRollout::max_prompt_tokens() const {
  size_t m = 0;
  for (const auto& p : prompts_) m = std::max(m, p.size());
  return static_cast<int64_t>(m);
}

int64_t EngineRollout::memory_bytes(const Model& policy) const {
  return engine_kv_pool_bytes(policy, rollout_engine_config(opts_, max_prompt_tokens()));
}

std::vector<posttrain::Trajectory> EngineRollout::generate(const Model& policy, int64_t first_prompt,
                                                           int64_t n_prompts, int64_t group_size) {
  if (core_ == nullptr || policy_ != &policy) {
    core_ = std::make_unique<EngineCore>(policy, rollout_engine_config(opts_, max_prompt_tokens()));
    policy_ = &policy;
  }
  const uint64_t version = policy.weight_version();
  // One request of n = G choices per prompt; its choices' tokens and log-probs by (request, choice).
  std::map<uint64_t, int64_t> prompt_of;  // request id -> prompt number
  for (int64_t p = first_prompt; p < first_prompt + n_prompts; ++p) {
    EngineRequest r;
    r.prompt = prompts_[static_cast<size_t>(p) % prompts_.size()];
    r.sampling = opts_.sampling;
    r.sampling.n = static_cast<int>(group_size);
    r.sampling.max_tokens = static_cast<int>(opts_.max_completion_length);
    r.sampling.logprobs = 0;  // the sampled token's
    r.sampling.logprobs_mode = LogprobsMode::kProcessed;
    r.sampling.stop_token_ids = opts_.stop_token_ids;
    r.sampling.seed = derive_key(opts_.seed, static_cast<uint64_t>(p));
    // Blocks computed with other weights must never be served from the prefix cache.
    r.cache_keys.cache_salt = "weight_version " + std::to_string(version);
    const uint64_t id = next_request_id_++;
    prompt_of[id] = p;
    core_->add_request(id, std::move(r));
  }
  struct Choice {
    std::vector<int32_t> tokens;
    std::vector<float> logps;
    bool truncated = false;
  };
  std::map<std::pair<uint64_t, int>, Choice> choices;
  while (core_->has_unfinished()) {
    for (const EngineOutput& out : core_->step()) {
      LATHE_CHECK_ARG(out.error.empty(), "[EngineRollout] a rollout request failed: ", out.error);
      Choice& c = choices[{out.request_id, out.index}];
      if (out.token) {
        c.tokens.push_back(*out.token);
        LATHE_ASSERT(out.logprobs.has_value());
        c.logps.push_back(out.logprobs->logprob);
      }
      if (out.finish == FinishReason::kLength) c.truncated = true;
    }
  }
  std::vector<posttrain::Trajectory> trs;
  for (const auto& [id, p] : prompt_of) {
    const size_t first = trs.size();
    for (int g = 0; g < group_size; ++g) {
      Choice& c = choices[{id, g}];
      posttrain::Trajectory t;
      t.prompt = prompts_[static_cast<size_t>(p) % prompts_.size()];
      t.completion = std::move(c.tokens);
      t.rollout_logps = std::move(c.logps);
      t.truncated = c.truncated;
      t.weight_version = version;
      trs.push_back(std::move(t));
    }
    const std::span<const posttrain::Trajectory> group(trs.data() + first, static_cast<size_t>(group_size));
    std::vector<std::vector<double>> r = rewards_(p % static_cast<int64_t>(prompts_.size()), group);
    LATHE_CHECK_ARG(r.size() == static_cast<size_t>(group_size), "[EngineRollout] the reward function returned ",
                    r.size(), " rows for a group of ", group_size);
    for (size_t g = 0; g < r.size(); ++g) {
      LATHE_CHECK_ARG(r[g].size() == reward_names_.size(), "[EngineRollout] the reward function returned ",
                      r[g].size(), " values for ", reward_names_.size(), " reward names");
      trs[first + g].rewards = std::move(r[g]);
    }
  }
  return trs;
}

}  // namespace lathe::rollout
