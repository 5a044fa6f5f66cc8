#include "lathe/posttrain/distill_objective.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/ops/linear.h"
#include "lathe/posttrain/onpolicy_batch.h"

namespace lathe::posttrain {

void check_teacher_vocab(const Model& student, const Model& teacher, const std::string& teacher_dir) {
  const int64_t vs = student.config().vocab_size, vt = teacher.config().vocab_size;
  LATHE_CHECK_ARG(vs == vt, "distill.teacher ", teacher_dir, ": the teacher's vocab_size is ", vt,
                  " but the student's is ", vs, "; logit distillation compares the two distributions token by"
                  " token, so both models need the same vocabulary");
}

Tensor teacher_head(const Model& teacher, const Tensor& hidden) {
  NoGradGuard no_grad;
  Tensor z = linear(hidden.contiguous(), teacher.weights().lm_head.weight);  // [r, V]; weight f32 or 16-bit
  if (const float cap = teacher.config().final_softcap; cap > 0) {
    float* p = z.data<float>();
    for (int64_t i = 0; i < z.numel(); ++i) p[i] = cap * std::tanh(p[i] / cap);
  }
  return z;
}

namespace {

// The student's side of distill_loss: its hidden states, the row weights, the head against `teacher`.
Tensor student_distill_loss(Model& student, const TeacherLogitsFn& teacher, const SftBatch& b,
                            const DistillLossOptions& o, double weight, const ForwardOptions& fo, DistillSums* sums) {
  const double denom = b.step_targets > 0 ? b.step_targets : static_cast<double>(b.n_targets);
  const Tensor hs = student.hidden(b.forward_batch(), fo);  // [N, C]
  std::vector<double> w(b.targets.size(), 0.0);
  for (size_t i = 0; i < w.size(); ++i)
    if (b.targets[i] != -100) w[i] = weight / denom;
  DistillLossOptions lo = o;
  lo.final_softcap = student.config().final_softcap;
  return linear_distill_loss(hs, student.weights().lm_head.weight, teacher, b.targets, w, lo, sums);
}

void check_batch(const Model& student, const SftBatch& b) {
  LATHE_CHECK_ARG(b.n_targets > 0, "[distill_loss] a micro-batch without trained tokens");
  LATHE_CHECK_ARG(!student.weights().lm_head.lora.defined(), "[distill_loss] a LoRA adapter on lm_head is not"
                  " supported by the distillation head (leave lm_head out of lora.target_modules)");
}

}  // namespace

Tensor distill_loss(Model& student, const Model& teacher, const SftBatch& b, const DistillLossOptions& o,
                    double weight, const ForwardOptions& fo, DistillSums* sums) {
  check_batch(student, b);
  Tensor ht;  // [N, C_teacher]
  {
    NoGradGuard no_grad;
    ht = teacher.hidden(b.forward_batch());
  }
  auto logits = [&](int64_t r0, int64_t r) {
    return TeacherRows{.logits = teacher_head(teacher, ht.slice(0, r0, r0 + r))};  // [r, V]
  };
  return student_distill_loss(student, logits, b, o, weight, fo, sums);
}

Tensor distill_loss(Model& student, const CachedTeacher& teacher, const SftBatch& b, const DistillLossOptions& o,
                    double weight, const ForwardOptions& fo, DistillSums* sums) {
  check_batch(student, b);
  const std::vector<int64_t> rows = teacher.rows_of(b);  // [N]
  const TeacherCache& c = teacher.cache();
  const int64_t k = c.info().k;
  auto logits = [&](int64_t r0, int64_t r) {
    TeacherRows t{.logits = Tensor::zeros({r, k}), .ids = Tensor::zeros({r, k}, DType::kI32)};  // [r, k] each
    for (int64_t i = 0; i < r; ++i) {
      const int64_t row = rows[static_cast<size_t>(r0 + i)];
      if (row < 0) continue;  // untrained: weight 0, never read
      std::copy(c.ids(row), c.ids(row) + k, t.ids.data<int32_t>() + i * k);
      std::copy(c.logits(row), c.logits(row) + k, t.logits.data<float>() + i * k);
    }
    return t;
  };
  return student_distill_loss(student, logits, b, o, weight, fo, sums);
}

DistillObjective::DistillObjective(DistillOptions opts, int world, std::unique_ptr<CompletionSampler> sampler)
    : opts_(std::move(opts)), world_(world), data_(opts_.sft, world), sampler_(std::move(sampler)) {}

DistillObjective::~DistillObjective() = default;

void DistillObjective::start(const train::ObjectiveStart& s) {
  comm_ = &s.comm;
  rank_ = s.comm.rank();
  forward_ = s.forward;
  data_.start(s);
  seek(0);
  const int64_t V = s.model.config().vocab_size;
  LATHE_CHECK_ARG(opts_.loss.top_k <= V, "distill.top_k ", opts_.loss.top_k, " exceeds the vocabulary (", V,
                  " tokens)");
  const std::string top = opts_.loss.top_k > 0 ? str_cat(" over the teacher's top ", opts_.loss.top_k) : "";
  const std::string loss = str_cat("loss ", divergence_name(opts_.loss.divergence), top, " at temperature ",
                                   opts_.loss.temperature, ", alpha ", opts_.loss.alpha);
  if (!opts_.teacher_logits.empty()) {
    const std::vector<SftRow> sources = source_rows(data_.train_rows());
    cached_ = std::make_unique<CachedTeacher>(TeacherCache::open(opts_.teacher_logits), sources, opts_.loss.top_k, V);
    s.note(str_cat("teacher: top-", opts_.loss.top_k, " logits from ", opts_.teacher_logits, " (",
                   cached_->cache().info().n_rows, " positions); ", loss));
    return;
  }
  teacher_ = Model::load(opts_.teacher);  // frozen: no requires_grad, 16-bit weights stay 16-bit
  check_teacher_vocab(s.model, *teacher_, opts_.teacher);
  s.note(str_cat("teacher: ", opts_.teacher, " (", teacher_->n_params(), " parameters, frozen); ", loss));
  if (!opts_.samples()) return;
  LATHE_CHECK_ARG(sampler_ != nullptr, "distill.lmbda ", opts_.lmbda, " / distill.seq_kd ", opts_.seq_kd,
                  ": sampling completions needs a completion sampler (`lathe distill` runs the serving engine's);"
                  " this objective was built without one");
  // The longest prompt plus max_new_tokens must fit both models' positions (the teacher scores every sample).
  const int64_t per_rank = opts_.sft.batch_size / world_;
  int64_t longest_prompt = 0, longest_row = 0, most_prompts = 0;
  for (const SftRow& r : data_.train_rows()) {
    SftBatch one;
    one.append(r);
    int64_t row = 0;
    const std::vector<std::vector<int32_t>> prompts = example_prompts(one);
    for (const std::vector<int32_t>& p : prompts) {
      longest_prompt = std::max<int64_t>(longest_prompt, static_cast<int64_t>(p.size()));
      row += static_cast<int64_t>(p.size()) + opts_.max_new_tokens;
    }
    longest_row = std::max(longest_row, row);
    most_prompts = std::max(most_prompts, static_cast<int64_t>(prompts.size()));
  }
  onpolicy_tokens_ = per_rank * longest_row;
  sampled_prompts_ = per_rank * most_prompts;
  longest_prompt_ = longest_prompt;
  for (const Model* m : {static_cast<const Model*>(&s.model), static_cast<const Model*>(teacher_.get())})
    LATHE_CHECK_ARG(longest_prompt + opts_.max_new_tokens <= m->config().max_positions, "distill.max_new_tokens ",
                    opts_.max_new_tokens, ": the longest prompt (", longest_prompt, " tokens) and its sample exceed",
                    m == &s.model ? " the student's " : " the teacher's ", m->config().max_positions,
                    " positions (max_position_embeddings): lower distill.max_new_tokens or sft.max_length");
  s.note(str_cat("on-policy: each step samples its completions from the student with probability ", opts_.lmbda,
                 opts_.seq_kd ? ", else from the teacher (seq_kd)" : ", else takes the dataset's", "; up to ",
                 opts_.max_new_tokens, " tokens at temperature ", opts_.sampling_temperature,
                 "; sampled steps train the divergence alone (alpha 1, as TRL GKD)"));
}

void DistillObjective::seek(int64_t position) {
  data_.seek(position);
  micro_ = 0;  // checkpoints are taken between optimizer steps
  sampled_.clear();
}

CompletionSource DistillObjective::step_source(int64_t step) const {
  // u uniform in [0, 1) from (seed, step): no generator state beyond the data position the checkpoint holds.
  const uint64_t key = derive_key(opts_.sft.seed, hash_name("distill.lmbda"));
  const double u = static_cast<double>(derive_key(key, static_cast<uint64_t>(step)) >> 11) * 0x1.0p-53;
  if (u < opts_.lmbda) return CompletionSource::kStudent;
  return opts_.seq_kd ? CompletionSource::kTeacher : CompletionSource::kDataset;
}

void DistillObjective::sample_step(const Model& student, CompletionSource source, int64_t step) {
  const int64_t ga = opts_.sft.grad_accum;
  // The step's micro-batches of this rank, as the data path would hand them out one by one.
  std::vector<SftBatch> rows;
  std::vector<int64_t> positions;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<size_t> first_prompt;  // [ga + 1] each micro-batch's first prompt in `prompts`
  for (int64_t j = 0; j < ga; ++j) {
    rows.push_back(data_.next_batch());
    positions.push_back(data_.data_position());
    first_prompt.push_back(prompts.size());
    for (std::vector<int32_t>& p : example_prompts(rows.back())) prompts.push_back(std::move(p));
  }
  first_prompt.push_back(prompts.size());
  const CompletionSampling cs{.max_new_tokens = opts_.max_new_tokens,
                              .temperature = opts_.sampling_temperature,
                              .stop_token_ids = data_.stop_tokens(),
                              .seed = derive_key(derive_key(opts_.sft.seed, hash_name("distill.samples")),
                                                 static_cast<uint64_t>(step * world_ + rank_))};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int32_t>> completions;
  {
    NoGradGuard no_grad;  // sampling records nothing on the tape
    completions = sampler_->sample(source == CompletionSource::kStudent ? student : *teacher_, prompts, cs);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LATHE_CHECK_ARG(completions.size() == prompts.size(), "[distill] the sampler returned ", completions.size(),
                  " completions for ", prompts.size(), " prompts");
  int64_t sampled_tokens = 0;
  for (const std::vector<int32_t>& c : completions) {
    LATHE_CHECK_ARG(!c.empty() && static_cast<int64_t>(c.size()) <= opts_.max_new_tokens, "[distill] the sampler"
                    " returned a completion of ", c.size(), " tokens (1 to ", opts_.max_new_tokens, " expected)");
    sampled_tokens += static_cast<int64_t>(c.size());
  }
  double step_targets = 0;
  for (int64_t j = 0; j < ga; ++j) {
    const auto from = completions.begin() + static_cast<std::ptrdiff_t>(first_prompt[j]);
    const auto to = completions.begin() + static_cast<std::ptrdiff_t>(first_prompt[j + 1]);
    DistillBatch b{.rows = with_completions(rows[j], std::vector<std::vector<int32_t>>(from, to)),
                   .source = source, .position = positions[j]};
    step_targets += static_cast<double>(b.rows.n_targets);
    sampled_.push_back(std::move(b));
  }
  // The loss denominator, as the data path's: the trained tokens of every micro-batch of every rank.
  comm_->all_reduce_sum(&step_targets, 1);
  for (DistillBatch& b : sampled_) b.rows.step_targets = step_targets;
  sampled_[0].completions = static_cast<int64_t>(completions.size());
  sampled_[0].completion_tokens = sampled_tokens;
  sampled_[0].sample_seconds = seconds;
}

DistillBatch DistillObjective::next_batch(const Model& student) {
  const int64_t ga = opts_.sft.grad_accum;
  if (micro_ == 0 && opts_.samples()) {
    const int64_t step = data_.data_position() / (opts_.sft.batch_size * ga);
    const CompletionSource source = step_source(step);
    if (source != CompletionSource::kDataset) sample_step(student, source, step);
  }
  DistillBatch b;
  if (!sampled_.empty()) {
    b = std::move(sampled_[static_cast<size_t>(micro_)]);
  } else {
    b.rows = data_.next_batch();
    b.position = data_.data_position();
  }
  micro_ = (micro_ + 1) % ga;
  if (micro_ == 0) sampled_.clear();
  return b;
}

train::ObjectiveMemory DistillObjective::memory(const Model& model) const {
  train::ObjectiveMemory m = data_.memory(model);
  m.tokens = std::max(m.tokens, onpolicy_tokens_);  // a sampled micro-batch: prompts + max_new_tokens each
  const int64_t N = m.tokens, V = model.config().vocab_size, C = model.config().hidden;
  m.fused_head = false;
  const int64_t rows = std::min(opts_.loss.chunk_rows, N);
  const bool head_trains = model.weights().lm_head.weight.requires_grad();
  if (cached_) {
    // The mapped cache (its pages stay resident once read: an epoch reads all of it), and the head's
    // student logits and their gradient [chunk_rows, V] f32 with the gathered top-k rows.
    const TeacherCacheInfo& info = cached_->cache().info();
    m.items.push_back({"teacher logits cache (mapped)", kTeacherCacheHeaderBytes + 8 * info.n_rows * info.k + 8});
    m.items.push_back({"distillation head",
                       4 * (2 * rows * V + 2 * rows * info.k + N * C + (head_trains ? 3 * V * C : 0))});
    return m;
  }
  // The teacher as loaded: 16-bit matrices stay 16-bit.
  m.items.push_back({"teacher weights", train::memory_plan_weight_bytes(*teacher_)});
  // A sampled micro-batch's KV pool, of the model that samples it (allocated for the call, before the forward).
  if (sampled_prompts_ > 0) {
    int64_t pool = 0;
    if (opts_.lmbda > 0) pool = sampler_->memory_bytes(model, sampled_prompts_, longest_prompt_, opts_.max_new_tokens);
    if (opts_.seq_kd)
      pool = std::max(pool, sampler_->memory_bytes(*teacher_, sampled_prompts_, longest_prompt_, opts_.max_new_tokens));
    if (pool > 0) m.items.push_back({"sampling KV pool", pool});
  }
  // Its hidden states [N, C_teacher] (kept for the head) and, during its no-grad forward, about one layer's
  // tensors at a time.
  const train::MemoryPlanActivations t = train::memory_plan_activations(*teacher_, N, {});
  int64_t layer = 0;
  for (const train::MemoryPlanLayer& l : t.layers) layer = std::max(layer, train::memory_plan_layer_bytes(l, false));
  m.items.push_back({"teacher activations", N * (4 * t.hidden + layer)});
  // linear_distill_loss: student logits, teacher logits and their gradient [chunk_rows, V] f32; dhidden [N, C]
  // and, when the head trains, dweight [V, C] with the product and sum that update it.
  m.items.push_back({"distillation head", 4 * (3 * rows * V + N * C + (head_trains ? 3 * V * C : 0))});
  return m;
}

train::ObjectiveResult DistillObjective::loss(Model& model, const DistillBatch& db) {
  const SftBatch& b = db.rows;
  const double weight = static_cast<double>(opts_.sft.grad_accum) * static_cast<double>(world_);
  const ForwardOptions o = train::micro_batch_forward(forward_, db.position, world_, rank_);
  const bool sampled = db.source != CompletionSource::kDataset;
  DistillLossOptions lo = opts_.loss;
  if (sampled) lo.alpha = 1;  // TRL GKD: the divergence alone on generated completions (no hard-label term)
  DistillSums sums;
  Tensor l = cached_ ? distill_loss(model, *cached_, b, lo, weight, o, &sums)
                    : distill_loss(model, *teacher_, b, lo, weight, o, &sums);
  // Each sum is (weight / step_targets)·Σ over this micro-batch: the loop's mean over micro-batches and
  // ranks is the per-token mean of the step.
  train::ObjectiveResult r{.loss = l,
                           .tokens = static_cast<int64_t>(b.tokens.size()),
                           .metrics = {{"divergence", sums.divergence}, {"kl_per_token", sums.kl_forward},
                                       {"nll", sums.nll}, {"trained_tokens", b.step_targets}}};
  if (!opts_.samples()) return r;  // an offline run logs what it always did
  // on_policy: 1 on a student-sampled step (its mean over a run is the fraction of such steps); the completion
  // length and the sampling time are those of the micro-batch that sampled (weight 0 elsewhere: null on a
  // dataset step).
  const double n = static_cast<double>(db.completions);
  r.metrics.push_back({"on_policy", db.source == CompletionSource::kStudent ? 1.0 : 0.0});
  r.metrics.push_back({"completion_length", n > 0 ? static_cast<double>(db.completion_tokens) / n : 0.0});
  r.metrics.push_back({"sample_seconds", db.sample_seconds});
  r.metric_weights = {1, 1, 1, 1, 1, n, n > 0 ? 1.0 : 0.0};
  return r;
}

}  // namespace lathe::posttrain
