// Writing a quantised Hugging Face folder (`lathe quantize`): every plain Linear weight of a model stored in
// a quantised format (docs/quantization.md has the layout), everything else copied as it is, and a
// `quantization_config` in config.json that Model::load reads back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/tensor/quant_weight.h"

namespace lathe {

struct QuantizeOptions {
  QuantSpec spec;
  // Modules left in their stored dtype: a module path ("model.layers.0.mlp.down_proj") or its last parts
  // ("lm_head", "down_proj", "mlp.down_proj").
  std::vector<std::string> skip;
  // The LM head's format (a tied head too: it is written as a quantised lm_head beside the float embedding
  // table, which the token lookup keeps reading). Default: int6 under a 4-bit format, as llama.cpp keeps
  // its output matrix at 6 bits under Q4_0 (the head is the matrix most sensitive to rounding), else spec.
  std::optional<QuantSpec> head;
};

// The LM head's format for opts (opts.head, or the default above).
QuantSpec head_quant_spec(const QuantizeOptions& opts);

struct QuantizeReport {
  int n_quantized = 0;
  std::vector<std::string> kept;       // "module: why" for each Linear left as it was
  size_t bytes_in = 0, bytes_out = 0;  // tensor bytes read and written
};

// Reads the Hugging Face folder in_dir, writes out_dir (new or empty): model.safetensors, config.json with
// quantization_config added, the other files copied. A Linear whose input size is not a multiple of the
// format's group is an InvalidArgument naming it (skip it, or pick another format).
QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir, const QuantizeOptions& opts);

class Model;
// QLoRA's base (recipe key model.quantize): every decoder layer's Linear weight (attention and MLP
// projections; not the LM head, embeddings or MoE experts) replaced in place by its quantised form in
// `spec`, the f32 weight freed. Returns how many. The weights must not require grad (a frozen base).
int quantize_decoder_linears(Model& model, const QuantSpec& spec);

// True when `module` (a path such as "model.layers.0.mlp.down_proj") is `pattern` or ends with "." + pattern.
bool quant_module_matches(const std::string& module, const std::string& pattern);

}  // namespace lathe
