#include "lathe/posttrain/sft_objective.h"

#include <algorithm>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/models/config.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/reshape.h"
#include "lathe/train/pretrain_objective.h"

namespace lathe::posttrain {

Tensor sft_loss(Model& model, const SftBatch& b, SftLoss kind, double weight, const ForwardOptions& o) {
  LATHE_CHECK_ARG(b.n_targets > 0, "[sft_loss] a micro-batch without trained tokens");
  const double denom = b.step_targets > 0 ? b.step_targets : static_cast<double>(b.n_targets);
  const auto n = static_cast<int64_t>(b.tokens.size());
  const Tensor targets = Tensor::from_data_i32({n}, b.targets);
  if (kind == SftLoss::kNll) {
    // The fused head's mean over this batch's targets, rescaled to sum / denom · weight.
    const Tensor mean = model.loss(b.forward_batch(), targets, o);
    return scale(mean, static_cast<float>(static_cast<double>(b.n_targets) * weight / denom));
  }
  // DFT: Σ_t −sg[p_t]·log p_t, as a dot product of log p [1, N] with constant weights [1, N] (a linear
  // with no gradient into the weights).
  const Tensor lp = model.token_logprobs(b.forward_batch(), targets, o).logprobs;  // [N]
  const std::vector<float> lpv = lp.to_vector();
  std::vector<float> w(static_cast<size_t>(n), 0.f);
  for (int64_t i = 0; i < n; ++i)
    if (b.targets[i] != -100) w[i] = static_cast<float>(-std::exp(static_cast<double>(lpv[i])) * weight / denom);
  return reshape(linear(reshape(lp, {1, n}), Tensor::from_data({1, n}, w)), {1});
}

std::vector<TokenizedExample> encode_sft_dataset(const std::string& path, const ExampleEncoder& enc,
                                                 std::string* first_where) {
  const Dataset d = load_dataset(path);
  LATHE_CHECK_ARG(d.kind == DatasetKind::kLanguageModeling || d.kind == DatasetKind::kPromptCompletion,
                  d.examples[0].where, ": SFT trains on language modelling (text, messages) or prompt-completion rows;"
                  " this file is ", dataset_kind_name(d.kind));
  std::vector<TokenizedExample> out;
  out.reserve(d.examples.size());
  for (const Example& e : d.examples) out.push_back(enc.encode_sft(e, d.kind));
  if (first_where) *first_where = d.examples[0].where;
  return out;
}

SftObjective::SftObjective(SftOptions opts, int world)
    : opts_(std::move(opts)), world_(world), order_(derive_key(opts_.seed, hash_name("sft rows")), opts_.shuffle) {
  LATHE_CHECK_ARG(opts_.batch_size % world == 0, "data.batch_size ", opts_.batch_size, " must be a multiple of the ",
                  world, " ranks (every rank trains on the same number of rows)");
}

SftObjective::~SftObjective() = default;

void SftObjective::start(const train::ObjectiveStart& s) {
  comm_ = &s.comm;
  rank_ = s.comm.rank();
  forward_ = s.forward;
  const ModelConfig& mc = s.model.config();
  const ExampleEncoder enc = open_example_encoder("sft", opts_.tokenizer, opts_.encoder, mc);
  std::string first;
  const std::vector<TokenizedExample> train = encode_sft_dataset(opts_.train_data, enc, &first);
  stop_tokens_ = stop_token_ids(enc.tokenizer(), mc.eos_token_ids, s.model.generation_config());
  check_stop_token_trained(train[0], stop_tokens_, enc.tokenizer(), first);
  int64_t tokens = 0, targets = 0;
  for (const auto& ex : train) {
    tokens += static_cast<int64_t>(ex.size());
    targets += ex.n_targets();
  }
  mean_example_tokens_ = static_cast<double>(tokens) / static_cast<double>(train.size());
  train_rows_ = build_rows(train, opts_.packing, opts_.encoder.max_length);
  s.note(str_cat("sft data: ", train.size(), " examples, ", tokens, " tokens, ", targets, " trained; ",
                 train_rows_.size(), " rows of up to ", opts_.encoder.max_length, " tokens"));
  if (!opts_.val_data.empty()) {
    // Evaluation never packs across examples: each is a row, the same ones every time.
    const std::vector<TokenizedExample> val = encode_sft_dataset(opts_.val_data, enc);
    val_rows_ = build_rows(val, Packing::kNone, opts_.encoder.max_length);
  }
  seek(0);
}

void SftObjective::seek(int64_t position) {
  position_ = position;
  micro_ = 0;  // checkpoints are taken between optimizer steps
}

const SftRow& SftObjective::row_at(int64_t g) {
  const auto n = static_cast<int64_t>(train_rows_.size());
  return train_rows_[static_cast<size_t>(order_.at(g, n))];
}

SftBatch SftObjective::next_batch() {
  const int64_t B = opts_.batch_size, per_rank = B / world_;
  if (micro_ == 0) {  // the denominator of the whole step: every micro-batch of every rank
    step_targets_ = 0;
    for (int64_t g = position_; g < position_ + B * opts_.grad_accum; ++g)
      step_targets_ += static_cast<double>(row_at(g).n_targets);
  }
  SftBatch b;
  for (int64_t g = position_ + rank_ * per_rank; g < position_ + (rank_ + 1) * per_rank; ++g) b.append(row_at(g));
  b.step_targets = step_targets_;
  position_ += B;
  micro_ = (micro_ + 1) % opts_.grad_accum;
  return b;
}

train::ObjectiveResult SftObjective::loss(Model& model, const SftBatch& b) {
  const double weight = static_cast<double>(opts_.grad_accum) * static_cast<double>(world_);
  const ForwardOptions o = train::micro_batch_forward(forward_, position_, world_, rank_);
  return {.loss = sft_loss(model, b, opts_.loss, weight, o),
          .tokens = static_cast<int64_t>(b.tokens.size()),
          .metrics = {{"trained_tokens", b.step_targets}}};
}

std::optional<train::ObjectiveEval> SftObjective::evaluate(Model& model) {
  if (val_rows_.empty()) return std::nullopt;
  const auto n_rows = static_cast<int64_t>(val_rows_.size());
  const int64_t B = opts_.batch_size;
  const int64_t n = std::min<int64_t>(opts_.eval_batches, std::max<int64_t>(1, n_rows / B));
  ForwardOptions eval_forward = forward_;
  eval_forward.lora_dropout = false;  // evaluation sees the whole adapter
  double sums[2] = {0, 0};  // summed NLL, trained tokens
  for (int64_t i = rank_; i < n; i += world_) {  // the ranks share the (always the same) batches
    SftBatch b;
    for (int64_t j = 0; j < B; ++j) b.append(val_rows_[static_cast<size_t>((i * B + j) % n_rows)]);
    sums[0] += static_cast<double>(sft_loss(model, b, SftLoss::kNll, 1.0, eval_forward).item()) * static_cast<double>(b.n_targets);
    sums[1] += static_cast<double>(b.n_targets);
  }
  comm_->all_reduce_sum(sums, 2);
  return train::ObjectiveEval{.loss = sums[0] / sums[1], .metrics = {}};
}

train::ObjectiveMemory SftObjective::memory(const Model&) const {
  int64_t longest = 0, tokens = 0;
  for (const SftRow& r : train_rows_) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.tokens.size()));
    tokens += static_cast<int64_t>(r.tokens.size());
  }
  for (const SftRow& r : val_rows_) tokens += static_cast<int64_t>(r.tokens.size());
  // A row holds tokens, positions and targets: three int32 per token.
  return {.tokens = opts_.batch_size / world_ * longest, .fused_head = true, .varying_lengths = true,
          .items = {{"tokenized data", 12 * tokens}}};
}

double SftObjective::flops_per_token(const Model& model, int64_t n_matmul_params) const {
  return train::causal_lm_flops_per_token(model.config(), n_matmul_params,
                                          std::max<int64_t>(1, std::llround(mean_example_tokens_)));
}

}  // namespace lathe::posttrain
