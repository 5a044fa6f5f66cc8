// LoRA training helpers: with the base frozen only the adapters get gradients and optimizer state, an
// AdamW step moves the adapters and leaves every base weight bit for bit, LoRA dropout under activation
// recompute gives the same loss and gradients as without it (the mask is redrawn exactly), and a
// checkpoint of a LoRA run holds the adapter as a PEFT folder and restores it and its moments exactly.
#include "lathe/train/lora_params.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/io/test_paths.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/train/checkpoint.h"

namespace lathe::train {
namespace {

std::unique_ptr<Model> llama() { return Model::load(testing::fixtures_root() + "/models/llama", {.force_f32 = true}); }

const Tensor& ids() {
  static const Tensor t = Tensor::from_data_i32({2, 6}, {1, 5, 9, 2, 7, 3, 4, 4, 8, 1, 0, 6});
  return t;
}

TEST(LoraParams, OnlyAdaptersTrain) {
  auto m = llama();
  LoraConfig c;
  c.r = 4;
  c.target_regex = "all-linear";
  LoraAdapters lora = LoraAdapters::create(*m, c, 5);
  freeze_base_for_lora(*m, lora);
  std::vector<OptimParam> params = lora_optim_params(lora);
  std::set<std::string> names;
  for (const OptimParam& p : params) names.insert(p.name);
  std::set<std::string> want;
  for (const auto& [name, t] : lora.peft_tensors()) want.insert(name);
  EXPECT_EQ(names, want);
  int64_t n = 0;
  for (const OptimParam& p : params) n += p.value.numel();
  EXPECT_EQ(n, lora.n_params());

  std::vector<std::pair<std::string, std::vector<float>>> base_before;
  m->for_each_param([&](const std::string& name, const Tensor& t, ParamRole, int) {
    base_before.push_back({name, t.to_vector()});
  });
  const Tensor loss0 = m->next_token_loss(ids());
  backward(loss0);
  m->for_each_param([&](const std::string& name, const Tensor& t, ParamRole, int) {
    EXPECT_FALSE(t.grad().defined()) << name << ": the base is frozen";
  });
  for (const OptimParam& p : params) EXPECT_TRUE(p.value.grad().defined()) << p.name;
  AdamW opt(params, AdamWConfig{});
  opt.step(1e-2, 1.f, current_context().pool);
  size_t i = 0;
  m->for_each_param([&](const std::string& name, const Tensor& t, ParamRole, int) {
    EXPECT_EQ(t.to_vector(), base_before[i++].second) << name << " moved";
  });
  lora.set_requires_grad(false);
  NoGradGuard ng;
  EXPECT_LT(m->next_token_loss(ids()).item(), loss0.item()) << "one step on the same batch lowers its loss";
}

TEST(LoraParams, DropoutUnderRecomputeIsExact) {
  auto m = llama();
  LoraConfig c;
  c.r = 4;
  c.lora_dropout = 0.3;
  c.target_modules = {"q_proj", "v_proj", "down_proj"};
  LoraAdapters lora = LoraAdapters::create(*m, c, 6);
  // Non-zero B, so that A's gradient and the dropout on A's input matter.
  lora.for_each_param([](const std::string& name, Tensor& t, int) {
    if (name.find("lora_B") != std::string::npos) t.copy_from(testing::random_tensor(t.shape(), 3, 0.1f));
  });
  freeze_base_for_lora(*m, lora);
  const auto run = [&](bool recompute) {
    ForwardOptions o{.recompute = recompute, .lora_dropout = true, .dropout_key = 77};
    const Tensor loss = m->next_token_loss(ids(), o);
    backward(loss);
    std::vector<std::vector<float>> g{{loss.item()}};
    lora.for_each_param([&](const std::string&, Tensor& t, int) {
      g.push_back(t.grad().to_vector());
      t.zero_grad();
    });
    return g;
  };
  const auto plain = run(false);
  EXPECT_EQ(run(true), plain);
  NoGradGuard ng;
  EXPECT_NE(m->next_token_loss(ids()).item(), plain[0][0]) << "dropout must change the training loss";
}

TEST(LoraParams, CheckpointHoldsThePeftAdapter) {
  auto m = llama();
  LoraConfig c;
  c.r = 2;
  LoraAdapters lora = LoraAdapters::create(*m, c, 8);
  freeze_base_for_lora(*m, lora);
  AdamW opt(lora_optim_params(lora), AdamWConfig{});
  backward(m->next_token_loss(ids()));
  opt.step(1e-2, 1.f, current_context().pool);
  const std::string run = testing::scratch_dir("lora_ckpt");
  const std::string dir = save_checkpoint(run, *m, opt, {.step = 1}, {.lora = &lora});
  EXPECT_TRUE(std::filesystem::exists(dir + "/adapter_config.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors")) << "the frozen base is not written";
  const CheckpointCheck check = verify_checkpoint(dir);
  EXPECT_TRUE(check.ok()) << check.problem;
  // Resume: the base, then the adapter from the checkpoint; the same tensors and moments bit for bit.
  auto m2 = llama();
  LoraAdapters back = LoraAdapters::load(*m2, dir);
  const auto a = lora.peft_tensors(), b = back.peft_tensors();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first;
  AdamW opt2(lora_optim_params(back), AdamWConfig{});
  const TrainState st = load_checkpoint_state(dir, opt2);
  EXPECT_EQ(st.step, 1);
  ASSERT_EQ(opt2.exp_avg().size(), opt.exp_avg().size());
  for (size_t i = 0; i < opt.exp_avg().size(); ++i) {
    EXPECT_EQ(opt2.exp_avg()[i].to_vector(), opt.exp_avg()[i].to_vector());
    EXPECT_EQ(opt2.exp_avg_sq()[i].to_vector(), opt.exp_avg_sq()[i].to_vector());
  }
}

}  // namespace
}  // namespace lathe::train
