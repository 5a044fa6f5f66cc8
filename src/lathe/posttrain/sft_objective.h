// Supervised fine-tuning as an Objective (train/objective.h), on the shared TrainLoop (specs/posttrain.md §2):
//   L = − Σ_{b,t} m[b,t] · log p_θ(x[b,t+1] | x[b,≤t])  /  Σ_{b,t} m[b,t]
// with the denominator the trained-token count of the whole optimizer step (all micro-batches, all ranks),
// as TRL's num_items_in_batch and Tunix's WeightedMetric: a micro-batch's loss is its token sum scaled by
// grad_accum · world / step_count, so the loop's mean over micro-batches and ranks is the step's token mean.
// Each rank holds the whole (tokenized) dataset, so the step's count needs no collective.
// loss_type dft (Dynamic Fine-Tuning, arXiv 2508.05629): each token's −log p weighted by sg[p].
// The log-probabilities come from the model's fused, vocabulary-chunked head: no [N, V] logits are held.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/posttrain/dataset.h"
#include "lathe/posttrain/epoch_order.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/posttrain/sft_options.h"
#include "lathe/posttrain/sft_rows.h"
#include "lathe/train/objective.h"

namespace lathe::posttrain {

// The loss of one micro-batch: the trained tokens' summed NLL (or DFT loss) times
// `weight` / batch.step_targets (batch.n_targets when step_targets is 0) -> [1]. weight = grad_accum · world
// makes the loop's average the step's per-token mean.
Tensor sft_loss(Model& model, const SftBatch& batch, SftLoss loss, double weight, const ForwardOptions& o = {});

class SftObjective final : public train::BatchObjective<SftBatch> {
 public:
  // Throws InvalidArgument unless batch_size is a multiple of `world`.
  SftObjective(SftOptions opts, int world);
  ~SftObjective() override;

  // Reads and tokenizes the data (every bad row is an error naming its file and line), checks that the first
  // example trains its end-of-answer token and that max_length fits the model, builds the rows.
  void start(const train::ObjectiveStart& s) override;
  int64_t data_position() const override { return position_; }
  void seek(int64_t position) override;
  SftBatch next_batch() override;
  train::ObjectiveResult loss(Model& model, const SftBatch& batch) override;
  std::optional<train::ObjectiveEval> evaluate(Model& model) override;
  // B/W rows of at most the longest row's tokens; the tokenized rows (train and val) are the data item.
  train::ObjectiveMemory memory(const Model& model) const override;
  double flops_per_token(const Model& model, int64_t n_matmul_params) const override;
  std::string data_tokenizer() const override { return opts_.tokenizer; }

  const std::vector<SftRow>& train_rows() const { return train_rows_; }
  // The ids that end an answer (stop_token_ids: the tokenizer's EOS and the model's), known after start().
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }

 private:
  const SftRow& row_at(int64_t global_index);  // the epoch's order (shuffled per epoch when asked)

  SftOptions opts_;
  int world_ = 1, rank_ = 0;
  ForwardOptions forward_;
  std::vector<SftRow> train_rows_, val_rows_;
  std::vector<int32_t> stop_tokens_;
  double mean_example_tokens_ = 1;
  int64_t position_ = 0;       // global rows consumed
  int64_t micro_ = 0;          // micro-batch of the current step
  double step_targets_ = 0;    // trained targets of the current step
  EpochOrder order_;           // the example at each global position (shuffled per epoch)
  dist::Communicator* comm_ = nullptr;
};

// Reads, parses and tokenizes an SFT dataset (language modelling or prompt-completion rows).
std::vector<TokenizedExample> encode_sft_dataset(const std::string& path, const ExampleEncoder& enc,
                                                 std::string* first_where = nullptr);

}  // namespace lathe::posttrain
