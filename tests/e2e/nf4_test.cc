// NF4 end to end on the Llama fixture (specs/posttrain.md §3.3): `lathe quantize --format nf4` writes bitsandbytes'
// tensors and transformers' quantization_config, with codes and statistics bit-identical to the reference quantiser's;
// the folder loads (kept NF4, or dequantised) and generates. QLoRA: LoRA on a base held in NF4 gets the gradients LoRA
// gets on the dequantised f32 base, and `lathe merge` on an NF4 folder writes the dequantised base plus the adapter's
// update.
#include "lathe/ref/nf4.h"
#include "lathe/train/test_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli_run.h"
#include "lathe/autograd/node.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/models/quantize.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
namespace {

std::string llama() { return testing::fixtures_root() + "/models/llama"; }

std::string quantize_nf4() {
  const std::string out = testing::scratch_dir("nf4_llama");
  auto [code, text] = testing::run_lathe("quantize " + llama() + " " + out + " --format nf4");
  EXPECT_EQ(code, 0) << text;
  return out;
}

double relative_error(const Tensor &a, const Tensor &b) {
  const auto av = a.to_vector(), bv = b.to_vector();
  double d2 = 0, b2 = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    d2 += (double(av[i]) - bv[i]) * (double(av[i]) - bv[i]);
    b2 += double(bv[i]) * bv[i];
  }
  return std::sqrt(d2 / b2);
}

template <class T>
std::vector<T> bytes_of(const Tensor &t) {
  const Tensor c = t.contiguous();
  const T *p = static_cast<const T *>(c.raw_data());
  return std::vector<T>(p, p + c.numel());
}

TEST(Nf4Folder, BitsandbytesLayoutAndBitIdenticalState) {
  const std::string dir = quantize_nf4();
  const CheckpointReader ckpt = CheckpointReader::open_dir(dir);
  const CheckpointReader orig = CheckpointReader::open_dir(llama());
  for (const std::string module : {"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"}) {
    const std::string w = module + ".weight";
    const Tensor f = orig.tensor(w).to(DType::kF32).contiguous();
    const ref::Nf4Quantized want = ref::nf4_quantize(f.data<float>(), f.numel(), 64);
    EXPECT_EQ(ckpt.entry(w).dtype, DType::kU8);
    EXPECT_EQ(ckpt.entry(w).shape, (Shape{(f.numel() + 1) / 2, 1}));
    EXPECT_EQ(bytes_of<uint8_t>(ckpt.tensor(w)), want.packed) << w;
    EXPECT_EQ(bytes_of<uint8_t>(ckpt.tensor(w + ".absmax")), want.absmax_codes) << w;
    EXPECT_EQ(bytes_of<float>(ckpt.tensor(w + ".nested_absmax")), want.nested_absmax) << w;
    EXPECT_EQ(bytes_of<float>(ckpt.tensor(w + ".quant_map")), std::vector<float>(ref::kNf4Code, ref::kNf4Code + 16));
    EXPECT_EQ(bytes_of<float>(ckpt.tensor(w + ".nested_quant_map")),
              std::vector<float>(ref::kDynamicMap8, ref::kDynamicMap8 + 256));
    const std::vector<uint8_t> js = bytes_of<uint8_t>(ckpt.tensor(w + ".quant_state.bitsandbytes__nf4"));
    const std::string text(js.begin(), js.end());
    // json.dumps' separators and key order (bitsandbytes QuantState.as_dict(packed=True)).
    EXPECT_EQ(text.rfind("{\"quant_type\": \"nf4\", \"blocksize\": 64, "
                         "\"dtype\": \"float32\", \"shape\": [",
                         0),
              0u)
        << text;
    const nlohmann::json st = nlohmann::json::parse(text);
    EXPECT_EQ(st["shape"], nlohmann::json(orig.entry(w).shape));
    EXPECT_EQ(st["nested_blocksize"], 256);
    EXPECT_EQ(st["nested_dtype"], "float32");
    EXPECT_EQ(st["nested_offset"].get<float>(), want.offset);
  }
  std::ifstream in(dir + "/config.json");
  const nlohmann::json qc = nlohmann::json::parse(in)["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "bitsandbytes");
  EXPECT_EQ(qc["load_in_4bit"], true);
  EXPECT_EQ(qc["bnb_4bit_quant_type"], "nf4");
  EXPECT_EQ(qc["bnb_4bit_use_double_quant"], true);
}

// Loaded kept in NF4 the model computes with the dequantised weights (force_f32): the same logits up to f32 summation
// order; against the f32 original, within the code's error (4·L + 1 matmuls in sequence, each off by its weight's
// relative error).
TEST(Nf4Folder, LoadsAndGenerates) {
  const std::string dir = quantize_nf4();
  const auto q = Model::load(dir);
  const auto deq = Model::load(dir, {.force_f32 = true});
  const auto f32 = Model::load(llama(), {.force_f32 = true});
  ASSERT_TRUE(q->weights().layers[0].self_attn.q_proj.quant.defined());
  EXPECT_EQ(q->weights().layers[0].self_attn.q_proj.quant.spec.format, QuantFormat::kNf4);
  NoGradGuard no_grad;
  const Tensor ids = SafetensorsFile::open(llama() + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  const Tensor got = q->forward(ids), want = deq->forward(ids), orig = f32->forward(ids);
  EXPECT_LT(relative_error(got, want), 9 * 128 * std::ldexp(1.0, -24));
  double eps = 0;
  for (size_t l = 0; l < q->weights().layers.size(); ++l)
    eps = std::max(
        eps, relative_error(deq->weights().layers[l].mlp.up_proj.weight, f32->weights().layers[l].mlp.up_proj.weight));
  EXPECT_GT(eps, 0.0);
  EXPECT_LT(relative_error(got, orig), (4.0 * f32->config().n_layers + 1) * 2 * eps);
  auto [code, text] = testing::run_lathe("generate " + dir + " --prompt-ids 1,5,9,14 --max-tokens 6 --ignore-eos");
  EXPECT_EQ(code, 0) << text;
}

// Random B (PEFT starts it at 0, which would leave A without gradient).
void randomise_b(LoraAdapters &a, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 0.05f);
  a.for_each_param([&](const std::string &name, Tensor &t, int) {
    if (name.find("lora_B") == std::string::npos) return;
    float *p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  });
}

// LoRA on the base held in NF4 (quantize_decoder_linears: the QLoRA recipe's path) against LoRA on the same weights
// dequantised to f32: loss and every adapter gradient equal up to f32 summation order.
TEST(Qlora, GradientsEqualLoraOnTheDequantisedBase) {
  const auto quant = Model::load(llama(), {.force_f32 = true});
  const auto plain = Model::load(llama(), {.force_f32 = true});
  LoraConfig lc;
  lc.r = 4;
  lc.lora_alpha = 8;
  lc.target_modules = {"q_proj", "v_proj", "up_proj", "down_proj"};
  LoraAdapters la = LoraAdapters::create(*quant, lc, 3), lb = LoraAdapters::create(*plain, lc, 3);
  randomise_b(la, 9);
  randomise_b(lb, 9);
  const QuantSpec nf4 = parse_quant_spec("nf4");
  EXPECT_EQ(quantize_decoder_linears(*quant, nf4), 14);
  EXPECT_EQ(quantize_decoder_linears(*plain, nf4), 14);
  for (DecoderLayer &layer : plain->weights().layers)  // the dequantised base: same weights, f32 path
    for (Linear *l : {&layer.self_attn.q_proj, &layer.self_attn.k_proj, &layer.self_attn.v_proj,
                      &layer.self_attn.o_proj, &layer.mlp.gate_proj, &layer.mlp.up_proj, &layer.mlp.down_proj}) {
      l->weight = dequantize_weight(l->quant);
      l->quant = QuantWeight();
    }
  la.set_requires_grad(true);
  lb.set_requires_grad(true);
  const Tensor ids = SafetensorsFile::open(llama() + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  const int64_t B = ids.size(0), T = ids.size(1);
  std::vector<int32_t> in, tgt;
  const auto idv = ids.contiguous();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t + 1 < T; ++t) {
      in.push_back(idv.data<int32_t>()[b * T + t]);
      tgt.push_back(idv.data<int32_t>()[b * T + t + 1]);
    }
  const Tensor x = Tensor::from_data_i32({B, T - 1}, in), y = Tensor::from_data_i32({B * (T - 1)}, tgt);
  const Tensor loss_q = quant->loss(ForwardBatch::rows(x), y), loss_p = plain->loss(ForwardBatch::rows(x), y);
  EXPECT_NEAR(loss_q.item(), loss_p.item(), 1e-5 * std::fabs(loss_p.item()));
  backward(loss_q);
  backward(loss_p);
  std::map<std::string, Tensor> grads;
  lb.for_each_param([&](const std::string &name, Tensor &t, int) { grads[name] = t.grad(); });
  int n = 0;
  la.for_each_param([&](const std::string &name, Tensor &t, int) {
    ASSERT_TRUE(t.grad().defined()) << name;
    EXPECT_LT(relative_error(t.grad(), grads.at(name)), 1e-4) << name;
    ++n;
  });
  EXPECT_EQ(n, 2 * 4 * 2);
}

// lathe merge on an NF4 folder: the dequantised base plus scaling·B·A, in f32, no quantization_config.
TEST(Qlora, MergeOnAnNf4BaseIsTheDequantisedBasePlusTheUpdate) {
  const std::string dir = quantize_nf4();
  const std::string adapter = testing::scratch_dir("nf4_adapter"), merged = testing::scratch_dir("nf4_merged");
  const auto base = Model::load(dir, {.force_f32 = true});
  {
    const auto m = Model::load(dir);  // held in NF4: adapters attach to quantised Linears too
    LoraConfig lc;
    lc.r = 4;
    lc.lora_alpha = 16;
    lc.target_modules = {"o_proj", "gate_proj"};
    LoraAdapters a = LoraAdapters::create(*m, lc, 5);
    randomise_b(a, 11);
    a.save(adapter);
  }
  std::filesystem::remove_all(merged);
  auto [code, text] = testing::run_lathe("merge " + dir + " " + adapter + " " + merged);
  ASSERT_EQ(code, 0) << text;
  const auto out = Model::load(merged);
  EXPECT_FALSE(out->config().hf_config.contains("quantization_config"));
  const SafetensorsFile ad = SafetensorsFile::open(adapter + "/adapter_model.safetensors");
  const float s = 16.f / 4.f;
  for (size_t l = 0; l < base->weights().layers.size(); ++l)
    for (const char *mod : {"self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj"}) {
      const std::string path = "model.layers." + std::to_string(l) + "." + mod;
      const DecoderLayer &b = base->weights().layers[l], &o = out->weights().layers[l];
      const std::string m(mod);
      const Linear &lb = m == "self_attn.o_proj" ? b.self_attn.o_proj
                         : m == "mlp.gate_proj"  ? b.mlp.gate_proj
                                                 : b.mlp.up_proj;
      const Linear &lo = m == "self_attn.o_proj" ? o.self_attn.o_proj
                         : m == "mlp.gate_proj"  ? o.mlp.gate_proj
                                                 : o.mlp.up_proj;
      Tensor want = lb.weight;
      if (m != "mlp.up_proj") {  // adapted
        const Tensor A = ad.tensor("base_model.model." + path + ".lora_A.weight");
        const Tensor Bm = ad.tensor("base_model.model." + path + ".lora_B.weight");
        want = add(lb.weight, scale(matmul(Bm, A), s));
      }
      EXPECT_EQ(lo.weight.to_vector(), want.to_vector()) << path;
    }
}

// `lathe sft` with model.quantize: nf4 (recipes/sft/tiny.yaml on the fixture Llama, a lora: section): the base is
// held in NF4, the loss falls as LoRA's on the f32 base does (within 5% at the end), the adapter is a PEFT
// folder, and the key without a lora: section is refused by name.
TEST(Qlora, SftTrainsAdaptersOnAnNf4Base) {
  const std::string dir = testing::tokenizer_in(testing::scratch_dir("qlora_cli"));
  const std::string args = "sft recipes/sft/tiny.yaml sft.tokenizer=" + dir +
                           "/tokenizer run.threads=2 schedule.steps=30 checkpoint.every=30 optimizer.lr=1e-2 lora.r=8 "
                           "lora.lora_alpha=16 lora.target_modules=all-linear";
  const auto [rc, out] = testing::run_lathe(args + " model.quantize=nf4 run.dir=" + dir + "/q");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model.quantize: 14 Linear weights held as nf4"), std::string::npos) << out;
  const auto [rc_f, out_f] = testing::run_lathe(args + " run.dir=" + dir + "/f");
  ASSERT_EQ(rc_f, 0) << out_f;
  const std::vector<double> q = testing::loss_values(dir + "/q"), f = testing::loss_values(dir + "/f");
  ASSERT_EQ(q.size(), 30u);
  ASSERT_EQ(f.size(), 30u);
  double q_first = 0, q_last = 0, f_last = 0;  // sums of the first and last 5 steps' losses
  for (size_t i = 0; i < 5; ++i) {
    q_first += q[i];
    q_last += q[q.size() - 1 - i];
    f_last += f[f.size() - 1 - i];
  }
  EXPECT_LT(q_last, 0.7 * q_first);
  EXPECT_NEAR(q_last, f_last, 0.05 * f_last);
  EXPECT_TRUE(std::filesystem::exists(dir + "/q/adapter/adapter_model.safetensors"));
  const auto r = testing::run_lathe_bounded("sft recipes/sft/tiny.yaml sft.tokenizer=" + dir +
                                            "/tokenizer model.quantize=nf4 run.dir=" + dir + "/bad");
  EXPECT_NE(r.second.find("model.quantize"), std::string::npos) << r.second;
  EXPECT_NE(r.second.find("lora: section"), std::string::npos) << r.second;
}

}  // namespace
}  // namespace lathe
