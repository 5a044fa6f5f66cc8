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

// A loss linear in the token log-probs lp [M] (values lpv): Σ_i w_i·lp_i + (value − Σ_i w_i·lp_i) -> [1], the
// gradient through the first term, the value exact.
Tensor linearised_loss(const Tensor& lp, std::span<const float> lpv, std::span<const double> w, double value) {
  const auto m = static_cast<int64_t>(w.size());
  std::vector<float> wf(static_cast<size_t>(m));
  double linear_part = 0;
  for (int64_t i = 0; i < m; ++i) {
    wf[i] = static_cast<float>(w[i]);
    linear_part += static_cast<double>(wf[i]) * static_cast<double>(lpv[i]);
  }
  const Tensor surrogate = reshape(linear(reshape(lp, {1, m}), Tensor::from_data({1, m}, wf)), {1});
  return add(surrogate, Tensor::from_data({1}, {static_cast<float>(value - linear_part)}));
}

// The policy's log-probs of the batch's targets [begin, end) (whole sequences) -> [end − begin].
Tensor range_logprobs(const Model& policy, const DpoBatch& b, int64_t begin, int64_t end, const ForwardOptions& o) {
  const auto n = static_cast<size_t>(end - begin);
  const auto at = static_cast<size_t>(begin);
  const ForwardBatch fb = ForwardBatch::packed(std::span<const int32_t>(b.tokens).subspan(at, n),
                                               std::span<const int32_t>(b.positions).subspan(at, n));
  const std::vector<int32_t> targets(b.targets.begin() + begin, b.targets.begin() + end);
  return policy.token_logprobs(fb, Tensor::from_data_i32({end - begin}, targets), o).logprobs;
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
  train::ObjectiveResult r{.loss = linearised_loss(lp, lpv, w, loss),
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

train::ObjectiveResult kto_loss(const Model& policy, const DpoBatch& b, const RefLogps& ref, const DpoLossConfig& c,
                                const ForwardOptions& o, dist::Communicator* comm) {
  const int64_t k = b.n_pairs();
  LATHE_CHECK_ARG(static_cast<int64_t>(ref.chosen.size()) == k && static_cast<int64_t>(ref.rejected.size()) == k &&
                      static_cast<int64_t>(b.desirable.size()) == k,
                  "[kto_loss] reference log-probs of ", ref.chosen.size(), " examples and ", b.desirable.size(),
                  " labels for a batch of ", k);
  // The examples are the batch's first tokens (autograd), their KL sequences the rest: z0 is a stop-gradient,
  // so their forward keeps no graph (TRL runs it under torch.no_grad).
  const auto n = static_cast<int64_t>(b.tokens.size());
  const auto n1 = static_cast<int64_t>(std::find_if(b.seq.begin(), b.seq.end(), [k](int32_t s) { return s >= k; }) -
                                       b.seq.begin());
  const Tensor lp = range_logprobs(policy, b, 0, n1, o);  // [n1]
  std::vector<float> lpv = lp.to_vector();
  {
    NoGradGuard ng;
    const std::vector<float> kl = range_logprobs(policy, b, n1, n, o).to_vector();
    lpv.insert(lpv.end(), kl.begin(), kl.end());
  }
  const std::vector<double> seq = sequence_logps(b, lpv);  // [2k]
  // z0 = max(0, mean of r(x, y') over the micro-batch's KL sequences, all ranks): TRL gathers the per-process
  // means (each rank holds as many) and clamps their mean.
  double kl[2] = {0, static_cast<double>(k)};
  for (int64_t j = 0; j < k; ++j) kl[0] += seq[k + j] - ref.rejected[j];
  if (comm != nullptr && comm->size() > 1) comm->all_reduce_sum(kl, 2);
  const double z0 = std::max(0.0, kl[0] / kl[1]);

  std::vector<double> w(static_cast<size_t>(n1), 0.0);
  std::vector<double> dseq(static_cast<size_t>(k));
  double loss = 0, sum_reward[2] = {0, 0}, sum_logp[2] = {0, 0}, count[2] = {0, 0};  // [undesirable, desirable]
  for (int64_t j = 0; j < k; ++j) {
    const bool d = b.desirable[j] != 0;
    const KtoExampleLoss e = kto_example_loss(c, seq[j], ref.chosen[j], z0, d);
    loss += e.loss / static_cast<double>(k);  // TRL: the mean over the batch's examples of w·(1 − σ(·))
    dseq[j] = e.d_logp / static_cast<double>(k);
    sum_reward[d] += e.reward;
    sum_logp[d] += seq[j];
    count[d] += 1;
  }
  for (int64_t i = 0; i < n1; ++i)
    if (b.completion[i]) w[i] = dseq[static_cast<size_t>(b.seq[i])];
  // Per-class means, weighted by the class's count (the loop's step value is then the mean over the step's
  // examples of that class); NaN with weight 0 when the micro-batch has none.
  const auto class_mean = [&](const double* sum, int cls) { return count[cls] > 0 ? sum[cls] / count[cls] : NAN; };
  const double chosen = class_mean(sum_reward, 1), rejected = class_mean(sum_reward, 0);
  const bool both = count[0] > 0 && count[1] > 0;
  const std::span<const float> lp_examples = std::span<const float>(lpv).first(static_cast<size_t>(n1));
  return train::ObjectiveResult{.loss = linearised_loss(lp, lp_examples, w, loss),
                                .tokens = n1,
                                .metrics = {{"rewards/chosen", chosen},
                                            {"rewards/rejected", rejected},
                                            {"rewards/margins", both ? chosen - rejected : NAN},
                                            {"logps/chosen", class_mean(sum_logp, 1)},
                                            {"logps/rejected", class_mean(sum_logp, 0)},
                                            {"kl", z0}},
                                .metric_weights = {count[1], count[0], both ? 1.0 : 0.0, count[1], count[0], 1.0}};
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
                  " implicit prompt); this file is ", dataset_kind_name(d.kind),
                  d.kind == DatasetKind::kUnpairedPreference ? " (dpo.loss_type: kto trains on it)" : "");
  std::vector<PreferencePair> out;
  out.reserve(d.examples.size());
  for (const Example& e : d.examples) out.push_back(enc.encode_preference(e));
  if (first_where) *first_where = d.examples[0].where;
  return out;
}

UnpairedExamples encode_unpaired_dataset(const std::string& path, const ExampleEncoder& enc, std::string* first_where) {
  const Dataset d = load_dataset(path);
  LATHE_CHECK_ARG(d.kind == DatasetKind::kUnpairedPreference, d.examples[0].where,
                  ": dpo.loss_type kto trains on unpaired preference rows (prompt, completion, label: true for a"
                  " desirable completion); this file is ", dataset_kind_name(d.kind));
  UnpairedExamples out;
  for (const Example& e : d.examples) {
    out.examples.push_back(enc.encode_unpaired(e));
    out.desirable.push_back(e.label ? 1 : 0);
  }
  if (first_where) *first_where = d.examples[0].where;
  return out;
}

DpoObjective::DpoObjective(DpoOptions opts, int world)
    : opts_(std::move(opts)), world_(world), order_(derive_key(opts_.seed, hash_name("dpo pairs")), opts_.shuffle) {
  LATHE_CHECK_ARG(opts_.batch_size % world == 0, "data.batch_size ", opts_.batch_size, " must be a multiple of the ",
                  world, " ranks (every rank trains on the same number of pairs)");
  LATHE_CHECK_ARG(!kto() || opts_.batch_size / world > 1, "dpo.loss_type kto needs more than one example per rank"
                  " in a micro-batch (its KL sequences pair each prompt with another example's completion there):"
                  " data.batch_size ", opts_.batch_size, " over ", world, " ranks");
}

DpoObjective::~DpoObjective() = default;

namespace {

// TRL's check of the class balance (KTOTrainer, Eq. 8 of arXiv 2402.01306): w_D·n_D / (w_U·n_U) in [1, 4/3],
// with a class of no examples counted as one. "" when it holds, else the warning with the weights that fix it.
std::string kto_balance_warning(const DpoLossConfig& c, const UnpairedExamples& d) {
  double n_d = 0;
  for (uint8_t x : d.desirable) n_d += x;
  const double n_u = std::max(1.0, static_cast<double>(d.size()) - n_d);
  n_d = std::max(1.0, n_d);
  const double ratio = c.desirable_weight * n_d / (c.undesirable_weight * n_u);
  if (ratio >= 1 && ratio <= 4.0 / 3.0) return "";
  return str_cat("warning: dpo kto: desirable_weight·n_desirable / (undesirable_weight·n_undesirable) = ",
                 ratio, " is outside [1, 4/3] (", n_d, " desirable, ", n_u, " undesirable examples); set EITHER"
                 " dpo.desirable_weight in [", c.undesirable_weight * n_u / n_d, ", ",
                 4.0 / 3.0 * c.undesirable_weight * n_u / n_d, "] or dpo.undesirable_weight in [",
                 0.75 * c.desirable_weight * n_d / n_u, ", ", c.desirable_weight * n_d / n_u, "] (docs/dpo.md)");
}

}  // namespace

void DpoObjective::start(const train::ObjectiveStart& s) {
  comm_ = &s.comm;
  rank_ = s.comm.rank();
  forward_ = s.forward;
  // The reference: no dropout, no recompute (no backward), the adapter off.
  ref_forward_ = ForwardOptions{.bf16 = forward_.bf16, .lora = false};
  const ModelConfig& mc = s.model.config();
  const ExampleEncoder enc = open_example_encoder("dpo", opts_.tokenizer, opts_.encoder, mc);
  const std::vector<int32_t> stops = stop_token_ids(enc.tokenizer(), mc.eos_token_ids, s.model.generation_config());
  std::string first;
  int64_t tokens = 0, n_seqs = 0;
  if (kto()) {
    train_kto_ = encode_unpaired_dataset(opts_.train_data, enc, &first);
    LATHE_CHECK_ARG(train_kto_.size() >= 2, first, ": dpo.loss_type kto needs at least 2 examples (the KL"
                    " sequences pair a prompt with another example's completion)");
    check_stop_token_trained(train_kto_.examples[0], stops, enc.tokenizer(), first);
    for (const TokenizedExample& e : train_kto_.examples) tokens += static_cast<int64_t>(e.size());
    n_seqs = static_cast<int64_t>(train_kto_.size());
    if (!opts_.val_data.empty()) val_kto_ = encode_unpaired_dataset(opts_.val_data, enc);
    int64_t n_d = 0;
    for (uint8_t x : train_kto_.desirable) n_d += x;
    s.note(str_cat("dpo data: ", train_kto_.size(), " unpaired examples (", n_d, " desirable, ",
                   n_seqs - n_d, " undesirable), ", tokens, " tokens; loss kto, beta ", opts_.loss.beta,
                   ", desirable_weight ", opts_.loss.desirable_weight, ", undesirable_weight ",
                   opts_.loss.undesirable_weight));
    if (const std::string w = kto_balance_warning(opts_.loss, train_kto_); !w.empty()) s.note(w);
  } else {
    train_ = encode_preference_dataset(opts_.train_data, enc, &first);
    check_stop_token_trained(train_[0].first, stops, enc.tokenizer(), first + " (chosen)");
    for (const auto& [c, r] : train_) tokens += static_cast<int64_t>(c.size() + r.size());
    n_seqs = static_cast<int64_t>(2 * train_.size());
    if (!opts_.val_data.empty()) val_ = encode_preference_dataset(opts_.val_data, enc);
    s.note(str_cat("dpo data: ", train_.size(), " pairs, ", tokens, " tokens; loss ", dpo_loss_name(opts_.loss.type),
                   ", beta ", opts_.loss.beta));
  }
  mean_pair_tokens_ = static_cast<double>(tokens) / static_cast<double>(n_seqs);
  const auto n_train = static_cast<size_t>(n_examples(false)), n_val = static_cast<size_t>(n_examples(true));
  train_cache_ = {std::vector<double>(n_train, kNotComputed), std::vector<double>(n_train, kNotComputed), {}};
  val_cache_ = {std::vector<double>(n_val, kNotComputed), std::vector<double>(n_val, kNotComputed), {}};
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
    ref += !opts_.cache_ref_logps ? "; its log-probs are recomputed every step (dpo.cache_ref_log_probs: false)"
           : kto() ? "; its log-probs are computed once per example and per KL pair (prompt, other answer) and"
                     " cached in memory"
                   : "; its log-probs are computed once per example and cached in memory";
  s.note("dpo reference: " + ref);
  seek(0);
}

int64_t DpoObjective::n_examples(bool val) const {
  if (kto()) return static_cast<int64_t>((val ? val_kto_ : train_kto_).size());
  return static_cast<int64_t>((val ? val_ : train_).size());
}

DpoBatch DpoObjective::batch_of(std::span<const int64_t> ids, bool val) const {
  if (kto()) return make_kto_batch(val ? val_kto_ : train_kto_, ids, opts_.encoder.max_length);
  const std::vector<PreferencePair>& data = val ? val_ : train_;
  std::vector<const PreferencePair*> pairs;
  for (int64_t id : ids) pairs.push_back(&data[static_cast<size_t>(id)]);
  return make_dpo_batch(pairs, ids);
}

void DpoObjective::seek(int64_t position) { position_ = position; }

DpoBatch DpoObjective::next_batch() {
  const int64_t per_rank = opts_.batch_size / world_;
  std::vector<int64_t> ids;
  for (int64_t g = position_ + rank_ * per_rank; g < position_ + (rank_ + 1) * per_rank; ++g)
    ids.push_back(order_.at(g, n_examples(false)));
  position_ += opts_.batch_size;
  return batch_of(ids, false);
}

RefLogps DpoObjective::reference_logps(const Model& policy, const DpoBatch& b, bool val) {
  const int64_t k = b.n_pairs();
  RefLogps r{std::vector<double>(static_cast<size_t>(k), 0.0), std::vector<double>(static_cast<size_t>(k), 0.0)};
  if (!opts_.needs_reference()) return r;
  const Model& ref = ref_model_ ? *ref_model_ : policy;
  Cache& cache = val ? val_cache_ : train_cache_;
  for (int64_t j = 0; j < k; ++j) {
    const auto id = static_cast<size_t>(b.pair_ids[j]);
    // KTO: the second sequence is the KL one, keyed by (example, the answer it borrows); DPO: the rejected.
    double* second = &cache.rejected[id];
    if (kto()) second = &cache.kl.try_emplace({b.pair_ids[j], b.kl_answer_ids[j]}, kNotComputed).first->second;
    if (!opts_.cache_ref_logps || std::isnan(cache.chosen[id]) || std::isnan(*second)) {
      if (kto()) {
        const UnpairedExamples& d = val ? val_kto_ : train_kto_;
        const TokenizedExample& x = d.examples[id];
        const PreferencePair p{x, kl_sequence(x, d.examples[static_cast<size_t>(b.kl_answer_ids[j])],
                                              opts_.encoder.max_length)};
        std::tie(cache.chosen[id], *second) = pair_reference_logps(ref, p, ref_forward_);
      } else {
        std::tie(cache.chosen[id], *second) = pair_reference_logps(ref, (val ? val_ : train_)[id], ref_forward_);
      }
      ++reference_forwards_;
    }
    r.chosen[j] = cache.chosen[id];
    r.rejected[j] = *second;
  }
  return r;
}

train::ObjectiveResult DpoObjective::batch_loss(const Model& model, const DpoBatch& b, const RefLogps& ref,
                                                const ForwardOptions& o, dist::Communicator* comm) const {
  return kto() ? kto_loss(model, b, ref, opts_.loss, o, comm) : dpo_loss(model, b, ref, opts_.loss, o);
}

train::ObjectiveResult DpoObjective::loss(Model& model, const DpoBatch& b) {
  const RefLogps ref = reference_logps(model, b);
  const ForwardOptions o = train::micro_batch_forward(forward_, position_, world_, rank_);
  return batch_loss(model, b, ref, o, comm_);  // KTO: z0 over the micro-batches of all ranks
}

std::optional<train::ObjectiveEval> DpoObjective::evaluate(Model& model) {
  const int64_t n_val = n_examples(true);
  if (n_val == 0) return std::nullopt;
  const int64_t B = opts_.batch_size;
  const int64_t n = std::min<int64_t>(opts_.eval_batches, std::max<int64_t>(1, n_val / B));
  ForwardOptions eval_forward = forward_;
  eval_forward.lora_dropout = false;  // evaluation sees the whole adapter
  // The reported metrics, weighted as the loop weighs them (KTO's per-class means over all the batches).
  const std::vector<std::string> keys =
      kto() ? std::vector<std::string>{"kl", "rewards/chosen", "rewards/rejected"}
            : std::vector<std::string>{"rewards/accuracies", "rewards/margins"};
  std::vector<double> sums(1 + 2 * keys.size(), 0.0);  // loss; Σ value·weight and Σ weight of each key
  for (int64_t i = rank_; i < n; i += world_) {  // the ranks share the (always the same) batches
    std::vector<int64_t> ids;
    for (int64_t j = 0; j < B; ++j) ids.push_back((i * B + j) % n_val);
    const DpoBatch b = batch_of(ids, true);
    // One rank holds the whole batch of B: z0 needs no all-reduce (and the ranks run different counts).
    const train::ObjectiveResult r = batch_loss(model, b, reference_logps(model, b, true), eval_forward, nullptr);
    sums[0] += static_cast<double>(r.loss.item());
    for (size_t m = 0; m < r.metrics.size(); ++m) {
      const auto key = std::find(keys.begin(), keys.end(), r.metrics[m].first);
      if (key == keys.end()) continue;
      const double w = r.metric_weights.empty() ? 1.0 : r.metric_weights[m];
      const auto at = static_cast<size_t>(key - keys.begin());
      if (w != 0) sums[1 + 2 * at] += w * r.metrics[m].second;
      sums[2 + 2 * at] += w;
    }
  }
  comm_->all_reduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
  train::ObjectiveEval e{.loss = sums[0] / static_cast<double>(n), .metrics = {}};
  for (size_t m = 0; m < keys.size(); ++m)
    e.metrics.emplace_back(keys[m], sums[2 + 2 * m] > 0 ? sums[1 + 2 * m] / sums[2 + 2 * m] : NAN);
  if (kto()) e.metrics.emplace_back("rewards/margins", e.metrics[1].second - e.metrics[2].second);
  return e;
}

train::ObjectiveMemory DpoObjective::memory(const Model&) const {
  int64_t longest = 0, tokens = 0;  // longest: one pair's two sequences, or one KTO example
  const auto count = [&](const TokenizedExample& e) { tokens += static_cast<int64_t>(e.size()); };
  for (const auto& [c, r] : train_) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(c.size() + r.size()));
    count(c);
    count(r);
  }
  for (const TokenizedExample& e : train_kto_.examples) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(e.size()));
    count(e);
  }
  for (const auto& [c, r] : val_) {
    count(c);
    count(r);
  }
  for (const TokenizedExample& e : val_kto_.examples) count(e);
  train::ObjectiveMemory m{
      .tokens = opts_.batch_size / world_ * longest, .fused_head = true, .varying_lengths = true, .items = {}};
  // The reference copy is loaded f32 (Model::load force_f32), as the policy.
  if (ref_model_) m.items.push_back({"reference model (f32, frozen)", train::memory_plan_weight_bytes(*ref_model_)});
  // Two doubles per example, train and val, allocated at start (KTO's KL pairs add map nodes as they are drawn).
  if (opts_.needs_reference() && opts_.cache_ref_logps)
    m.items.push_back({"cached reference log-probs",
                       16 * static_cast<int64_t>(train_cache_.chosen.size() + val_cache_.chosen.size())});
  m.items.push_back({"tokenized data", 5 * tokens});  // an int32 id and a uint8 mask per token
  return m;
}

double DpoObjective::flops_per_token(const Model& model, int64_t n_matmul_params) const {
  // The reference's forwards are cached (once per example): not counted, nor KTO's no-grad KL forwards.
  return train::causal_lm_flops_per_token(model.config(), n_matmul_params,
                                          std::max<int64_t>(1, std::llround(mean_pair_tokens_)));
}

}  // namespace lathe::posttrain
