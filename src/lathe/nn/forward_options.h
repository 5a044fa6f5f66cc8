// Run options of one forward call (DESIGN.md "Seams" 4): how to run, not what the model is. They are
// not part of ModelConfig, and a forward never mutates the model to apply them.
#pragma once

namespace lathe {

struct ForwardOptions {
  // Activation recompute: each decoder layer keeps only its input and is re-run in the backward pass
  // (less memory, ~1/3 more compute). Training only; a KV-cached forward ignores it.
  bool recompute = false;
  // bf16 mixed-precision compute (specs/pretrain.md §2.4): every Linear with a bf16 compute copy
  // (Model::make_bf16_copies) multiplies bf16 x by its copy with f32 accumulation; gradients reach the
  // f32 masters. Linears without a copy, norms, softmax and residuals stay f32.
  bool bf16 = false;
};

}  // namespace lathe
