// Reading a llama.cpp GGUF file as a model (docs/gguf.md): its metadata becomes a Hugging Face config,
// its tensors are renamed to Hugging Face names and put back in their layout (the rotary row permutation
// llama.cpp's converter applies to Llama's q and k undone), Q8_0 / Q4_0 blocks are split into lathe's
// int8 / int4 planes without loss. Model::load reads a path ending in ".gguf" through these.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lathe/io/gguf.h"
#include "lathe/models/config.h"
#include "lathe/models/tensor_source.h"

namespace lathe {

// A path Model::load reads as GGUF: one ending in ".gguf".
bool is_gguf_path(const std::string& path);

// The config.json text equivalent to the file's metadata (general.architecture llama, qwen2 or qwen3;
// `<arch>.embedding_length`, `block_count`, ...; tied when there is no output.weight). FormatError naming
// the file and key for a missing or mistyped key, NotImplemented for another architecture or rope scaling.
std::string gguf_config_json(const GgufFile& g);
// The rope_freqs tensor's values ([R/2]; convert_hf_to_gguf's Llama 3 scaling), empty without one.
// Model::load divides its inverse frequencies by them (as llama.cpp does); they are not part of the
// ModelConfig, so Model::save of such a model writes a config without that scaling.
std::vector<float> gguf_rope_freq_factors(const GgufFile& g);
// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; "" for a name with no counterpart.
std::string gguf_to_hf_name(const std::string& gguf_name);

// The file's tensors under Hugging Face names, in Hugging Face layout.
class GgufTensors final : public TensorSource {
 public:
  // cfg: the model's config (gguf_config_json parsed): its head counts undo the q/k row permutation.
  GgufTensors(std::shared_ptr<const GgufFile> g, const ModelConfig& cfg);
  std::vector<std::string> names() const override;
  bool contains(const std::string& name) const override { return to_gguf_.count(name) != 0; }
  DType dtype(const std::string& name) const override;
  // F32 / F16 / BF16 as stored (zero-copy unless permuted), Q8_0 / Q4_0 dequantised to f32.
  Tensor tensor(const std::string& name) const override;
  // A Q8_0 / Q4_0 Linear weight as int8 / int4 planes (bit for bit the same codes and scales).
  std::optional<QuantWeight> quant_weight(const std::string& name, bool linear) const override;
  std::string file_of(const std::string&) const override { return g_->path(); }
  const std::string& where() const override { return g_->path(); }

 private:
  const GgufTensorInfo& info(const std::string& name) const { return g_->tensor_info(to_gguf_.at(name)); }
  // Row r of our layout is row source_row(name, r) of the file's (the identity unless permuted).
  int64_t source_row(const std::string& name, int64_t r, int64_t n_rows) const;
  // The Q8_0 / Q4_0 tensor as planes ([rows, K]; NotImplemented naming any other type).
  QuantWeight split_blocks(const std::string& name) const;
  std::shared_ptr<const GgufFile> g_;
  std::map<std::string, std::string> to_gguf_;  // Hugging Face name -> GGUF name
  std::map<std::string, int64_t> permuted_;     // Hugging Face name -> heads of its rotary row permutation
};

}  // namespace lathe
