// A training objective (DESIGN.md "Seams" 4): which data a step trains on and what its loss is. The loop
// (train/train_loop.h) owns what every objective shares: micro-batches and gradient accumulation, the
// all-reduce / ZeRO, clipping, AdamW and the LR schedule, checkpoints and exact resume, metrics and
// progress, the eval cadence and stop requests. Pre-training (train/pretrain_objective.h) is the first;
// SFT, DPO, GRPO and distillation are further objectives, the loop unchanged.
//   per micro-batch:  {loss, tokens, metrics} = objective.loss(model, objective.next_batch())
//                     backward(loss / grad_accum)
// An objective may hold more than its data: a reference or teacher model (DPO, distillation; loaded in
// start()), or a rollout engine over the live model it is given (GRPO's next_batch). Per-sequence sums
// and masks are the objective's business: the loop sees only the scalar loss.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/base/rng.h"
#include "lathe/dist/communicator.h"
#include "lathe/models/model.h"
#include "lathe/train/memory_plan.h"

namespace lathe::train {

// Named scalars of an objective (e.g. a DPO "reward_accuracy"): the same names in the same order on every
// call. The loop averages them over micro-batches and ranks, like the loss, and writes them to
// metrics.jsonl after the loop's own keys.
using ObjectiveMetrics = std::vector<std::pair<std::string, double>>;

// The value of metric `name` in m (NaN when absent), for progress lines.
inline double metric_value(const ObjectiveMetrics& m, const std::string& name) {
  for (const auto& [k, v] : m)
    if (k == name) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

struct ObjectiveResult {
  // Scalar f32, recorded on the tape: this micro-batch's mean loss. Every micro-batch weighs the same in
  // the step (the step's loss is the mean over micro-batches and ranks); an objective whose batches differ
  // in size and wants a per-token mean over the whole step would carry a weight here.
  Tensor loss;
  int64_t tokens = 0;  // tokens of this rank's micro-batch that the loss trained on (throughput, MFU)
  ObjectiveMetrics metrics;
  // [metrics.size()] or empty (every weight 1): a metric that is a mean over a varying number of items (KTO's
  // rewards/chosen over the micro-batch's desirable examples) carries that number here, so the step's value
  // is Σ value·weight / Σ weight over micro-batches and ranks; a step whose weights are all 0 logs null.
  std::vector<double> metric_weights;
};

struct ObjectiveEval {
  double loss = 0;  // on every rank; "val_loss" in metrics.jsonl
  ObjectiveMetrics metrics;
};

// What the loop hands an objective when a run starts.
struct ObjectiveStart {
  Model& model;               // the model being trained: f32 masters, gradients on, weights as resumed
  dist::Communicator& comm;   // this rank's share of each batch: rank() of size() ranks
  ForwardOptions forward;     // the run options of every training forward (recompute, bf16 compute)
  std::function<void(const std::string&)> note;  // a message for the user (printed by rank 0)
};
// (All three are valid until the loop's run() returns; an objective keeps none of them past it.)

// What an objective adds to the loop's memory plan (train/memory_plan.h), known once start() has run.
struct ObjectiveMemory {
  // N: the most tokens one of this rank's training micro-batches runs through the policy with autograd
  // (the activations and the head are sized by it).
  int64_t tokens = 0;
  bool fused_head = true;  // the loss runs the model's fused head; false: its own head is one of `items`
  bool varying_lengths = false;  // micro-batches differ in tokens (packed examples), not fixed [B, T] windows
  // What it holds besides the policy: a reference or a teacher, caches, its own head's buffers, its data.
  std::vector<MemoryPlanItem> items;
};

// The run's forward options for one training micro-batch: LoRA dropout masks keyed by the data position and
// the rank (a pure function of the data, so a resumed run redraws the same masks). Without dropout the key
// is unused.
inline ForwardOptions micro_batch_forward(const ForwardOptions& run, int64_t data_position, int world, int rank) {
  ForwardOptions o = run;
  o.dropout_key = derive_key(run.dropout_key, static_cast<uint64_t>(data_position * world + rank));
  return o;
}

class Objective {
 public:
  virtual ~Objective() = default;

  // Once per run, before the first step: opens its data sources (and loads what else it needs).
  virtual void start(const ObjectiveStart& s) = 0;

  // The data position, in global samples consumed (TrainState::data_cursor in every checkpoint); seek()
  // restores it on resume, so the run continues with the same batches. A pure count: whatever else decides
  // a batch (shuffling, sampling) must be a function of the seed and the position.
  virtual int64_t data_position() const = 0;
  virtual void seek(int64_t position) = 0;

  // This rank's next micro-batch and its loss (autograd on); advances the data position.
  virtual ObjectiveResult next_loss(Model& model) = 0;

  // Held-out evaluation (the loop calls it with autograd off; a collective: every rank calls it).
  // nullopt: nothing to evaluate (no validation data).
  virtual std::optional<ObjectiveEval> evaluate(Model& model) = 0;

  // Its part of the memory plan (after start(); `model` is the policy as the run trains it).
  virtual ObjectiveMemory memory(const Model& model) const = 0;

  // Model FLOPs per trained token, for MFU (a reference model's forward would add its share).
  virtual double flops_per_token(const Model& model, int64_t n_matmul_params) const = 0;

  // The tokenizer the data was prepared with (tokenizer.json or its folder; "": unknown). Checkpoints carry
  // a copy. Called on rank 0 only; may throw IoError when the recorded tokenizer is missing.
  virtual std::string data_tokenizer() const = 0;
};

// The usual shape of an objective: a data source of BatchT and a loss on one batch, kept apart so a test
// (or another objective) can compute the loss of a given batch.
template <class BatchT>
class BatchObjective : public Objective {
 public:
  virtual BatchT next_batch() = 0;                                          // this rank's next micro-batch
  virtual ObjectiveResult loss(Model& model, const BatchT& batch) = 0;
  ObjectiveResult next_loss(Model& model) final { return loss(model, next_batch()); }
};

}  // namespace lathe::train
