#include "lathe/rollout/episode_rollout.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <unordered_map>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/rollout/environment_calls.h"
#include "lathe/serve/engine/engine_core.h"

namespace lathe::rollout {

namespace {

struct Episode {
  int64_t prompt = 0;  // the prompt number
  int sample = 0;      // g in [0, G)
  std::vector<int32_t> completion;  // every token after the prompt
  std::vector<uint8_t> mask;        // 1: the model's
  std::vector<float> logps;         // the sampler's (0 on observation tokens)
  size_t turn_start = 0;            // where the current turn's tokens begin in completion
  int turns = 0;
  bool truncated = false, done = false;
};

}  // namespace

EpisodeRollout::EpisodeRollout(std::vector<std::vector<int32_t>> prompts, std::vector<std::string> reward_names,
                               RewardFn rewards, std::unique_ptr<Environment> environment,
                               std::shared_ptr<const EpisodeCodec> codec, EpisodeRolloutOptions o)
    : prompts_(std::move(prompts)), reward_names_(std::move(reward_names)), rewards_(std::move(rewards)),
      env_(std::move(environment)), codec_(std::move(codec)), opts_(std::move(o)) {
  LATHE_CHECK_ARG(!prompts_.empty(), "[EpisodeRollout] no prompts");
  for (size_t i = 0; i < prompts_.size(); ++i)
    LATHE_CHECK_ARG(!prompts_[i].empty(), "[EpisodeRollout] prompt ", i, " has no tokens");
  LATHE_CHECK_ARG(!reward_names_.empty() && rewards_, "[EpisodeRollout] no reward function");
  LATHE_CHECK_ARG(env_ != nullptr && codec_ != nullptr, "[EpisodeRollout] no environment or codec");
  LATHE_CHECK_ARG(opts_.engine.max_completion_length >= 1 && opts_.max_turns >= 1 && opts_.workers >= 1,
                  "[EpisodeRollout] need max_completion_length, max_turns and workers >= 1, got ",
                  opts_.engine.max_completion_length, ", ", opts_.max_turns, " and ", opts_.workers);
  calls_ = std::make_unique<EnvironmentCalls>(*env_, static_cast<int>(opts_.workers));
}

EpisodeRollout::~EpisodeRollout() = default;

int64_t EpisodeRollout::max_prompt_tokens() const {
  size_t m = 0;
  for (const auto& p : prompts_) m = std::max(m, p.size());
  return static_cast<int64_t>(m);
}

std::vector<std::string> EpisodeRollout::metric_names() const {
  return {"episodes/turns_mean", "episodes/tool_calls_mean", "episodes/observation_tokens_mean",
          "episodes/model_tokens_mean", "episodes/prefix_cache_hit_frac"};
}

std::vector<double> EpisodeRollout::take_metrics() {
  const EpisodeStats s = std::exchange(untaken_, {});
  const int64_t prompt_tokens = std::exchange(untaken_prompt_tokens_, 0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto ratio = [&](int64_t v, int64_t n) { return n > 0 ? static_cast<double>(v) / static_cast<double>(n) : nan; };
  return {ratio(s.turns, s.episodes), ratio(s.tool_calls, s.episodes), ratio(s.observation_tokens, s.episodes),
          ratio(s.model_tokens, s.episodes), ratio(s.prefix_cache_hit_tokens, prompt_tokens)};
}

int64_t EpisodeRollout::memory_bytes(const Model& policy) const {
  return engine_kv_pool_bytes(policy, rollout_engine_config(opts_.engine, max_prompt_tokens()));
}

std::vector<posttrain::Trajectory> EpisodeRollout::generate(const Model& policy, int64_t first_prompt,
                                                            int64_t n_prompts, int64_t group_size) {
  const auto t0 = std::chrono::steady_clock::now();
  if (core_ == nullptr || policy_ != &policy) {
    core_ = std::make_unique<EngineCore>(policy, rollout_engine_config(opts_.engine, max_prompt_tokens()));
    policy_ = &policy;
  }
  const uint64_t version = policy.weight_version();
  const int64_t budget = opts_.engine.max_completion_length;
  const auto n_prompts_total = static_cast<int64_t>(prompts_.size());
  stats_ = EpisodeStats{.episodes = n_prompts * group_size};
  std::vector<Episode> eps(static_cast<size_t>(n_prompts * group_size));
  std::unordered_map<uint64_t, size_t> episode_of;  // running request id -> episode
  size_t n_done = 0;

  const auto prompt_of = [&](const Episode& e) -> const std::vector<int32_t>& {
    return prompts_[static_cast<size_t>(e.prompt % n_prompts_total)];
  };
  // The episode's next model turn: one request of prompt + everything so far.
  const auto start_turn = [&](size_t i) {
    Episode& e = eps[i];
    EngineRequest r;
    r.prompt = prompt_of(e);
    r.prompt.insert(r.prompt.end(), e.completion.begin(), e.completion.end());
    r.sampling = opts_.engine.sampling;
    r.sampling.n = 1;
    r.sampling.max_tokens = static_cast<int>(budget - static_cast<int64_t>(e.completion.size()));
    r.sampling.logprobs = 0;  // the sampled token's
    r.sampling.logprobs_mode = LogprobsMode::kProcessed;
    r.sampling.stop_token_ids = opts_.engine.stop_token_ids;
    r.sampling.seed = derive_key(derive_key(derive_key(opts_.engine.seed, static_cast<uint64_t>(e.prompt)),
                                            static_cast<uint64_t>(e.sample)),
                                 static_cast<uint64_t>(e.turns));
    // Blocks computed with other weights must never be served from the prefix cache.
    r.cache_keys.cache_salt = "weight_version " + std::to_string(version);
    e.turn_start = e.completion.size();
    untaken_prompt_tokens_ += static_cast<int64_t>(r.prompt.size());
    const uint64_t id = next_request_id_++;
    episode_of[id] = i;
    core_->add_request(id, std::move(r));
  };
  const auto finish = [&](Episode& e, bool truncated) {
    e.done = true;
    e.truncated = truncated;
    ++n_done;
  };
  // A turn ended: by a tool call (answered unless it was the last turn or no room is left), else for good.
  const auto end_turn = [&](size_t i, bool tool_call, bool cut) {
    Episode& e = eps[i];
    ++e.turns;
    ++stats_.turns;
    if (!tool_call) return finish(e, cut);
    ++stats_.tool_calls;
    if (e.turns >= opts_.max_turns) return finish(e, false);
    if (static_cast<int64_t>(e.completion.size()) >= budget) return finish(e, true);
    ToolRequest c{.episode = str_cat("p", e.prompt, ".g", e.sample),
               .prompt_index = e.prompt % n_prompts_total,
               .turn = e.turns,
               .text = codec_->decode(std::span<const int32_t>(e.completion).subspan(e.turn_start))};
    c.call = codec_->parse_call(c.text);
    calls_->submit(i, std::move(c));
  };
  // The environment answered episode i: append the observation (loss mask 0) and continue, or end.
  const auto observe = [&](size_t i, const ToolResult& res) {
    Episode& e = eps[i];
    if (res.done) return finish(e, false);
    const std::vector<int32_t> obs = codec_->observation(res.content);
    const auto room = static_cast<size_t>(budget) - e.completion.size();
    const size_t n = std::min(obs.size(), room);
    e.completion.insert(e.completion.end(), obs.begin(), obs.begin() + static_cast<std::ptrdiff_t>(n));
    e.mask.insert(e.mask.end(), n, 0);
    e.logps.insert(e.logps.end(), n, 0.f);
    stats_.observation_tokens += static_cast<int64_t>(n);
    if (obs.size() >= room) return finish(e, true);  // no room left for the model
    start_turn(i);
  };

  for (int64_t p = 0; p < n_prompts; ++p)
    for (int64_t g = 0; g < group_size; ++g) {
      Episode& e = eps[static_cast<size_t>(p * group_size + g)];
      e.prompt = first_prompt + p;
      e.sample = static_cast<int>(g);
    }
  try {
    for (size_t i = 0; i < eps.size(); ++i) start_turn(i);
    while (n_done < eps.size()) {
      if (core_->has_unfinished()) {
        for (const EngineOutput& out : core_->step()) {
          LATHE_CHECK_ARG(out.error.empty(), "[EpisodeRollout] a rollout request failed: ", out.error);
          const auto it = episode_of.find(out.request_id);
          if (it == episode_of.end()) continue;
          const size_t i = it->second;
          Episode& e = eps[i];
          bool tool_call = false;
          if (out.token) {
            if (e.completion.size() == e.turn_start) stats_.prefix_cache_hit_tokens += out.n_cached_prompt;
            e.completion.push_back(*out.token);
            e.mask.push_back(1);
            LATHE_ASSERT(out.logprobs.has_value());
            e.logps.push_back(out.logprobs->logprob);
            ++stats_.model_tokens;
            tool_call = codec_->ends_tool_call(std::span<const int32_t>(e.completion).subspan(e.turn_start));
          }
          if (!tool_call && !out.finish) continue;
          if (!out.finish) core_->finish_choice(out.request_id, 0, FinishReason::kStop);  // ended by its call
          episode_of.erase(it);
          end_turn(i, tool_call, out.finish == FinishReason::kLength);
        }
      }
      // Block only when every unfinished episode waits on its environment.
      const bool engine_busy = core_->has_unfinished();
      if (n_done == eps.size()) break;
      LATHE_ASSERT(engine_busy || calls_->outstanding() > 0, "unfinished episodes, yet no request and no call");
      const auto wait = engine_busy ? std::chrono::milliseconds(0) : std::chrono::milliseconds(100);
      for (EnvironmentAnswer& a : calls_->take(wait)) {
        if (a.error) std::rethrow_exception(a.error);
        observe(static_cast<size_t>(a.key), a.result);
      }
    }
  } catch (...) {
    calls_->reset();  // the calls in flight end (each within its timeout) and their answers are dropped
    core_.reset();    // its unfinished requests go with it; the next generate() builds a fresh one
    throw;
  }

  std::vector<posttrain::Trajectory> trs;
  trs.reserve(eps.size());
  for (Episode& e : eps) {
    posttrain::Trajectory t;
    t.prompt = prompt_of(e);
    t.completion = std::move(e.completion);
    t.rollout_logps = std::move(e.logps);
    t.loss_mask = std::move(e.mask);
    t.truncated = e.truncated;
    t.weight_version = version;
    trs.push_back(std::move(t));
  }
  // Rewards per prompt group (episodes are prompt-major: p * group_size + g).
  for (int64_t p = 0; p < n_prompts; ++p) {
    const size_t first = static_cast<size_t>(p * group_size);
    const std::span<const posttrain::Trajectory> group(trs.data() + first, static_cast<size_t>(group_size));
    std::vector<std::vector<double>> r = rewards_(eps[first].prompt % n_prompts_total, group);
    LATHE_CHECK_ARG(r.size() == static_cast<size_t>(group_size), "[EpisodeRollout] the reward function returned ",
                    r.size(), " rows for a group of ", group_size);
    for (size_t g = 0; g < r.size(); ++g) {
      LATHE_CHECK_ARG(r[g].size() == reward_names_.size(), "[EpisodeRollout] the reward function returned ",
                      r[g].size(), " values for ", reward_names_.size(), " reward names");
      trs[first + g].rewards = std::move(r[g]);
    }
  }
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  untaken_.add_counts(stats_);
  return trs;
}

}  // namespace lathe::rollout
