// The loop runs an objective it knows nothing about: an in-memory objective (no token shards) whose batches
// are a pure function of its data position. Its metrics are averaged over micro-batches (with weights, when
// it gives them) into metrics.jsonl, its eval metrics logged, and a stopped run resumes at the saved data
// position, bit for bit.
#include "lathe/train/train_loop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe::train {
namespace {

constexpr int64_t kVocab = 64, kRows = 4, kSeqLen = 8;

// Batches of counting rows: row k of the stream starts at token (k * 7) % 40 + 1 and counts up.
class CountingObjective final : public BatchObjective<int64_t /* position of the batch's first row */> {
 public:
  void start(const ObjectiveStart&) override { ++starts; }
  int64_t data_position() const override { return position_; }
  void seek(int64_t position) override { position_ = position; }
  int64_t next_batch() override {
    const int64_t first = position_;
    position_ += kRows;
    return first;
  }
  ObjectiveResult loss(Model& model, const int64_t& first) override {
    std::vector<int32_t> inputs, targets;
    for (int64_t k = first; k < first + kRows; ++k)
      for (int64_t t = 0; t < kSeqLen; ++t) {
        inputs.push_back(static_cast<int32_t>((k * 7) % 40 + 1 + t));
        targets.push_back(static_cast<int32_t>((k * 7) % 40 + 2 + t));
      }
    Tensor l = model.loss(ForwardBatch::rows(Tensor::from_data_i32({kRows, kSeqLen}, inputs)),
                          Tensor::from_data_i32({kRows * kSeqLen}, targets));
    // first_row: a plain mean; weighted_row: weighted by first / kRows + 1; no_items: weight 0 (NaN value).
    const auto row = static_cast<double>(first);
    return {.loss = l,
            .tokens = kRows * kSeqLen,
            .metrics = {{"first_row", row}, {"weighted_row", row}, {"no_items", NAN}},
            .metric_weights = {1.0, static_cast<double>(first / kRows + 1), 0.0}};
  }
  std::optional<ObjectiveEval> evaluate(Model& model) override {
    return ObjectiveEval{.loss = loss(model, 1000).loss.item(), .metrics = {{"eval_rows", static_cast<double>(kRows)}}};
  }
  ObjectiveMemory memory(const Model&) const override {
    return {.tokens = kRows * kSeqLen, .fused_head = true, .varying_lengths = false, .items = {}};
  }
  double flops_per_token(const Model&, int64_t n_matmul) const override { return 6.0 * static_cast<double>(n_matmul); }
  std::string data_tokenizer() const override { return ""; }

  int starts = 0;

 private:
  int64_t position_ = 0;
};

TrainConfig recipe(const std::string& run_dir) {
  return parse_recipe(R"(
run: {seed: 3, threads: 2}
model:
  config: {architectures: [LlamaForCausalLM], model_type: llama, vocab_size: 64, hidden_size: 32,
           intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
           max_position_embeddings: 64, rms_norm_eps: 1.0e-5, tie_word_embeddings: false}
data: {train: unused, seq_len: 8, batch_size: 4, grad_accum: 2}
optimizer: {lr: 1.0e-2}
schedule: {kind: cosine, steps: 6, warmup_steps: 1}
eval: {every: 2}
checkpoint: {every: 2, keep: 2}
)",
                      {"run.dir=" + run_dir});
}

std::vector<nlohmann::json> metrics_records(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(TrainLoop, RunsAnObjectiveItDoesNotKnowAndResumesAtItsDataPosition) {
  const std::string dir = testing::scratch_dir("train_loop_objective");
  Context ctx(2);
  ContextScope scope(ctx);
  CountingObjective whole;
  const TrainResult a = TrainLoop(recipe(dir + "/whole")).run(whole, StartMode::kFresh, ctx);
  EXPECT_EQ(a.steps_done, 6);
  EXPECT_EQ(whole.starts, 1);
  EXPECT_EQ(whole.data_position(), 6 * 2 * kRows);  // 6 steps of 2 micro-batches of kRows rows
  int64_t train_lines = 0, eval_lines = 0;
  for (const nlohmann::json& r : metrics_records(dir + "/whole")) {
    if (r.contains("loss")) {  // step s trains rows from 8(s - 1): micro-batches at +0 and +4, mean +2
      ++train_lines;
      EXPECT_EQ(r["first_row"].get<double>(), 8.0 * (r["step"].get<double>() - 1) + 2) << r.dump();
      const double a = 8.0 * (r["step"].get<double>() - 1), b = a + 4, wa = a / 4 + 1, wb = b / 4 + 1;
      const double want = (a * wa + b * wb) / (wa + wb);  // metrics.jsonl writes 9 significant digits
      EXPECT_NEAR(r["weighted_row"].get<double>(), want, 5e-9 * want) << r.dump();
      EXPECT_TRUE(r["no_items"].is_null()) << r.dump();  // no weight this step: null, not NaN (invalid JSON)
    } else if (r.contains("val_loss")) {
      ++eval_lines;
      EXPECT_EQ(r["eval_rows"].get<double>(), static_cast<double>(kRows)) << r.dump();
    }
  }
  EXPECT_EQ(train_lines, 6);
  EXPECT_EQ(eval_lines, 3);  // steps 2 and 4, and the end
  EXPECT_LT(testing::loss_values(dir + "/whole").back(), testing::loss_values(dir + "/whole").front()) << "did not learn";

  // Stopped after step 3, resumed by a fresh objective: the checkpoint's data position is restored.
  TrainerHooks stop_at_3;
  stop_at_3.on_step = [](const StepReport& r) {
    if (r.step == 3) TrainLoop::request_stop();
  };
  CountingObjective first, second;
  EXPECT_TRUE(TrainLoop(recipe(dir + "/part"), stop_at_3).run(first, StartMode::kFresh, ctx).stopped_early);
  EXPECT_EQ(TrainLoop(recipe(dir + "/part")).run(second, StartMode::kResume, ctx).steps_done, 6);
  EXPECT_EQ(second.data_position(), whole.data_position());
  EXPECT_EQ(testing::loss_lines(dir + "/part"), testing::loss_lines(dir + "/whole"));
}

}  // namespace
}  // namespace lathe::train
