// quantize_checkpoint (see quantize.h).
#include "lathe/models/quantize.h"

#include <filesystem>
#include <map>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/model.h"
#include "lathe/models/nf4_checkpoint.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

// Checkpoint files that are not copied: weights (rewritten) and the shard index; config.json is rewritten.
bool is_rewritten(const std::string& name) {
  for (const char* ext : {".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".pt", ".pth", ".ckpt",
                          ".msgpack", ".h5", ".gguf"})
    if (name.ends_with(ext)) return true;
  return name == "config.json";
}

// lathe's own quantization_config (docs/quantization.md).
nlohmann::json lathe_quantization_config(const QuantSpec& spec, const std::vector<std::string>& kept) {
  return {{"quant_method", "lathe"},
          {"format", quant_spec_name(spec)},
          {"group_size", spec.group},
          {"bits", spec.format == QuantFormat::kInt8 ? 8 : 4},
          {"symmetric", spec.format != QuantFormat::kInt4Asym},
          {"modules_not_converted", kept}};
}

}  // namespace

int quantize_decoder_linears(Model& model, const QuantSpec& spec) {
  check_quant_spec(spec);
  NoGradGuard no_grad;
  int n = 0;
  for (DecoderLayer& layer : model.weights().layers)
    for (Linear* l : {&layer.self_attn.q_proj, &layer.self_attn.k_proj, &layer.self_attn.v_proj,
                      &layer.self_attn.o_proj, &layer.mlp.gate_proj, &layer.mlp.up_proj, &layer.mlp.down_proj}) {
      if (!l->weight.defined()) continue;  // already quantised, or absent (MoE layers)
      LATHE_CHECK_ARG(!l->weight.requires_grad(), "[quantize] a Linear weight that trains cannot be quantised");
      l->quant = quantize_weight(l->weight, spec);
      l->weight = Tensor();
      l->bf16 = Tensor();
      ++n;
    }
  return n;
}

bool quant_module_matches(const std::string& module, const std::string& pattern) {
  return !pattern.empty() && (module == pattern || (module.size() > pattern.size() && module.ends_with("." + pattern)));
}

QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir, const QuantizeOptions& opts) {
  check_quant_spec(opts.spec);
  LATHE_CHECK_ARG(!fs::exists(out_dir) || (fs::is_directory(out_dir) && fs::is_empty(out_dir)), out_dir,
                  ": exists and is not an empty folder (lathe quantize writes a new folder)");
  NoGradGuard no_grad;
  // The model's structure tells which checkpoint tensors are plain Linear weights.
  const std::unique_ptr<Model> model = Model::load(in_dir, {.map_in_place = true});
  const nlohmann::json& hf = model->config().hf_config;
  LATHE_CHECK_ARG(!hf.contains("quantization_config") || hf["quantization_config"].is_null(), in_dir,
                  ": is already quantised (quantise the f32 / bf16 / f16 original)");
  std::map<const Tensor*, bool> is_linear;
  for_each_linear(model->weights(), [&](const Linear& l) { is_linear[&l.weight] = true; });

  QuantizeReport report;
  std::map<std::string, std::string> target;  // checkpoint weight name -> module path, for those quantised
  for (const TensorBinding& b : model->bindings()) {
    if (b.slots.size() != 1 || !is_linear.count(b.slots[0])) continue;
    const std::string module = b.name.ends_with(".weight") ? b.name.substr(0, b.name.size() - 7) : b.name;
    bool skipped = false;
    for (const std::string& p : opts.skip) skipped = skipped || quant_module_matches(module, p);
    if (skipped) {
      report.kept.push_back(module + ": --skip");
    } else if (b.transposed) {  // GPT-2's Conv1D [in, out]: the codes run along the input dimension
      report.kept.push_back(module + ": stored transposed ([in, out], GPT-2 Conv1D)");
    } else if (b.shape.size() != 2) {
      report.kept.push_back(module + ": not 2-D");
    } else {
      LATHE_CHECK_ARG(opts.spec.format == QuantFormat::kNf4 || b.shape[1] % opts.spec.group == 0, in_dir, ": '", b.name,
                      "' ", shape_str(b.shape), ": its input size ", b.shape[1],
                      " is not a multiple of the group size ", opts.spec.group, " of format ",
                      quant_spec_name(opts.spec), " (pass --skip ", module,
                      " to keep it, or pick a format whose group divides it)");
      target[b.name] = module;
    }
  }
  if (model->config().tie_embeddings) report.kept.push_back("lm_head: tied to model.embed_tokens (an embedding)");

  const CheckpointReader ckpt = CheckpointReader::open_dir(in_dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ckpt.names()) {
    const Tensor t = ckpt.tensor(name);
    report.bytes_in += t.nbytes();
    auto it = target.find(name);
    if (it == target.end()) {
      tensors.push_back({name, t});
      report.bytes_out += t.nbytes();
      continue;
    }
    const QuantWeight q = quantize_weight(t, opts.spec);
    report.bytes_out += q.nbytes();
    ++report.n_quantized;
    if (opts.spec.format == QuantFormat::kNf4) {  // bitsandbytes' tensors (models/nf4_checkpoint.h)
      append_nf4_tensors(name, q, tensors);
      continue;
    }
    tensors.push_back({name, q.codes});
    tensors.push_back({it->second + ".scales", q.scales});
    if (q.mins.defined()) tensors.push_back({it->second + ".mins", q.mins});
  }
  fs::create_directories(out_dir);
  save_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors);

  nlohmann::json config = model->config().hf_config;
  std::vector<std::string> kept;
  for (const std::string& k : report.kept) kept.push_back(k.substr(0, k.find(':')));
  config["quantization_config"] = opts.spec.format == QuantFormat::kNf4
                                      ? bnb_nf4_quantization_config(config.value("torch_dtype", "float32"), kept)
                                      : lathe_quantization_config(opts.spec, kept);
  write_file_atomic((fs::path(out_dir) / "config.json").string(), config.dump(2) + "\n");
  for (const auto& entry : fs::directory_iterator(in_dir)) {
    const std::string leaf = entry.path().filename().string();
    if (!entry.is_regular_file() || is_rewritten(leaf)) continue;
    write_file_atomic((fs::path(out_dir) / leaf).string(), read_file(entry.path().string()));
  }
  return report;
}

}  // namespace lathe
