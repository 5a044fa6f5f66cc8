// Test helper: the PEFT LoRA fixture (tests/fixtures/posttrain: reference.json "lora", the adapter folder
// and lora.input_ids / lora.logits in reference.safetensors) and its base model, all read from the files.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe::testing {

struct LoraFixture {
  nlohmann::json lora;  // reference.json "lora"
  std::string base_dir, adapter_dir;
  Tensor ids;     // [B, T] int32 (lora.input_ids)
  Tensor logits;  // [B, T, V] f32 (lora.logits): PEFT's base + adapter
};

inline LoraFixture load_lora_fixture() {
  const std::string root = fixtures_root();
  std::ifstream in(root + "/posttrain/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  LoraFixture f;
  f.lora = ref.at("lora");
  // "base_model": "models/llama (load its model.safetensors)": the folder is the first word.
  std::istringstream base(ref.at("base_model").get<std::string>());
  std::string base_rel;
  base >> base_rel;
  f.base_dir = root + "/" + base_rel;
  f.adapter_dir = root + "/" + f.lora.at("adapter_dir").get<std::string>();
  const SafetensorsFile st = SafetensorsFile::open(root + "/posttrain/reference.safetensors");
  f.ids = st.tensor("lora.input_ids").to(DType::kI32);
  f.logits = st.tensor("lora.logits").to(DType::kF32);
  return f;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> av = a.to_vector(), bv = b.to_vector();
  EXPECT_EQ(av.size(), bv.size());
  double m = 0;
  for (size_t i = 0; i < av.size() && i < bv.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(av[i]) - bv[i]));
  return m;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace lathe::testing
