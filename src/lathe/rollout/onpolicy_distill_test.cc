// On-policy distillation (GKD) on the fixture student and teacher with recipes/distill/onpolicy-tiny.yaml and the
// serving engine's sampler: at lmbda 0 the objective's batches and losses are the offline data path's bit for
// bit and nothing is sampled; at lmbda 1 every step's completions are the engine's samples from the student
// (prompts untouched, the samples trained, the step's trained tokens the denominator); the loss of an on-policy
// batch is distill_loss of its tokens with alpha 1 (TRL GKD); a stopped and resumed run redraws the same steps'
// sources and samples and logs the uninterrupted losses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/io/test_paths.h"
#include "lathe/posttrain/distill_objective.h"
#include "lathe/posttrain/onpolicy_batch.h"
#include "lathe/rollout/engine_completion_sampler.h"
#include "lathe/train/byte_tokenizer.h"
#include "lathe/train/test_metrics.h"

namespace lathe::rollout {
namespace {

using posttrain::CompletionSampling;
using posttrain::CompletionSource;
using posttrain::DistillBatch;
using posttrain::DistillObjective;
using posttrain::DistillOptions;
using posttrain::SftBatch;

// Every call's prompts, model, seed and completions (the engine's, or a failure when none is wanted).
struct SamplerLog {
  struct Call {
    std::vector<std::vector<int32_t>> prompts, completions;
    const Model* model = nullptr;
    uint64_t seed = 0;
  };
  std::vector<Call> calls;
};

class RecordingSampler final : public posttrain::CompletionSampler {
 public:
  explicit RecordingSampler(SamplerLog* log) : log_(log) {}
  std::vector<std::vector<int32_t>> sample(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const CompletionSampling& s) override {
    std::vector<std::vector<int32_t>> out = engine_.sample(model, prompts, s);
    log_->calls.push_back({.prompts = prompts, .completions = out, .model = &model, .seed = s.seed});
    return out;
  }

 private:
  SamplerLog* log_;
  EngineCompletionSampler engine_;
};

// The tiny on-policy recipe in `dir` (its tokenizer written there), with overrides.
train::TrainConfig recipe(const std::string& dir, std::vector<std::string> overrides) {
  train::write_byte_level_tokenizer(dir + "/tokenizer");
  overrides.push_back("sft.tokenizer=" + dir + "/tokenizer");
  overrides.push_back("run.dir=" + dir + "/run");
  overrides.push_back("run.threads=2");
  return train::load_recipe("recipes/distill/onpolicy-tiny.yaml", overrides);
}

std::unique_ptr<Model> student() {
  auto m = Model::load(testing::fixtures_root() + "/models/llama", {.force_f32 = true});
  m->set_requires_grad(true);
  return m;
}

// The objective, started on `model`, and the plain SFT data path over the same data (the offline batches).
struct Started {
  std::unique_ptr<dist::Communicator> comm = dist::make_single_process();
  std::unique_ptr<DistillObjective> objective;
  std::unique_ptr<posttrain::SftObjective> data;
};

Started start(Model& model, const DistillOptions& o, SamplerLog* log) {
  Started s;
  s.objective = std::make_unique<DistillObjective>(o, 1, std::make_unique<RecordingSampler>(log));
  s.data = std::make_unique<posttrain::SftObjective>(o.sft, 1);
  const train::ObjectiveStart st{.model = model, .comm = *s.comm, .forward = {}, .note = [](const std::string&) {}};
  s.objective->start(st);
  s.data->start(st);
  return s;
}

double distill_loss_of(Model& student, const Model& teacher, const SftBatch& b, posttrain::DistillLossOptions lo,
                       const DistillOptions& o, int64_t position) {
  const double weight = static_cast<double>(o.sft.grad_accum);
  return posttrain::distill_loss(student, teacher, b, lo, weight, train::micro_batch_forward({}, position, 1, 0))
      .item();
}

TEST(OnPolicyDistill, LmbdaZeroIsTheOfflineDataPathBitForBit) {
  const std::string dir = testing::scratch_dir("onpolicy_lmbda0");
  train::TrainConfig c = recipe(dir, {"distill.lmbda=0"});
  const DistillOptions o = posttrain::distill_options(c);
  ASSERT_EQ(o.lmbda, 0);
  Context ctx(2);
  ContextScope scope(ctx);
  auto s = student();
  const auto teacher = Model::load(o.teacher);
  SamplerLog log;
  Started st = start(*s, o, &log);
  for (int micro = 0; micro < 3 * o.sft.grad_accum; ++micro) {
    const DistillBatch b = st.objective->next_batch(*s);
    const SftBatch want = st.data->next_batch();
    EXPECT_EQ(b.source, CompletionSource::kDataset);
    EXPECT_EQ(b.rows.tokens, want.tokens);
    EXPECT_EQ(b.rows.targets, want.targets);
    EXPECT_EQ(b.rows.step_targets, want.step_targets);
    const train::ObjectiveResult r = st.objective->loss(*s, b);
    EXPECT_EQ(r.loss.item(), distill_loss_of(*s, *teacher, want, o.loss, o, st.data->data_position())) << micro;
    EXPECT_TRUE(r.metric_weights.empty());  // an offline run logs what it always logged
    EXPECT_TRUE(std::isnan(train::metric_value(r.metrics, "on_policy")));
  }
  EXPECT_TRUE(log.calls.empty());
}

TEST(OnPolicyDistill, LmbdaOneTrainsOnTheEnginesSamplesFromTheStudent) {
  const std::string dir = testing::scratch_dir("onpolicy_lmbda1");
  train::TrainConfig c = recipe(dir, {"distill.lmbda=1"});
  const DistillOptions o = posttrain::distill_options(c);
  Context ctx(2);
  ContextScope scope(ctx);
  auto s = student();
  SamplerLog log;
  Started st = start(*s, o, &log);
  const int64_t ga = o.sft.grad_accum;
  ASSERT_GE(ga, 2);  // one sampling call serves the step's micro-batches
  for (int step = 0; step < 2; ++step) {
    std::vector<DistillBatch> got;
    std::vector<SftBatch> data;
    for (int64_t j = 0; j < ga; ++j) {
      got.push_back(st.objective->next_batch(*s));
      data.push_back(st.data->next_batch());
    }
    ASSERT_EQ(log.calls.size(), static_cast<size_t>(step + 1));
    const SamplerLog::Call& call = log.calls.back();
    EXPECT_EQ(call.model, s.get());  // the student's live weights
    size_t k = 0;
    double trained = 0;
    int64_t sampled_tokens = 0;
    for (int64_t j = 0; j < ga; ++j) {
      const DistillBatch& b = got[static_cast<size_t>(j)];
      EXPECT_EQ(b.source, CompletionSource::kStudent);
      const std::vector<std::vector<int32_t>> prompts = posttrain::example_prompts(data[static_cast<size_t>(j)]);
      ASSERT_EQ(b.rows.sources.size(), prompts.size());
      size_t at = 0;
      for (size_t e = 0; e < prompts.size(); ++e, ++k) {
        ASSERT_LT(k, call.prompts.size());
        EXPECT_EQ(call.prompts[k], prompts[e]);  // the data's prompts, in order
        const std::vector<int32_t>& p = prompts[e];
        const std::vector<int32_t>& cpl = call.completions[k];
        EXPECT_GE(cpl.size(), 1u);
        EXPECT_LE(static_cast<int64_t>(cpl.size()), o.max_new_tokens);
        sampled_tokens += static_cast<int64_t>(cpl.size());
        const size_t n = p.size() + cpl.size();
        ASSERT_EQ(b.rows.sources[e].tokens, static_cast<int64_t>(n));
        for (size_t i = 0; i < n; ++i) {
          EXPECT_EQ(b.rows.tokens[at + i], i < p.size() ? p[i] : cpl[i - p.size()]);
          EXPECT_EQ(b.rows.positions[at + i], static_cast<int32_t>(i));
          const bool target = i + 1 >= p.size() && i + 1 < n;  // every sampled token, nothing of the prompt
          EXPECT_EQ(b.rows.targets[at + i], target ? b.rows.tokens[at + i + 1] : -100);
        }
        at += n;
      }
      EXPECT_EQ(at, b.rows.tokens.size());
      trained += static_cast<double>(b.rows.n_targets);
    }
    EXPECT_EQ(k, call.prompts.size());
    for (const DistillBatch& b : got) EXPECT_EQ(b.rows.step_targets, trained);  // the step's sampled tokens
    EXPECT_EQ(got[0].completions, static_cast<int64_t>(call.prompts.size()));
    EXPECT_EQ(got[0].completion_tokens, sampled_tokens);
    EXPECT_EQ(trained, static_cast<double>(sampled_tokens));
    const train::ObjectiveResult r = st.objective->loss(*s, got[0]);
    EXPECT_EQ(train::metric_value(r.metrics, "on_policy"), 1.0);
    EXPECT_EQ(train::metric_value(r.metrics, "completion_length"),
              static_cast<double>(sampled_tokens) / static_cast<double>(call.prompts.size()));
  }
  EXPECT_NE(log.calls[0].seed, log.calls[1].seed);  // each step its own samples
}

// The objective's loss of a hand-built on-policy batch is distill_loss of the same tokens with alpha 1 (the
// recipe's alpha < 1 would add the hard-label NLL of the student's own samples, which TRL's GKD has not).
TEST(OnPolicyDistill, TheLossOfASampledBatchIsTheDivergenceAlone) {
  const std::string dir = testing::scratch_dir("onpolicy_loss");
  train::TrainConfig c = recipe(dir, {"distill.lmbda=1", "distill.alpha=0.25"});
  const DistillOptions o = posttrain::distill_options(c);
  Context ctx(2);
  ContextScope scope(ctx);
  auto s = student();
  const auto teacher = Model::load(o.teacher);
  SamplerLog log;
  Started st = start(*s, o, &log);
  const SftBatch data = st.data->next_batch();
  std::vector<std::vector<int32_t>> completions;
  for (const std::vector<int32_t>& p : posttrain::example_prompts(data))
    completions.push_back({p.back(), 40, 41, 42});  // any tokens of the vocabulary
  DistillBatch b{.rows = posttrain::with_completions(data, completions), .source = CompletionSource::kStudent,
                 .position = 4};
  b.rows.step_targets = 2.5 * static_cast<double>(b.rows.n_targets);
  const double got = st.objective->loss(*s, b).loss.item();
  posttrain::DistillLossOptions lo = o.loss;
  lo.alpha = 1;
  EXPECT_EQ(got, distill_loss_of(*s, *teacher, b.rows, lo, o, 4));
  EXPECT_NE(got, distill_loss_of(*s, *teacher, b.rows, o.loss, o, 4));  // alpha 0.25 is another loss
  // The same rows from the dataset keep the recipe's alpha.
  b.source = CompletionSource::kDataset;
  EXPECT_EQ(st.objective->loss(*s, b).loss.item(), distill_loss_of(*s, *teacher, b.rows, o.loss, o, 4));
  EXPECT_TRUE(log.calls.empty());
}

// lmbda 0.5: a run stopped after step 5 and resumed draws the same source for every step, samples the same
// completions (the same lengths) and logs the uninterrupted run's losses bit for bit.
TEST(OnPolicyDistill, ResumeReplaysTheSameChoicesSamplesAndLosses) {
  const std::string dir = testing::scratch_dir("onpolicy_resume");
  const std::vector<std::string> keys = {"distill.lmbda=0.5", "schedule.steps=10", "checkpoint.every=5"};
  {
    train::TrainConfig c = recipe(dir + "/full", keys);
    EngineDistillTrainer t(c);
    ASSERT_EQ(t.run(train::StartMode::kFresh).steps_done, 10);
  }
  {
    train::TrainConfig c = recipe(dir + "/stopped", keys);
    EngineDistillTrainer t(c, {.on_step = [](const train::StepReport& r) {
                                 if (r.step == 5) train::TrainLoop::request_stop();
                               }});
    const train::TrainResult r = t.run(train::StartMode::kFresh);
    ASSERT_TRUE(r.stopped_early);
    ASSERT_EQ(r.steps_done, 5);
  }
  {
    train::TrainConfig c = recipe(dir + "/stopped", keys);
    EngineDistillTrainer t(c);
    ASSERT_EQ(t.run(train::StartMode::kResume).steps_done, 10);
  }
  const std::string full = dir + "/full/run", resumed = dir + "/stopped/run";
  const std::vector<double> on = testing::step_metric(full, "on_policy");
  ASSERT_EQ(on.size(), 10u);
  EXPECT_EQ(testing::step_metric(resumed, "on_policy"), on);
  // Both kinds of step happen, after the resume too (so the test sees the draw replayed, not a constant).
  EXPECT_NE(std::count(on.begin() + 5, on.end(), 1.0), 0);
  EXPECT_NE(std::count(on.begin() + 5, on.end(), 0.0), 0);
  const std::vector<double> len = testing::step_metric(full, "completion_length"),
                            len2 = testing::step_metric(resumed, "completion_length");
  ASSERT_EQ(len.size(), 10u);
  ASSERT_EQ(len2.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(std::isnan(len[i]), on[i] == 0.0) << i;  // null on a dataset step
    if (!std::isnan(len[i])) {
      EXPECT_EQ(len2[i], len[i]) << i;
    }
  }
  EXPECT_EQ(testing::loss_lines(resumed), testing::loss_lines(full));
}

TEST(OnPolicyDistill, SamplingRecipesNeedTheTeacherItselfAndWholeExamples) {
  const std::string dir = testing::scratch_dir("onpolicy_refused");
  train::TrainConfig cached = recipe(dir, {"distill.teacher=null", "distill.teacher_logits=x.kd", "distill.top_k=8"});
  EXPECT_THROW(posttrain::distill_options(cached), InvalidArgument);
  train::TrainConfig wrapped = recipe(dir, {"sft.packing_strategy=wrapped"});
  EXPECT_THROW(posttrain::distill_options(wrapped), InvalidArgument);
  train::TrainConfig bad = recipe(dir, {"distill.lmbda=1.5"});
  EXPECT_THROW(posttrain::distill_options(bad), InvalidArgument);
  // Without a sampler the objective refuses to start.
  train::TrainConfig c = recipe(dir, {});
  const DistillOptions o = posttrain::distill_options(c);
  Context ctx(2);
  ContextScope scope(ctx);
  auto s = student();
  const auto comm = dist::make_single_process();
  DistillObjective objective(o, 1);
  EXPECT_THROW(objective.start({.model = *s, .comm = *comm, .forward = {}, .note = [](const std::string&) {}}),
               InvalidArgument);
}

}  // namespace
}  // namespace lathe::rollout
