// Offline logit distillation as an Objective on the shared TrainLoop (specs/posttrain.md §6): the SFT data
// path (rows, packing, masks, step-global token count: sft_objective.h) with a frozen teacher run on the same
// packed batch under no-grad. Per micro-batch:
//   L = Σ_{i trained} (α·T²·D(p_teacher,i ‖ q_student,i) + (1−α)·CE_i) · grad_accum·world / step_targets
// so the loop's mean over micro-batches and ranks is the step's per-token mean, as SFT's. With
// distill.teacher_logits no teacher runs: its top-k logits are read from a cache (teacher_cache.h).
// Memory: the two decoders' hidden states [N, C] and [N, C_teacher], and the head's chunks
// (linear_distill_loss: 3·chunk_rows·V f32, plus the student head gradient [V, C]); no [N, V] logits.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "lathe/posttrain/distill_options.h"
#include "lathe/posttrain/sft_objective.h"
#include "lathe/posttrain/teacher_cache.h"

namespace lathe::posttrain {

// The distillation loss of one batch (student with autograd, teacher without) -> [1]; `weight` as
// sft_loss's. sums (optional) gets Σ w_i·D_i, Σ w_i·KL_i, Σ w_i·CE_i with w_i = weight / step_targets.
Tensor distill_loss(Model& student, const Model& teacher, const SftBatch& batch, const DistillLossOptions& o,
                    double weight, const ForwardOptions& fo = {}, DistillSums* sums = nullptr);

// The same with the teacher's top-k logits read from a cache (o.top_k: the cache's k).
Tensor distill_loss(Model& student, const CachedTeacher& teacher, const SftBatch& batch, const DistillLossOptions& o,
                    double weight, const ForwardOptions& fo = {}, DistillSums* sums = nullptr);

// The teacher's logits [r, V] f32 of its final hidden states rows [r, C_teacher] (after its final soft-cap).
Tensor teacher_head(const Model& teacher, const Tensor& hidden);

// Throws InvalidArgument unless the two models have the same vocabulary size.
void check_teacher_vocab(const Model& student, const Model& teacher, const std::string& teacher_dir);

class DistillObjective final : public train::BatchObjective<SftBatch> {
 public:
  DistillObjective(DistillOptions opts, int world);
  ~DistillObjective() override;

  // The SFT data, then the teacher (loaded once; bf16 weights stay bf16) or its cache, checked against the
  // student (and the cache against the data).
  void start(const train::ObjectiveStart& s) override;
  int64_t data_position() const override { return data_.data_position(); }
  void seek(int64_t position) override { data_.seek(position); }
  SftBatch next_batch() override { return data_.next_batch(); }
  train::ObjectiveResult loss(Model& model, const SftBatch& batch) override;
  // The student's NLL on data.val (as lathe sft's val_loss).
  std::optional<train::ObjectiveEval> evaluate(Model& model) override { return data_.evaluate(model); }
  // SFT's micro-batch and data, the teacher's weights and forward, and the distillation head's chunks in
  // place of the fused head.
  train::ObjectiveMemory memory(const Model& model) const override;
  double flops_per_token(const Model& model, int64_t n_matmul_params) const override {
    return data_.flops_per_token(model, n_matmul_params);  // the student's; the teacher's forward is extra
  }
  std::string data_tokenizer() const override { return data_.data_tokenizer(); }

 private:
  DistillOptions opts_;
  int world_ = 1, rank_ = 0;
  SftObjective data_;
  ForwardOptions forward_;
  std::unique_ptr<Model> teacher_;         // distill.teacher
  std::unique_ptr<CachedTeacher> cached_;  // distill.teacher_logits
};

}  // namespace lathe::posttrain
