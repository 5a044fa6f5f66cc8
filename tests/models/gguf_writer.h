// Test support: a small GGUF writer following the spec (ggml/docs/gguf.md, version 3), independent of
// lathe's reader, and a converter that writes a Hugging Face Llama folder as llama.cpp's
// convert_hf_to_gguf.py would (tensor names, the rotary q/k row permutation, Llama 3 scaling as a
// rope_freqs tensor), its weights as F32, F16, Q8_0 or Q4_0 blocks quantised as ggml's reference
// quantisers do (quantize_row_q8_0_ref / quantize_row_q4_0_ref).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/io/file_read.h"
#include "lathe/io/gguf.h"
#include "lathe/io/safetensors.h"
#include "lathe/ref/quant.h"
#include "lathe/tensor/dtype.h"

namespace lathe::testing {

class GgufWriter {
 public:
  // Metadata, in the order added.
  void u32(const std::string& k, uint32_t v) { scalar(k, GgufType::kU32, &v, 4); }
  void i32(const std::string& k, int32_t v) { scalar(k, GgufType::kI32, &v, 4); }
  void f32(const std::string& k, float v) { scalar(k, GgufType::kF32, &v, 4); }
  void boolean(const std::string& k, bool v) {
    const uint8_t b = v;
    scalar(k, GgufType::kBool, &b, 1);
  }
  void str(const std::string& k, const std::string& v) {
    key(k, GgufType::kString);
    put_string(kv_, v);
  }
  void strings(const std::string& k, const std::vector<std::string>& v) {
    array_head(k, GgufType::kString, v.size());
    for (const std::string& s : v) put_string(kv_, s);
  }
  void f32s(const std::string& k, const std::vector<float>& v) {
    array_head(k, GgufType::kF32, v.size());
    put(kv_, v.data(), v.size() * 4);
  }
  void i32s(const std::string& k, const std::vector<int32_t>& v) {
    array_head(k, GgufType::kI32, v.size());
    put(kv_, v.data(), v.size() * 4);
  }
  // Any raw value (type + bytes already encoded), for the reader's type coverage.
  void raw(const std::string& k, GgufType t, const std::string& bytes) {
    key(k, t);
    kv_ += bytes;
  }

  // A tensor from f32 values [rows, K] (or 1-D), stored as `type`.
  void tensor(const std::string& name, const Shape& shape, const std::vector<float>& x, GgmlType type) {
    std::string data;
    if (type == GgmlType::kF32) {
      put(data, x.data(), x.size() * 4);
    } else if (type == GgmlType::kF16) {
      for (float v : x) {
        const f16 h = f32_to_f16(v);
        put(data, &h, 2);
      }
    } else if (type == GgmlType::kBF16) {
      for (float v : x) {
        const bf16 h = f32_to_bf16(v);  // round to nearest even, as gguf-py's bf16 conversion
        put(data, &h, 2);
      }
    } else {
      for (size_t b = 0; b < x.size(); b += 32) (type == GgmlType::kQ8_0 ? q8_0 : q4_0)(&x[b], data);
    }
    tensors_.push_back({name, shape, type, std::move(data)});
  }

  // A tensor of any type from its encoded bytes.
  void raw_tensor(const std::string& name, const Shape& shape, GgmlType type, std::string bytes) {
    tensors_.push_back({name, shape, type, std::move(bytes)});
  }

  // The file image: header, metadata, tensor infos, padding to `alignment`, data (each tensor aligned).
  std::string image(uint32_t version = 3, size_t alignment = 32) const {
    std::string out;
    put(out, "GGUF", 4);
    put(out, &version, 4);
    const uint64_t n_t = tensors_.size(), n_kv = n_kv_;
    put(out, &n_t, 8);
    put(out, &n_kv, 8);
    out += kv_;
    uint64_t offset = 0;
    for (const T& t : tensors_) {
      put_string(out, t.name);
      const uint32_t n_dims = static_cast<uint32_t>(t.shape.size());
      put(out, &n_dims, 4);
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
        const uint64_t d = static_cast<uint64_t>(*it);
        put(out, &d, 8);
      }
      const uint32_t type = static_cast<uint32_t>(t.type);
      put(out, &type, 4);
      put(out, &offset, 8);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    for (const T& t : tensors_) {
      out += t.data;
      out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    }
    return out;
  }
  void write(const std::string& path, uint32_t version = 3) const {
    std::ofstream f(path, std::ios::binary);
    const std::string img = image(version);
    f.write(img.data(), static_cast<std::streamsize>(img.size()));
  }

  static void put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  static void put_string(std::string& out, const std::string& s) {
    const uint64_t n = s.size();
    put(out, &n, 8);
    out += s;
  }

 private:
  struct T {
    std::string name;
    Shape shape;
    GgmlType type;
    std::string data;
  };
  void key(const std::string& k, GgufType t) {
    put_string(kv_, k);
    const uint32_t tt = static_cast<uint32_t>(t);
    put(kv_, &tt, 4);
    ++n_kv_;
  }
  void scalar(const std::string& k, GgufType t, const void* v, size_t n) {
    key(k, t);
    put(kv_, v, n);
  }
  void array_head(const std::string& k, GgufType elem, uint64_t n) {
    key(k, GgufType::kArray);
    const uint32_t e = static_cast<uint32_t>(elem);
    put(kv_, &e, 4);
    put(kv_, &n, 8);
  }
  // ggml-quants.c quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d).
  static void q8_0(const float* x, std::string& out) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f, id = d ? 1.f / d : 0.f;
    const f16 h = f32_to_f16(d);
    put(out, &h, 2);
    for (int j = 0; j < 32; ++j) {
      const int8_t q = static_cast<int8_t>(std::roundf(x[j] * id));
      put(out, &q, 1);
    }
  }
  // ggml-quants.c quantize_row_q4_0_ref: d = (the value of largest |x|) / -8, q = min(15, (int8)(x/d + 8.5));
  // byte j holds input j (low nibble) and input j + 16 (high nibble).
  // (Compiled without FMA contraction, as ggml's C is: ref/quant.h says why.)
  LATHE_QUANT_NO_FMA static void q4_0(const float* x, std::string& out) {
    LATHE_QUANT_NO_FMA_BODY
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.f, id = d ? 1.f / d : 0.f;
    const f16 h = f32_to_f16(d);
    put(out, &h, 2);
    for (int j = 0; j < 16; ++j) {
      const uint8_t lo = std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const uint8_t hi = std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      const uint8_t b = static_cast<uint8_t>(lo | (hi << 4));
      put(out, &b, 1);
    }
  }
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// What convert_hf_to_gguf.py (LlamaModel, Qwen3Model) and llama-quantize write for a folder.
struct FolderGgufOptions {
  GgmlType matrices = GgmlType::kF32;  // every 2-D weight but the embedding
  GgmlType embedding = GgmlType::kF32;
  bool permute_qk = true;  // LlamaModel.permute (false: a file as a broken converter would write it)
};

// LlamaModel.permute(w, n_head, n_head_kv): w.reshape(heads, 2, D/2, C).swapaxes(1, 2).
inline std::vector<float> gguf_permute_rows(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t heads) {
  std::vector<float> out(w.size());
  const int64_t d = rows / heads;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < d / 2; ++i)
        std::copy_n(&w[(h * d + s * d / 2 + i) * cols], cols, &out[(h * d + 2 * i + s) * cols]);
  return out;
}

// convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: Llama 3 scaling as per-frequency factors.
inline std::vector<float> gguf_llama3_rope_factors(const nlohmann::json& hf) {
  const nlohmann::json& rs = hf["rope_scaling"];
  const double base = hf.value("rope_theta", 10000.0);
  const int64_t dim = hf.value("head_dim", hf["hidden_size"].get<int64_t>() / hf["num_attention_heads"].get<int64_t>());
  const double factor = rs.value("factor", 8.0), low = rs.value("low_freq_factor", 1.0),
               high = rs.value("high_freq_factor", 4.0),
               old_ctx = rs.value("original_max_position_embeddings", 8192.0);
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.f / std::pow(static_cast<float>(base), static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < old_ctx / high) {
      out.push_back(1.f);
    } else if (wavelen > old_ctx / low) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// Writes the Llama or Qwen3 folder `dir` (config.json + model.safetensors, f32) as a GGUF file at `path`
// (general.architecture = its model_type; only Llama's q/k rows are permuted, as convert_hf_to_gguf does).
inline void write_folder_gguf(const std::string& dir, const std::string& path, const FolderGgufOptions& o,
                             const std::function<void(GgufWriter&)>& extra_metadata = {}) {
  const nlohmann::json hf = nlohmann::json::parse(read_file(dir + "/config.json"));
  const CheckpointReader ckpt = CheckpointReader::open_dir(dir);
  const int64_t heads = hf["num_attention_heads"], kv_heads = hf.value("num_key_value_heads", heads);
  const int64_t hidden = hf["hidden_size"];
  const int64_t head_dim = hf.value("head_dim", hidden / heads);
  const std::string arch = hf["model_type"].get<std::string>(), k = arch + ".";
  const bool permute = o.permute_qk && arch == "llama";
  GgufWriter w;
  w.str("general.architecture", arch);
  w.str("general.name", "lathe test fixture");
  w.u32(k + "context_length", hf["max_position_embeddings"].get<uint32_t>());
  w.u32(k + "embedding_length", static_cast<uint32_t>(hidden));
  w.u32(k + "block_count", hf["num_hidden_layers"].get<uint32_t>());
  w.u32(k + "feed_forward_length", hf["intermediate_size"].get<uint32_t>());
  w.u32(k + "attention.head_count", static_cast<uint32_t>(heads));
  w.u32(k + "attention.head_count_kv", static_cast<uint32_t>(kv_heads));
  w.u32(k + "attention.key_length", static_cast<uint32_t>(head_dim));
  w.u32(k + "attention.value_length", static_cast<uint32_t>(head_dim));
  w.u32(k + "rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.f32(k + "rope.freq_base", hf.value("rope_theta", 10000.f));
  w.f32(k + "attention.layer_norm_rms_epsilon", hf.value("rms_norm_eps", 1e-6f));
  w.u32("general.alignment", 32);
  if (extra_metadata) extra_metadata(w);
  const auto values = [&](const std::string& name) {
    const Tensor t = ckpt.tensor(name).to(DType::kF32).contiguous();
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  const auto shape = [&](const std::string& name) { return ckpt.entry(name).shape; };
  if (hf.contains("rope_scaling") && hf["rope_scaling"].is_object() &&
      hf["rope_scaling"].value("rope_type", "") == "llama3") {
    const std::vector<float> f = gguf_llama3_rope_factors(hf);
    w.tensor("rope_freqs.weight", {static_cast<int64_t>(f.size())}, f, GgmlType::kF32);
  }
  w.tensor("token_embd.weight", shape("model.embed_tokens.weight"), values("model.embed_tokens.weight"), o.embedding);
  w.tensor("output_norm.weight", shape("model.norm.weight"), values("model.norm.weight"), GgmlType::kF32);
  if (ckpt.contains("lm_head.weight")) w.tensor("output.weight", shape("lm_head.weight"), values("lm_head.weight"), o.matrices);
  const char* kNames[][2] = {{"input_layernorm", "attn_norm"},       {"self_attn.q_proj", "attn_q"},
                             {"self_attn.k_proj", "attn_k"},         {"self_attn.v_proj", "attn_v"},
                             {"self_attn.o_proj", "attn_output"},    {"post_attention_layernorm", "ffn_norm"},
                             {"mlp.gate_proj", "ffn_gate"},          {"mlp.up_proj", "ffn_up"},
                             {"mlp.down_proj", "ffn_down"},          {"self_attn.q_norm", "attn_q_norm"},
                             {"self_attn.k_norm", "attn_k_norm"}};
  for (int64_t l = 0; l < hf["num_hidden_layers"].get<int64_t>(); ++l)
    for (const auto& n : kNames) {
      const std::string src = "model.layers." + std::to_string(l) + "." + n[0] + ".weight";
      if (!ckpt.contains(src)) continue;  // Qwen3's q/k norms only
      const Shape s = shape(src);
      std::vector<float> x = values(src);
      if (permute && std::string(n[1]) == "attn_q") x = gguf_permute_rows(x, s[0], s[1], heads);
      if (permute && std::string(n[1]) == "attn_k") x = gguf_permute_rows(x, s[0], s[1], kv_heads);
      w.tensor("blk." + std::to_string(l) + "." + n[1] + ".weight", s, x, s.size() == 1 ? GgmlType::kF32 : o.matrices);
    }
  w.write(path);
}

}  // namespace lathe::testing
