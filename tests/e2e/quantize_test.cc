// `lathe quantize` end to end on the Llama fixture: the folder it writes holds the documented layout
// (docs/quantization.md), loads as a model whose logits stay within the format's error of the f32 model,
// and `lathe generate` and `lathe verify` run on it; bad group sizes and --skip behave as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
namespace {

std::string llama() { return testing::fixtures_root() + "/models/llama"; }

// ||a - b|| / ||b||.
double relative_error(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector(), bv = b.to_vector();
  double d2 = 0, b2 = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    d2 += (double(av[i]) - bv[i]) * (double(av[i]) - bv[i]);
    b2 += double(bv[i]) * bv[i];
  }
  return std::sqrt(d2 / b2);
}

// ||quantised model - the same weights dequantised to f32|| / ||.||, over the 9 matmuls a token passes
// through in sequence (4 per layer of the 2-layer fixtures, and the head): f32 summation order only (up to
// 128 terms of 2^-24 each), or, on an AVX-512 VNNI CPU, where decode and prefill take the integer dot, each
// matmul's input rounded to int8 per 32 values (at most 1/254 of the unit's largest |x| per value: under 2^-7
// relative for these activations).
double same_weights_bound() {
  return cpu::quant_cpu_has_vnni() ? 9 * std::ldexp(1.0, -7) : 9 * 128 * std::ldexp(1.0, -24);
}

std::string quantize(const std::string& format, const std::string& extra = "") {
  const std::string out = testing::scratch_dir("quantized_llama_" + format);
  auto [code, text] = testing::run_lathe("quantize " + llama() + " " + out + " --format " + format + extra);
  EXPECT_EQ(code, 0) << text;
  return out;
}

// Logits on the fixture's reference input_ids.
Tensor logits_of(const Model& m) {
  NoGradGuard no_grad;
  const Tensor ids = SafetensorsFile::open(llama() + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  return m.forward(ids);
}

// Each format's logits against the f32 model's. To first order a Linear's relative output error is its
// weight's relative error ε = ||W - deq(W)|| / ||W||, and the errors of the matmuls a token passes through
// in sequence add up: per layer q/k/v then o, gate/up then down (4), and the LM head: 4·L + 1 = 9 for the
// fixture's 2 layers, times the largest ε of any quantised Linear. The quantised model also equals the
// dequantised f32 model (load with force_f32) up to f32 summation order.
TEST(Quantize, LogitsWithinTheFormatsError) {
  const auto f32 = Model::load(llama(), {.force_f32 = true});
  const Tensor want = logits_of(*f32);
  double int8_error = 0;
  for (const char* format : {"int8", "int6", "int4", "int4-g32", "int4-g64"}) {
    const std::string dir = quantize(format);
    const auto q = Model::load(dir);
    const QuantSpec spec = parse_quant_spec(format);
    // The layout: codes under the weight's own name, f16 scales (and mins) beside it; the config says so.
    const CheckpointReader ckpt = CheckpointReader::open_dir(dir);
    const std::string o = "model.layers.1.self_attn.o_proj";
    EXPECT_EQ(ckpt.entry(o + ".weight").dtype, spec.format == QuantFormat::kInt8 ? DType::kI8 : DType::kU8);
    EXPECT_EQ(ckpt.entry(o + ".scales").dtype, DType::kF16);
    EXPECT_EQ(ckpt.contains(o + ".mins"), quant_has_mins(spec.format));
    EXPECT_EQ(q->config().hf_config["quantization_config"]["format"], format);

    double eps = 0;
    int n_quantised = 0;
    for (size_t l = 0; l <= q->weights().layers.size(); ++l) {
      const bool head = l == q->weights().layers.size();
      const auto check = [&](const Linear& lq, const Linear& lf) {
        ASSERT_TRUE(lq.quant.defined() && !lq.weight.defined());
        eps = std::max(eps, relative_error(dequantize_weight(lq.quant), lf.weight));
        ++n_quantised;
      };
      if (head) {
        check(q->weights().lm_head, f32->weights().lm_head);
        // 4-bit formats keep the head at 6 bits (--head-format), as llama.cpp's Q4_0 keeps its output matrix.
        const bool own = spec.format == QuantFormat::kInt8 || spec.format == QuantFormat::kInt6;
        EXPECT_EQ(quant_spec_name(q->weights().lm_head.quant.spec), own ? format : "int6");
        continue;
      }
      const DecoderLayer &a = q->weights().layers[l], &b = f32->weights().layers[l];
      check(a.self_attn.q_proj, b.self_attn.q_proj);
      check(a.self_attn.k_proj, b.self_attn.k_proj);
      check(a.self_attn.v_proj, b.self_attn.v_proj);
      check(a.self_attn.o_proj, b.self_attn.o_proj);
      check(a.mlp.gate_proj, b.mlp.gate_proj);
      check(a.mlp.up_proj, b.mlp.up_proj);
      check(a.mlp.down_proj, b.mlp.down_proj);
    }
    EXPECT_EQ(n_quantised, 15);
    const Tensor got = logits_of(*q);
    const double err = relative_error(got, want), bound = (4.0 * f32->config().n_layers + 1) * eps;
    EXPECT_GT(err, 0.0) << format << ": the quantised model gave the f32 logits exactly";
    EXPECT_LT(err, bound) << format << ": weight error " << eps;
    if (spec.format == QuantFormat::kInt8)
      int8_error = err;
    else
      EXPECT_GT(err, int8_error) << format << " beat int8";
    // Same weights in f32 (force_f32 dequantises): only the summation order differs, a few f32 roundings
    // (2^-24 each, times up to K = 128 terms) per matmul, unless the integer-dot kernels ran.
    const Tensor deq = logits_of(*Model::load(dir, {.force_f32 = true}));
    EXPECT_LT(relative_error(got, deq), same_weights_bound()) << format;
  }
}

TEST(Quantize, GenerateAndVerifyRunOnTheFolder) {
  const std::string dir = quantize("int4");
  auto [code, text] = testing::run_lathe("generate " + dir + " --prompt-ids 1,5,9,14 --max-tokens 6 --ignore-eos");
  ASSERT_EQ(code, 0) << text;
  const std::string ids = text.substr(0, text.find('\n'));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 4 + 6 - 1) << text;  // the prompt and 6 new ids
  // verify compares the quantised model's logits (and gradients) with the f32 reference: beyond atol 0,
  // within loose tolerances.
  const std::string ref = llama() + "/reference.safetensors";
  auto [fail_code, fail_text] = testing::run_lathe("verify " + dir + " " + ref + " --atol 0");
  EXPECT_EQ(fail_code, 1) << fail_text;
  auto [ok_code, ok_text] = testing::run_lathe("verify " + dir + " " + ref + " --atol 10 --grad-rtol 1");
  EXPECT_EQ(ok_code, 0) << ok_text;
}

TEST(Quantize, GroupThatDoesNotDivideTheInputIsAClearError) {
  // The fixture's Linears take 64 or 128 inputs: group 128 does not divide 64.
  const std::string out = testing::scratch_dir("quantized_llama_bad_group");
  auto [code, text] = testing::run_lathe("quantize " + llama() + " " + out + " --format int4-g128");
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("is not a multiple of the group size 128"), std::string::npos) << text;
  EXPECT_NE(text.find("--skip"), std::string::npos) << text;
}

TEST(Quantize, SkipKeepsModulesAsStored) {
  const std::string dir = quantize("int8", " --skip lm_head,layers.0.mlp.down_proj");
  const CheckpointReader ckpt = CheckpointReader::open_dir(dir);
  EXPECT_EQ(ckpt.entry("lm_head.weight").dtype, DType::kF32);
  EXPECT_EQ(ckpt.entry("model.layers.0.mlp.down_proj.weight").dtype, DType::kF32);
  EXPECT_EQ(ckpt.entry("model.layers.1.mlp.down_proj.weight").dtype, DType::kI8);
  EXPECT_FALSE(ckpt.contains("lm_head.scales"));
  std::ifstream in(dir + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  const auto& kept = config["quantization_config"]["modules_not_converted"];
  EXPECT_NE(std::find(kept.begin(), kept.end(), "lm_head"), kept.end()) << kept.dump();
  const auto q = Model::load(dir);
  EXPECT_TRUE(q->weights().lm_head.weight.defined());
  EXPECT_TRUE(q->weights().layers[1].mlp.down_proj.quant.defined());
}

// A tied head (Qwen3's fixture ties lm_head to the embedding): quantised as its own lm_head beside the float
// table, which the token lookup keeps reading; its format is --head-format (default int6 under int4), and
// the model's logits stay within the formats' error of the f32 model's.
TEST(Quantize, TiedHeadIsQuantisedBesideTheEmbedding) {
  const std::string qwen3 = testing::fixtures_root() + "/models/qwen3";
  const auto f32 = Model::load(qwen3, {.force_f32 = true});
  ASSERT_TRUE(f32->config().tie_embeddings);
  NoGradGuard no_grad;
  const Tensor ids = SafetensorsFile::open(qwen3 + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  const Tensor want = f32->forward(ids);
  for (const auto& [extra, head_format] : {std::pair<std::string, std::string>{"", "int6"},
                                           {" --head-format int8", "int8"},
                                           {" --head-format int4", "int4"}}) {
    const std::string out = testing::scratch_dir("quantized_qwen3_tied" + head_format);
    auto [code, text] = testing::run_lathe("quantize " + qwen3 + " " + out + " --format int4" + extra);
    ASSERT_EQ(code, 0) << text;
    const CheckpointReader ckpt = CheckpointReader::open_dir(out);
    EXPECT_EQ(ckpt.entry("lm_head.weight").dtype, head_format == "int8" ? DType::kI8 : DType::kU8);
    EXPECT_EQ(ckpt.entry("lm_head.scales").dtype, DType::kF16);
    EXPECT_EQ(ckpt.entry("model.embed_tokens.weight").dtype, f32->weights().embed_tokens.weight.dtype());
    const auto q = Model::load(out);
    EXPECT_EQ(q->config().hf_config["quantization_config"].value("lm_head_format", "int4"), head_format);
    const Linear& head = q->weights().lm_head;
    ASSERT_TRUE(head.quant.defined() && !head.weight.defined());
    EXPECT_EQ(quant_spec_name(head.quant.spec), head_format);
    EXPECT_TRUE(q->weights().embed_tokens.weight.defined());
    const double head_error = relative_error(dequantize_weight(head.quant), f32->weights().embed_tokens.weight);
    EXPECT_GT(head_error, 0.0);
    EXPECT_LT(head_error, head_format == "int8" ? 0.01 : head_format == "int6" ? 0.05 : 0.2);
    // Loose: the 4-bit layers dominate; the check is that the head is the embedding's codes, not another matrix.
    EXPECT_LT(relative_error(q->forward(ids), want), 0.5);
    const Tensor deq = Model::load(out, {.force_f32 = true})->forward(ids);
    EXPECT_LT(relative_error(q->forward(ids), deq), same_weights_bound());
  }
  const std::string kept = testing::scratch_dir("quantized_qwen3_tied_skip");
  auto [code, text] = testing::run_lathe("quantize " + qwen3 + " " + kept + " --format int8 --skip lm_head");
  ASSERT_EQ(code, 0) << text;
  EXPECT_FALSE(CheckpointReader::open_dir(kept).contains("lm_head.scales"));
  const auto q = Model::load(kept);
  EXPECT_FALSE(q->weights().lm_head.quant.defined());
  EXPECT_EQ(q->weights().lm_head.weight.impl(), q->weights().embed_tokens.weight.impl());
}

}  // namespace
}  // namespace lathe
