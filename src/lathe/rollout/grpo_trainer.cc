#include "lathe/rollout/grpo_trainer.h"

#include <algorithm>
#include <memory>

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/posttrain/dataset.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/posttrain/grpo_objective.h"
#include "lathe/posttrain/posttrain_run.h"
#include "lathe/rollout/engine_rollout.h"
#include "lathe/rollout/episode_rollout.h"
#include "lathe/rollout/prompt_encoding.h"
#include "lathe/rollout/reward_set.h"

namespace lathe::rollout {

namespace {

train::TrainConfig with_defaults(train::TrainConfig cfg, posttrain::GrpoOptions& opts, std::vector<RewardSpec>& rewards) {
  opts = posttrain::grpo_options(cfg);
  const std::string where = cfg.recipe_path.empty() ? "recipe" : cfg.recipe_path;
  LATHE_CHECK_ARG(!opts.rewards.is_null(), where, ": grpo.rewards is required: the reward functions that score the"
                  " completions, e.g. [{type: format, pattern: 'kcal'}, {type: answer_numeric}] (docs/recipes.md)");
  rewards = parse_reward_specs(opts.rewards, where, opts.max_completion_length);
  // Per-entry weights are the same as grpo.reward_weights, written beside each function; one or the other.
  const std::vector<double> weights = reward_weights(rewards);
  LATHE_CHECK_ARG(weights.empty() || opts.advantage.reward_weights.empty(), where,
                  ": grpo.reward_weights and a `weight` in grpo.rewards: give the weights one way");
  if (!weights.empty()) opts.advantage.reward_weights = weights;
  LATHE_CHECK_ARG(!opts.tokenizer.empty(), where, ": GRPO needs a tokenizer: set model.base (a Hugging Face folder"
                  " with tokenizer.json) or grpo.tokenizer");
  if (!opts.environment.is_null())
    cfg.resolved["grpo"]["environment"] = environment_spec_json(parse_environment_spec(opts.environment, where));
  return cfg;
}

// The rollout of a run: data.train's prompts tokenized (conversations with the chat template's generation
// prompt), their rows' other columns, and the reward functions over the decoded completions.
std::unique_ptr<posttrain::RolloutSource> make_rollout(const posttrain::GrpoOptions& o,
                                                       const std::vector<RewardSpec>& specs) {
  const posttrain::Dataset d = posttrain::load_dataset(o.train_data);
  LATHE_CHECK_ARG(d.kind == posttrain::DatasetKind::kPromptOnly, d.examples[0].where,
                  ": GRPO trains on prompt-only rows (a prompt column, and optional columns for the rewards); this"
                  " file is ", posttrain::dataset_kind_name(d.kind));
  auto enc = std::make_shared<posttrain::ExampleEncoder>(tokenizer::read_tokenizer_files(o.tokenizer),
                                                         posttrain::EncoderOptions{});
  const tokenizer::Tokenizer& tok = enc->tokenizer();
  std::vector<std::vector<int32_t>> prompts;
  struct Row {
    std::string prompt;               // as rendered
    nlohmann::ordered_json columns;   // the other columns
  };
  auto rows = std::make_shared<std::vector<Row>>();
  for (const posttrain::Example& e : d.examples) {
    EncodedPrompt p = encode_prompt(*enc, e, o.max_prompt_length);
    prompts.push_back(std::move(p.ids));
    rows->push_back({std::move(p.text), e.extra});
  }
  auto set = std::make_shared<RewardSet>(specs);  // starts the reward commands, once per run
  // tool_call rewards parse the call markers, which some families make special tokens: a second decode keeps them.
  const bool keep_special = std::any_of(specs.begin(), specs.end(),
                                        [](const RewardSpec& r) { return r.kind == RewardKind::kToolCall; });
  const int64_t max_len = o.max_completion_length;
  RewardFn fn = [enc, rows, set, max_len, keep_special](int64_t prompt, std::span<const posttrain::Trajectory> group) {
    const Row& row = (*rows)[static_cast<size_t>(prompt)];
    std::vector<RewardInput> in;
    for (const posttrain::Trajectory& t : group) {
      // The model's own tokens: an episode's tool output (loss mask 0) is not the model's answer.
      std::vector<uint32_t> ids;
      for (size_t i = 0; i < t.completion.size(); ++i)
        if (t.loss_mask.empty() || t.loss_mask[i]) ids.push_back(static_cast<uint32_t>(t.completion[i]));
      in.push_back({.prompt = row.prompt,
                    .completion = enc->tokenizer().decode(ids, /*skip_special_tokens=*/true),
                    .completion_raw = keep_special ? enc->tokenizer().decode(ids, /*skip_special_tokens=*/false) : "",
                    .completion_tokens = static_cast<int64_t>(ids.size()),
                    .max_completion_tokens = max_len,
                    .columns = &row.columns});
    }
    return set->score(in);
  };
  SamplingParams sampling;
  sampling.temperature = static_cast<float>(o.temperature);
  sampling.top_p = static_cast<float>(o.top_p);
  sampling.top_k = static_cast<int>(o.top_k);
  std::vector<int32_t> stops;
  if (tok.special_tokens().eos_id) stops.push_back(static_cast<int32_t>(*tok.special_tokens().eos_id));
  EngineRolloutOptions ro{.max_completion_length = o.max_completion_length, .sampling = sampling,
                          .stop_token_ids = stops, .seed = o.seed};
  if (!o.environment.is_null()) {  // multi-turn episodes with a tool environment
    const EnvironmentSpec env = parse_environment_spec(o.environment, "recipe");  // checked by with_defaults
    auto codec = std::make_shared<ChatToolCodec>(enc, env.tool_call_start, env.tool_call_end);
    return std::make_unique<EpisodeRollout>(std::move(prompts), set->names(), std::move(fn), make_environment(env),
                                            std::move(codec),
                                            EpisodeRolloutOptions{.engine = std::move(ro), .max_turns = env.max_turns,
                                                                  .workers = env.workers});
  }
  return std::make_unique<EngineRollout>(std::move(prompts), set->names(), std::move(fn), std::move(ro));
}

}  // namespace

GrpoTrainer::GrpoTrainer(train::TrainConfig cfg, train::TrainerHooks hooks)
    : loop_(with_defaults(std::move(cfg), opts_, rewards_), std::move(hooks)) {}

train::TrainResult GrpoTrainer::run(train::StartMode mode) {
  return posttrain::run_and_export(loop_, mode, [this](int world) {
    return std::make_unique<posttrain::GrpoObjective>(opts_, make_rollout(opts_, rewards_), world);
  });
}

std::string GrpoTrainer::output_dir() const { return posttrain::output_dir(loop_.config()); }

}  // namespace lathe::rollout
