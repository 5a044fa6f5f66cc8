// merge_lora (see lora_merge.h).
#include "lathe/models/lora_merge.h"

#include <filesystem>
#include <map>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

// Checkpoint files that are not copied: weights (ours are rewritten) and the shard index.
bool is_weight_file(const std::string& name) {
  for (const char* ext : {".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".pt", ".pth", ".ckpt",
                          ".msgpack", ".h5", ".gguf"})
    if (name.ends_with(ext)) return true;
  return false;
}

// The update of `mod` in [out, in] (or [in, out] for a Conv1D), f32: PEFT get_delta_weight,
// transpose(B·A, fan_in_fan_out) · scaling.
Tensor lora_update(const LoraModule& mod, const std::map<std::string, Tensor>& a_of,
                   const std::map<std::string, Tensor>& b_of, float s) {
  const Tensor delta = scale(matmul(b_of.at(lora_b_name(mod.path)), a_of.at(lora_a_name(mod.path))), s);  // [out, in]
  return mod.conv1d ? delta.transpose(0, 1).contiguous() : delta;                                         // [in, out]
}

void copy_other_files(const std::string& base_dir, const std::string& out_dir, bool keep_config) {
  for (const auto& entry : fs::directory_iterator(base_dir)) {
    const std::string leaf = entry.path().filename().string();
    if (!entry.is_regular_file() || is_weight_file(leaf) || (!keep_config && leaf == "config.json")) continue;
    write_file_atomic((fs::path(out_dir) / leaf).string(), read_file(entry.path().string()));
  }
}

// A quantised base: loaded dequantised to f32 (Model::load force_f32), every tensor written in f32 from the
// model's bindings, the adapted ones with the update added.
int merge_into_dequantised(const std::string& base_dir, const std::string& adapter_dir, const std::string& out_dir) {
  std::unique_ptr<Model> model = Model::load(base_dir, {.force_f32 = true});
  const LoraAdapters adapters = LoraAdapters::load(*model, adapter_dir);
  const float s = adapters.config().scaling();
  std::map<std::string, Tensor> b_of, a_of;
  for (auto& [name, t] : adapters.peft_tensors()) (name.ends_with(".lora_A.weight") ? a_of : b_of)[name] = t;
  std::map<std::string, Tensor> merged;
  for (const LoraModule& mod : adapters.modules()) merged[mod.path + ".weight"] = lora_update(mod, a_of, b_of, s);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorBinding& b : model->bindings()) {
    Tensor w = b.save().to(DType::kF32);
    auto it = merged.find(b.name);
    if (it != merged.end()) {
      LATHE_CHECK_ARG(w.shape() == it->second.shape(), base_dir, ": '", b.name, "' has shape ", shape_str(w.shape()),
                      ", the adapter's update is ", shape_str(it->second.shape()));
      w = add(w, it->second);
    }
    tensors.push_back({b.name, w});
  }
  fs::create_directories(out_dir);
  save_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors);
  nlohmann::json config = model->config().hf_config;
  config.erase("quantization_config");
  config["torch_dtype"] = "float32";
  write_file_atomic((fs::path(out_dir) / "config.json").string(), config.dump(2) + "\n");
  copy_other_files(base_dir, out_dir, /*keep_config=*/false);
  return static_cast<int>(merged.size());
}

}  // namespace

int merge_lora(const std::string& base_dir, const std::string& adapter_dir, const std::string& out_dir) {
  LATHE_CHECK_ARG(!fs::exists(out_dir) || (fs::is_directory(out_dir) && fs::is_empty(out_dir)), out_dir,
                  ": exists and is not an empty folder (lathe merge writes a new folder)");
  NoGradGuard no_grad;
  const nlohmann::json hf =
      parse_json_object(read_file((fs::path(base_dir) / "config.json").string()), base_dir + "/config.json");
  if (hf.contains("quantization_config") && !hf["quantization_config"].is_null())
    return merge_into_dequantised(base_dir, adapter_dir, out_dir);
  std::unique_ptr<Model> model = Model::load(base_dir, {.map_in_place = true});  // the module structure only
  const LoraAdapters adapters = LoraAdapters::load(*model, adapter_dir);
  const CheckpointReader ckpt = CheckpointReader::open_dir(base_dir);
  const float s = adapters.config().scaling();
  std::map<std::string, Tensor> b_of;
  std::map<std::string, Tensor> a_of;
  for (auto& [name, t] : adapters.peft_tensors()) (name.ends_with(".lora_A.weight") ? a_of : b_of)[name] = t;

  std::map<std::string, Tensor> merged;
  for (const LoraModule& mod : adapters.modules()) {
    const std::string name = mod.path + ".weight";
    LATHE_CHECK_ARG(ckpt.contains(name), base_dir, ": no tensor '", name, "' to merge into");
    const Tensor w = ckpt.tensor(name);
    // PEFT get_delta_weight, added to the weight in place.
    const Tensor delta = lora_update(mod, a_of, b_of, s);
    LATHE_CHECK_ARG(w.shape() == delta.shape(), ckpt.file_of(name), ": '", name, "' has shape ", shape_str(w.shape()),
                    ", the adapter's update is ", shape_str(delta.shape()));
    Tensor sum = add(w.to(DType::kF32), delta);
    merged[name] = w.dtype() == DType::kF32 ? sum : sum.to(w.dtype());
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ckpt.names()) {
    auto it = merged.find(name);
    tensors.push_back({name, it != merged.end() ? it->second : ckpt.tensor(name)});
  }
  fs::create_directories(out_dir);
  save_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors);
  copy_other_files(base_dir, out_dir, /*keep_config=*/true);
  return static_cast<int>(merged.size());
}

}  // namespace lathe
