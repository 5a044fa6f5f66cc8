#include "lathe/posttrain/distill_objective.h"

#include <algorithm>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/ops/linear.h"

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

DistillObjective::DistillObjective(DistillOptions opts, int world)
    : opts_(std::move(opts)), world_(world), data_(opts_.sft, world) {}

DistillObjective::~DistillObjective() = default;

void DistillObjective::start(const train::ObjectiveStart& s) {
  rank_ = s.comm.rank();
  forward_ = s.forward;
  data_.start(s);
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
}

train::ObjectiveMemory DistillObjective::memory(const Model& model) const {
  train::ObjectiveMemory m = data_.memory(model);
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

train::ObjectiveResult DistillObjective::loss(Model& model, const SftBatch& b) {
  const double weight = static_cast<double>(opts_.sft.grad_accum) * static_cast<double>(world_);
  const ForwardOptions o = train::micro_batch_forward(forward_, data_.data_position(), world_, rank_);
  DistillSums sums;
  Tensor l = cached_ ? distill_loss(model, *cached_, b, opts_.loss, weight, o, &sums)
                    : distill_loss(model, *teacher_, b, opts_.loss, weight, o, &sums);
  // Each sum is (weight / step_targets)·Σ over this micro-batch: the loop's mean over micro-batches and
  // ranks is the per-token mean of the step.
  return {.loss = l,
          .tokens = static_cast<int64_t>(b.tokens.size()),
          .metrics = {{"divergence", sums.divergence}, {"kl_per_token", sums.kl_forward}, {"nll", sums.nll},
                      {"trained_tokens", b.step_targets}}};
}

}  // namespace lathe::posttrain
