// Bad checkpoints fail with one clear error naming the file and the tensor, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class LoadErrors : public ::testing::Test {
 protected:
  std::string src_ = testing::fixtures_root() + "/models/llama";
  std::string dir_ = testing::scratch_dir("load_errors");

  void SetUp() override {
    fs::copy_file(src_ + "/config.json", dir_ + "/config.json");
    fs::copy_file(src_ + "/model.safetensors", dir_ + "/model.safetensors");
  }
  // Rewrites model.safetensors after `edit` changes the tensor list.
  void edit_tensors(const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit) {
    SafetensorsFile f = SafetensorsFile::open(src_ + "/model.safetensors");
    std::vector<std::pair<std::string, Tensor>> t;
    for (const auto& e : f.entries()) t.push_back({e.name, f.tensor(e.name).clone()});
    edit(t);
    fs::remove(dir_ + "/model.safetensors");
    save_safetensors(dir_ + "/model.safetensors", t);
  }
  void edit_config(const std::function<void(json&)>& edit) {
    std::ifstream in(src_ + "/config.json");
    json c = json::parse(in);
    edit(c);
    std::ofstream(dir_ + "/config.json") << c.dump(2);
  }
  // Loading must throw a lathe::Error whose message contains every `needle`.
  void expect_error(std::initializer_list<std::string> needles) {
    try {
      Model::load(dir_);
      ADD_FAILURE() << "loaded without error";
    } catch (const Error& e) {
      for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
};

TEST_F(LoadErrors, UnknownArchitecture) {
  edit_config([](json& c) {
    c["architectures"] = {"FancyNewForCausalLM"};
    c["model_type"] = "fancy";
  });
  expect_error({"FancyNewForCausalLM", "LlamaForCausalLM"});
}

TEST_F(LoadErrors, MissingTensor) {
  edit_tensors([](auto& t) {
    std::erase_if(t, [](auto& p) { return p.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  expect_error({"missing tensor", "model.layers.1.mlp.up_proj.weight"});
}

TEST_F(LoadErrors, ExtraTensor) {
  edit_tensors([](auto& t) { t.push_back({"model.layers.7.surprise.weight", Tensor::zeros({3})}); });
  expect_error({"unexpected tensor", "model.layers.7.surprise.weight", "model.safetensors"});
}

TEST_F(LoadErrors, ShapeMismatch) {
  edit_tensors([](auto& t) {
    for (auto& p : t)
      if (p.first == "model.layers.0.self_attn.k_proj.weight") p.second = Tensor::zeros({31, 64});
  });
  expect_error({"model.layers.0.self_attn.k_proj.weight", "[31, 64]", "model.safetensors"});
}

TEST_F(LoadErrors, ConfigShapeDisagreesWithWeights) {
  edit_config([](json& c) { c["intermediate_size"] = 96; });
  expect_error({"gate_proj.weight", "[96, 64]"});
}

TEST_F(LoadErrors, IntegerWeights) {
  edit_tensors([](auto& t) {
    for (auto& p : t)
      if (p.first == "model.norm.weight") p.second = Tensor::zeros({64}, DType::kI32);
  });
  expect_error({"model.norm.weight", "i32", "model.safetensors"});
}

TEST_F(LoadErrors, CorruptConfig) {
  std::ofstream(dir_ + "/config.json") << "{\"architectures\": [";
  expect_error({"config.json", "JSON"});
}

TEST_F(LoadErrors, MissingConfigKey) {
  edit_config([](json& c) { c.erase("hidden_size"); });
  expect_error({"config.json", "hidden_size"});
}

TEST_F(LoadErrors, TruncatedWeights) {
  fs::resize_file(dir_ + "/model.safetensors", fs::file_size(dir_ + "/model.safetensors") - 1000);
  expect_error({"model.safetensors", "tensor '"});
}

TEST_F(LoadErrors, NotAFolder) {
  try {
    Model::load(dir_ + "/nope");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
}

TEST(ShardedCheckpoint, LoadsFromIndex) {
  const std::string src = testing::fixtures_root() + "/models/llama";
  const std::string dir = testing::scratch_dir("sharded");
  fs::copy_file(src + "/config.json", dir + "/config.json");
  SafetensorsFile f = SafetensorsFile::open(src + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> a, b;
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  for (const auto& e : f.entries()) {
    const bool first = e.name < "model.layers.1";
    (first ? a : b).push_back({e.name, f.tensor(e.name)});
    index["weight_map"][e.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  save_safetensors(dir + "/model-00001-of-00002.safetensors", a);
  save_safetensors(dir + "/model-00002-of-00002.safetensors", b);
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  auto sharded = Model::load(dir);
  auto single = Model::load(src);
  EXPECT_EQ(sharded->n_params(), single->n_params());
}

}  // namespace
}  // namespace lathe
