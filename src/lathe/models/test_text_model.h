// Test helper: a small text model with a real tokenizer. The Qwen3 fixture's architecture with the Qwen3
// tokenizer's vocabulary, random weights, and the tokenizer files beside it (LATHE_TOKENIZERS, default
// ~/.cache/lathe/tokenizers; tests skip when it is absent).
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "lathe/base/rng.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"

namespace lathe::testing {

inline constexpr int32_t kQwen3ImEnd = 151645;  // <|im_end|>: the model's eos_token_id

// The Qwen3 fixture's config.json with the real tokenizer's vocabulary and end of turn, and a context
// of 512 positions.
inline nlohmann::json qwen3_text_model_config() {
  std::ifstream in(fixtures_root() + "/models/qwen3/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["vocab_size"] = 151936;  // Qwen3's embedding rows (the tokenizer has 151669 ids)
  config["max_position_embeddings"] = 512;
  config["eos_token_id"] = kQwen3ImEnd;
  return config;
}

// The folder, written once per test process; "" when the qwen3 tokenizer is not installed.
inline const std::string& qwen3_text_model_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path tok = fs::path(tokenizers_root()) / "qwen3";
    if (!fs::exists(tok / "tokenizer.json")) return std::string();
    const nlohmann::json config = qwen3_text_model_config();
    const std::string out = scratch_dir("qwen3_text_model");
    Model::create(config.dump(), 7)->save(out);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok / f, fs::path(out) / f);
    return out;
  }();
  return dir;
}

// A PEFT adapter folder for that model (multi-LoRA serving tests), written once per test process: rank
// 4 on q, v and down projections, A as PEFT initialises it and B random (PEFT's B = 0 would change
// nothing); "" without the model.
inline const std::string& qwen3_text_lora_dir() {
  static const std::string dir = [] {
    if (qwen3_text_model_dir().empty()) return std::string();
    const std::string out = scratch_dir("qwen3_text_lora");
    auto m = Model::load(qwen3_text_model_dir(), {.force_f32 = true});
    LoraConfig c;
    c.r = 4;
    c.lora_alpha = 8;
    c.target_modules = {"q_proj", "v_proj", "down_proj"};
    LoraAdapters ad = LoraAdapters::create(*m, c, 11);
    CounterRng rng{.key = 12};
    ad.for_each_param([&](const std::string& name, Tensor& t, int) {
      if (name.find("lora_B") == std::string::npos) return;
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = 0.5f * (2.f * rng.next_float() - 1.f);
    });
    ad.save(out);
    return out;
  }();
  return dir;
}

}  // namespace lathe::testing
