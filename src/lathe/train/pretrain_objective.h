// Pre-training as an Objective (train/objective.h): next-token cross-entropy on windows of token shards
// (train/data_loader.h), optionally with attention masked at document boundaries.
//   loss = mean over the micro-batch's B/W x T targets of -log softmax(model(inputs))[target]
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "lathe/train/data_loader.h"
#include "lathe/train/objective.h"
#include "lathe/train/recipe.h"

namespace lathe::train {

// The objective's recipe section: data.* (less grad_accum, which the loop reads) and eval.batches.
struct PretrainOptions {
  std::string train_data, val_data;  // shard folders or name prefixes; val "" = no evaluation
  int64_t seq_len = 0;               // T
  int64_t batch_size = 0;            // sequences per micro-batch, summed over ranks
  uint64_t seed = 0;                 // data order
  bool shuffle = true;
  bool document_masking = false;
  int32_t delimiter_id = -1;  // -1: from the data manifest
  int64_t eval_batches = 8;   // validation batches of batch_size sequences, always the same ones
};
PretrainOptions pretrain_options(const TrainConfig& c);

// FLOPs per trained token of a causal LM (specs/pretrain.md §3): 6 N_matmul + 12 sum_layers d_attn k_mean.
double causal_lm_flops_per_token(const ModelConfig& cfg, int64_t n_matmul_params, int64_t seq_len);

class PretrainObjective final : public BatchObjective<Batch> {
 public:
  // Throws InvalidArgument unless batch_size is a multiple of `world` (every rank trains on as many rows).
  PretrainObjective(PretrainOptions opts, int world);

  void start(const ObjectiveStart& s) override;
  int64_t data_position() const override { return train_->cursor(); }
  void seek(int64_t position) override { train_->seek(position); }
  Batch next_batch() override;
  ObjectiveResult loss(Model& model, const Batch& batch) override;
  std::optional<ObjectiveEval> evaluate(Model& model) override;
  // B/W windows of T tokens; the shards are read window by window, not held.
  ObjectiveMemory memory(const Model& model) const override;
  double flops_per_token(const Model& model, int64_t n_matmul_params) const override;
  std::string data_tokenizer() const override;

 private:
  PretrainOptions opts_;
  dist::Communicator* comm_ = nullptr;  // set by start()
  ForwardOptions forward_;              // set by start(): the run options of every forward
  nlohmann::json manifest_;             // null without `lathe data prepare`'s manifest
  std::unique_ptr<DataLoader> train_;
  std::unique_ptr<DataLoader> val_;     // none without validation data
};

}  // namespace lathe::train
