// Where Model::load reads a checkpoint's tensors from, by Hugging Face name and layout: a model folder's
// safetensors files (FolderTensors) or an imported GGUF file (models/gguf_import.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/io/safetensors.h"
#include "lathe/tensor/quant_weight.h"

namespace lathe {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Every tensor the model must consume (a quantised weight once, under its "X.weight" name), sorted.
  virtual std::vector<std::string> names() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  // dtype of tensor(name) (F32, BF16 or F16 for a weight; a folder may hold others, which load refuses).
  virtual DType dtype(const std::string& name) const = 0;
  // The tensor in our layout (zero-copy where the stored one is).
  virtual Tensor tensor(const std::string& name) const = 0;
  // The weight stored quantised under `name` (not yet checked: QuantWeight::check), or nullopt when it is
  // stored as floats. `linear`: the name binds a plain Linear weight, the only slot a quantised weight can
  // fill (a source that can dequantise, such as GGUF's embedding, returns nullopt and a float tensor()).
  virtual std::optional<QuantWeight> quant_weight(const std::string& name, bool linear) const = 0;
  // The file holding `name`, for error messages.
  virtual std::string file_of(const std::string& name) const = 0;
  // The checkpoint's place (folder or file) for messages about it as a whole.
  virtual const std::string& where() const = 0;
};

// A Hugging Face folder's tensors (CheckpointReader); with a lathe quantization_config (`quant`), a
// Linear "X.weight" stored as codes has its X.scales (and X.mins) beside it; lm_head in format `head`
// (quantization_config.lm_head_format; default `quant`).
class FolderTensors final : public TensorSource {
 public:
  FolderTensors(const std::string& dir, std::optional<QuantSpec> quant, std::optional<QuantSpec> head = std::nullopt);
  std::vector<std::string> names() const override;
  bool contains(const std::string& name) const override { return ckpt_.contains(name); }
  DType dtype(const std::string& name) const override { return ckpt_.entry(name).dtype; }
  Tensor tensor(const std::string& name) const override { return ckpt_.tensor(name); }
  std::optional<QuantWeight> quant_weight(const std::string& name, bool linear) const override;
  std::string file_of(const std::string& name) const override { return ckpt_.file_of(name); }
  const std::string& where() const override { return dir_; }
  const CheckpointReader& reader() const { return ckpt_; }

 private:
  std::string dir_;
  CheckpointReader ckpt_;
  std::optional<QuantSpec> quant_, head_;
};

}  // namespace lathe
