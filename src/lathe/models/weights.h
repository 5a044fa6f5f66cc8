// The decoder's parameters, one struct for every family (a family leaves unused slots undefined), and
// the bindings that map checkpoint tensors (Hugging Face names and layouts) onto those slots.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe {

struct LayerWeights {
  Tensor attn_norm_w, attn_norm_b;      // [C]
  Tensor wq, wk, wv, wo;                // [H*D, C], [Hkv*D, C], [Hkv*D, C], [C, H*D]
  Tensor bq, bk, bv, bo;                // [H*D], [Hkv*D], [Hkv*D], [C]
  Tensor q_norm, k_norm;                // [D]
  Tensor post_attn_norm;                // [C]  (Gemma 2/3 sandwich norm)
  Tensor mlp_norm_w, mlp_norm_b;        // [C]
  Tensor post_mlp_norm;                 // [C]
  Tensor w_gate, w_up, w_down;          // [F, C], [F, C], [C, F]  (plain MLP: w_up = fc, w_down = proj)
  Tensor b_up, b_down;                  // [F], [C]
  Tensor router;                        // [E, C]
  Tensor experts_gate, experts_up;      // [E, Fe, C]
  Tensor experts_down;                  // [E, C, Fe]
};

struct ModelWeights {
  Tensor embed;        // [V, C]
  Tensor pos_embed;    // [P, C]  (GPT-2)
  std::vector<LayerWeights> layers;
  Tensor final_norm_w, final_norm_b;  // [C]
  Tensor lm_head;      // [V, C]; the same tensor as embed when tied
};

// One tensor of the checkpoint and how it maps onto model slots.
struct TensorBinding {
  std::string name;  // checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;       // checkpoint shape
  // Installs the checkpoint tensor into the model (zero-copy when the layout is the same).
  std::function<void(const Tensor& src)> load;
  // Produces the checkpoint tensor from the model (exact: transposes and splits only move bytes).
  std::function<Tensor()> save;
  // The model tensors this binding fills (for counting and for optimizers).
  std::vector<Tensor*> slots;
};

// Binding builders used by the family files.
TensorBinding bind(const std::string& name, Tensor& slot, const Shape& shape);
// Checkpoint stores the transpose of our [out, in] layout (GPT-2 Conv1D: [in, out]).
TensorBinding bind_transposed(const std::string& name, Tensor& slot, const Shape& our_shape);
// Checkpoint tensor = concat(parts, dim 0), transposed first when `transposed` (GPT-2 c_attn [C, 3C]).
// The parts become views of one buffer.
TensorBinding bind_concat(const std::string& name, std::vector<Tensor*> parts, std::vector<Shape> part_shapes,
                          bool transposed);
// Checkpoint tensor `index` of a stack: our slot is [n, part...] and the checkpoint has one tensor per index.
TensorBinding bind_stacked(const std::string& name, Tensor& stack, int64_t index, int64_t n, const Shape& part_shape);
// transformers-5 fused experts: checkpoint [E, 2F, C] = concat(gate [E, F, C], up [E, F, C], dim 1).
TensorBinding bind_concat_dim1(const std::string& name, Tensor& a, Tensor& b, const Shape& part_shape);

}  // namespace lathe
