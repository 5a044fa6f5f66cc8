#include "lathe/train/pretrain_objective.h"

#include <algorithm>

#include "lathe/base/error.h"
#include "lathe/models/config.h"

namespace lathe::train {

PretrainOptions pretrain_options(const TrainConfig& c) {
  return {.train_data = c.train_data,
          .val_data = c.val_data,
          .seq_len = c.seq_len,
          .batch_size = c.batch_size,
          .seed = c.seed,
          .shuffle = c.shuffle,
          .document_masking = c.document_masking,
          .delimiter_id = c.delimiter_id,
          .eval_batches = c.eval_batches};
}

double causal_lm_flops_per_token(const ModelConfig& cfg, int64_t n_matmul, int64_t T) {
  double attn = 0;
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const int window = l < static_cast<int64_t>(cfg.layers.size()) ? cfg.layers[l].window : 0;
    double k_mean = 0;  // mean keys visible per query: mean_i min(i + 1, W)
    for (int64_t i = 0; i < T; ++i) k_mean += static_cast<double>(window > 0 ? std::min<int64_t>(i + 1, window) : i + 1);
    k_mean /= static_cast<double>(T);
    attn += 12.0 * static_cast<double>(cfg.q_dim()) * k_mean;
  }
  return 6.0 * static_cast<double>(n_matmul) + attn;
}

namespace {

// The forward batch of a loader batch: B rows of T, or with document masking the packed documents
// (positions restart at each document, so each one is a sequence of its own).
ForwardBatch forward_batch(const Batch& b) {
  if (b.positions.empty()) return ForwardBatch::rows(Tensor::from_data_i32({b.batch, b.seq_len}, b.inputs));
  return ForwardBatch::packed(b.inputs, b.positions, b.seq_len);
}

}  // namespace

PretrainObjective::PretrainObjective(PretrainOptions opts, int world) : opts_(std::move(opts)) {
  LATHE_CHECK_ARG(opts_.batch_size % world == 0, "data.batch_size ", opts_.batch_size, " must be a multiple of the ",
                  world, " ranks (every rank trains on the same number of sequences)");
}

void PretrainObjective::start(const ObjectiveStart& s) {
  comm_ = &s.comm;
  forward_ = s.forward;
  const uint64_t vocab = static_cast<uint64_t>(s.model.config().vocab_size);
  manifest_ = read_manifest(opts_.train_data);
  int32_t delimiter = -1;  // document masking needs the token that opens each document
  if (opts_.document_masking) {
    delimiter = opts_.delimiter_id;
    if (delimiter < 0) {
      LATHE_CHECK_ARG(manifest_.is_object() && manifest_.contains("delimiter_id"), opts_.train_data,
                      ": data.document_masking needs the document delimiter: no manifest from `lathe data prepare`"
                      " next to the shards; set data.delimiter_id");
      delimiter = manifest_["delimiter_id"].get<int32_t>();  // read_manifest checked: an id of the vocabulary
    }
  }
  train_ = std::make_unique<DataLoader>(DataLoaderOptions{.shards = find_shards(opts_.train_data, "train", s.note),
                                                          .seq_len = opts_.seq_len,
                                                          .seed = opts_.seed,
                                                          .shuffle = opts_.shuffle,
                                                          .vocab_limit = vocab,
                                                          .delimiter_id = delimiter});
  if (!opts_.val_data.empty())
    val_ = std::make_unique<DataLoader>(DataLoaderOptions{.shards = find_shards(opts_.val_data, "val", s.note),
                                                          .seq_len = opts_.seq_len,
                                                          .shuffle = false,
                                                          .vocab_limit = vocab,
                                                          .delimiter_id = delimiter});
}

Batch PretrainObjective::next_batch() { return train_->next(opts_.batch_size, comm_->rank(), comm_->size()); }

ObjectiveResult PretrainObjective::loss(Model& model, const Batch& b) {
  Tensor l = model.loss(forward_batch(b), Tensor::from_data_i32({b.batch * b.seq_len}, b.targets), forward_);
  return {.loss = std::move(l), .tokens = b.batch * b.seq_len, .metrics = {}};
}

std::optional<ObjectiveEval> PretrainObjective::evaluate(Model& model) {
  if (!val_) return std::nullopt;
  const int64_t B = opts_.batch_size;
  const int64_t n = std::min<int64_t>(opts_.eval_batches, std::max<int64_t>(1, val_->samples_per_epoch() / B));
  if (n <= 0) return std::nullopt;  // no eval batches: nothing to average (0 / 0 would log a NaN)
  double sum = 0;
  for (int64_t i = comm_->rank(); i < n; i += comm_->size())  // the ranks share the (always the same) batches
    sum += loss(model, val_->batch_at((i * B) % val_->samples_per_epoch(), B)).loss.item();
  comm_->all_reduce_sum(&sum, 1);
  return ObjectiveEval{.loss = sum / static_cast<double>(n), .metrics = {}};
}

ObjectiveMemory PretrainObjective::memory(const Model&) const {
  return {.tokens = opts_.batch_size / comm_->size() * opts_.seq_len, .fused_head = true, .varying_lengths = false,
          .items = {}};
}

double PretrainObjective::flops_per_token(const Model& model, int64_t n_matmul_params) const {
  return causal_lm_flops_per_token(model.config(), n_matmul_params, opts_.seq_len);
}

std::string PretrainObjective::data_tokenizer() const { return manifest_tokenizer(manifest_); }

}  // namespace lathe::train
