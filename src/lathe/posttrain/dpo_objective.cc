#include "lathe/posttrain/dpo_objective.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/models/config.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/reshape.h"
#include "lathe/train/pretrain_objective.h"

namespace lathe::posttrain {

namespace {

constexpr double kNotComputed = std::numeric_limits<double>::quiet_NaN();

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

train::ObjectiveResult dpo_loss(const Model& policy, const DpoBatch& b, const RefLogps& ref, const DpoLossConfig& c,
                                const ForwardOptions& o) {
  const int64_t k = b.n_pairs();
  LATHE_CHECK_ARG(static_cast<int64_t>(ref.chosen.size()) == k && static_cast<int64_t>(ref.rejected.size()) == k,
                  "[dpo_loss] reference log-probs of ", ref.chosen.size(), " pairs for a batch of ", k);
  const auto n = static_cast<int64_t>(b.tokens.size());
  const Tensor lp = policy.token_logprobs(b.forward_batch(), Tensor::from_data_i32({n}, b.targets), o).logprobs;  // [N]
  const std::vector<float> lpv = lp.to_vector();
  const std::vector<double> seq = sequence_logps(b, lpv);  // [2k]
  const bool norm = loss_length_normalised(c.type);
  const auto scaled = [&](double x, int64_t s) { return norm ? x / static_cast<double>(b.completion_len[s]) : x; };

  // Per-sequence ∂loss/∂(sum of its response log-probs), and the metrics.
  std::vector<double> dseq(static_cast<size_t>(2 * k), 0.0);
  std::vector<double> rc, rr, acc, margin, lc, lr;
  double loss = 0;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t sc = j, sr = k + j;
    const PairLogps p{.chosen = scaled(seq[sc], sc), .rejected = scaled(seq[sr], sr),
                      .ref_chosen = scaled(ref.chosen[j], sc), .ref_rejected = scaled(ref.rejected[j], sr)};
    const PairLoss pl = dpo_pair_loss(c, p);
    loss += pl.loss / static_cast<double>(k);
    dseq[sc] = scaled(pl.d_chosen, sc) / static_cast<double>(k);  // d/dsum = d/dmean / |y| when normalised
    dseq[sr] = scaled(pl.d_rejected, sr) / static_cast<double>(k);
    rc.push_back(pl.reward_chosen);
    rr.push_back(pl.reward_rejected);
    margin.push_back(pl.reward_chosen - pl.reward_rejected);
    acc.push_back(pl.reward_chosen > pl.reward_rejected ? 1.0 : 0.0);
    lc.push_back(p.chosen);
    lr.push_back(p.rejected);
  }
  // Per-token weights [N]: the pair terms on response tokens, and the NLL terms on the chosen sequences
  // (RPO: response tokens; ORPO: every target, prompt included; each a token mean over the batch).
  const bool orpo = c.type == DpoLossType::kOrpo, nll_term = orpo || c.rpo_alpha > 0;
  std::vector<double> w(static_cast<size_t>(n), 0.0);
  double nll_tokens = 0;
  for (int64_t i = 0; i < n; ++i)
    if (b.seq[i] < k && b.targets[i] != -100 && (orpo || b.completion[i])) nll_tokens += 1;
  const double nll_weight = orpo ? 1.0 : c.rpo_alpha;
  double nll = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (b.completion[i]) w[i] = dseq[static_cast<size_t>(b.seq[i])];
    if (nll_term && b.seq[i] < k && b.targets[i] != -100 && (orpo || b.completion[i])) {
      w[i] -= nll_weight / nll_tokens;
      nll -= static_cast<double>(lpv[i]) / nll_tokens;
    }
  }
  if (nll_term) loss += nll_weight * nll;
  // loss = Σ_i w_i·lp_i + (value − Σ_i w_i·lp_i): the gradient through the first term, the value exact.
  std::vector<float> wf(static_cast<size_t>(n));
  double linear_part = 0;
  for (int64_t i = 0; i < n; ++i) {
    wf[i] = static_cast<float>(w[i]);
    linear_part += static_cast<double>(wf[i]) * static_cast<double>(lpv[i]);
  }
  const Tensor surrogate = reshape(linear(reshape(lp, {1, n}), Tensor::from_data({1, n}, wf)), {1});
  const Tensor value = add(surrogate, Tensor::from_data({1}, {static_cast<float>(loss - linear_part)}));
  train::ObjectiveResult r{.loss = value,
                           .tokens = n,
                           .metrics = {{"rewards/chosen", mean(rc)},
                                       {"rewards/rejected", mean(rr)},
                                       {"rewards/accuracies", mean(acc)},
                                       {"rewards/margins", mean(margin)},
                                       {"logps/chosen", mean(lc)},
                                       {"logps/rejected", mean(lr)}}};
  if (nll_term) r.metrics.emplace_back("nll_loss", nll);
  return r;
}

std::pair<double, double> pair_reference_logps(const Model& ref, const PreferencePair& p, const ForwardOptions& o) {
  NoGradGuard ng;
  const PreferencePair* one[] = {&p};
  const int64_t id = 0;
  const DpoBatch b = make_dpo_batch(one, std::span<const int64_t>(&id, 1));
  const auto n = static_cast<int64_t>(b.tokens.size());
  const std::vector<float> lp =
      ref.token_logprobs(b.forward_batch(), Tensor::from_data_i32({n}, b.targets), o).logprobs.to_vector();
  const std::vector<double> s = sequence_logps(b, lp);
  return {s[0], s[1]};
}

std::vector<PreferencePair> encode_preference_dataset(const std::string& path, const ExampleEncoder& enc,
                                                      std::string* first_where) {
  const Dataset d = load_dataset(path);
  LATHE_CHECK_ARG(d.kind == DatasetKind::kPreference, d.examples[0].where,
                  ": DPO trains on preference rows (prompt, chosen, rejected; or chosen and rejected with an"
                  " implicit prompt); this file is ", dataset_kind_name(d.kind));
  std::vector<PreferencePair> out;
  out.reserve(d.examples.size());
  for (const Example& e : d.examples) out.push_back(enc.encode_preference(e));
  if (first_where) *first_where = d.examples[0].where;
  return out;
}

DpoObjective::DpoObjective(DpoOptions opts, int world)
    : opts_(std::move(opts)), world_(world), order_(derive_key(opts_.seed, hash_name("dpo pairs")), opts_.shuffle) {
  LATHE_CHECK_ARG(opts_.batch_size % world == 0, "data.batch_size ", opts_.batch_size, " must be a multiple of the ",
                  world, " ranks (every rank trains on the same number of pairs)");
}

DpoObjective::~DpoObjective() = default;

void DpoObjective::start(const train::ObjectiveStart& s) {
  comm_ = &s.comm;
  rank_ = s.comm.rank();
  forward_ = s.forward;
  // The reference: no dropout, no recompute (no backward), the adapter off.
  ref_forward_ = ForwardOptions{.bf16 = forward_.bf16, .lora = false};
  const ModelConfig& mc = s.model.config();
  const ExampleEncoder enc = open_example_encoder("dpo", opts_.tokenizer, opts_.encoder, mc);
  std::string first;
  train_ = encode_preference_dataset(opts_.train_data, enc, &first);
  const std::vector<int32_t> stops = stop_token_ids(enc.tokenizer(), mc.eos_token_ids, s.model.generation_config());
  check_stop_token_trained(train_[0].first, stops, enc.tokenizer(), first + " (chosen)");
  int64_t tokens = 0;
  for (const auto& [c, r] : train_) tokens += static_cast<int64_t>(c.size() + r.size());
  mean_pair_tokens_ = static_cast<double>(tokens) / static_cast<double>(2 * train_.size());
  if (!opts_.val_data.empty()) val_ = encode_preference_dataset(opts_.val_data, enc);
  train_cache_ = {std::vector<double>(train_.size(), kNotComputed), std::vector<double>(train_.size(), kNotComputed)};
  val_cache_ = {std::vector<double>(val_.size(), kNotComputed), std::vector<double>(val_.size(), kNotComputed)};
  s.note(str_cat("dpo data: ", train_.size(), " pairs, ", tokens, " tokens; loss ", dpo_loss_name(opts_.loss.type),
                 ", beta ", opts_.loss.beta));
  std::string ref;
  if (!opts_.needs_reference()) {
    ref = opts_.reference_free ? "none (reference-free: log-probs 0)" : "none (the loss compares the policy's own log-probs)";
  } else if (opts_.lora && opts_.ref_model.empty()) {
    ref = "the base model with the adapter off (no second copy)";
  } else {
    const std::string path = opts_.ref_model.empty() ? opts_.model_base : opts_.ref_model;
    ref_model_ = Model::load(path, {.force_f32 = true});
    ref = "a frozen copy of " + path;
  }
  if (opts_.needs_reference())
    ref += opts_.cache_ref_logps ? "; its log-probs are computed once per example and cached in memory"
                                 : "; its log-probs are recomputed every step (dpo.cache_ref_log_probs: false)";
  s.note("dpo reference: " + ref);
  seek(0);
}

void DpoObjective::seek(int64_t position) { position_ = position; }

int64_t DpoObjective::pair_at(int64_t g) {
  const auto n = static_cast<int64_t>(train_.size());
  return order_.at(g, n);
}

DpoBatch DpoObjective::next_batch() {
  const int64_t per_rank = opts_.batch_size / world_;
  std::vector<const PreferencePair*> pairs;
  std::vector<int64_t> ids;
  for (int64_t g = position_ + rank_ * per_rank; g < position_ + (rank_ + 1) * per_rank; ++g) {
    ids.push_back(pair_at(g));
    pairs.push_back(&train_[static_cast<size_t>(ids.back())]);
  }
  position_ += opts_.batch_size;
  return make_dpo_batch(pairs, ids);
}

RefLogps DpoObjective::reference_logps(const Model& policy, const DpoBatch& b, bool val) {
  const int64_t k = b.n_pairs();
  RefLogps r{std::vector<double>(static_cast<size_t>(k), 0.0), std::vector<double>(static_cast<size_t>(k), 0.0)};
  if (!opts_.needs_reference()) return r;
  const Model& ref = ref_model_ ? *ref_model_ : policy;
  Cache& cache = val ? val_cache_ : train_cache_;
  const std::vector<PreferencePair>& pairs = val ? val_ : train_;
  for (int64_t j = 0; j < k; ++j) {
    const auto id = static_cast<size_t>(b.pair_ids[j]);
    if (!opts_.cache_ref_logps || std::isnan(cache.chosen[id])) {
      std::tie(cache.chosen[id], cache.rejected[id]) = pair_reference_logps(ref, pairs[id], ref_forward_);
      ++reference_forwards_;
    }
    r.chosen[j] = cache.chosen[id];
    r.rejected[j] = cache.rejected[id];
  }
  return r;
}

train::ObjectiveResult DpoObjective::loss(Model& model, const DpoBatch& b) {
  const RefLogps ref = reference_logps(model, b);
  const ForwardOptions o = train::micro_batch_forward(forward_, position_, world_, rank_);
  return dpo_loss(model, b, ref, opts_.loss, o);
}

std::optional<train::ObjectiveEval> DpoObjective::evaluate(Model& model) {
  if (val_.empty()) return std::nullopt;
  const auto n_pairs = static_cast<int64_t>(val_.size());
  const int64_t B = opts_.batch_size;
  const int64_t n = std::min<int64_t>(opts_.eval_batches, std::max<int64_t>(1, n_pairs / B));
  ForwardOptions eval_forward = forward_;
  eval_forward.lora_dropout = false;  // evaluation sees the whole adapter
  double sums[3] = {0, 0, 0};  // loss, reward accuracy, reward margin (summed over batches)
  for (int64_t i = rank_; i < n; i += world_) {  // the ranks share the (always the same) batches
    std::vector<const PreferencePair*> pairs;
    std::vector<int64_t> ids;
    for (int64_t j = 0; j < B; ++j) {
      ids.push_back((i * B + j) % n_pairs);
      pairs.push_back(&val_[static_cast<size_t>(ids.back())]);
    }
    const DpoBatch b = make_dpo_batch(pairs, ids);
    const train::ObjectiveResult r = dpo_loss(model, b, reference_logps(model, b, true), opts_.loss, eval_forward);
    sums[0] += static_cast<double>(r.loss.item());
    sums[1] += r.metrics[2].second;
    sums[2] += r.metrics[3].second;
  }
  comm_->all_reduce_sum(sums, 3);
  const auto nb = static_cast<double>(n);
  return train::ObjectiveEval{.loss = sums[0] / nb,
                              .metrics = {{"rewards/accuracies", sums[1] / nb}, {"rewards/margins", sums[2] / nb}}};
}

double DpoObjective::flops_per_token(const Model& model, int64_t n_matmul_params) const {
  // The reference's forwards are cached (once per example): not counted.
  return train::causal_lm_flops_per_token(model.config(), n_matmul_params,
                                          std::max<int64_t>(1, std::llround(mean_pair_tokens_)));
}

}  // namespace lathe::posttrain
