// The GRPO family as an Objective (train/objective.h) on the shared TrainLoop (specs/posttrain.md §5). Every
// steps_per_generation · num_iterations micro-batches, the objective asks its RolloutSource for a generation
// batch (batch_size · steps_per_generation completions over all ranks, G per prompt, each rank whole groups),
// and once per generation batch computes what does not change while it is trained on:
//   advantages       over each group (grpo_advantages.h), from the trajectories' rewards (+ DAPO's soft
//                    overlong punishment as a reward "overlong" when grpo.overlong_buffer > 0)
//   π_old log-probs  a no-grad forward of the policy as it is now, unless on-policy (μ = 1 and one optimizer
//                    step per generation batch: π_old = sg[π_θ], TRL) or use_rollout_log_probs (the sampler's)
//   π_ref log-probs  a no-grad forward of the reference (the adapter off, or a frozen copy); none when β = 0
//   mismatch         weights and diagnostics from π_old vs the sampler's log-probs (grpo_mismatch.h)
//   dapo tokens      each optimizer step's trained-token count over all its micro-batches and ranks
// With grpo.dynamic_sampling (DAPO), groups without reward variance are dropped and refilled from extra
// sampling rounds (grpo_dynamic_sampling.h) before any of this.
// Micro-batch j of a generation cycle trains chunk j mod steps_per_generation of it (TRL's buffer), so μ > 1
// passes over the same completions with the same π_old. The loss is grpo_loss (grpo_loss.h) on the policy's
// fused-head log-probs of the completion tokens only (ForwardBatch::output_rows), of the distribution the sampler
// drew from: grpo.temperature, top_k and top_p replayed on the logits (ops/logprob.h LogprobProcessing).
// The data position counts completions trained (all ranks). A run resumed inside a generation cycle
// regenerates that cycle with the resumed weights (its completions differ from the interrupted run's); a
// checkpoint at a cycle boundary resumes exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/posttrain/grpo_batch.h"
#include "lathe/posttrain/grpo_options.h"
#include "lathe/train/objective.h"

namespace lathe::posttrain {

// Where a GRPO run's trajectories come from: the in-process rollout engine, or a test's fixed set.
class RolloutSource {
 public:
  virtual ~RolloutSource() = default;
  // The reward functions, in the order of Trajectory::rewards (logged as rewards/<name>).
  virtual std::vector<std::string> reward_names() const = 0;
  // The longest prompt it will hand out, in tokens (the memory plan).
  virtual int64_t max_prompt_tokens() const = 0;
  // Bytes it allocates to sample from `policy` beyond the model itself (the memory plan): an engine's KV pool.
  virtual int64_t memory_bytes(const Model& /*policy*/) const { return 0; }
  // Metrics of its own, logged with each generation batch after the GRPO ones: the names (fixed for the run),
  // and their values over the generate() calls since the last take_metrics() (NaN: logged as null).
  virtual std::vector<std::string> metric_names() const { return {}; }
  virtual std::vector<double> take_metrics() { return {}; }
  // G = group_size completions of each of the n_prompts prompts numbered from first_prompt (a global count:
  // the same number asks for the same prompt), sampled from `policy` as it is now: n_prompts · G
  // trajectories, a prompt's G consecutive, each stamped with policy.weight_version().
  virtual std::vector<Trajectory> generate(const Model& policy, int64_t first_prompt, int64_t n_prompts,
                                           int64_t group_size) = 0;
};

// One micro-batch with everything the loss needs besides the policy's live log-probs.
struct GrpoMicroBatch {
  std::vector<Trajectory> trajectories;  // [b]
  GrpoBatch batch;                       // their packed sequences; [N] completion tokens
  std::vector<double> advantages;        // [b]
  std::vector<uint8_t> mask;             // [N] the trajectories' loss masks (truncated completions are masked by
                                         // the loss when asked)
  std::vector<uint8_t> truncated;        // [b]
  std::vector<float> old_logps;          // [N], or empty: on-policy (π_old = sg[π_θ])
  std::vector<float> ref_logps;          // [N], or empty: β = 0
  std::vector<float> is_weights;         // [N] mismatch weights, or empty: no correction
  // [N] the sampler's log-probs when the mismatch waits for the training forward (on-policy: its log-probs are
  // π_old, so loss() computes the diagnostics and the correction weights from them, and no π_old forward runs);
  // empty otherwise.
  std::vector<float> deferred_rollout_logps;
  double dapo_tokens = 0;                // the step's trained tokens / its micro-batches (all ranks)
  train::ObjectiveMetrics generation_metrics;  // rewards, advantages, mismatch of its generation batch
};

class GrpoObjective final : public train::Objective {
 public:
  // Throws InvalidArgument unless batch_size is a multiple of `world`, each rank's share of a generation batch
  // holds whole groups, steps_per_generation is a multiple of grad_accum (an optimizer step never spans two
  // generation batches), and scale_rewards batch runs on one rank.
  GrpoObjective(GrpoOptions opts, std::unique_ptr<RolloutSource> source, int world);
  ~GrpoObjective() override;

  // Loads the reference when β > 0 and it is a separate model; notes what the run does.
  void start(const train::ObjectiveStart& s) override;
  int64_t data_position() const override { return position_; }
  void seek(int64_t position) override;
  train::ObjectiveResult next_loss(Model& model) override { return loss(model, next_batch(model)); }
  std::optional<train::ObjectiveEval> evaluate(Model&) override { return std::nullopt; }
  train::ObjectiveMemory memory(const Model& model) const override;
  double flops_per_token(const Model& model, int64_t n_matmul_params) const override;
  // grpo.tokenizer (model.base by default): checkpoints and the exported folder carry a copy.
  std::string data_tokenizer() const override { return opts_.tokenizer; }

  // This rank's next micro-batch (generating a new generation batch with `model` when the cycle starts).
  GrpoMicroBatch next_batch(const Model& model);
  // The loss of `b` under `model` (autograd as the caller's grad mode): loss [1] and the §5.7 metrics.
  train::ObjectiveResult loss(Model& model, const GrpoMicroBatch& b);

  int64_t generations() const { return generations_; }                   // generation batches sampled
  int64_t old_logp_forwards() const { return old_logp_forwards_; }       // micro-batches run for π_old
  int64_t reference_forwards() const { return reference_forwards_; }     // micro-batches run for π_ref
  std::vector<std::string> metric_names() const;

 private:
  void generate(const Model& model, int64_t cycle);

  GrpoOptions opts_;
  std::unique_ptr<RolloutSource> source_;
  std::vector<std::string> reward_names_;  // the source's, + "overlong"
  std::vector<std::string> source_metric_names_;
  int world_ = 1, rank_ = 0;
  dist::Communicator* comm_ = nullptr;
  ForwardOptions forward_, no_grad_forward_;
  LogprobProcessing processing_;  // the sampler's temperature / top-k / top-p, replayed by every log-prob
  std::unique_ptr<Model> ref_model_;  // a frozen copy (no LoRA, or grpo.ref_model); null otherwise
  int64_t position_ = 0;              // global completions trained
  int64_t cycle_ = -1;                // the generation cycle in chunks_ (-1: none)
  std::vector<GrpoMicroBatch> chunks_;  // [steps_per_generation] this rank's generation batch
  double mean_sequence_tokens_ = 0;
  std::vector<double> pending_times_;  // the last generation's time/* metrics, until a micro-batch reports them
  int64_t generations_ = 0, old_logp_forwards_ = 0, reference_forwards_ = 0;
};

}  // namespace lathe::posttrain
