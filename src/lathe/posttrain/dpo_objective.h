// The DPO family as an Objective (train/objective.h) on the shared TrainLoop (specs/posttrain.md §4): each
// micro-batch is k preference pairs; the loss is the mean over them of dpo_pair_loss (posttrain/dpo_loss.h)
// on the sequence log-probs log π(y|x) = Σ of the response tokens' log-probs (the prompt masked), plus
// rpo_alpha · the chosen responses' token-mean NLL (RPO), or for ORPO the NLL of prompt + chosen. Every pair
// weighs the same, so the loop's mean over micro-batches and ranks is the step's pair mean.
// The policy's log-probs come from one forward of the 2k sequences through the fused head, with autograd;
// the loss is made linear in them (per-token weights ∂loss/∂log p, plus a constant for the value), so
// backward needs no [k]-sized graph of its own. The reference (no grad): with LoRA, the same model with the
// adapter off (ForwardOptions.lora = false: no second copy of the weights); otherwise a frozen copy of
// model.base or dpo.ref_model; none when reference-free, SimPO or ORPO. A frozen reference never changes,
// so each example's reference log-probs are computed once, in a forward of their own (the same bits
// whatever the batch), and cached in memory.
// KTO (dpo.loss_type kto) is the same objective on unpaired examples: a micro-batch holds k examples and
// their k KL sequences (dpo_batch.h), the loss is kto_loss; the reference cache adds the KL sequences.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lathe/posttrain/epoch_order.h"
#include "lathe/posttrain/dpo_batch.h"
#include "lathe/posttrain/dpo_options.h"
#include "lathe/train/objective.h"

namespace lathe::posttrain {

// Reference log-probs of a batch's pairs (raw sums over response tokens; 0 when reference-free).
struct RefLogps {
  std::vector<double> chosen, rejected;  // [k]
};

// The loss of micro-batch `b` under `policy` (autograd as the caller's grad mode) -> ObjectiveResult with
// loss [1] and the metrics rewards/{chosen,rejected,accuracies,margins}, logps/{chosen,rejected} (TRL's
// names; means over the pairs) and, with an NLL term, nll_loss.
train::ObjectiveResult dpo_loss(const Model& policy, const DpoBatch& b, const RefLogps& ref, const DpoLossConfig& c,
                                const ForwardOptions& o = {});

// KTO (specs/posttrain.md §4) on a make_kto_batch batch: `ref.chosen` the examples' reference log-probs,
// `ref.rejected` their KL sequences'. z0 = max(0, mean over the KL sequences of log π_θ − log π_ref), the
// mean taken over the micro-batches of all ranks of `comm` (null: this batch only); the policy's KL forward
// keeps no graph. The loss is the mean over the examples of kto_example_loss -> loss [1], metrics
// rewards/{chosen,rejected,margins}, logps/{chosen,rejected} (per-class means, weighted by the class's count:
// ObjectiveResult::metric_weights) and kl (z0).
train::ObjectiveResult kto_loss(const Model& policy, const DpoBatch& b, const RefLogps& ref, const DpoLossConfig& c,
                                const ForwardOptions& o = {}, dist::Communicator* comm = nullptr);

// The reference log-probs {chosen, rejected} of one pair, in a forward of its own (no grad).
std::pair<double, double> pair_reference_logps(const Model& ref, const PreferencePair& p, const ForwardOptions& o);

// Reads, parses and tokenizes a preference dataset (prompt/chosen/rejected, explicit or implicit prompt).
std::vector<PreferencePair> encode_preference_dataset(const std::string& path, const ExampleEncoder& enc,
                                                      std::string* first_where = nullptr);

// Reads, parses and tokenizes an unpaired preference dataset (prompt/completion/label) for KTO.
UnpairedExamples encode_unpaired_dataset(const std::string& path, const ExampleEncoder& enc,
                                         std::string* first_where = nullptr);

class DpoObjective final : public train::BatchObjective<DpoBatch> {
 public:
  // Throws InvalidArgument unless batch_size is a multiple of `world` (KTO: of at least 2 per rank).
  DpoObjective(DpoOptions opts, int world);
  ~DpoObjective() override;

  // Reads and tokenizes the data, checks the first chosen answer trains its end token, loads the reference.
  void start(const train::ObjectiveStart& s) override;
  int64_t data_position() const override { return position_; }
  void seek(int64_t position) override;
  DpoBatch next_batch() override;
  train::ObjectiveResult loss(Model& model, const DpoBatch& batch) override;
  std::optional<train::ObjectiveEval> evaluate(Model& model) override;
  // B/W pairs (2 sequences each; KTO: examples, their KL sequences run without autograd), the frozen
  // reference copy, the cached reference log-probs, the tokenized data.
  train::ObjectiveMemory memory(const Model& model) const override;
  double flops_per_token(const Model& model, int64_t n_matmul_params) const override;
  std::string data_tokenizer() const override { return opts_.tokenizer; }

  // The reference log-probs of b's pairs (training pairs; val: the validation set's): cached, or computed.
  RefLogps reference_logps(const Model& policy, const DpoBatch& b, bool val = false);
  int64_t reference_forwards() const { return reference_forwards_; }  // pairs run through the reference
  const std::vector<PreferencePair>& train_pairs() const { return train_; }

 private:
  struct Cache {
    std::vector<double> chosen, rejected;  // NaN: not computed yet (KTO: chosen = the examples')
    // KTO: (example, index of the answer it borrows) -> the KL sequence's reference log-prob. The KL pairs
    // follow the batches, so with shuffling most are new each epoch.
    std::map<std::pair<int64_t, int64_t>, double> kl;
  };
  bool kto() const { return opts_.loss.type == DpoLossType::kKto; }
  int64_t n_examples(bool val) const;  // pairs, or KTO's unpaired examples
  DpoBatch batch_of(std::span<const int64_t> ids, bool val) const;
  train::ObjectiveResult batch_loss(const Model& model, const DpoBatch& b, const RefLogps& ref,
                                    const ForwardOptions& o, dist::Communicator* comm) const;

  DpoOptions opts_;
  int world_ = 1, rank_ = 0;
  ForwardOptions forward_, ref_forward_;
  std::unique_ptr<Model> ref_model_;  // a frozen copy (full fine-tuning or dpo.ref_model); null otherwise
  std::vector<PreferencePair> train_, val_;   // preference pairs (not KTO)
  UnpairedExamples train_kto_, val_kto_;      // KTO's examples
  Cache train_cache_, val_cache_;
  int64_t reference_forwards_ = 0;
  double mean_pair_tokens_ = 1;
  int64_t position_ = 0;      // global pairs consumed
  EpochOrder order_;           // the example at each global position (shuffled per epoch)
  dist::Communicator* comm_ = nullptr;
};

}  // namespace lathe::posttrain
