// The decoder's parameters, one struct for every family (a family leaves unused members undefined), and
// the bindings that map checkpoint tensors (Hugging Face names and layouts) onto them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/nn/decoder_layer.h"
#include "lathe/nn/embedding.h"
#include "lathe/nn/linear.h"
#include "lathe/nn/norm.h"
#include "lathe/nn/param_role.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

// Named as Hugging Face's *ForCausalLM (model.embed_tokens, model.layers, model.norm, lm_head).
struct ModelWeights {
  Embedding embed_tokens;     // [V, C]
  Embedding embed_positions;  // [P, C] learned positions (GPT-2 wpe), else undefined
  std::vector<DecoderLayer> layers;
  Norm norm;                  // [C] final norm
  Linear lm_head;             // [V, C]; its weight is embed_tokens.weight (the same tensor) when tied
};

// Calls fn(Linear&) for every Linear module of the decoder, whatever it holds (before loading: nothing),
// in a fixed order (per layer q, k, v, o, gate, up, down; then the LM head). W is ModelWeights or const.
template <class W, class Fn>
void for_each_linear_module(W& w, Fn&& fn) {
  for (auto& l : w.layers)
    for (auto* lin : {&l.self_attn.q_proj, &l.self_attn.k_proj, &l.self_attn.v_proj, &l.self_attn.o_proj,
                      &l.mlp.gate_proj, &l.mlp.up_proj, &l.mlp.down_proj})
      fn(*lin);
  fn(w.lm_head);
}

// Calls fn(Linear&) for every Linear the decoder applies that has a (float) weight, in the same order (the
// LM head tied or not). The modules' own walk: their bf16 slots are filled through it. A quantised Linear
// (Linear::quant; weight undefined) is not visited. W is ModelWeights or const ModelWeights.
template <class W, class Fn>
void for_each_linear(W& w, Fn&& fn) {
  for_each_linear_module(w, [&](auto& lin) {
    if (lin.weight.defined()) fn(lin);
  });
}

// One tensor of the checkpoint and how it maps onto model parameters.
struct TensorBinding {
  std::string name;  // checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;       // checkpoint shape
  // Installs the checkpoint tensor into the model (zero-copy when the layout is the same).
  std::function<void(const Tensor& src)> load;
  // Produces the checkpoint tensor from the model (exact: transposes and splits only move bytes).
  std::function<Tensor()> save;
  // The model tensors this binding fills (several when the checkpoint fuses them, e.g. GPT-2's c_attn).
  std::vector<Tensor*> slots;
  ParamRole role = ParamRole::kMatmulWeight;  // of every slot
  int layer = -1;                             // the decoder layer the slots belong to; -1: none
  // Standard deviation of Model::create's normal draw for this tensor; 0: the config's initializer_range.
  // A family hook (GPT-2 scales its residual projections).
  float init_std = 0.f;
  // The checkpoint stores the transpose of our [out, in] layout (GPT-2's Conv1D [in, out]: PEFT's
  // fan_in_fan_out; a merged LoRA update is written transposed).
  bool transposed = false;
};

// Binding builders used by the family files. `layer` is the decoder layer (-1: none).
TensorBinding bind(const std::string& name, Tensor& slot, const Shape& shape, ParamRole role, int layer = -1);
// Checkpoint stores the transpose of our [out, in] layout (GPT-2 Conv1D: [in, out]).
TensorBinding bind_transposed(const std::string& name, Tensor& slot, const Shape& our_shape, ParamRole role,
                              int layer);
// Checkpoint tensor = concat(parts, dim 0), transposed first when `transposed` (GPT-2 c_attn [C, 3C]).
// The parts become views of one buffer.
struct ConcatParts {
  std::vector<Tensor*> parts;
  std::vector<Shape> shapes;  // our shape of each part
  bool transposed = false;
};
TensorBinding bind_concat(const std::string& name, const ConcatParts& parts, ParamRole role, int layer);
// Checkpoint tensor `index` of a stack: our slot is [n, part...] and the checkpoint has one tensor per index.
TensorBinding bind_stacked(const std::string& name, Tensor& stack, int64_t index, int64_t n, const Shape& part_shape,
                           ParamRole role, int layer);
// transformers-5 fused experts: checkpoint [E, 2F, C] = concat(gate [E, F, C], up [E, F, C], dim 1).
TensorBinding bind_concat_dim1(const std::string& name, Tensor& a, Tensor& b, const Shape& part_shape, ParamRole role,
                               int layer);

}  // namespace lathe
