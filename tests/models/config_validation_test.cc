// validate_config / parse_model_config: every family's fixture config parses, and each bad count,
// divisor, list or pattern is an InvalidArgument naming its config.json key (never a crash).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/base/checked_size.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/config.h"

namespace lathe {
namespace {
using nlohmann::json;

json fixture_config(const std::string& family) {
  std::ifstream in(testing::fixtures_root() + "/models/" + family + "/config.json");
  return json::parse(in);
}

// parse_model_config must throw a lathe::Error whose message holds `needle`.
void expect_rejected(const json& config, const std::string& needle) {
  try {
    parse_model_config(config.dump(), "x/config.json");
    ADD_FAILURE() << "accepted: " << config.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x/config.json"), std::string::npos) << e.what();
  }
}

TEST(ConfigValidation, EveryFixtureParses) {
  for (const char* f : {"llama", "qwen3", "qwen3_moe", "gemma2", "gemma3", "gpt2"}) {
    const ModelConfig c = parse_model_config(fixture_config(f).dump(), f);
    EXPECT_EQ(static_cast<int64_t>(c.layers.size()), c.n_layers) << f;
    EXPECT_GT(c.head_dim, 0) << f;
    EXPECT_GT(c.attn_scale, 0.f) << f;
    EXPECT_NO_THROW(validate_config(c)) << f;
  }
}

TEST(ConfigValidation, Gemma3PatternAndLayerTypesGiveTheSameLayers) {
  json c = fixture_config("gemma3");
  const ModelConfig by_pattern = parse_model_config(c.dump(), "c");
  c.erase("sliding_window_pattern");
  c["layer_types"] = {"sliding_attention", "full_attention"};  // pattern 2 over 2 layers
  const ModelConfig by_list = parse_model_config(c.dump(), "c");
  for (size_t i = 0; i < by_list.layers.size(); ++i) {
    EXPECT_EQ(by_list.layers[i].window, by_pattern.layers[i].window) << i;
    EXPECT_EQ(by_list.layers[i].rope.theta, by_pattern.layers[i].rope.theta) << i;
  }
  EXPECT_EQ(by_list.layers[0].window, 4);
  EXPECT_EQ(by_list.layers[1].window, 0);
}

TEST(ConfigValidation, BadValuesNameTheirKey) {
  struct Case {
    const char* family;
    const char* key;
    json value;
  };
  const Case cases[] = {
      {"gpt2", "n_head", 0},
      {"gpt2", "n_head", 3},  // 64 is not divisible by 3
      {"gpt2", "n_embd", 0},
      {"gpt2", "n_layer", -1},
      {"gpt2", "n_inner", 0},
      {"gpt2", "vocab_size", 4294967296},
      {"gpt2", "layer_norm_epsilon", -1.0},
      {"llama", "num_attention_heads", 0},
      {"llama", "num_attention_heads", -4},
      {"llama", "num_key_value_heads", 3},
      {"llama", "num_key_value_heads", 8},  // more kv heads than heads
      {"llama", "hidden_size", 0},
      {"llama", "head_dim", -1},
      {"llama", "head_dim", 3},  // rotary dims must be even
      {"llama", "max_position_embeddings", 0},
      {"llama", "intermediate_size", 0},
      {"llama", "num_hidden_layers", 0},
      {"llama", "num_hidden_layers", 70000},
      {"llama", "vocab_size", -320},
      {"llama", "partial_rotary_factor", 1.5},
      {"llama", "rope_theta", -1.0},
      {"llama", "rope_theta", 1e300},
      {"llama", "bos_token_id", -7},
      {"llama", "eos_token_id", json::array({1, -2})},
      {"qwen3", "rms_norm_eps", "tiny"},
      {"qwen3_moe", "num_experts", 0},
      {"qwen3_moe", "num_experts", 100000},
      {"qwen3_moe", "num_experts_per_tok", 5},
      {"qwen3_moe", "moe_intermediate_size", 0},
      {"qwen3_moe", "decoder_sparse_step", -1},
      {"qwen3_moe", "mlp_only_layers", json::array({-1})},
      {"gemma2", "sliding_window", 0},  // Gemma 2 always has sliding layers
      {"gemma2", "attn_logit_softcapping", -50.0},
      {"gemma3", "sliding_window_pattern", 0},
      {"gemma3", "sliding_window_pattern", -2},
      {"gemma3", "layer_types", json::array({"foo", "bar"})},
      {"gemma3", "layer_types", json::array({"full_attention"})},
      {"gemma3", "layer_types", "sliding_attention"},
      {"gemma3", "rope_local_base_freq", 0.0},
      {"gemma3", "query_pre_attn_scalar", -1.0},
  };
  for (const Case& k : cases) {
    json c = fixture_config(k.family);
    c[k.key] = k.value;
    SCOPED_TRACE(std::string(k.family) + " " + k.key + " = " + k.value.dump());
    expect_rejected(c, k.key);
  }
}

TEST(ConfigValidation, RopeScalingParameters) {
  json c = fixture_config("llama");
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 4.0}};
  expect_rejected(c, "low_freq_factor");
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.0}};
  expect_rejected(c, "factor");
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"original_max_position_embeddings", 0}};
  expect_rejected(c, "original_max_position_embeddings");
}

// A nested settings object of the wrong type (rope_scaling: "llama3") is an error naming the key, never
// read as "no scaling"; the same for the per-layer-type entries of rope_parameters and for
// quantization_config. Model::create's initializer_range is checked in the same pass.
TEST(ConfigValidation, NestedObjectsMustBeObjectsOrNull) {
  const json wrong[] = {"llama3", 8.0, json::array({1, 2}), true};
  for (const char* f : {"llama", "qwen3", "qwen3_moe", "gemma2", "gemma3"}) {
    for (const char* key : {"rope_scaling", "rope_parameters", "quantization_config"}) {
      for (const json& v : wrong) {
        json c = fixture_config(f);
        c[key] = v;
        SCOPED_TRACE(std::string(f) + " " + key + " = " + v.dump());
        expect_rejected(c, std::string("'") + key + "' must be an object or null");
      }
    }
  }
  for (const char* f : {"llama", "gemma3"}) {
    for (const char* layer : {"full_attention", "sliding_attention"}) {
      json c = fixture_config(f);
      c["rope_parameters"] = {{layer, "default"}};
      SCOPED_TRACE(std::string(f) + " " + layer);
      expect_rejected(c, std::string("'rope_parameters.") + layer + "' must be an object or null");
    }
  }
  json q = fixture_config("llama");
  q["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  expect_rejected(q, "'quantization_config' (quant_method 'gptq')");
  EXPECT_THROW(parse_model_config(q.dump(), "x/config.json"), NotImplemented);
}

TEST(ConfigValidation, InitializerRangeIsCheckedInTheOnePass) {
  for (const char* f : {"llama", "gpt2", "gemma3"}) {
    for (const json& v : {json(1e38), json(0.0), json(-0.02), json(2.0), json("0.02")}) {
      json c = fixture_config(f);
      c["initializer_range"] = v;
      SCOPED_TRACE(std::string(f) + " initializer_range = " + v.dump());
      expect_rejected(c, "initializer_range");
    }
    const json hf = fixture_config(f);
    EXPECT_EQ(parse_model_config(hf.dump(), f).initializer_range, hf["initializer_range"].get<double>()) << f;
    json absent = hf;
    absent.erase("initializer_range");
    EXPECT_EQ(parse_model_config(absent.dump(), f).initializer_range, 0.02) << f;  // transformers' default
  }
}

TEST(ConfigValidation, NotAnObject) {
  for (const char* text : {"null", "[]", "3", "\"x\"", "true"}) {
    try {
      parse_model_config(text, "m/config.json");
      ADD_FAILURE() << text;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("m/config.json: must be a JSON object"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_model_config("{", "m/config.json"), FormatError);
}

TEST(ConfigValidation, HandBuiltConfigIsCheckedToo) {
  ModelConfig c = parse_model_config(fixture_config("llama").dump(), "c");
  c.layers.pop_back();
  EXPECT_THROW(validate_config(c), InvalidArgument);
  c = parse_model_config(fixture_config("llama").dump(), "c");
  c.n_kv_heads = 0;
  EXPECT_THROW(validate_config(c), InvalidArgument);
}

// Once `layers` is filled the derived fields are used as they are: head_dim 0 would make q_dim() 0 and a
// scale of 0, inf or nan would silently change the softmax.
TEST(ConfigValidation, HandBuiltDerivedFieldsMustBeUsable) {
  const ModelConfig good = parse_model_config(fixture_config("gemma3").dump(), "c");
  auto expect_bad = [&](const char* what, auto&& edit, const std::string& needle) {
    ModelConfig c = good;
    edit(c);
    SCOPED_TRACE(what);
    try {
      validate_config(c);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_bad("head_dim 0", [](ModelConfig& c) { c.head_dim = 0; }, "head_dim");
  expect_bad("head_dim -16", [](ModelConfig& c) { c.head_dim = -16; }, "head_dim");
  expect_bad("attn_scale 0", [](ModelConfig& c) { c.attn_scale = 0.f; }, "attention scale");
  expect_bad("attn_scale inf", [](ModelConfig& c) { c.attn_scale = INFINITY; }, "attention scale");
  expect_bad("attn_scale nan", [](ModelConfig& c) { c.attn_scale = NAN; }, "attention scale");
  expect_bad("attn_scale < 0", [](ModelConfig& c) { c.attn_scale = -0.25f; }, "attention scale");
  expect_bad("embed_scale 0", [](ModelConfig& c) { c.embed_scale = 0.f; }, "hidden_size");
  expect_bad("layer rope theta 0", [](ModelConfig& c) { c.layers[1].rope.theta = 0.f; }, "rope_theta");
  expect_bad("layer rotary_dim 0", [](ModelConfig& c) { c.layers[0].rope.rotary_dim = 0; }, "rotary_dim");
  expect_bad("layer window -1", [](ModelConfig& c) { c.layers[0].window = -1; }, "sliding_window");
  EXPECT_NO_THROW(validate_config(good));
}

// Gemma's sqrt(C) embedding scale is derived (the family only sets scale_embeddings), rounded to f32.
TEST(ConfigValidation, GemmaEmbedScaleIsDerived) {
  for (const char* f : {"gemma2", "gemma3"}) {
    const json hf = fixture_config(f);
    const ModelConfig c = parse_model_config(hf.dump(), f);
    EXPECT_TRUE(c.scale_embeddings) << f;
    EXPECT_EQ(c.embed_scale, static_cast<float>(std::sqrt(hf["hidden_size"].get<double>()))) << f;
  }
  for (const char* f : {"llama", "qwen3", "gpt2"}) EXPECT_EQ(parse_model_config(fixture_config(f).dump(), f).embed_scale, 1.f) << f;
}

TEST(CheckedSize, RangesAndTypes) {
  EXPECT_EQ(checked_size<int>(int64_t{7}, "x"), 7);
  EXPECT_EQ(checked_size<int>(-1, "x", -1), -1);
  EXPECT_EQ(checked_size<int64_t>(3.0, "x"), 3);
  EXPECT_THROW(checked_size<int>(int64_t{1} << 40, "x"), InvalidArgument);
  EXPECT_THROW(checked_size<int>(-1, "x"), InvalidArgument);
  EXPECT_THROW(checked_size<uint32_t>(uint64_t{1} << 33, "x"), InvalidArgument);
  EXPECT_THROW(checked_size<int64_t>(2.5, "x"), InvalidArgument);
  EXPECT_THROW(checked_size<int64_t>(1e30, "x"), InvalidArgument);
  EXPECT_THROW(checked_size<int>(std::nan(""), "x"), InvalidArgument);
  try {
    checked_size<int>(-5, "config.json: 'n_layer'", 1, 10);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "config.json: 'n_layer' must be an integer in [1, 10], got -5");
  }
}

}  // namespace
}  // namespace lathe
