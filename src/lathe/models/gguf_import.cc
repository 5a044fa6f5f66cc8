#include "lathe/models/gguf_import.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
using nlohmann::json;

namespace {

struct GgufArch {
  const char* gguf;          // general.architecture
  const char* hf_class;      // config.json architectures[0]
  const char* model_type;
  bool permuted_qk;          // convert_hf_to_gguf permutes q/k rows (LlamaModel.permute)
};
constexpr GgufArch kArchs[] = {
    {"llama", "LlamaForCausalLM", "llama", true},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", false},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", false},
};

const GgufArch& find_arch(const GgufFile& g) {
  const std::string arch = g.string("general.architecture");
  for (const GgufArch& a : kArchs)
    if (arch == a.gguf) return a;
  throw NotImplemented(str_cat(g.path(), ": GGUF architecture '", arch, "' is not supported (llama, qwen2, qwen3)"));
}

// Per-layer GGUF tensor names (llama.cpp's LLM_TENSOR_NAMES) and their Hugging Face suffixes.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

bool is_k_quant(GgmlType t) { return t >= GgmlType::kQ2_K && t <= GgmlType::kQ8_K; }

[[noreturn]] void unsupported_type(const GgufFile& g, const GgufTensorInfo& t) {
  throw NotImplemented(str_cat(g.path(), ": tensor '", t.name, "' has type ", ggml_type_name(t.type),
                               is_k_quant(t.type) ? "; K-quants are not supported yet" : ", which is not supported",
                               " (lathe reads F32, F16, BF16, Q8_0 and Q4_0; `llama-quantize --pure` writes Q8_0 "
                               "or Q4_0 for every tensor, docs/gguf.md)"));
}

}  // namespace

bool is_gguf_path(const std::string& path) { return path.ends_with(".gguf") || path.ends_with(".GGUF"); }

std::string gguf_to_hf_name(const std::string& n) {
  if (n == "token_embd.weight") return "model.embed_tokens.weight";
  if (n == "output_norm.weight") return "model.norm.weight";
  if (n == "output.weight") return "lm_head.weight";
  if (!n.starts_with("blk.")) return "";
  const size_t dot = n.find('.', 4);
  if (dot == std::string::npos || dot == 4) return "";
  const std::string layer = n.substr(4, dot - 4);
  if (!std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; })) return "";
  const std::string rest = n.substr(dot + 1);
  for (const auto& [gguf, hf] : kLayerNames)
    if (rest == gguf) return "model.layers." + layer + "." + hf;
  return "";
}

std::string gguf_config_json(const GgufFile& g) {
  const GgufArch& a = find_arch(g);
  const std::string k = std::string(a.gguf) + ".";
  json hf;
  hf["architectures"] = {a.hf_class};
  hf["model_type"] = a.model_type;
  // The vocabulary is the embedding's rows (the token list, when present, is checked against it by the
  // text model loader).
  hf["vocab_size"] = g.tensor_info("token_embd.weight").shape.at(0);
  const int64_t hidden = g.integer(k + "embedding_length");
  const int64_t heads = g.integer(k + "attention.head_count");
  hf["hidden_size"] = hidden;
  hf["num_hidden_layers"] = g.integer(k + "block_count");
  hf["intermediate_size"] = g.integer(k + "feed_forward_length");
  hf["num_attention_heads"] = heads;
  hf["num_key_value_heads"] = g.integer_or(k + "attention.head_count_kv", heads);
  const int64_t head_dim = g.integer_or(k + "attention.key_length", heads > 0 ? hidden / heads : 0);
  hf["head_dim"] = head_dim;
  hf["max_position_embeddings"] = g.integer(k + "context_length");
  hf["rms_norm_eps"] = g.number(k + "attention.layer_norm_rms_epsilon");
  hf["rope_theta"] = g.number_or(k + "rope.freq_base", 10000.0);
  const int64_t rot = g.integer_or(k + "rope.dimension_count", head_dim);
  if (rot != head_dim && head_dim > 0) hf["partial_rotary_factor"] = static_cast<double>(rot) / head_dim;
  const std::string scaling = g.string_or(k + "rope.scaling.type", "none");
  if (scaling == "linear") {
    hf["rope_scaling"] = {{"rope_type", "linear"}, {"factor", g.number(k + "rope.scaling.factor")}};
  } else if (scaling != "none") {
    throw NotImplemented(str_cat(g.path(), ": ", k, "rope.scaling.type '", scaling,
                                 "' is not supported (none, linear; Llama 3's scaling comes as rope_freqs)"));
  }
  hf["hidden_act"] = "silu";
  hf["tie_word_embeddings"] = !g.contains("output.weight");
  for (const char* id : {"bos", "eos", "padding"})
    if (g.find(str_cat("tokenizer.ggml.", id, "_token_id")))
      hf[std::string(id == std::string("padding") ? "pad" : id) + "_token_id"] =
          g.integer(str_cat("tokenizer.ggml.", id, "_token_id"));
  return hf.dump(2);
}

std::vector<float> gguf_rope_freq_factors(const GgufFile& g) {
  if (!g.contains("rope_freqs.weight")) return {};
  const GgufTensorInfo& t = g.tensor_info("rope_freqs.weight");
  LATHE_CHECK_FORMAT(ggml_dense_dtype(t.type) && t.shape.size() == 1, g.path(),
                     ": rope_freqs.weight must be a dense 1-D tensor, got ", ggml_type_name(t.type), " ",
                     shape_str(t.shape));
  const Tensor f = g.tensor("rope_freqs.weight").to(DType::kF32);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

GgufTensors::GgufTensors(std::shared_ptr<const GgufFile> g, const ModelConfig& cfg) : g_(std::move(g)) {
  const bool permute = find_arch(*g_).permuted_qk;
  for (const GgufTensorInfo& t : g_->tensors()) {
    const std::string hf = gguf_to_hf_name(t.name);
    if (hf.empty()) continue;
    to_gguf_[hf] = t.name;
    // LlamaModel.permute(w, n_head, n_head_kv): q with the query heads, k with the KV heads.
    if (permute && (hf.ends_with("q_proj.weight") || hf.ends_with("q_proj.bias"))) permuted_[hf] = cfg.n_heads;
    if (permute && (hf.ends_with("k_proj.weight") || hf.ends_with("k_proj.bias"))) permuted_[hf] = cfg.n_kv_heads;
  }
}

std::vector<std::string> GgufTensors::names() const {
  std::vector<std::string> out;
  for (const GgufTensorInfo& t : g_->tensors()) {
    if (t.name == "rope_freqs.weight") continue;  // read into the config
    const std::string hf = gguf_to_hf_name(t.name);
    out.push_back(hf.empty() ? t.name : hf);  // an unmapped name is reported as it is
  }
  std::sort(out.begin(), out.end());
  return out;
}

DType GgufTensors::dtype(const std::string& name) const {
  return ggml_dense_dtype(info(name).type).value_or(DType::kF32);  // quantised types are dequantised
}

int64_t GgufTensors::source_row(const std::string& name, int64_t r, int64_t n_rows) const {
  const auto it = permuted_.find(name);
  if (it == permuted_.end()) return r;
  // convert_hf_to_gguf: w.reshape(heads, 2, D/2, ...).swapaxes(1, 2): our row h·D + s·D/2 + i (the
  // rotate_half halves) is the file's row h·D + 2i + s (interleaved pairs).
  const int64_t d = n_rows / it->second, h = r / d, s = (r % d) / (d / 2), i = r % (d / 2);
  return h * d + 2 * i + s;
}

QuantWeight GgufTensors::split_blocks(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  if (t.type != GgmlType::kQ8_0 && t.type != GgmlType::kQ4_0) unsupported_type(*g_, t);
  const bool int8 = t.type == GgmlType::kQ8_0;
  const int64_t k = t.shape.back();
  const int64_t rows = shape_numel(t.shape) / std::max<int64_t>(k, 1);
  const int64_t blocks = k / kQuantUnit;  // the reader checked k % 32 == 0
  if (permuted_.count(name))
    LATHE_CHECK_FORMAT(rows % (2 * permuted_.at(name)) == 0, g_->path(), ": '", t.name, "' has ", rows,
                       " rows, not a whole number of heads of even size (", permuted_.at(name), " heads)");
  QuantWeight q;
  q.spec = {int8 ? QuantFormat::kInt8 : QuantFormat::kInt4, kQuantUnit};
  q.out = rows;
  q.in = k;
  q.codes = Tensor::empty({rows, quant_row_bytes(q.spec.format, k)}, int8 ? DType::kI8 : DType::kU8);
  q.scales = Tensor::empty({rows, blocks}, DType::kF16);
  const int64_t block_bytes = int8 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
  const int64_t unit_bytes = block_bytes - 2;  // after the f16 scale: 32 int8 codes or 16 bytes of nibbles
  const char* src = g_->tensor_data(t);
  char* codes = static_cast<char*>(q.codes.raw_data());
  char* scales = static_cast<char*>(q.scales.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = src + source_row(name, r, rows) * blocks * block_bytes;
    for (int64_t b = 0; b < blocks; ++b) {
      std::memcpy(scales + (r * blocks + b) * 2, row + b * block_bytes, 2);
      std::memcpy(codes + (r * blocks + b) * unit_bytes, row + b * block_bytes + 2, unit_bytes);
    }
  }
  return q;
}

Tensor GgufTensors::tensor(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  if (!ggml_dense_dtype(t.type)) {
    QuantWeight q = split_blocks(name);
    return dequantize_weight(q).view(t.shape);
  }
  Tensor stored = g_->tensor(t.name);
  if (!permuted_.count(name)) return stored;
  const int64_t rows = t.shape.at(0);
  LATHE_CHECK_FORMAT(rows % (2 * permuted_.at(name)) == 0, g_->path(), ": '", t.name, "' has ", rows,
                     " rows, not a whole number of heads of even size (", permuted_.at(name), " heads)");
  Tensor out = Tensor::empty(t.shape, stored.dtype());
  const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
  const char* src = static_cast<const char*>(stored.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * row_bytes, src + source_row(name, r, rows) * row_bytes, row_bytes);
  return out;
}

std::optional<QuantWeight> GgufTensors::quant_weight(const std::string& name, bool linear) const {
  const GgufTensorInfo& t = info(name);
  if (ggml_dense_dtype(t.type)) return std::nullopt;
  if (!linear) {
    if (t.type != GgmlType::kQ8_0 && t.type != GgmlType::kQ4_0) unsupported_type(*g_, t);
    return std::nullopt;  // an embedding or norm: tensor() dequantises it
  }
  return split_blocks(name);
}

}  // namespace lathe
