// The training loop end to end on a tiny model: it learns, it stops and resumes bit for bit, a resume
// ignores incomplete checkpoints, and a failed checkpoint write leaves the previous one intact.
#include "lathe/train/trainer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/test_metrics.h"
#include "lathe/train/token_shard.h"

namespace lathe::train {
namespace {

namespace fs = std::filesystem;

// A learnable stream: repeated counting sequences 1..40 with noise-free structure.
void write_data(const std::string& dir) {
  std::vector<uint32_t> tokens;
  CounterRng rng{5, 0};
  while (tokens.size() < 20000) {
    const uint32_t start = 1 + static_cast<uint32_t>(rng.next_below(20));
    for (uint32_t t = start; t < start + 20; ++t) tokens.push_back(t);
  }
  write_token_shard(dir + "/toy_train_000000.bin", tokens, 2);
  write_token_shard(dir + "/toy_val_000000.bin", std::vector<uint32_t>(tokens.begin(), tokens.begin() + 2000), 2);
}

std::string recipe(const std::string& data, int steps) {
  return R"(
run: {seed: 3, threads: 2}
model:
  config: {architectures: [LlamaForCausalLM], model_type: llama, vocab_size: 64, hidden_size: 32,
           intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
           max_position_embeddings: 64, rms_norm_eps: 1.0e-5, tie_word_embeddings: false}
data: {train: )" + data + "/toy, val: " + data + R"(/toy, seq_len: 16, batch_size: 4, grad_accum: 2}
optimizer: {lr: 1.0e-2, weight_decay: 0.1}
schedule: {kind: cosine, steps: )" + std::to_string(steps) + R"(, warmup_steps: 2}
eval: {every: 4, batches: 2}
checkpoint: {every: 3, keep: 2}
)";
}

using testing::loss_lines;

TEST(Trainer, LearnsAndResumesBitForBit) {
  const std::string dir = testing::scratch_dir("trainer_resume");
  write_data(dir);
  TrainConfig full = parse_recipe(recipe(dir, 10), {"run.dir=" + dir + "/full"});
  const TrainResult a = Trainer(full).run(StartMode::kFresh);
  EXPECT_EQ(a.steps_done, 10);
  const auto full_losses = loss_lines(dir + "/full");
  ASSERT_EQ(full_losses.size(), 10u);
  EXPECT_LT(a.final_val_loss, std::log(64.0) - 1.0) << "did not learn";
  // Checkpoints: every 3 steps and at the end, the newest 2 kept.
  EXPECT_TRUE(fs::exists(dir + "/full/checkpoints/step_00000010/DONE"));
  EXPECT_TRUE(fs::exists(dir + "/full/checkpoints/step_00000009/DONE"));
  EXPECT_FALSE(fs::exists(dir + "/full/checkpoints/step_00000006"));

  // Stopped after step 5 (as on SIGTERM), then resumed: the same losses, bit for bit.
  TrainConfig part = parse_recipe(recipe(dir, 10), {"run.dir=" + dir + "/part"});
  TrainerHooks stop_at_5;
  std::vector<uint64_t> versions;
  stop_at_5.on_step = [&versions](const StepReport& r) {
    versions.push_back(r.weight_version);
    if (r.step == 5) Trainer::request_stop();
  };
  const TrainResult b = Trainer(part, stop_at_5).run(StartMode::kFresh);
  EXPECT_EQ(versions, (std::vector<uint64_t>{1, 2, 3, 4, 5})) << "the trainer bumps the weight version per step";
  EXPECT_TRUE(b.stopped_early);
  EXPECT_EQ(b.steps_done, 5);
  // A half-written later checkpoint (no DONE marker) must be ignored by the resume.
  fs::create_directories(dir + "/part/checkpoints/step_00000007");
  std::ofstream(dir + "/part/checkpoints/step_00000007/state.json") << "{\"step\": 7";
  const TrainResult c = Trainer(part).run(StartMode::kResume);
  EXPECT_EQ(c.steps_done, 10);
  EXPECT_EQ(loss_lines(dir + "/part"), full_losses);
}

// The loss of each line (the loss lines are cut before grad_norm).
// run.precision=bf16 (specs/pretrain.md §2.4): it learns, stays near the f32 run, resumes bit for bit (the
// bf16 copies are rebuilt from the f32 masters with the same rounding key), and checkpoints f32 masters.
TEST(Trainer, Bf16ComputeLearnsAndResumesBitForBit) {
  const std::string dir = testing::scratch_dir("trainer_bf16");
  write_data(dir);
  Trainer(parse_recipe(recipe(dir, 10), {"run.dir=" + dir + "/f32"})).run(StartMode::kFresh);
  TrainConfig full = parse_recipe(recipe(dir, 10), {"run.dir=" + dir + "/full", "run.precision=bf16"});
  EXPECT_EQ(full.resolved["run"]["precision"], "bf16");
  const TrainResult a = Trainer(full).run(StartMode::kFresh);
  EXPECT_LT(a.final_val_loss, std::log(64.0) - 1.0) << "did not learn";
  const auto full_losses = loss_lines(dir + "/full");
  ASSERT_EQ(full_losses.size(), 10u);
  const std::vector<double> f32 = testing::loss_values(dir + "/f32"), b16 = testing::loss_values(full_losses);
  EXPECT_NE(f32[1], b16[1]) << "run.precision=bf16 changed nothing";
  // Same data and initial weights; bf16 rounding moves each loss by well under 2% on this toy task.
  for (size_t i = 0; i < f32.size(); ++i) EXPECT_NEAR(b16[i], f32[i], 0.02 * f32[i]) << "step " << i + 1;

  // Stopped after step 5, resumed: the same losses bit for bit.
  TrainConfig part = parse_recipe(recipe(dir, 10), {"run.dir=" + dir + "/part", "run.precision=bf16"});
  TrainerHooks stop_at_5;
  stop_at_5.on_step = [](const StepReport& r) {
    if (r.step == 5) Trainer::request_stop();
  };
  EXPECT_TRUE(Trainer(part, stop_at_5).run(StartMode::kFresh).stopped_early);
  EXPECT_EQ(Trainer(part).run(StartMode::kResume).steps_done, 10);
  EXPECT_EQ(loss_lines(dir + "/part"), full_losses);

  // Layer recompute reads the same bf16 copies: the same losses bit for bit.
  Trainer(parse_recipe(recipe(dir, 10), {"run.dir=" + dir + "/recompute", "run.precision=bf16",
                                         "run.recompute_layers=true"}))
      .run(StartMode::kFresh);
  EXPECT_EQ(loss_lines(dir + "/recompute"), full_losses);

  // Checkpoints hold the f32 masters.
  const auto ckpt = latest_checkpoint(dir + "/full");
  ASSERT_TRUE(ckpt.has_value());
  const auto saved = Model::load(*ckpt);  // stored dtypes kept (no force_f32)
  saved->for_each_param([](const std::string& n, const Tensor& t, ParamRole, int) { EXPECT_EQ(t.dtype(), DType::kF32) << n; });
}

TEST(Trainer, FailedCheckpointWriteKeepsThePreviousOne) {
  const std::string dir = testing::scratch_dir("trainer_full_disk");
  write_data(dir);
  TrainConfig cfg = parse_recipe(recipe(dir, 3), {"run.dir=" + dir + "/run"});
  Trainer(cfg).run(StartMode::kFresh);
  const auto before = latest_checkpoint(dir + "/run");
  ASSERT_TRUE(before.has_value());
  // A file-size limit below the model's size makes every large write fail, as a full disk does.
  auto model = Model::load(*before, {.force_f32 = true});
  std::vector<OptimParam> params;
  model->for_each_param(
      [&](const std::string&, Tensor& t, ParamRole, int) { params.push_back({"p" + std::to_string(params.size()), t, true}); });
  AdamW opt(params, {});
  struct rlimit old {};
  getrlimit(RLIMIT_FSIZE, &old);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  EXPECT_THROW(save_checkpoint(dir + "/run", *model, opt, {.step = 4}, {}), IoError);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(latest_checkpoint(dir + "/run"), before);
  for (const auto& e : fs::directory_iterator(dir + "/run/checkpoints"))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos) << "temporary left behind";
  EXPECT_NO_THROW(Model::load(*before));
}

TEST(Trainer, DocumentMaskingChangesWhatTheModelSees) {
  const std::string dir = testing::scratch_dir("trainer_docs");
  write_data(dir);
  // Token 5 opens a "document" in the toy stream; no manifest here, so the delimiter is given.
  const TrainResult plain = Trainer(parse_recipe(recipe(dir, 4), {"run.dir=" + dir + "/plain"})).run(StartMode::kFresh);
  const TrainResult masked = Trainer(parse_recipe(recipe(dir, 4), {"run.dir=" + dir + "/masked",
                                                                  "data.document_masking=true", "data.delimiter_id=5"}))
                                 .run(StartMode::kFresh);
  EXPECT_TRUE(std::isfinite(masked.final_loss));
  EXPECT_NE(plain.final_loss, masked.final_loss);
  // Without a manifest and without data.delimiter_id the run explains what is missing.
  EXPECT_THROW(Trainer(parse_recipe(recipe(dir, 4), {"run.dir=" + dir + "/x", "data.document_masking=true"})).run(StartMode::kFresh),
               InvalidArgument);
}

TEST(Trainer, RecipeErrorsNameTheKey) {
  try {
    parse_recipe("data: {train: x, seq_len: 8, batch_size: 2}\nschedule: {steps: 3}\nmodel: {base: m}\noptimizer: {lr: 1e-3, betas: 3}\n");
    ADD_FAILURE() << "unknown key accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.betas"), std::string::npos) << e.what();
  }
  try {
    parse_recipe("data: {train: x, seq_len: eight, batch_size: 2}\nschedule: {steps: 3}\nmodel: {base: m}\n");
    ADD_FAILURE() << "string seq_len accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("data.seq_len"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_recipe("data: {train: x, seq_len: 8, batch_size: 2}\nschedule: {steps: 3}\nmodel: {base: m}\n",
                            {"run.precision=fp16"}),
               InvalidArgument);
  const TrainConfig c = parse_recipe("data: {train: x, seq_len: 8, batch_size: 2}\nschedule: {steps: 3}\nmodel: {base: m}\n",
                                     {"optimizer.lr=5e-4", "schedule.kind=wsd"});
  EXPECT_EQ(c.precision, "f32");
  EXPECT_EQ(c.resolved["run"]["precision"], "f32") << "the default is written to the resolved recipe";
  EXPECT_DOUBLE_EQ(c.schedule.peak, 5e-4);
  EXPECT_EQ(c.schedule.kind, "wsd");
  EXPECT_EQ(c.resolved["optimizer"]["lr"], 5e-4);
}

}  // namespace
}  // namespace lathe::train
