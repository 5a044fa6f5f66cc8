// Families and config spellings without their own fixture are checked by equivalence with one that has
// one: the same weights under another family's names / another transformers version's config keys must
// give the same logits as the fixture model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/autograd/node.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::vector<std::pair<std::string, Tensor>> read_tensors(const std::string& p) {
  SafetensorsFile f = SafetensorsFile::open(p);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& e : f.entries()) out.push_back({e.name, f.tensor(e.name).clone()});
  return out;
}

Tensor logits_of(const std::string& dir) {
  const std::string ref = testing::fixtures_root() + "/models/llama/reference.safetensors";
  Tensor ids = SafetensorsFile::open(ref).tensor("input_ids").to(DType::kI32);
  NoGradGuard ng;
  return Model::load(dir)->forward(ids);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto av = a.to_vector(), bv = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < av.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(av[i]) - bv[i]));
  return m;
}

std::string fixture(const std::string& name) { return testing::fixtures_root() + "/models/" + name; }

void write_variant(const std::string& dir, const json& config, const std::vector<std::pair<std::string, Tensor>>& t) {
  std::ofstream(dir + "/config.json") << config.dump(2);
  save_safetensors(dir + "/model.safetensors", t);
}

// Qwen2 = Llama + q/k/v biases: zero biases must reproduce Llama's logits exactly.
TEST(ConfigVariants, Qwen2WithZeroBiasesEqualsLlama) {
  const std::string dir = testing::scratch_dir("variant_qwen2");
  json c = read_json(fixture("llama") + "/config.json");
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  auto t = read_tensors(fixture("llama") + "/model.safetensors");
  const int64_t layers = c["num_hidden_layers"], hd = c["head_dim"], h = c["num_attention_heads"], kv = c["num_key_value_heads"];
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    t.push_back({p + "q_proj.bias", Tensor::zeros({h * hd})});
    t.push_back({p + "k_proj.bias", Tensor::zeros({kv * hd})});
    t.push_back({p + "v_proj.bias", Tensor::zeros({kv * hd})});
  }
  write_variant(dir, c, t);
  EXPECT_EQ(max_abs_diff(logits_of(dir), logits_of(fixture("llama"))), 0.0);
}

// Mistral = Llama with a sliding window; a window longer than the sequence changes nothing, a short one does.
TEST(ConfigVariants, MistralSlidingWindow) {
  const std::string dir = testing::scratch_dir("variant_mistral");
  json c = read_json(fixture("llama") + "/config.json");
  c["architectures"] = {"MistralForCausalLM"};
  c["model_type"] = "mistral";
  c["sliding_window"] = 4096;
  write_variant(dir, c, read_tensors(fixture("llama") + "/model.safetensors"));
  const Tensor base = logits_of(fixture("llama"));
  EXPECT_EQ(max_abs_diff(logits_of(dir), base), 0.0);
  c["sliding_window"] = 3;
  write_variant(dir, c, read_tensors(fixture("llama") + "/model.safetensors"));
  EXPECT_GT(max_abs_diff(logits_of(dir), base), 1e-3);
}

// transformers 5 config spelling for Gemma 3: rope_parameters keyed by layer type and layer_types.
TEST(ConfigVariants, Gemma3TransformersV5ConfigEqualsV4) {
  const std::string dir = testing::scratch_dir("variant_gemma3_v5");
  json c = read_json(fixture("gemma3") + "/config.json");
  const int64_t layers = c["num_hidden_layers"];
  const int64_t pattern = c["sliding_window_pattern"];
  json types = json::array();
  for (int64_t i = 0; i < layers; ++i) types.push_back((i + 1) % pattern ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  json full = c["rope_scaling"];
  full["rope_theta"] = c["rope_theta"];
  c["rope_parameters"] = {{"full_attention", full},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", c["rope_local_base_freq"]}}}};
  for (const char* k : {"rope_scaling", "rope_theta", "rope_local_base_freq", "sliding_window_pattern"}) c.erase(k);
  write_variant(dir, c, read_tensors(fixture("gemma3") + "/model.safetensors"));
  EXPECT_EQ(max_abs_diff(logits_of(dir), logits_of(fixture("gemma3"))), 0.0);
}

// transformers 5 config spelling for Llama: rope_parameters with rope_theta inside.
TEST(ConfigVariants, LlamaRopeParametersEqualsRopeScaling) {
  const std::string dir = testing::scratch_dir("variant_llama_v5");
  json c = read_json(fixture("llama") + "/config.json");
  json rp = c["rope_scaling"];
  rp["rope_theta"] = c["rope_theta"];
  c["rope_parameters"] = rp;
  c.erase("rope_scaling");
  c.erase("rope_theta");
  write_variant(dir, c, read_tensors(fixture("llama") + "/model.safetensors"));
  EXPECT_EQ(max_abs_diff(logits_of(dir), logits_of(fixture("llama"))), 0.0);
}

// transformers 5's fused expert tensors: same logits, and saving writes the fused layout back bit for bit.
TEST(ConfigVariants, Qwen3MoeFusedExpertsEqualPerExpert) {
  const std::string dir = testing::scratch_dir("variant_moe_fused");
  json c = read_json(fixture("qwen3_moe") + "/config.json");
  const int64_t layers = c["num_hidden_layers"], E = c["num_experts"];
  auto t = read_tensors(fixture("qwen3_moe") + "/model.safetensors");
  std::map<std::string, Tensor> by_name(t.begin(), t.end());
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, v] : t)
    if (n.find(".mlp.experts.") == std::string::npos) out.push_back({n, v});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    const Tensor g0 = by_name[p + "0.gate_proj.weight"], d0 = by_name[p + "0.down_proj.weight"];
    const int64_t F = g0.size(0), C = g0.size(1);
    Tensor gate_up = Tensor::empty({E, 2 * F, C}), down = Tensor::empty({E, C, F});
    for (int64_t e = 0; e < E; ++e) {
      const std::string ep = p + std::to_string(e) + ".";
      gate_up.select(0, e).slice(0, 0, F).copy_from(by_name[ep + "gate_proj.weight"]);
      gate_up.select(0, e).slice(0, F, 2 * F).copy_from(by_name[ep + "up_proj.weight"]);
      down.select(0, e).copy_from(by_name[ep + "down_proj.weight"]);
    }
    out.push_back({p + "gate_up_proj", gate_up});
    out.push_back({p + "down_proj", down});
  }
  write_variant(dir, c, out);
  EXPECT_EQ(max_abs_diff(logits_of(dir), logits_of(fixture("qwen3_moe"))), 0.0);
  const std::string saved = testing::scratch_dir("variant_moe_fused_saved");
  Model::load(dir)->save(saved);
  std::ifstream a(dir + "/model.safetensors", std::ios::binary), b(saved + "/model.safetensors", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
}

}  // namespace
}  // namespace lathe
