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
          {"bits", spec.format == QuantFormat::kInt8 ? 8 : spec.format == QuantFormat::kInt6 ? 6 : 4},
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

QuantSpec head_quant_spec(const QuantizeOptions& opts) {
  if (opts.head) return *opts.head;
  // The 4-bit formats keep the head, the matrix most sensitive to rounding, at 6 bits (llama.cpp's Q6_K head
  // under Q4_0 spends the same bits); int8 and int6 keep their own format.
  const QuantFormat f = opts.spec.format;
  return f == QuantFormat::kInt8 || f == QuantFormat::kInt6 ? opts.spec : QuantSpec{QuantFormat::kInt6, 32};
}

QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir, const QuantizeOptions& opts) {
  check_quant_spec(opts.spec);
  const bool nf4 = opts.spec.format == QuantFormat::kNf4;
  const QuantSpec head_spec = head_quant_spec(opts);
  check_quant_spec(head_spec);
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
  const auto skipped = [&](const std::string& module) {
    for (const std::string& p : opts.skip)
      if (quant_module_matches(module, p)) return true;
    return false;
  };
  const auto check_group = [&](const std::string& name, const Shape& shape, const QuantSpec& spec,
                               const std::string& module) {
    LATHE_CHECK_ARG(spec.format == QuantFormat::kNf4 || shape[1] % spec.group == 0, in_dir, ": '", name, "' ", shape_str(shape), ": its input size ",
                    shape[1], " is not a multiple of the group size ", spec.group, " of format ",
                    quant_spec_name(spec), " (pass --skip ", module, " to keep it, or pick a format whose group "
                    "divides it)");
  };
  // checkpoint weight name -> (module path, format), for those quantised
  std::map<std::string, std::pair<std::string, QuantSpec>> target;
  std::string tied_embedding;  // the embedding table a tied head is quantised from ("" if none)
  for (const TensorBinding& b : model->bindings()) {
    if (model->config().tie_embeddings && b.slots.size() == 1 && b.slots[0] == &model->weights().embed_tokens.weight)
      tied_embedding = b.name;
    if (b.slots.size() != 1 || !is_linear.count(b.slots[0])) continue;
    const std::string module = b.name.ends_with(".weight") ? b.name.substr(0, b.name.size() - 7) : b.name;
    const QuantSpec spec = module == "lm_head" ? head_spec : opts.spec;
    if (module == "lm_head" && nf4) {
      report.kept.push_back(module + ": nf4 keeps the head as stored (as bitsandbytes folders do)");
    } else if (skipped(module)) {
      report.kept.push_back(module + ": --skip");
    } else if (b.transposed) {  // GPT-2's Conv1D [in, out]: the codes run along the input dimension
      report.kept.push_back(module + ": stored transposed ([in, out], GPT-2 Conv1D)");
    } else if (b.shape.size() != 2) {
      report.kept.push_back(module + ": not 2-D");
    } else {
      check_group(b.name, b.shape, spec, module);
      target[b.name] = {module, spec};
    }
  }
  const bool quantise_tied_head = !tied_embedding.empty() && !skipped("lm_head") && !nf4;
  if (!tied_embedding.empty() && !quantise_tied_head) report.kept.push_back("lm_head: tied to the embedding, kept");
  if (quantise_tied_head)
    check_group(tied_embedding, {model->config().vocab_size, model->config().hidden}, head_spec, "lm_head");

  const CheckpointReader ckpt = CheckpointReader::open_dir(in_dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ckpt.names()) {
    const Tensor t = ckpt.tensor(name);
    report.bytes_in += t.nbytes();
    const auto write_quantised = [&](const std::string& codes_name, const std::string& module,
                                     const QuantSpec& spec) {
      const QuantWeight q = quantize_weight(t, spec);
      tensors.push_back({codes_name, q.codes});
      tensors.push_back({module + ".scales", q.scales});
      if (q.mins.defined()) tensors.push_back({module + ".mins", q.mins});
      report.bytes_out += q.nbytes();
      ++report.n_quantized;
    };
    // A tied head: the float table stays for the lookup, its quantised copy becomes lm_head.
    if (quantise_tied_head && name == tied_embedding) write_quantised("lm_head.weight", "lm_head", head_spec);
    auto it = target.find(name);
    if (it == target.end()) {
      tensors.push_back({name, t});
      report.bytes_out += t.nbytes();
      continue;
    }
    if (it->second.second.format == QuantFormat::kNf4) {  // bitsandbytes' tensors (models/nf4_checkpoint.h)
      const QuantWeight q = quantize_weight(t, it->second.second);
      report.bytes_out += q.nbytes();
      ++report.n_quantized;
      append_nf4_tensors(name, q, tensors);
      continue;
    }
    write_quantised(name, it->second.first, it->second.second);
  }
  fs::create_directories(out_dir);
  save_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors);

  nlohmann::json config = model->config().hf_config;
  std::vector<std::string> kept;
  for (const std::string& k : report.kept) kept.push_back(k.substr(0, k.find(':')));
  if (opts.spec.format == QuantFormat::kNf4) {
    config["quantization_config"] = bnb_nf4_quantization_config(config.value("torch_dtype", "float32"), kept);
  } else {
    nlohmann::json qc = lathe_quantization_config(opts.spec, kept);
    if (quant_spec_name(head_spec) != quant_spec_name(opts.spec)) qc["lm_head_format"] = quant_spec_name(head_spec);
    config["quantization_config"] = qc;
  }
  write_file_atomic((fs::path(out_dir) / "config.json").string(), config.dump(2) + "\n");
  for (const auto& entry : fs::directory_iterator(in_dir)) {
    const std::string leaf = entry.path().filename().string();
    if (!entry.is_regular_file() || is_rewritten(leaf)) continue;
    write_file_atomic((fs::path(out_dir) / leaf).string(), read_file(entry.path().string()));
  }
  return report;
}

}  // namespace lathe
