// Merging a LoRA adapter into its base (PEFT merge_and_unload, then save_pretrained): a Hugging Face
// folder whose adapted weights are W' = W + scaling·B·A, for `lathe merge BASE ADAPTER OUT`.
#pragma once

#include <string>

namespace lathe {

// Writes out_dir/model.safetensors: every tensor of base_dir's checkpoint (sharded or not) under its own
// name, the adapted modules' weights merged in f32 and stored in the base tensor's dtype and layout (a
// Conv1D weight [in, out] gets the transposed update), the rest unchanged. Every other regular file of
// base_dir (config.json, generation_config.json, tokenizer files, chat template) is copied; weight files
// of other formats and the shard index are not. out_dir must not exist or be empty.
// A quantised base (int8 / int4 / nf4: a quantization_config in config.json) is dequantised: out_dir holds
// the f32 model W' = deq(W) + scaling·B·A for every tensor, and config.json without quantization_config
// (a QLoRA adapter merged into the weights its base stands for, as PEFT merges into a dequantised
// bitsandbytes base).
// Returns the number of merged weight tensors.
int merge_lora(const std::string& base_dir, const std::string& adapter_dir, const std::string& out_dir);

}  // namespace lathe
