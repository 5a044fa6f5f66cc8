// Model::for_each_param, the one parameter walk: every fixture family's parameters are visited once each
// (a tied embedding once), with the role and layer that the module structs say they have; the walk's
// counts agree with the reference's parameter count; the bf16 copies cover exactly the Linear weights;
// and the weight version counts updates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "fixture_model.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> fixture_models() { return testing::fixture_model_names(); }

struct Expected {
  ParamRole role;
  int layer;
};

// The role and layer of every parameter tensor, read off the module structs (independently of the
// family files' bindings, which the walk follows).
std::map<const TensorImpl*, Expected> expected_roles(const ModelWeights& w) {
  std::map<const TensorImpl*, Expected> out;
  const auto add = [&](const Tensor& t, ParamRole r, int layer) {
    if (t.defined()) out.emplace(t.impl(), Expected{r, layer});
  };
  const auto add_norm = [&](const Norm& n, int layer) {
    add(n.weight, ParamRole::kNormWeight, layer);
    add(n.bias, ParamRole::kBias, layer);
  };
  const auto add_linear = [&](const Linear& l, int layer) {
    add(l.weight, ParamRole::kMatmulWeight, layer);
    add(l.bias, ParamRole::kBias, layer);
  };
  add(w.embed_tokens.weight, ParamRole::kEmbedding, -1);  // first: a tied head keeps this role
  add(w.embed_positions.weight, ParamRole::kEmbedding, -1);
  for (int i = 0; i < static_cast<int>(w.layers.size()); ++i) {
    const DecoderLayer& l = w.layers[i];
    for (const Norm* n : {&l.input_layernorm, &l.post_attention_layernorm, &l.pre_feedforward_layernorm,
                          &l.post_feedforward_layernorm, &l.self_attn.q_norm, &l.self_attn.k_norm})
      add_norm(*n, i);
    for (const Linear* lin : {&l.self_attn.q_proj, &l.self_attn.k_proj, &l.self_attn.v_proj, &l.self_attn.o_proj,
                              &l.mlp.gate_proj, &l.mlp.up_proj, &l.mlp.down_proj})
      add_linear(*lin, i);
    add(l.moe.router, ParamRole::kRouter, i);
    for (const Tensor* e : {&l.moe.experts.gate_proj, &l.moe.experts.up_proj, &l.moe.experts.down_proj})
      add(*e, ParamRole::kExpert, i);
  }
  add_norm(w.norm, -1);
  add_linear(w.lm_head, -1);
  return out;
}

class ParamWalk : public ::testing::TestWithParam<std::string> {};

TEST_P(ParamWalk, VisitsEveryTensorOnceWithItsRoleAndLayer) {
  const std::string dir = testing::fixtures_root() + "/models/" + GetParam();
  auto m = Model::load(dir, {.force_f32 = true});
  const auto expected = expected_roles(m->weights());
  std::set<const TensorImpl*> seen;
  std::set<std::string> names;
  int64_t numel = 0;
  m->for_each_param([&](const std::string& name, Tensor& t, ParamRole role, int layer) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(seen.insert(t.impl()).second) << "visited twice";
    EXPECT_TRUE(names.insert(name).second) << "name used twice";
    const auto it = expected.find(t.impl());
    ASSERT_NE(it, expected.end()) << "not a parameter of the module structs";
    EXPECT_EQ(param_role_name(role), std::string(param_role_name(it->second.role)));
    EXPECT_EQ(layer, it->second.layer);
    numel += t.numel();
  });
  EXPECT_EQ(seen.size(), expected.size()) << "some parameters were not visited";
  EXPECT_EQ(numel, m->n_params());
  std::ifstream ref(dir + "/reference.json");
  if (ref) {
    EXPECT_EQ(m->n_params(), nlohmann::json::parse(ref)["n_params"].get<int64_t>());
  }
  // A tied head is the embedding table (visited once, as an embedding).
  const ModelWeights& w = m->weights();
  EXPECT_EQ(w.lm_head.weight.impl() == w.embed_tokens.weight.impl(), m->config().tie_embeddings);

  // The const walk visits the same tensors in the same order.
  std::vector<std::string> order, const_order;
  m->for_each_param([&](const std::string& n, Tensor&, ParamRole, int) { order.push_back(n); });
  static_cast<const Model&>(*m).for_each_param(
      [&](const std::string& n, const Tensor&, ParamRole, int) { const_order.push_back(n); });
  EXPECT_EQ(order, const_order);
}

// The bf16 compute copies sit on exactly the Linears' weights (for_each_linear), each the shape of its
// weight: the matmul weights of the walk plus a tied head; no norm, bias, lookup-only or MoE tensor.
TEST_P(ParamWalk, Bf16CopiesCoverTheLinearWeights) {
  auto m = testing::load_fixture_model_f32(GetParam());
  EXPECT_FALSE(m->has_bf16_copies());
  EXPECT_THROW(m->round_bf16_copies(1), InvalidArgument);
  m->make_bf16_copies();
  ASSERT_TRUE(m->has_bf16_copies());
  std::set<const TensorImpl*> copied;
  for_each_linear(m->weights(), [&](const Linear& l) {
    ASSERT_TRUE(l.bf16.defined());
    EXPECT_EQ(l.bf16.dtype(), DType::kBF16);
    EXPECT_EQ(l.bf16.shape(), l.weight.shape());
    copied.insert(l.weight.impl());
  });
  std::set<const TensorImpl*> matmul;
  m->for_each_param([&](const std::string&, Tensor& t, ParamRole role, int) {
    if (role == ParamRole::kMatmulWeight) matmul.insert(t.impl());
  });
  if (m->config().tie_embeddings) matmul.insert(m->weights().embed_tokens.weight.impl());
  EXPECT_EQ(copied, matmul);
  // Rounding is a pure function of (weights, key).
  m->round_bf16_copies(3);
  const std::vector<float> first = m->weights().layers[0].self_attn.q_proj.bf16.to(DType::kF32).to_vector();
  m->round_bf16_copies(4);
  m->round_bf16_copies(3);
  EXPECT_EQ(m->weights().layers[0].self_attn.q_proj.bf16.to(DType::kF32).to_vector(), first);
  m->drop_bf16_copies();
  EXPECT_FALSE(m->has_bf16_copies());
  for_each_linear(m->weights(), [](const Linear& l) { EXPECT_FALSE(l.bf16.defined()); });
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ParamWalk, ::testing::ValuesIn(fixture_models()),
                         [](const auto& info) { return info.param; });

TEST(WeightVersion, StartsAtZeroAndCountsBumps) {
  auto m = Model::load(testing::fixtures_root() + "/models/" + fixture_models().at(0));
  EXPECT_EQ(m->weight_version(), 0u);
  const uint64_t pinned = m->weight_version();
  m->bump_weight_version();
  m->bump_weight_version();
  EXPECT_EQ(m->weight_version(), 2u);
  EXPECT_NE(m->weight_version(), pinned) << "a reader that pinned version 0 sees the change";
}

}  // namespace
}  // namespace lathe
