// Run options of one forward call (DESIGN.md "Seams" 4): how to run, not what the model is. They are
// not part of ModelConfig, and a forward never mutates the model to apply them.
#pragma once

#include <cstdint>
#include <span>

namespace lathe {

// Rows [begin, end) of a batch run with the served adapter in slot `slot` (>= 1) of every Linear that has
// one there (Linear::lora_slots): multi-LoRA serving, one adapter per sequence, several per batch.
struct LoraRowRun {
  int32_t slot = 0;
  int64_t begin = 0, end = 0;
};

struct ForwardOptions {
  // Activation recompute: each decoder layer keeps only its input and is re-run in the backward pass
  // (less memory, ~1/3 more compute). Training only; a KV-cached forward ignores it.
  bool recompute = false;
  // bf16 mixed-precision compute (specs/pretrain.md §2.4): every Linear with a bf16 compute copy
  // (Model::make_bf16_copies) multiplies bf16 x by its copy with f32 accumulation; gradients reach the
  // f32 masters. Linears without a copy, norms, softmax and residuals stay f32.
  bool bf16 = false;
  // LoRA adapters (Linear::lora) are applied where present; false runs the base network alone (DPO's
  // reference: the same weights with the adapter off, no second copy). Without adapters it changes nothing.
  bool lora = true;
  // Training forwards: LoRA dropout on, each adapter's mask drawn from derive_key(dropout_key, its stream),
  // a pure function of the key (a recomputed layer redraws the same mask; vary the key per micro-batch).
  // Off in evaluation and generation (a forward over a KV store never applies it).
  bool lora_dropout = false;
  uint64_t dropout_key = 0;
  // Served adapters (inference only): which rows run with which slot's adapter. The decoder sets it from
  // ForwardBatch::lora_slots (runs of consecutive sequences of one slot); empty: no served adapter, the
  // forward is exactly the one without them. Rows outside every run (the base) add nothing.
  std::span<const LoraRowRun> lora_rows;
};

}  // namespace lathe
