// Test helpers of the preference losses (dpo_loss_test, kto_loss_test): the fixture Llama + PEFT adapter of
// tests/fixtures/posttrain (reference.json) as a policy, and token sequences from its JSON.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "lathe/autograd/node.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/train/lora_params.h"
#include "lathe/train/objective.h"

namespace lathe::testing {

inline nlohmann::json posttrain_reference() {
  std::ifstream in(fixtures_root() + "/posttrain/reference.json");
  return nlohmann::json::parse(in);
}

// prompt + answer (token id arrays), the answer's tokens trained.
inline posttrain::TokenizedExample prompt_answer_sequence(const nlohmann::json& prompt, const nlohmann::json& answer) {
  posttrain::TokenizedExample e;
  for (const auto& t : prompt) {
    e.ids.push_back(t.get<int32_t>());
    e.supervised.push_back(0);
  }
  for (const auto& t : answer) {
    e.ids.push_back(t.get<int32_t>());
    e.supervised.push_back(1);
  }
  return e;
}

// The policy of the fixture: base + PEFT adapter, the base frozen.
struct FixturePolicy {
  std::unique_ptr<Model> model;
  std::unique_ptr<LoraAdapters> lora;
};
inline FixturePolicy fixture_policy() {
  // "base_model": "models/llama (load its model.safetensors)": the folder is the first word.
  const nlohmann::json all = posttrain_reference();
  std::istringstream base(all.at("base_model").get<std::string>());
  std::string base_rel;
  base >> base_rel;
  const std::string root = fixtures_root();
  FixturePolicy p;
  p.model = Model::load(root + "/" + base_rel, {.force_f32 = true});
  p.lora = std::make_unique<LoraAdapters>(
      LoraAdapters::load(*p.model, root + "/" + all.at("lora").at("adapter_dir").get<std::string>()));
  train::freeze_base_for_lora(*p.model, *p.lora);
  return p;
}

// The gradient of a loss along a random direction d of all adapter tensors: `analytic` = ∇L·d from the
// adapters' gradients (after the caller's backward; cleared here), `numeric` = (L(θ+hd) − L(θ−hd)) / 2h with
// `loss_at_theta` evaluated (no grad) at the moved adapters, which are restored afterwards.
struct DirectionalDerivative {
  double analytic = 0, numeric = 0;
};
inline DirectionalDerivative directional_derivative(LoraAdapters& lora, const std::function<double()>& loss_at_theta,
                                                    double h) {
  std::vector<std::vector<float>> orig, dir;
  DirectionalDerivative r;
  uint32_t seed = 1;
  lora.for_each_param([&](const std::string&, Tensor& t, int) {
    orig.push_back(t.to_vector());
    dir.push_back(random_tensor(t.shape(), seed++).to_vector());
    const std::vector<float> g = t.grad().to_vector();
    for (size_t i = 0; i < g.size(); ++i) r.analytic += static_cast<double>(g[i]) * dir.back()[i];
    t.zero_grad();
  });
  const auto loss_at = [&](double step) {
    size_t k = 0;
    lora.for_each_param([&](const std::string&, Tensor& t, int) {
      std::vector<float> v = orig[k];
      for (size_t i = 0; i < v.size(); ++i) v[i] += static_cast<float>(step) * dir[k][i];
      t.copy_from(Tensor::from_data(t.shape(), v));
      ++k;
    });
    NoGradGuard ng;
    return loss_at_theta();
  };
  r.numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
  loss_at(0);
  return r;
}

// The value of the objective metric `name` in `r` (a test failure when it is missing).
inline double metric(const train::ObjectiveResult& r, const std::string& name) {
  for (const auto& [k, v] : r.metrics)
    if (k == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

}  // namespace lathe::testing
