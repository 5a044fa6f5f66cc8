// LoRA training (specs/posttrain.md §3.1): only the adapters train. The base is frozen: no gradient, no
// optimizer state, never copied (it may stay bf16 or memory-mapped: dx flows through a 16-bit weight).
// Wiring a run (the loop's usual steps, with these in place of set_requires_grad / optim_params):
//   LoraAdapters lora = LoraAdapters::create(model, cfg, seed);   // or LoraAdapters::load(model, dir) to resume
//   freeze_base_for_lora(model, lora);
//   AdamW opt(lora_optim_params(lora), adamw_cfg);
//   forward options: {.lora_dropout = cfg.lora_dropout > 0, .dropout_key = derive_key(seed, micro_batch_index)}
//   checkpoint: lora.save(dir) writes a PEFT folder (adapter_config.json + adapter_model.safetensors)
//   reference log-probs (DPO): the same model with ForwardOptions{.lora = false}
#pragma once

#include <vector>

#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

// Turns every base parameter's gradient off and the adapters' on.
void freeze_base_for_lora(Model& m, LoraAdapters& adapters);

// The optimizer's parameters of a LoRA run: the adapter tensors only, in LoraAdapters::for_each_param
// order and names (optimizer state is checkpointed under them), all with weight decay (they are matmul
// weights; transformers' Trainer decays every weight but biases and norms).
std::vector<OptimParam> lora_optim_params(LoraAdapters& adapters);

}  // namespace lathe::train
