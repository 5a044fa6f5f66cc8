#include "lathe/posttrain/grpo_objective.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/posttrain/grpo_dynamic_sampling.h"
#include "lathe/train/pretrain_objective.h"

namespace lathe::posttrain {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The policy's (or reference's) log-probs of a micro-batch's completion tokens, no grad -> [N].
std::vector<float> no_grad_logps(const Model& m, const GrpoBatch& b, const ForwardOptions& o,
                                 const LogprobProcessing& processing) {
  NoGradGuard ng;
  const Tensor targets = Tensor::from_data_i32({b.n_tokens()}, b.targets);
  return m.token_logprobs(b.forward_batch(), targets, o, false, processing).logprobs.to_vector();
}

// The metrics after the generation metrics: names of the loss's and the versions' (order fixed).
const char* const kLossMetricNames[] = {
    "completions/mean_length", "completions/min_length", "completions/max_length", "completions/clipped_ratio",
    "kl",          "pg_clipfrac",   "pg_clipfrac_lower", "entropy", "is_ratio/mean", "is_ratio/min", "is_ratio/max",
    "policy_version/min", "policy_version/lag"};
const char* const kGenerationMetricNames[] = {
    "rewards/mean", "rewards/std", "rewards/min", "rewards/max", "frac_reward_zero_std", "advantage/abs_mean",
    "advantage/nonzero_frac", "sampler_trainer/logp_diff_mean", "sampler_trainer/logp_diff_max",
    "sampler_trainer/prob_diff_mean", "sampler_trainer/probs_pearson_corr", "sampler_is/weight_mean",
    "sampler_is/weight_max", "sampler_is/weight_min", "sampler_is/frac_clipped",
    // DAPO dynamic sampling, per generation batch on this rank (null when off): groups dropped (no reward
    // variance), extra rounds sampled, dropped groups put back when max_resample_rounds ran out.
    "dynamic_sampling/dropped_groups", "dynamic_sampling/refill_rounds", "dynamic_sampling/kept_zero_std_groups"};
// Seconds of a generation batch (logged on the step that samples it; null on the others): sampling and scoring
// the completions, the π_old and the π_ref forwards. The step's own wall time is the loop's step_s.
const char* const kTimeMetricNames[] = {"time/rollout_s", "time/old_logps_s", "time/reference_s"};

// The first prompt number of dynamic sampling's refill rounds: far above any batch's own prompt numbers.
constexpr int64_t kRefillPrompts = int64_t{1} << 40;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GrpoObjective::GrpoObjective(GrpoOptions opts, std::unique_ptr<RolloutSource> source, int world)
    : opts_(std::move(opts)), source_(std::move(source)), world_(world) {
  LATHE_CHECK_ARG(source_ != nullptr, "[GrpoObjective] no rollout source");
  LATHE_CHECK_ARG(opts_.batch_size % world == 0, "data.batch_size ", opts_.batch_size, " must be a multiple of the ",
                  world, " ranks (every rank trains on the same number of completions)");
  LATHE_CHECK_ARG(opts_.generation_batch() / world % opts_.num_generations == 0, "data.batch_size ",
                  opts_.batch_size, " · grpo.steps_per_generation ", opts_.steps_per_generation, " / ", world,
                  " ranks must be a multiple of grpo.num_generations ", opts_.num_generations,
                  " (each rank samples and scores whole groups)");
  LATHE_CHECK_ARG(opts_.steps_per_generation % opts_.grad_accum == 0, "grpo.steps_per_generation ",
                  opts_.steps_per_generation, " must be a multiple of data.grad_accum ", opts_.grad_accum,
                  " (an optimizer step never spans two generation batches)");
  LATHE_CHECK_ARG(opts_.advantage.scale != GrpoRewardScale::kBatch || world == 1,
                  "grpo.scale_rewards batch divides by the std of the whole generation batch, which " , world,
                  " ranks hold in parts: use group or none");
  reward_names_ = source_->reward_names();
  source_metric_names_ = source_->metric_names();
  LATHE_CHECK_ARG(!reward_names_.empty(), "[GrpoObjective] the rollout source has no reward function");
  if (opts_.overlong_buffer > 0) {
    reward_names_.push_back("overlong");
    if (!opts_.advantage.reward_weights.empty()) opts_.advantage.reward_weights.push_back(1.0);
  }
  LATHE_CHECK_ARG(opts_.advantage.reward_weights.empty() || opts_.advantage.reward_weights.size() == reward_names_.size(),
                  "grpo.reward_weights has ", opts_.advantage.reward_weights.size() - (opts_.overlong_buffer > 0),
                  " weights for ", reward_names_.size() - (opts_.overlong_buffer > 0), " reward functions");
  mean_sequence_tokens_ = static_cast<double>(source_->max_prompt_tokens() + opts_.max_completion_length);
  // Every log-prob (π_θ, π_old, π_ref) is of the sampler's processed distribution (specs §5.6); temperature 0
  // (greedy) has none: the model's own distribution.
  if (opts_.temperature > 0)
    processing_ = {.temperature = static_cast<float>(opts_.temperature),
                   .top_k = opts_.top_k,
                   .top_p = static_cast<float>(opts_.top_p)};
}

GrpoObjective::~GrpoObjective() = default;

std::vector<std::string> GrpoObjective::metric_names() const {
  std::vector<std::string> names;
  for (const std::string& n : reward_names_) names.push_back("rewards/" + n);
  for (const char* n : kGenerationMetricNames) names.emplace_back(n);
  for (const std::string& n : source_metric_names_) names.push_back(n);
  for (const char* n : kTimeMetricNames) names.emplace_back(n);
  for (const char* n : kLossMetricNames) names.emplace_back(n);
  return names;
}

void GrpoObjective::start(const train::ObjectiveStart& s) {
  comm_ = &s.comm;
  rank_ = s.comm.rank();
  forward_ = s.forward;
  // π_old and π_ref forwards: no dropout, no recompute (no backward).
  no_grad_forward_ = ForwardOptions{.bf16 = forward_.bf16};
  const GrpoLossOptions& l = opts_.loss;
  std::string ref = "none (grpo.beta 0: no reference forward)";
  if (l.beta > 0) {
    if (opts_.lora && opts_.ref_model.empty()) {
      ref = "the base model with the adapter off (no second copy)";
    } else {
      const std::string path = opts_.ref_model.empty() ? opts_.model_base : opts_.ref_model;
      ref_model_ = Model::load(path, {.force_f32 = true});
      ref = "a frozen copy of " + path;
    }
  }
  s.note(str_cat("grpo: G ", opts_.num_generations, ", ", opts_.generation_batch(), " completions per generation batch (",
                 opts_.steps_per_generation, " micro-batches, ", opts_.num_iterations, " iteration(s)); loss ",
                 grpo_aggregation_name(l.aggregation), ", ratio ", grpo_ratio_level_name(l.ratio_level), ", epsilon ",
                 l.epsilon_low, "/", l.epsilon_high, ", beta ", l.beta, " (", grpo_kl_name(l.kl), "), advantages ",
                 grpo_advantage_name(opts_.advantage.type), " scaled by ", grpo_reward_scale_name(opts_.advantage.scale),
                 "; reference ", ref));
  if (opts_.on_policy())
    s.note("grpo: on-policy (one optimizer step per generation batch, one iteration): the ratio is 1 and the loss"
           " value is about beta·KL (0 at beta 0) while its gradient is the policy gradient (docs/recipes.md)");
  // GSPO's paper clips at 3e-4 / 4e-4; Tunix's silent default of 0.2 is ~500x that (specs §5.4).
  if (l.ratio_level != GrpoRatioLevel::kToken && std::max(l.epsilon_low, l.epsilon_high) >= 0.01)
    s.note(str_cat("warning: grpo: importance_sampling_level ", grpo_ratio_level_name(l.ratio_level),
                   " (GSPO) with epsilon ", l.epsilon_low, "/", l.epsilon_high,
                   ": the GSPO paper clips sequence ratios at 3e-4 / 4e-4 (arXiv 2507.18071)"));
  seek(position_);
}

void GrpoObjective::seek(int64_t position) {
  position_ = position;
  cycle_ = -1;  // regenerate: the buffered batch belongs to the weights it was sampled with
  chunks_.clear();
}

void GrpoObjective::generate(const Model& model, int64_t cycle) {
  const int64_t g = opts_.num_generations, spg = opts_.steps_per_generation;
  const int64_t local_gen = opts_.generation_batch() / world_, local_b = opts_.batch_size / world_;
  const int64_t prompts = local_gen / g;
  const size_t n_fn = reward_names_.size() - (opts_.overlong_buffer > 0);
  // One round of sampling: n prompts numbered from `first`, checked, with DAPO's overlong punishment added.
  const auto sample = [&](int64_t first, int64_t n) {
    std::vector<Trajectory> trs = source_->generate(model, first, n, g);
    LATHE_CHECK_ARG(static_cast<int64_t>(trs.size()) == n * g, "[grpo] the rollout source returned ", trs.size(),
                    " trajectories for ", n, " prompts x ", g, " completions");
    for (Trajectory& t : trs) {
      LATHE_CHECK_ARG(t.rewards.size() == n_fn, "[grpo] a trajectory has ", t.rewards.size(), " rewards for ", n_fn,
                      " reward functions");
      if (opts_.overlong_buffer > 0)
        t.rewards.push_back(soft_overlong_punishment(static_cast<int64_t>(t.completion.size()),
                                                     opts_.max_completion_length, opts_.overlong_buffer));
    }
    return trs;
  };
  const auto t_rollout = std::chrono::steady_clock::now();
  const int64_t first = cycle * (opts_.generation_batch() / g) + rank_ * prompts;
  std::vector<Trajectory> trs;
  GrpoDynamicSamplingStats ds;
  if (!opts_.dynamic_sampling) {
    trs = sample(first, prompts);
  } else {
    // Refill prompts are numbered apart from the batches' own (from kRefillPrompts), by (cycle, round, rank)
    // alone: a resumed run asks for the same ones and, with the same weights and seeds, samples the same groups.
    const int64_t per_cycle = opts_.generation_batch() / g;  // prompts of a cycle, all ranks
    trs = grpo_dynamic_sample(prompts, g, opts_.max_resample_rounds, opts_.advantage,
                              [&](int64_t round, int64_t n) {
                                if (round == 0) return sample(first, n);
                                const int64_t r = cycle * opts_.max_resample_rounds + (round - 1);
                                return sample(kRefillPrompts + r * per_cycle + rank_ * prompts, n);
                              },
                              &ds);
  }
  const double rollout_s = seconds_since(t_rollout);
  bool any_rollout = false, all_rollout = true;
  for (const Trajectory& t : trs) {
    const bool has = !t.rollout_logps.empty();
    LATHE_CHECK_ARG(!has || t.rollout_logps.size() == t.completion.size(), "[grpo] a trajectory has ",
                    t.rollout_logps.size(), " rollout log-probs for ", t.completion.size(), " completion tokens");
    any_rollout |= has;
    all_rollout &= has;
  }
  LATHE_CHECK_ARG(any_rollout == all_rollout, "[grpo] some trajectories carry the sampler's log-probs, others not");
  LATHE_CHECK_ARG(all_rollout || (opts_.mismatch.mode == GrpoMismatchMode::kNone && !opts_.use_rollout_logps),
                  "grpo.importance_sampling_correction / use_rollout_log_probs need the sampler's log-probs, and the"
                  " rollout source returned none");
  std::vector<std::vector<double>> rewards;
  for (const Trajectory& t : trs) rewards.push_back(t.rewards);
  const GrpoAdvantages adv = grpo_advantages(rewards, g, opts_.advantage);

  ++generations_;
  cycle_ = cycle;
  chunks_.assign(static_cast<size_t>(spg), {});
  std::vector<double> step_tokens(static_cast<size_t>(spg), 0.0);  // trained tokens of each chunk, then all ranks
  double seq_tokens = 0;
  double old_s = 0, ref_s = 0;  // seconds in the π_old and π_ref forwards
  // The generation batch's mismatch statistics from its chunks': means weighted by tokens, max of maxima,
  // min of minima (the Pearson correlation: the chunks' token-weighted mean, an approximation).
  GrpoMismatch mm;
  mm.weight_mean = mm.weight_max = mm.weight_min = 0;
  double mm_tokens = 0;
  for (int64_t k = 0; k < spg; ++k) {
    GrpoMicroBatch& c = chunks_[static_cast<size_t>(k)];
    const auto at = static_cast<size_t>(k * local_b);
    c.trajectories.assign(trs.begin() + static_cast<std::ptrdiff_t>(at),
                          trs.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(local_b)));
    c.batch = make_grpo_batch(c.trajectories);
    c.advantages.assign(adv.advantages.begin() + static_cast<std::ptrdiff_t>(at),
                        adv.advantages.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(local_b)));
    c.mask = c.batch.loss_mask;  // 0 on tool output (multi-turn episodes)
    for (const Trajectory& t : c.trajectories) {
      c.truncated.push_back(t.truncated ? 1 : 0);
      if (!(t.truncated && opts_.loss.mask_truncated_completions))
        step_tokens[static_cast<size_t>(k)] += static_cast<double>(
            t.loss_mask.empty() ? t.completion.size() : std::count(t.loss_mask.begin(), t.loss_mask.end(), 1));
      seq_tokens += static_cast<double>(t.prompt.size() + t.completion.size());
    }
    std::vector<float> rollout;
    for (const Trajectory& t : c.trajectories) rollout.insert(rollout.end(), t.rollout_logps.begin(), t.rollout_logps.end());
    // π_old: the sampler's, this forward, or (on-policy) the training forward's own, sg[π_θ]. Its weights have
    // not moved since sampling, so the mismatch against the sampler is computed there too (loss()), unless
    // LoRA dropout makes that forward noisier than the sampler's.
    if (opts_.use_rollout_logps) {
      c.old_logps = rollout;
    } else if (!opts_.on_policy() || (all_rollout && forward_.lora_dropout)) {
      const auto t0 = std::chrono::steady_clock::now();
      c.old_logps = no_grad_logps(model, c.batch, no_grad_forward_, processing_);
      old_s += seconds_since(t0);
      ++old_logp_forwards_;
    }
    if (opts_.loss.beta > 0) {
      const auto t0 = std::chrono::steady_clock::now();
      ForwardOptions ro = no_grad_forward_;
      ro.lora = false;  // the base when the policy is base + adapter; a separate reference has no adapter
      c.ref_logps = no_grad_logps(ref_model_ ? *ref_model_ : model, c.batch, ro, processing_);
      ref_s += seconds_since(t0);
      ++reference_forwards_;
    }
    if (all_rollout && c.old_logps.empty()) {
      c.deferred_rollout_logps = std::move(rollout);
    } else if (all_rollout) {
      const GrpoMismatch m = grpo_mismatch(c.old_logps, rollout, c.mask, c.batch.offsets, opts_.mismatch);
      if (opts_.mismatch.mode != GrpoMismatchMode::kNone) c.is_weights = m.weights;
      const auto n = static_cast<double>(c.batch.n_tokens());
      mm.logp_diff_mean += n * m.logp_diff_mean;
      mm.prob_diff_mean += n * m.prob_diff_mean;
      mm.probs_pearson_corr += n * m.probs_pearson_corr;
      mm.weight_mean += n * m.weight_mean;
      mm.frac_clipped += n * m.frac_clipped;
      mm.logp_diff_max = std::max(mm.logp_diff_max, m.logp_diff_max);
      mm.weight_max = k == 0 ? m.weight_max : std::max(mm.weight_max, m.weight_max);
      mm.weight_min = k == 0 ? m.weight_min : std::min(mm.weight_min, m.weight_min);
      mm_tokens += n;
    }
  }
  mean_sequence_tokens_ = seq_tokens / static_cast<double>(local_gen);
  // Each optimizer step's trained tokens over its micro-batches and ranks (dapo's normaliser).
  if (comm_ != nullptr && comm_->size() > 1) comm_->all_reduce_sum(step_tokens.data(), spg);
  const int64_t accum = opts_.grad_accum;
  for (int64_t k = 0; k < spg; ++k) {
    double sum = 0;
    for (int64_t j = k / accum * accum; j < (k / accum + 1) * accum; ++j) sum += step_tokens[static_cast<size_t>(j)];
    chunks_[static_cast<size_t>(k)].dapo_tokens = sum / static_cast<double>(accum * world_);
  }
  // The generation batch's metrics, the same on each of its micro-batches.
  train::ObjectiveMetrics gm;
  for (size_t f = 0; f < reward_names_.size(); ++f) gm.emplace_back("rewards/" + reward_names_[f], adv.function_means[f]);
  const bool have = mm_tokens > 0;  // else no sampler log-probs: NaN, logged as null
  const auto mean = [&](double sum) { return have ? sum / mm_tokens : kNan; };
  const double gv[] = {adv.reward_mean, adv.reward_std, adv.reward_min, adv.reward_max, adv.frac_reward_zero_std,
                       adv.advantage_abs_mean, adv.advantage_nonzero_frac, mean(mm.logp_diff_mean),
                       have ? mm.logp_diff_max : kNan, mean(mm.prob_diff_mean), mean(mm.probs_pearson_corr),
                       mean(mm.weight_mean), have ? mm.weight_max : kNan, have ? mm.weight_min : kNan,
                       mean(mm.frac_clipped),
                       opts_.dynamic_sampling ? static_cast<double>(ds.dropped_groups) : kNan,
                       opts_.dynamic_sampling ? static_cast<double>(ds.refill_rounds) : kNan,
                       opts_.dynamic_sampling ? static_cast<double>(ds.kept_zero_std_groups) : kNan};
  static_assert(std::size(gv) == std::size(kGenerationMetricNames));
  for (size_t i = 0; i < std::size(gv); ++i) gm.emplace_back(kGenerationMetricNames[i], gv[i]);
  const std::vector<double> own = source_->take_metrics();  // of every generate() call of this batch
  LATHE_CHECK_ARG(own.size() == source_metric_names_.size(), "[grpo] the rollout source returned ", own.size(),
                  " metrics for ", source_metric_names_.size(), " names");
  for (size_t i = 0; i < own.size(); ++i) gm.emplace_back(source_metric_names_[i], own[i]);
  for (GrpoMicroBatch& c : chunks_) c.generation_metrics = gm;
  // The cycle's times, reported once: with the first micro-batch trained on it (NaN, weight 0, on the others).
  for (GrpoMicroBatch& c : chunks_)
    for (const char* n : kTimeMetricNames) c.generation_metrics.emplace_back(n, kNan);
  const double times[] = {rollout_s, old_s, ref_s};
  static_assert(std::size(times) == std::size(kTimeMetricNames));
  pending_times_.assign(std::begin(times), std::end(times));
}

GrpoMicroBatch GrpoObjective::next_batch(const Model& model) {
  const int64_t micro = position_ / opts_.batch_size;
  const int64_t per_cycle = opts_.steps_per_generation * opts_.num_iterations;
  const int64_t cycle = micro / per_cycle;
  if (cycle != cycle_) generate(model, cycle);
  position_ += opts_.batch_size;
  GrpoMicroBatch b = chunks_[static_cast<size_t>(micro % per_cycle % opts_.steps_per_generation)];
  if (!pending_times_.empty()) {  // the first micro-batch since the cycle was sampled reports its times
    const size_t at = b.generation_metrics.size() - std::size(kTimeMetricNames);
    for (size_t i = 0; i < pending_times_.size(); ++i) b.generation_metrics[at + i].second = pending_times_[i];
    pending_times_.clear();
  }
  return b;
}

train::ObjectiveResult GrpoObjective::loss(Model& model, const GrpoMicroBatch& b) {
  const ForwardOptions o = train::micro_batch_forward(forward_, position_, world_, rank_);
  const Tensor targets = Tensor::from_data_i32({b.batch.n_tokens()}, b.batch.targets);
  const TokenLogprobs lp = model.token_logprobs(b.batch.forward_batch(), targets, o, /*want_entropy=*/true, processing_);
  std::vector<float> live;
  if (b.old_logps.empty()) live = lp.logprobs.to_vector();  // on-policy: π_old = sg[π_θ]
  std::vector<float> is_weights = b.is_weights;
  std::optional<GrpoMismatch> mm;  // deferred to this forward (on-policy with the sampler's log-probs)
  if (!b.deferred_rollout_logps.empty()) {
    LATHE_ASSERT(b.old_logps.empty() && is_weights.empty());
    mm = grpo_mismatch(live, b.deferred_rollout_logps, b.mask, b.batch.offsets, opts_.mismatch);
    if (opts_.mismatch.mode != GrpoMismatchMode::kNone) is_weights = mm->weights;
  }
  const std::vector<float> entropy = lp.entropy.to_vector();
  const GrpoLossInputs in{.offsets = b.batch.offsets,
                          .old_logps = b.old_logps.empty() ? live : b.old_logps,
                          .ref_logps = b.ref_logps,
                          .mask = b.mask,
                          .advantages = b.advantages,
                          .is_weights = is_weights,
                          .truncated = b.truncated,
                          .entropy = entropy};
  GrpoLossOptions lo = opts_.loss;
  lo.dapo_tokens_per_micro_batch = b.dapo_tokens;
  GrpoLossMetrics m;
  Tensor loss = grpo_loss(lp.logprobs, in, lo, &m);

  double vmin = std::numeric_limits<double>::infinity(), lag = 0;
  const auto now = static_cast<double>(model.weight_version());
  for (const Trajectory& t : b.trajectories) {
    vmin = std::min(vmin, static_cast<double>(t.weight_version));
    lag += (now - static_cast<double>(t.weight_version)) / static_cast<double>(b.trajectories.size());
  }
  train::ObjectiveResult r{.loss = loss, .tokens = b.batch.n_tokens(), .metrics = b.generation_metrics};
  if (mm) {  // this micro-batch's mismatch in place of the generation batch's (the step averages micro-batches)
    const std::pair<const char*, double> values[] = {
        {"sampler_trainer/logp_diff_mean", mm->logp_diff_mean}, {"sampler_trainer/logp_diff_max", mm->logp_diff_max},
        {"sampler_trainer/prob_diff_mean", mm->prob_diff_mean},
        {"sampler_trainer/probs_pearson_corr", mm->probs_pearson_corr}, {"sampler_is/weight_mean", mm->weight_mean},
        {"sampler_is/weight_max", mm->weight_max}, {"sampler_is/weight_min", mm->weight_min},
        {"sampler_is/frac_clipped", mm->frac_clipped}};
    for (const auto& [name, v] : values) {
      const auto it = std::ranges::find(r.metrics, std::string_view(name),
                                        [](const auto& kv) { return std::string_view(kv.first); });
      LATHE_ASSERT(it != r.metrics.end());
      it->second = v;
    }
  }
  const double lv[] = {m.completion_mean_length, m.completion_min_length, m.completion_max_length,
                       m.completion_clipped_ratio, m.kl, m.pg_clipfrac, m.pg_clipfrac_lower, m.entropy,
                       m.is_ratio_mean, m.is_ratio_min, m.is_ratio_max, vmin, lag};
  static_assert(std::size(lv) == std::size(kLossMetricNames));
  for (size_t i = 0; i < std::size(lv); ++i) r.metrics.emplace_back(kLossMetricNames[i], lv[i]);
  // NaN (no reference, no sampler log-probs, no applicable reward): weight 0, logged as null.
  for (const auto& [name, v] : r.metrics) r.metric_weights.push_back(std::isnan(v) ? 0.0 : 1.0);
  return r;
}

train::ObjectiveMemory GrpoObjective::memory(const Model& model) const {
  const int64_t longest = source_->max_prompt_tokens() + opts_.max_completion_length;
  train::ObjectiveMemory m{.tokens = opts_.batch_size / world_ * longest, .fused_head = true,
                           .varying_lengths = true, .items = {}};
  if (ref_model_) m.items.push_back({"reference model (f32, frozen)", train::memory_plan_weight_bytes(*ref_model_)});
  // The buffered generation batch: ids, positions, three f32 log-prob arrays per token.
  m.items.push_back({"buffered generation batch", opts_.generation_batch() / world_ * longest * 20});
  if (const int64_t rollout = source_->memory_bytes(model); rollout > 0)
    m.items.push_back({"rollout KV pool", rollout});
  return m;
}

double GrpoObjective::flops_per_token(const Model& model, int64_t n_matmul_params) const {
  // The no-grad π_old / π_ref forwards and the rollout are not counted (as DPO's cached reference).
  return train::causal_lm_flops_per_token(model.config(), n_matmul_params,
                                          std::max<int64_t>(1, std::llround(mean_sequence_tokens_)));
}

}  // namespace lathe::posttrain
