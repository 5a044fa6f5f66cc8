// Model::create: training from scratch starts from the family's Hugging Face initialisation, is
// reproducible from the seed, and saves a folder that Model::load reads back unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe {
namespace {

std::string config_of(const std::string& family) {
  std::ifstream in(testing::fixtures_root() + "/models/" + family + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double std_of(const Tensor& t) {
  const auto v = t.to_vector();
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += double(x) * x;
  }
  const double mean = s / v.size();
  return std::sqrt(s2 / v.size() - mean * mean);
}

TEST(ModelCreate, InitialisesLikeTheFamilyAndIsReproducible) {
  for (const std::string family : {"llama", "gemma3", "gpt2", "qwen3_moe"}) {
    SCOPED_TRACE(family);
    const std::string cfg = config_of(family);
    auto a = Model::create(cfg, 7), b = Model::create(cfg, 7), c = Model::create(cfg, 8);
    const double range = a->config().hf_config.value("initializer_range", 0.02);
    const auto& w = a->weights();
    EXPECT_NEAR(std_of(w.embed_tokens.weight), range, 0.15 * range);
    for (float x : w.norm.weight.to_vector()) EXPECT_EQ(x, 1.f - a->config().norm_weight_offset);
    if (w.norm.bias.defined()) {
      for (float x : w.norm.bias.to_vector()) EXPECT_EQ(x, 0.f);
    }
    if (family == "gpt2") {  // residual projections: std / sqrt(2 L)
      const double expect = range / std::sqrt(2.0 * a->config().n_layers);
      EXPECT_NEAR(std_of(w.layers[0].self_attn.o_proj.weight), expect, 0.15 * expect);
    }
    EXPECT_EQ(a->weights().embed_tokens.weight.to_vector(), b->weights().embed_tokens.weight.to_vector());
    {  // the initialisation does not depend on the thread count (a vocabulary big enough for several chunks)
      nlohmann::json big = nlohmann::json::parse(cfg);
      big["vocab_size"] = 5000;
      auto many = Model::create(big.dump(), 7);
      Context one(1);
      ContextScope scope(one);
      auto single = Model::create(big.dump(), 7);
      EXPECT_EQ(single->weights().embed_tokens.weight.to_vector(), many->weights().embed_tokens.weight.to_vector());
    }
    EXPECT_NE(a->weights().embed_tokens.weight.to_vector(), c->weights().embed_tokens.weight.to_vector());
    // Saved and reloaded: the same logits.
    const std::string dir = testing::scratch_dir("create_" + family);
    a->save(dir);
    auto back = Model::load(dir, {.force_f32 = true});
    const Tensor ids = Tensor::from_data_i32({1, 5}, {1, 2, 3, 4, 5});
    EXPECT_EQ(a->forward(ids).to_vector(), back->forward(ids).to_vector());
  }
}

// A huge initializer_range would draw inf weights: create refuses it, naming the key, before drawing.
TEST(ModelCreate, RefusesAnUnusableInitializerRange) {
  nlohmann::json cfg = nlohmann::json::parse(config_of("llama"));
  cfg["initializer_range"] = 1e38;
  try {
    Model::create(cfg.dump(), 7);
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'initializer_range'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
