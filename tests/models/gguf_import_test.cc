// GGUF import (docs/gguf.md) on the Llama fixture: a GGUF file written from the fixture folder as llama.cpp's
// converter and quantiser would write it (gguf_writer.h: the spec's layout, the rotary q/k permutation,
// Llama 3 scaling as rope_freqs, ggml's reference Q8_0 / Q4_0 quantisers) loads as the same model: F32
// weights bit for bit and logits within rounding of the safetensors model, Q8_0 / Q4_0 weights as the very
// codes and scales of lathe's own int8 / int4 quantisation, F16 as the f16 rounding of each weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "../e2e/cli_run.h"
#include "gguf_writer.h"
#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/gguf_import.h"
#include "lathe/models/model.h"
#include "lathe/models/quantize.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
namespace {

std::string llama() { return testing::fixtures_root() + "/models/llama"; }

double relative_error(const Tensor& a, const Tensor& b) {
  const auto av = a.to(DType::kF32).to_vector(), bv = b.to(DType::kF32).to_vector();
  double d2 = 0, b2 = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    d2 += (double(av[i]) - bv[i]) * (double(av[i]) - bv[i]);
    b2 += double(bv[i]) * bv[i];
  }
  return std::sqrt(d2 / b2);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return ac.dtype() == bc.dtype() && ac.shape() == bc.shape() &&
         std::memcmp(ac.raw_data(), bc.raw_data(), ac.nbytes()) == 0;
}

Tensor logits_of(const Model& m) {
  NoGradGuard no_grad;
  const Tensor ids = SafetensorsFile::open(llama() + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  return m.forward(ids);
}

std::string write_gguf(const std::string& name, const testing::FolderGgufOptions& o) {
  const std::string path = testing::scratch_dir("gguf_import") + "/" + name + ".gguf";
  testing::write_folder_gguf(llama(), path, o);
  return path;
}

// The Linears of two models side by side (for_each_linear_module's fixed order).
std::vector<std::pair<const Linear*, const Linear*>> linear_pairs(const Model& a, const Model& b) {
  std::vector<const Linear*> la, lb;
  for_each_linear_module(a.weights(), [&](const Linear& l) { la.push_back(&l); });
  for_each_linear_module(b.weights(), [&](const Linear& l) { lb.push_back(&l); });
  std::vector<std::pair<const Linear*, const Linear*>> out;
  for (size_t i = 0; i < la.size(); ++i) out.push_back({la[i], lb[i]});
  return out;
}

// The only difference from the safetensors model is Llama 3 scaling: transformers scales inv_freq by its
// smoothing formula, llama.cpp divides by convert_hf_to_gguf's factor (1 / the same formula), a few f32
// roundings apart (2^-24 relative each) in angles of up to ~128 radians: far below 1e-5 of the logits.
constexpr double kRopeRounding = 1e-5;

TEST(GgufImport, F32IsTheSafetensorsModel) {
  const auto st = Model::load(llama(), {.force_f32 = true});
  const auto gg = Model::load(write_gguf("f32", {}));
  const ModelConfig &a = gg->config(), &b = st->config();
  EXPECT_EQ(a.family, "llama");
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.ffn, b.ffn);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  // Every parameter under its Hugging Face name, bit for bit (q and k permuted back).
  std::map<std::string, Tensor> want;
  st->for_each_param([&](const std::string& n, const Tensor& t, ParamRole, int) { want[n] = t; });
  int n = 0;
  gg->for_each_param([&](const std::string& name, const Tensor& t, ParamRole, int) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(same_bytes(t, want[name])) << name;
    ++n;
  });
  EXPECT_EQ(n, static_cast<int>(want.size()));
  // Rope: the factors give the same inverse frequencies within f32 rounding.
  const double err = relative_error(logits_of(*gg), logits_of(*st));
  EXPECT_LT(err, kRopeRounding);
}

TEST(GgufImport, Qwen3IsTheSafetensorsModel) {
  // qwen3: q/k norms, a tied head, no q/k permutation (NeoX rope in llama.cpp), no rope_freqs.
  const std::string dir = testing::fixtures_root() + "/models/qwen3";
  const std::string path = testing::scratch_dir("gguf_qwen3") + "/qwen3.gguf";
  testing::write_folder_gguf(dir, path, {});
  const auto st = Model::load(dir, {.force_f32 = true});
  const auto gg = Model::load(path);
  EXPECT_EQ(gg->config().family, "qwen3");
  EXPECT_TRUE(gg->config().qk_norm);
  EXPECT_TRUE(gg->config().tie_embeddings);
  std::map<std::string, Tensor> want;
  st->for_each_param([&](const std::string& n, const Tensor& t, ParamRole, int) { want[n] = t; });
  int n = 0;
  gg->for_each_param([&](const std::string& name, const Tensor& t, ParamRole, int) {
    EXPECT_TRUE(want.count(name) && same_bytes(t, want[name])) << name;
    ++n;
  });
  EXPECT_EQ(n, static_cast<int>(want.size()));
  NoGradGuard no_grad;
  const Tensor ids = SafetensorsFile::open(dir + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  EXPECT_EQ(relative_error(gg->forward(ids), st->forward(ids)), 0.0);  // the same weights and rope
}

TEST(GgufImport, UnpermutedQkWouldChangeTheLogits) {
  // The test above can see the permutation: a file whose q/k rows were not permuted loads as a different
  // model (its q/k rows shuffled), far from the safetensors logits.
  const auto st = Model::load(llama(), {.force_f32 = true});
  const auto gg = Model::load(write_gguf("unpermuted", {.permute_qk = false}));
  EXPECT_GT(relative_error(logits_of(*gg), logits_of(*st)), 1e-2);
}

TEST(GgufImport, F16AndBF16AreEachWeightRounded) {
  const auto st = Model::load(llama(), {.force_f32 = true});
  for (const auto& [type, dtype, bits] : {std::tuple{GgmlType::kF16, DType::kF16, 11}, std::tuple{GgmlType::kBF16, DType::kBF16, 8}}) {
    const auto gg = Model::load(write_gguf(ggml_type_name(type), {.matrices = type, .embedding = type}));
    for (const auto& [g, s] : linear_pairs(*gg, *st)) {
      ASSERT_EQ(g->weight.dtype(), dtype);  // kept as stored, like a 16-bit safetensors folder
      EXPECT_TRUE(same_bytes(g->weight, s->weight.to(dtype))) << ggml_type_name(type);
    }
    EXPECT_TRUE(same_bytes(gg->weights().embed_tokens.weight, st->weights().embed_tokens.weight.to(dtype)));
    // Logits: weights rounded to `bits` significant bits (relative error 2^-bits) through the 4 L + 1 = 9
    // matmuls a token passes.
    EXPECT_LT(relative_error(logits_of(*gg), logits_of(*st)), 9 * std::ldexp(1.0, -bits)) << ggml_type_name(type);
  }
}

TEST(GgufImport, Q8_0AndQ4_0AreLathesInt8AndInt4Codes) {
  const auto st = Model::load(llama(), {.force_f32 = true});
  for (const auto& [type, format] : {std::pair{GgmlType::kQ8_0, "int8"}, std::pair{GgmlType::kQ4_0, "int4"}}) {
    const QuantSpec spec = parse_quant_spec(format);
    const auto gg = Model::load(write_gguf(format, {.matrices = type}));
    int n = 0;
    for (const auto& [g, s] : linear_pairs(*gg, *st)) {
      ASSERT_TRUE(g->quant.defined() && !g->weight.defined()) << format;
      EXPECT_EQ(quant_spec_name(g->quant.spec), format);
      // ggml's reference quantiser (the writer) and lathe's give the same codes and f16 scales, and the
      // import puts them where lathe's layout has them (planes, q/k rows permuted back).
      const QuantWeight want = quantize_weight(s->weight, spec);
      EXPECT_TRUE(same_bytes(g->quant.codes, want.codes)) << format << " linear " << n;
      EXPECT_TRUE(same_bytes(g->quant.scales, want.scales)) << format << " linear " << n;
      ++n;
    }
    EXPECT_EQ(n, 15);
    // So the model is the folder lathe quantize writes, up to the rope rounding above.
    const std::string dir = testing::scratch_dir(std::string("gguf_lathe_") + format);
    quantize_checkpoint(llama(), dir, {.spec = spec, .head = spec});  // the file quantises its head alike
    EXPECT_LT(relative_error(logits_of(*gg), logits_of(*Model::load(dir))), kRopeRounding) << format;
  }
}

TEST(GgufImport, QuantisedEmbeddingIsDequantised) {
  // llama-quantize quantises token_embd too; the embedding lookup reads floats, so it is dequantised.
  const auto st = Model::load(llama(), {.force_f32 = true});
  const auto gg = Model::load(write_gguf("q8_embd", {.embedding = GgmlType::kQ8_0}));
  const Tensor want = dequantize_weight(quantize_weight(st->weights().embed_tokens.weight, parse_quant_spec("int8")));
  EXPECT_TRUE(same_bytes(gg->weights().embed_tokens.weight, want));
  // force_f32 dequantises the Q8_0 / Q4_0 Linears too.
  const auto q4 = Model::load(write_gguf("q4_f32", {.matrices = GgmlType::kQ4_0}), {.force_f32 = true});
  EXPECT_EQ(q4->weights().layers[0].mlp.down_proj.weight.dtype(), DType::kF32);
}

TEST(GgufImport, UnsupportedTensorTypesNameTheTensorAndType) {
  testing::GgufWriter w;
  w.str("general.architecture", "llama");
  const std::string dir = testing::scratch_dir("gguf_types");
  // A K-quant (Q6_K: 210 bytes per 256 weights) and a legacy type lathe does not import (Q5_0).
  for (const auto& [type, bytes, what] : {std::tuple{GgmlType::kQ6_K, 210, "K-quants are not supported yet"},
                                          std::tuple{GgmlType::kQ5_0, 22 * 8, "Q5_0, which is not supported"}}) {
    testing::GgufWriter t = w;
    t.raw_tensor("token_embd.weight", {1, 256}, type, std::string(bytes, '\0'));
    const std::string path = dir + "/" + ggml_type_name(type) + ".gguf";
    t.write(path);
    const GgufTensors src(std::make_shared<const GgufFile>(GgufFile::open(path)), ModelConfig{});
    try {
      src.tensor("model.embed_tokens.weight");
      ADD_FAILURE() << "no error for " << ggml_type_name(type);
    } catch (const NotImplemented& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find("'token_embd.weight'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  }
}

TEST(GgufImport, MissingMetadataAndOtherArchitecturesAreClearErrors) {
  const std::string dir = testing::scratch_dir("gguf_meta");
  testing::GgufWriter w;
  w.str("general.architecture", "falcon");
  w.write(dir + "/falcon.gguf");
  try {
    Model::load(dir + "/falcon.gguf");
    ADD_FAILURE() << "falcon loaded";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("GGUF architecture 'falcon' is not supported"), std::string::npos) << e.what();
  }
  // A Llama file without its block count.
  testing::GgufWriter l;
  l.str("general.architecture", "llama");
  l.u32("llama.embedding_length", 64);
  l.u32("llama.attention.head_count", 4);
  l.raw_tensor("token_embd.weight", {4, 64}, GgmlType::kF32, std::string(4 * 64 * 4, '\0'));
  l.write(dir + "/nolayers.gguf");
  try {
    Model::load(dir + "/nolayers.gguf");
    ADD_FAILURE() << "loaded without llama.block_count";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("nolayers.gguf: no metadata key 'llama.block_count'"), std::string::npos)
        << e.what();
  }
}

TEST(GgufImport, CliInfoAndGenerateTakeTheFile) {
  const std::string path = write_gguf("cli_q8", {.matrices = GgmlType::kQ8_0});
  auto [code, info] = testing::run_lathe("info " + path);
  ASSERT_EQ(code, 0) << info;
  EXPECT_NE(info.find("family        llama"), std::string::npos) << info;
  EXPECT_NE(info.find("int8: "), std::string::npos) << info;  // the Q8_0 Linears, held as int8
  EXPECT_NE(info.find("Q8_0: 15"), std::string::npos) << info;  // 2 layers x 7 + the head, as stored
  EXPECT_NE(info.find("tokenizer     none in the file"), std::string::npos) << info;
  // Greedy ids: the file and the folder lathe quantize writes agree (same codes; the rope rounding above
  // is far below a logit gap of this fixture's prompt).
  const std::string dir = testing::scratch_dir("gguf_cli_int8");
  quantize_checkpoint(llama(), dir, {.spec = parse_quant_spec("int8")});
  const std::string args = " --prompt-ids 1,5,9,14 --max-tokens 8 --ignore-eos";
  auto [code_a, a] = testing::run_lathe("generate " + path + args);
  auto [code_b, b] = testing::run_lathe("generate " + dir + args);
  ASSERT_EQ(code_a, 0) << a;
  ASSERT_EQ(code_b, 0) << b;
  EXPECT_EQ(a.substr(0, a.find('\n')), b.substr(0, b.find('\n')));
  // --prompt needs a tokenizer: the error names the file and the alternative.
  auto [code_p, p] = testing::run_lathe("generate " + path + " --prompt hi");
  EXPECT_EQ(code_p, 1) << p;
  EXPECT_NE(p.find(path + ": no tokenizer in the GGUF metadata"), std::string::npos) << p;
  // A file that is not there, or not GGUF, is named.
  auto [code_m, m] = testing::run_lathe("info " + path + ".missing.gguf");
  EXPECT_NE(code_m, 0);
  EXPECT_NE(m.find(path + ".missing.gguf"), std::string::npos) << m;
}

}  // namespace
}  // namespace lathe
