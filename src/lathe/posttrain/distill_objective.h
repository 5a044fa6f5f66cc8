// Logit distillation as an Objective on the shared TrainLoop (specs/posttrain.md §6): the SFT data
// path (rows, packing, masks, step-global token count: sft_objective.h) with a frozen teacher run on the same
// packed batch under no-grad. Per micro-batch:
//   L = Σ_{i trained} (α·T²·D(p_teacher,i ‖ q_student,i) + (1−α)·CE_i) · grad_accum·world / step_targets
// so the loop's mean over micro-batches and ranks is the step's per-token mean, as SFT's. With
// distill.teacher_logits no teacher runs: its top-k logits are read from a cache (teacher_cache.h).
// On-policy GKD (distill.lmbda, distill.seq_kd; docs/distill.md): a step's completions may instead be sampled
// from the student (or the teacher) by a CompletionSampler and scored by the teacher (onpolicy_batch.h).
// Memory: the two decoders' hidden states [N, C] and [N, C_teacher], and the head's chunks
// (linear_distill_loss: 3·chunk_rows·V f32, plus the student head gradient [V, C]); no [N, V] logits.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/posttrain/completion_sampler.h"
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

// Where a step's completions come from (distill.lmbda, distill.seq_kd).
enum class CompletionSource : uint8_t { kDataset, kStudent, kTeacher, kCount };

// One micro-batch of distillation and what the loss and the metrics need to know about it.
struct DistillBatch {
  SftBatch rows;
  CompletionSource source = CompletionSource::kDataset;
  int64_t position = 0;  // the data position after its rows (the LoRA dropout key, as SFT's)
  // Set on the micro-batch that sampled its step (the first), 0 on the others.
  int64_t completions = 0;        // sampled completions (this rank's, all the step's micro-batches)
  int64_t completion_tokens = 0;  // their tokens
  double sample_seconds = 0;      // wall time of the sampling call
};

class DistillObjective final : public train::Objective {
 public:
  // sampler: where sampled completions come from; required when opts.samples() (distill.lmbda > 0 or seq_kd).
  DistillObjective(DistillOptions opts, int world, std::unique_ptr<CompletionSampler> sampler = nullptr);
  ~DistillObjective() override;

  // The SFT data, then the teacher (loaded once; bf16 weights stay bf16) or its cache, checked against the
  // student (and the cache against the data).
  void start(const train::ObjectiveStart& s) override;
  int64_t data_position() const override { return data_.data_position(); }
  void seek(int64_t position) override;
  train::ObjectiveResult next_loss(Model& model) override { return loss(model, next_batch(model)); }
  // This rank's next micro-batch. At the first micro-batch of an optimizer step the step's source is drawn
  // (step_source); a sampled step's micro-batches are all sampled then, in one call with `student` (or the
  // teacher) as it is at the step's start, and the step's trained tokens summed over its micro-batches and ranks.
  DistillBatch next_batch(const Model& student);
  // The loss of `b`: distill_loss with the recipe's options, except on sampled completions: the divergence
  // alone (alpha 1), as TRL's GKD, which has no hard-label term on any batch.
  train::ObjectiveResult loss(Model& model, const DistillBatch& b);
  // The student's NLL on data.val (as lathe sft's val_loss).
  std::optional<train::ObjectiveEval> evaluate(Model& model) override { return data_.evaluate(model); }
  // SFT's micro-batch (or, when sampling, its prompts with max_new_tokens each) and data, the teacher's weights
  // and forward, and the distillation head's chunks in place of the fused head.
  train::ObjectiveMemory memory(const Model& model) const override;
  double flops_per_token(const Model& model, int64_t n_matmul_params) const override {
    return data_.flops_per_token(model, n_matmul_params);  // the student's; the teacher's forward is extra
  }
  std::string data_tokenizer() const override { return data_.data_tokenizer(); }

  // The source of optimizer step `step`'s completions: a pure function of run.seed and the step, so a resumed
  // run redraws the same ones. Student with probability lmbda, else the teacher with seq_kd, else the dataset.
  CompletionSource step_source(int64_t step) const;

 private:
  void sample_step(const Model& student, CompletionSource source, int64_t step);

  DistillOptions opts_;
  int world_ = 1, rank_ = 0;
  SftObjective data_;
  ForwardOptions forward_;
  dist::Communicator* comm_ = nullptr;
  std::unique_ptr<Model> teacher_;         // distill.teacher
  std::unique_ptr<CachedTeacher> cached_;  // distill.teacher_logits
  std::unique_ptr<CompletionSampler> sampler_;
  int64_t micro_ = 0;                      // micro-batch of the current step
  std::vector<DistillBatch> sampled_;      // [grad_accum] the current sampled step's micro-batches; empty: none
  int64_t onpolicy_tokens_ = 0;            // the most tokens a sampled micro-batch can hold (memory plan)
  int64_t sampled_prompts_ = 0;            // ... its most prompts, and the longest of them (0: no sampling)
  int64_t longest_prompt_ = 0;
};

}  // namespace lathe::posttrain
