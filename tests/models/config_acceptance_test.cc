// Acceptance: real Hugging Face config.json spellings that must still be ACCEPTED (the validation pass
// must not refuse what transformers reads). Each row takes a fixture model's config.json, applies one
// variation seen on the hub, parses and validates it and checks the derived values; where the fixture's
// weights still fit the variation, it loads the model and checks the logits against the fixture's
// reference (and bit for bit against the unchanged fixture). Every expected value is read from the files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "lathe/autograd/node.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture(const std::string& family) { return testing::fixtures_root() + "/models/" + family; }

json fixture_config(const std::string& family) {
  std::ifstream in(fixture(family) + "/config.json");
  return json::parse(in);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector(), bv = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < av.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(av[i]) - bv[i]));
  return m;
}

// The fixture's reference input_ids through the model in `dir` (f32, as the parity tests load it).
Tensor logits_of(const std::string& dir, const std::string& family) {
  const Tensor ids = SafetensorsFile::open(fixture(family) + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  NoGradGuard ng;
  return Model::load(dir, {.force_f32 = true})->forward(ids);
}

// The softmax scale transformers uses: 1/sqrt(query_pre_attn_scalar) when set, else 1/sqrt(head_dim).
float expected_attn_scale(const json& hf, int64_t head_dim) {
  if (hf.contains("query_pre_attn_scalar") && !hf["query_pre_attn_scalar"].is_null())
    return static_cast<float>(1.0 / std::sqrt(hf["query_pre_attn_scalar"].get<double>()));
  return 1.f / std::sqrt(static_cast<float>(head_dim));
}

// Everything the decoder reads from a config, equal between the fixture and the variation (the family
// may differ: Mistral reads Llama's weights).
void expect_same_derived(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.ffn, b.ffn);
  EXPECT_EQ(a.attn_scale, b.attn_scale);
  EXPECT_EQ(a.embed_scale, b.embed_scale);
  EXPECT_EQ(a.attn_softcap, b.attn_softcap);
  EXPECT_EQ(a.final_softcap, b.final_softcap);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    EXPECT_EQ(a.layers[i].window, b.layers[i].window);
    EXPECT_EQ(a.layers[i].mlp, b.layers[i].mlp);
    const RopeConfig &ra = a.layers[i].rope, &rb = b.layers[i].rope;
    EXPECT_EQ(ra.theta, rb.theta);
    EXPECT_EQ(ra.rotary_dim, rb.rotary_dim);
    EXPECT_EQ(ra.scaling, rb.scaling);
    EXPECT_EQ(ra.factor, rb.factor);
    EXPECT_EQ(ra.low_freq_factor, rb.low_freq_factor);
    EXPECT_EQ(ra.high_freq_factor, rb.high_freq_factor);
    EXPECT_EQ(ra.original_max_position, rb.original_max_position);
  }
}

struct Variation {
  const char* name;    // test name suffix
  const char* family;  // fixture folder
  std::function<void(json&)> edit;
  // The fixture's weights fit the edited config and it computes the same function: load it and compare
  // the logits. Otherwise parse + validate only.
  bool same_model;
  // Extra checks of the derived values (base: the fixture as it is; hf: the edited config.json).
  std::function<void(const ModelConfig& base, const ModelConfig& v, const json& hf)> check = nullptr;
};

void set_arch(json& c, const char* arch, const char* model_type) {
  c["architectures"] = {arch};
  c["model_type"] = model_type;
}

// Gemma-7B's shape: 16 heads x head_dim 256 = 4096 != hidden 3072 (the head size is not hidden / heads).
void gemma7b_shape(json& c) {
  c["hidden_size"] = 3072;
  c["num_attention_heads"] = 16;
  c["num_key_value_heads"] = 16;
  c["head_dim"] = 256;
  c["intermediate_size"] = 24576;
  c["vocab_size"] = 256000;
}

const std::vector<Variation>& variations() {
  static const std::vector<Variation> v = {
      // head_dim given and not hidden / heads: a parse-level row (the weights no longer fit).
      {"Gemma7bHeadDim", "gemma2", gemma7b_shape, false,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.head_dim, hf["head_dim"].get<int64_t>());
         EXPECT_EQ(m.q_dim(), hf["num_attention_heads"].get<int64_t>() * hf["head_dim"].get<int64_t>());
         EXPECT_NE(m.q_dim(), m.hidden);
         EXPECT_EQ(m.attn_scale, expected_attn_scale(hf, m.head_dim));
         EXPECT_EQ(m.embed_scale, static_cast<float>(std::sqrt(hf["hidden_size"].get<double>())));
         for (const LayerConfig& l : m.layers) EXPECT_EQ(l.rope.rotary_dim, m.head_dim);
       }},
      {"Gemma7bHeadDim", "gemma3", gemma7b_shape, false,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.head_dim, hf["head_dim"].get<int64_t>());
         EXPECT_EQ(m.attn_scale, expected_attn_scale(hf, m.head_dim));
       }},
      {"ExplicitHeadDimNotHiddenOverHeads", "llama",
       [](json& c) { c["head_dim"] = 2 * (c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>()); },
       false,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.head_dim, hf["head_dim"].get<int64_t>());
         EXPECT_EQ(m.q_dim(), 2 * m.hidden);
         EXPECT_EQ(m.attn_scale, expected_attn_scale(hf, m.head_dim));
       }},
      // head_dim: null (and absent) is hidden / heads, which the fixtures' head_dim equals.
      {"HeadDimNull", "llama", [](json& c) { c["head_dim"] = nullptr; }, true},
      {"HeadDimNull", "qwen3", [](json& c) { c["head_dim"] = nullptr; }, true},
      {"HeadDimNull", "gemma3", [](json& c) { c["head_dim"] = nullptr; }, true},
      {"HeadDimAbsent", "qwen3_moe", [](json& c) { c.erase("head_dim"); }, true},
      // Mistral: the same weights as Llama; sliding_window null means full attention on every layer.
      {"MistralSlidingWindowNull", "llama",
       [](json& c) {
         set_arch(c, "MistralForCausalLM", "mistral");
         c["sliding_window"] = nullptr;
       },
       true,
       [](const ModelConfig&, const ModelConfig& m, const json&) {
         EXPECT_EQ(m.family, "mistral");
         for (const LayerConfig& l : m.layers) EXPECT_EQ(l.window, 0);
       }},
      {"SlidingWindowNull", "qwen3", [](json& c) { c["sliding_window"] = nullptr; }, true},
      // Soft-capping null (the gemma3 fixture writes both as null, as Gemma 3 does) or absent: off.
      {"SoftcapsAbsent", "gemma3",
       [](json& c) {
         c.erase("attn_logit_softcapping");
         c.erase("final_logit_softcapping");
       },
       true},
      {"SoftcapsNull", "gemma2",
       [](json& c) {
         c["attn_logit_softcapping"] = nullptr;
         c["final_logit_softcapping"] = nullptr;
       },
       false,
       [](const ModelConfig& base, const ModelConfig& m, const json&) {
         EXPECT_GT(base.attn_softcap, 0.f);
         EXPECT_EQ(m.attn_softcap, 0.f);
         EXPECT_EQ(m.final_softcap, 0.f);
       }},
      // eos_token_id as a list (Llama 3, Gemma 3 instruct).
      {"EosTokenIdList", "llama",
       [](json& c) { c["eos_token_id"] = {c["eos_token_id"], c["bos_token_id"]}; }, true,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.eos_token_ids, hf["eos_token_id"].get<std::vector<int>>());
       }},
      {"EosTokenIdList", "gemma3",
       [](json& c) { c["eos_token_id"] = json::array({c["eos_token_id"]}); }, true,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.eos_token_ids, hf["eos_token_id"].get<std::vector<int>>());
       }},
      {"TokenIdsNull", "llama",
       [](json& c) {
         c["bos_token_id"] = nullptr;
         c["pad_token_id"] = nullptr;
         c["eos_token_id"] = nullptr;
       },
       true,
       [](const ModelConfig&, const ModelConfig& m, const json&) {
         EXPECT_EQ(m.bos_token_id, -1);
         EXPECT_TRUE(m.eos_token_ids.empty());
       }},
      // Qwen3 in transformers 5: layer_types, every layer full attention.
      {"LayerTypesAllFull", "qwen3",
       [](json& c) { c["layer_types"] = json(std::vector<std::string>(c["num_hidden_layers"].get<size_t>(), "full_attention")); },
       true},
      {"LayerTypesAllFullNoSlidingWindow", "qwen3",
       [](json& c) {
         c["layer_types"] = json(std::vector<std::string>(c["num_hidden_layers"].get<size_t>(), "full_attention"));
         c["use_sliding_window"] = false;
         c["sliding_window"] = nullptr;
       },
       true},
      {"LayerTypesAllFull", "qwen3_moe",
       [](json& c) { c["layer_types"] = json(std::vector<std::string>(c["num_hidden_layers"].get<size_t>(), "full_attention")); },
       true},
      // Gemma 3 as transformers 4.5x writes it: layer_types and sliding_window_pattern, consistent.
      {"LayerTypesAndPattern", "gemma3",
       [](json& c) {
         const int64_t pattern = c["sliding_window_pattern"];
         json types = json::array();
         for (int64_t i = 0; i < c["num_hidden_layers"].get<int64_t>(); ++i)
           types.push_back((i + 1) % pattern ? "sliding_attention" : "full_attention");
         c["layer_types"] = types;
       },
       true,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         for (size_t i = 0; i < m.layers.size(); ++i)
           EXPECT_EQ(m.layers[i].window > 0, hf["layer_types"][i] == "sliding_attention") << i;
       }},
      // GPT-2: n_inner null or absent is 4 x n_embd; given explicitly, the same.
      {"NInnerAbsent", "gpt2", [](json& c) { c.erase("n_inner"); }, true},
      {"NInnerExplicit", "gpt2", [](json& c) { c["n_inner"] = 4 * c["n_embd"].get<int64_t>(); }, true},
      // rope_scaling null or absent: no scaling; a null rope_parameters leaves rope_scaling in charge.
      {"RopeScalingNull", "gemma2", [](json& c) { c["rope_scaling"] = nullptr; }, true},
      {"RopeScalingAbsent", "qwen3", [](json& c) { c.erase("rope_scaling"); }, true},
      {"RopeParametersNull", "llama", [](json& c) { c["rope_parameters"] = nullptr; }, true},
      {"RopeParametersNull", "gemma3", [](json& c) { c["rope_parameters"] = nullptr; }, true},
      // transformers 5: rope_parameters keyed by layer type, also for a family without sliding layers.
      {"RopeParametersByLayerType", "llama",
       [](json& c) {
         json full = c["rope_scaling"];
         full["rope_theta"] = c["rope_theta"];
         c["rope_parameters"] = {{"full_attention", full}};
         c.erase("rope_scaling");
         c.erase("rope_theta");
       },
       true},
      // tie_word_embeddings both ways where the weights allow it, and the other way parse-level.
      {"TieAbsent", "llama", [](json& c) { c.erase("tie_word_embeddings"); }, true},
      {"TieTrue", "gemma2", [](json& c) { c["tie_word_embeddings"] = true; }, true},
      {"TieTrue", "gpt2", [](json& c) { c["tie_word_embeddings"] = true; }, true},
      {"TieTrue", "llama", [](json& c) { c["tie_word_embeddings"] = true; }, false,
       [](const ModelConfig&, const ModelConfig& m, const json&) { EXPECT_TRUE(m.tie_embeddings); }},
      {"TieFalse", "qwen3", [](json& c) { c["tie_word_embeddings"] = false; }, false,
       [](const ModelConfig&, const ModelConfig& m, const json&) { EXPECT_FALSE(m.tie_embeddings); }},
      // A long context: rotary models take any max_position_embeddings (GPT-2's wpe would not fit).
      {"MaxPositions131072", "llama", [](json& c) { c["max_position_embeddings"] = 131072; }, true,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.max_positions, hf["max_position_embeddings"].get<int64_t>());
       }},
      {"MaxPositions131072", "qwen3_moe", [](json& c) { c["max_position_embeddings"] = 131072; }, true},
      {"MaxPositions131072", "gemma3", [](json& c) { c["max_position_embeddings"] = 131072; }, true},
      {"NPositions131072", "gpt2", [](json& c) { c["n_positions"] = 131072; }, false,
       [](const ModelConfig&, const ModelConfig& m, const json& hf) {
         EXPECT_EQ(m.max_positions, hf["n_positions"].get<int64_t>());
       }},
      // dtype keys (transformers 4: torch_dtype, 5: dtype) describe the stored weights, not the compute.
      {"TorchDtypeBf16", "llama", [](json& c) { c["torch_dtype"] = "bfloat16"; }, true},
      {"DtypeKey", "qwen3",
       [](json& c) {
         c.erase("torch_dtype");
         c["dtype"] = "bfloat16";
       },
       true},
      {"DtypeKey", "gpt2", [](json& c) { c["dtype"] = "float16"; }, true},
      // Keys lathe does not read (hub metadata, training-only options, future keys).
      {"UnknownKeys", "llama",
       [](json& c) {
         c["_name_or_path"] = "meta-llama/Llama-3.2-1B";
         c["auto_map"] = {{"AutoConfig", "configuration_x.XConfig"}};
         c["a_future_key"] = {{"nested", json::array({1, 2, 3})}};
         c["use_cache"] = false;
         c["attention_dropout"] = 0.1;
         c["transformers_version"] = "5.0.0";
         c["quantization_config"] = nullptr;
       },
       true},
      {"UnknownKeys", "gemma3",
       [](json& c) {
         c["final_logit_softcapping"] = nullptr;
         c["cache_implementation"] = "hybrid";
         c["attn_implementation"] = "eager";
         c["rope_scaling_future"] = "anything";
       },
       true},
      {"UnknownKeys", "gpt2",
       [](json& c) {
         c["task_specific_params"] = {{"text-generation", {{"do_sample", true}, {"max_length", 50}}}};
         c["summary_activation"] = nullptr;
       },
       true},
      {"MoeDefaults", "qwen3_moe",
       [](json& c) {
         c.erase("decoder_sparse_step");
         c["mlp_only_layers"] = nullptr;
       },
       true},
  };
  return v;
}

class ConfigAcceptance : public ::testing::TestWithParam<size_t> {};

TEST_P(ConfigAcceptance, AcceptedWithTheRightDerivedValues) {
  const Variation& var = variations()[GetParam()];
  const json base_hf = fixture_config(var.family);
  json hf = base_hf;
  var.edit(hf);
  ASSERT_NE(hf, base_hf) << "the variation changes nothing";
  const ModelConfig base = parse_model_config(base_hf.dump(), "base/config.json");
  ModelConfig m;
  try {
    m = parse_model_config(hf.dump(), "variant/config.json");
  } catch (const Error& e) {
    FAIL() << "refused: " << e.what() << "\n" << hf.dump();
  }
  EXPECT_NO_THROW(validate_config(m));
  EXPECT_EQ(static_cast<int64_t>(m.layers.size()), m.n_layers);
  EXPECT_GE(m.head_dim, 1);
  EXPECT_GT(m.attn_scale, 0.f);
  EXPECT_EQ(m.attn_scale, expected_attn_scale(hf, m.head_dim));
  if (var.check) var.check(base, m, hf);
  if (!var.same_model) return;

  expect_same_derived(base, m);
  const std::string dir = testing::scratch_dir(std::string("accept_") + var.family + "_" + var.name);
  std::ofstream(dir + "/config.json") << hf.dump(2);
  fs::create_symlink(fs::absolute(fixture(var.family) + "/model.safetensors"), dir + "/model.safetensors");
  const Tensor got = logits_of(dir, var.family);
  const Tensor want = SafetensorsFile::open(fixture(var.family) + "/reference.safetensors").tensor("logits");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LE(max_abs_diff(got, want), 1e-4);  // the parity tolerance (tests/models/parity_test.cc)
  static std::map<std::string, Tensor> fixture_logits;  // the unchanged fixture, once per family
  if (!fixture_logits.count(var.family)) fixture_logits[var.family] = logits_of(fixture(var.family), var.family);
  EXPECT_EQ(max_abs_diff(got, fixture_logits[var.family]), 0.0);  // the same function, bit for bit
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ConfigAcceptance, ::testing::Range<size_t>(0, variations().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           const Variation& v = variations()[info.param];
                           return std::string(v.family) + "_" + v.name;
                         });

}  // namespace
}  // namespace lathe
