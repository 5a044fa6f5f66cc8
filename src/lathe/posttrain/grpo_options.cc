#include "lathe/posttrain/grpo_options.h"

#include <cmath>

#include "lathe/base/error.h"
#include "lathe/posttrain/section_reader.h"

namespace lathe::posttrain {

using nlohmann::json;

GrpoOptions grpo_options(train::TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  LATHE_CHECK_ARG(!c.grpo.is_null(), where, ": no grpo: section (write `grpo: {}` for TRL's defaults)");
  GrpoOptions o;
  o.batch_size = c.batch_size;
  o.grad_accum = c.grad_accum;
  o.seed = c.seed;
  o.model_base = c.model_base;
  o.lora = !c.lora.is_null();
  SectionReader r(c.grpo, where, "grpo");

  r.get("num_generations", o.num_generations);
  r.checked("num_generations", o.num_generations >= 2, o.num_generations, "must be at least 2 (a group needs a baseline)");
  r.get("max_completion_length", o.max_completion_length);
  r.checked("max_completion_length", o.max_completion_length >= 1, o.max_completion_length, "must be at least 1");
  o.steps_per_generation = o.grad_accum;
  r.get("steps_per_generation", o.steps_per_generation);
  r.checked("steps_per_generation", o.steps_per_generation >= 1, o.steps_per_generation, "must be at least 1");
  r.checked("steps_per_generation", o.generation_batch() % o.num_generations == 0, o.steps_per_generation,
            str_cat("times data.batch_size ", o.batch_size, " must be a multiple of grpo.num_generations ",
                    o.num_generations, " (a generation batch holds whole groups)"));
  r.get("num_iterations", o.num_iterations);
  r.checked("num_iterations", o.num_iterations >= 1, o.num_iterations, "must be at least 1");

  GrpoLossOptions& l = o.loss;
  r.get("epsilon", l.epsilon_low);
  r.checked("epsilon", l.epsilon_low >= 0 && l.epsilon_low < 1, l.epsilon_low, "must be in [0, 1)");
  l.epsilon_high = l.epsilon_low;
  r.get("epsilon_high", l.epsilon_high);
  r.checked("epsilon_high", l.epsilon_high >= 0, l.epsilon_high, "must be >= 0");
  r.get("epsilon_c", l.epsilon_c);
  r.checked("epsilon_c", l.epsilon_c == 0 || l.epsilon_c > 1, l.epsilon_c, "must be > 1 (dual clip), or 0: off");
  r.get("beta", l.beta);
  r.checked("beta", l.beta >= 0, l.beta, "must be >= 0 (0: no reference model)");
  const std::string kl = r.choice("kl_estimator", "k3", grpo_kl_from_name, l.kl, "must be k1, k2 or k3");
  r.get("kl_clamp", l.kl_clamp);
  r.checked("kl_clamp", l.kl_clamp >= 0, l.kl_clamp, "must be >= 0 (0: off)");
  const std::string agg = r.choice("loss_type", "dapo", grpo_aggregation_from_name, l.aggregation,
                                   "must be grpo, bnpo, dr_grpo, dapo, seq_mean_token_sum or token_sum_norm");
  const std::string level = r.choice("importance_sampling_level", "token", grpo_ratio_level_from_name, l.ratio_level,
                                     "must be token (GRPO), sequence (GSPO) or sequence_token (GSPO-token)");
  r.get("log_ratio_clamp", l.log_ratio_clamp);
  r.checked("log_ratio_clamp", l.log_ratio_clamp > 0, l.log_ratio_clamp, "must be positive");
  r.get("token_sum_norm", l.token_sum_norm);
  r.checked("token_sum_norm", l.token_sum_norm >= 0, l.token_sum_norm, "must be >= 0 (0: the micro-batch size)");
  r.get("mask_truncated_completions", l.mask_truncated_completions);
  l.max_completion_length = o.max_completion_length;

  GrpoAdvantageOptions& a = o.advantage;
  const std::string adv =
      r.choice("advantage_type", "grpo", grpo_advantage_from_name, a.type, "must be grpo, dr_grpo or rloo");
  const std::string scale =
      r.choice("scale_rewards", "group", grpo_reward_scale_from_name, a.scale, "must be group, batch or none");
  r.get("advantage_epsilon", a.eps);
  r.checked("advantage_epsilon", a.eps > 0, a.eps, "must be positive");
  if (const json* w = r.find("reward_weights")) {
    r.checked("reward_weights", w->is_array(), *w, "expected a list of numbers, one per reward function");
    for (const json& x : *w) {
      r.checked("reward_weights", x.is_number(), *w, "expected a list of numbers, one per reward function");
      a.reward_weights.push_back(x.get<double>());
    }
  }
  r.get("per_reward_normalisation", a.per_reward_normalisation);

  GrpoMismatchOptions& m = o.mismatch;
  const std::string mode = r.choice("importance_sampling_correction", "none", grpo_mismatch_mode_from_name, m.mode,
                                    "must be none, token_truncate, token_mask, sequence_truncate or sequence_mask");
  r.get("importance_sampling_cap", m.c_max);
  r.checked("importance_sampling_cap", m.c_max > 0, m.c_max, "must be positive");
  r.get("importance_sampling_min", m.c_min);
  r.checked("importance_sampling_min", m.c_min >= 0 && m.c_min < m.c_max, m.c_min,
            "must be in [0, importance_sampling_cap)");
  std::string seq = "sum";
  r.get("importance_sampling_sequence", seq);
  r.checked("importance_sampling_sequence", seq == "sum" || seq == "mean", seq,
            "must be sum (exp Σ_t Δ_t, TRL) or mean (exp mean_t Δ_t)");
  m.sequence_mean = seq == "mean";
  r.get("use_rollout_log_probs", o.use_rollout_logps);
  r.get("overlong_buffer", o.overlong_buffer);
  r.checked("overlong_buffer", o.overlong_buffer >= 0 && o.overlong_buffer <= o.max_completion_length,
            o.overlong_buffer, "must be in [0, max_completion_length] (0: off)");
  r.get("dynamic_sampling", o.dynamic_sampling);
  r.get("max_resample_rounds", o.max_resample_rounds);
  r.checked("max_resample_rounds", o.max_resample_rounds >= 0, o.max_resample_rounds,
            "must be >= 0 (extra sampling rounds to refill dropped groups)");
  r.get("ref_model", o.ref_model);
  o.train_data = c.train_data;
  o.tokenizer = c.model_base;
  r.get("tokenizer", o.tokenizer);
  r.get("max_prompt_length", o.max_prompt_length);
  r.checked("max_prompt_length", o.max_prompt_length >= 1, o.max_prompt_length, "must be at least 1");
  r.get("temperature", o.temperature);
  r.checked("temperature", o.temperature >= 0 && std::isfinite(o.temperature), o.temperature,
            "must be >= 0 (0: greedy, every completion of a group the same)");
  r.get("top_p", o.top_p);
  r.checked("top_p", o.top_p > 0 && o.top_p <= 1, o.top_p, "must be in (0, 1]");
  r.get("top_k", o.top_k);
  r.checked("top_k", o.top_k >= 0, o.top_k, "must be >= 0 (0: off)");
  if (const json* rw = r.find("rewards")) {
    r.checked("rewards", rw->is_array() && !rw->empty(), *rw, "expected a list of reward functions (docs/recipes.md)");
    o.rewards = *rw;
  }
  if (const json* env = r.find("environment")) o.environment = *env;
  r.reject_unknown();
  LATHE_CHECK_ARG(l.beta == 0 || o.lora || !o.ref_model.empty() || !c.model_base.empty(), where,
                  ": grpo.beta > 0 needs a reference model: set model.base (its frozen copy), grpo.ref_model, or a"
                  " lora: section (the adapter off), or set grpo.beta: 0");

  json& s = c.resolved["grpo"];  // every default, written
  s["num_generations"] = o.num_generations;
  s["max_completion_length"] = o.max_completion_length;
  s["steps_per_generation"] = o.steps_per_generation;
  s["num_iterations"] = o.num_iterations;
  s["epsilon"] = l.epsilon_low;
  s["epsilon_high"] = l.epsilon_high;
  s["epsilon_c"] = l.epsilon_c;
  s["beta"] = l.beta;
  s["kl_estimator"] = kl;
  s["kl_clamp"] = l.kl_clamp;
  s["loss_type"] = agg;
  s["importance_sampling_level"] = level;
  s["log_ratio_clamp"] = l.log_ratio_clamp;
  s["token_sum_norm"] = l.token_sum_norm;
  s["mask_truncated_completions"] = l.mask_truncated_completions;
  s["advantage_type"] = adv;
  s["scale_rewards"] = scale;
  s["advantage_epsilon"] = a.eps;
  s["per_reward_normalisation"] = a.per_reward_normalisation;
  s["importance_sampling_correction"] = mode;
  s["importance_sampling_cap"] = m.c_max;
  s["importance_sampling_min"] = m.c_min;
  s["importance_sampling_sequence"] = seq;
  s["use_rollout_log_probs"] = o.use_rollout_logps;
  s["overlong_buffer"] = o.overlong_buffer;
  s["dynamic_sampling"] = o.dynamic_sampling;
  s["max_resample_rounds"] = o.max_resample_rounds;
  s["max_prompt_length"] = o.max_prompt_length;
  s["temperature"] = o.temperature;
  s["top_p"] = o.top_p;
  s["top_k"] = o.top_k;
  return o;
}

}  // namespace lathe::posttrain
