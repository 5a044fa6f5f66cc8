// Logit distillation losses (specs/posttrain.md §6, TRL GKD semantics). Per position, with temperature T,
// teacher p = softmax(z_T / T) and student q = softmax(z_S / T):
//   forward KL   KL(p‖q) = Σ_v p (log p − log q)
//   reverse KL   KL(q‖p) = Σ_v q (log q − log p)
//   JSD_β        β KL(p‖m) + (1−β) KL(q‖m),  m = β p + (1−β) q;  TRL: β = 0 is forward KL, β = 1 reverse KL
//                (special-cased: the mixture's own limits are 0)
// times T² when asked (Hinton / Tunix; TRL's JSD has none), mixed with the hard-label NLL of the student at
// temperature 1:  L_i = α·[T²]·D_i + (1 − α)·CE(z_S, y_i).
// Top-k (Tunix `distill_top_k`): with k > 0, D is taken over the teacher's k largest logits S only, both sides
// renormalised there (p = softmax(z_T[S] / T), q = softmax(z_S[S] / T)); the student's gradient is zero off S,
// the hard-label CE stays over the whole vocabulary. k teacher logits per position are what a cache on disk
// holds (teacher_cache.h).
// The student logits are never held for all rows: the head runs over chunks of rows (see linear_distill_loss).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe::posttrain {

enum class Divergence : uint8_t { kForwardKl, kReverseKl, kJsd, kCount };

struct DistillLossOptions {
  Divergence divergence = Divergence::kForwardKl;
  double beta = 0.5;          // JSD mixture weight of the teacher (0: forward KL, 1: reverse KL)
  double temperature = 1.0;   // T > 0 on both sides
  bool temperature_squared = true;  // multiply the divergence by T² (keeps gradient scale across T)
  double alpha = 1.0;         // weight of the divergence; 1 − alpha weighs the hard-label NLL
  float final_softcap = 0.f;  // the student's final logit soft-cap (Gemma 2); the teacher's is the caller's
  int64_t chunk_rows = 256;   // rows per head chunk
  int64_t top_k = 0;          // the divergence over the teacher's top-k ids only; 0: the whole vocabulary
};

// One row: the divergence D (no T², no α) of student logits zs [V] from teacher logits zt [V], and its
// gradient dD/dzs [V] (written when dzs is not null). kl_forward gets KL(p‖q) of the same row (a metric).
double distill_row(const float* zs, const float* zt, int64_t v, const DistillLossOptions& o, float* dzs,
                   double* kl_forward);

// The same over the teacher's top-k: ids [k] (distinct, in [0, v)) and their teacher logits zt [k]; the student
// logits zs [V] are read at the ids. Both sides are renormalised over the ids: D of softmax(zt / T) from
// softmax(zs[ids] / T). dzs [V] (when not null) is zero off the ids; kl_forward is the renormalised KL(p‖q).
double distill_row_top_k(const float* zs, int64_t v, const int32_t* ids, const float* zt, int64_t k,
                         const DistillLossOptions& o, float* dzs, double* kl_forward);

// The k largest of logits z [V] (1 <= k <= V): their ids [k] and values top [k], largest first, ties to the
// smaller id (NaN ranks lowest), so the live teacher and its cache on disk select the same ids.
void teacher_top_k(const float* z, int64_t v, int64_t k, int32_t* ids, float* top);

// The teacher's side of rows [r0, r0 + r) (no gradient): its logits [r, V] f32 (ids undefined), or when the
// loss has top_k = k, either those or its top-k only: ids [r, k] i32 with their logits [r, k] f32 (a cache).
struct TeacherRows {
  Tensor logits;  // [r, V] or [r, k] f32
  Tensor ids;     // [r, k] i32, or undefined
};
using TeacherLogitsFn = std::function<TeacherRows(int64_t r0, int64_t r)>;

struct DistillSums {
  double divergence = 0;  // Σ_i w_i·D_i over the weighted rows (no T², no α)
  double kl_forward = 0;  // Σ_i w_i·KL(p_i‖q_i)
  double nll = 0;         // Σ_i w_i·CE_i (rows with a target)
};

// Σ_i w_i·(α·[T²]·D_i + (1−α)·CE_i) -> [1], over the rows with w_i ≠ 0, differentiable in hidden and weight.
// hidden [N, C] f32 (the student's final-normed states), weight [V, C] f32 (its head), targets [N] i32 (the
// hard label, -100: none; needed only when α < 1), row_weights [N]. The head runs chunk_rows rows at a time:
// student logits zs, teacher logits zt and dzs, each [chunk_rows, V] f32 (zt [chunk_rows, k] from a cache), are
// the only vocabulary-wide buffers (3·chunk_rows·V·4 bytes at once, whatever N); the gradients dhidden [N, C]
// and dweight [V, C] are computed chunk by chunk in the forward (when recording) and held by the node until the
// backward.
Tensor linear_distill_loss(const Tensor& hidden, const Tensor& weight, const TeacherLogitsFn& teacher,
                           const std::vector<int32_t>& targets, const std::vector<double>& row_weights,
                           const DistillLossOptions& o, DistillSums* sums = nullptr);

}  // namespace lathe::posttrain
