// A model family = how to read its config.json into ModelConfig + the list of its checkpoint tensors.
// Adding one: a file in models/ defining a Family, and one line in registry.cc (docs/architecture.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/io/safetensors.h"
#include "lathe/models/config.h"
#include "lathe/models/weights.h"

namespace lathe {

struct Family {
  const char* name;                        // "llama"
  std::vector<std::string> architectures;  // HF class names this family reads
  std::vector<std::string> model_types;    // config.json model_type values
  // Reads config.json values into cfg, typed but not yet checked against each other and without
  // arithmetic on them: parse_model_config then runs validate_config and fills the derived fields.
  void (*parse_config)(const nlohmann::json& hf, ModelConfig& cfg);
  // The checkpoint tensors and the parameters they fill, each with its role (ParamRole) and layer: the
  // list that load, save, Model::create and Model::for_each_param walk.
  std::vector<TensorBinding> (*bindings)(const ModelConfig& cfg, ModelWeights& w);
  // Optional: settles layout choices that only the checkpoint's tensor names tell (Qwen3-MoE's fused or
  // per-expert layout) before Model::load calls bindings. Model::create uses the defaults.
  void (*read_checkpoint_layout)(const CheckpointReader& ckpt, ModelConfig& cfg) = nullptr;
};

// By config.json "architectures"[0], falling back to "model_type"; throws NotImplemented listing the
// supported names.
const Family& find_family(const nlohmann::json& hf_config);
const std::vector<const Family*>& all_families();

// Shared pieces of the Llama-style families (llama, mistral, qwen2, qwen3, qwen3_moe, gemma2/3).
void parse_llama_like(const nlohmann::json& hf, ModelConfig& cfg);
// Embedding, final norm, head and per-layer attention (prefix "model.layers.<i>.").
void bind_llama_attention(const ModelConfig& cfg, ModelWeights& w, int layer, std::vector<TensorBinding>& out);
void bind_llama_common(const ModelConfig& cfg, ModelWeights& w, std::vector<TensorBinding>& out);
void bind_gated_mlp(const ModelConfig& cfg, ModelWeights& w, int layer, std::vector<TensorBinding>& out);

std::string layer_prefix(int layer);  // "model.layers.<i>."

}  // namespace lathe
