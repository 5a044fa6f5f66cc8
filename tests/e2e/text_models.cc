// The tool-call model of text_models.h: render the request with Qwen3's real chat template, train a tiny
// Qwen3 on prompt + answer with the loss on the answer only, check greedy decoding, save.
#include "text_models.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/infer/generate.h"
#include "lathe/io/jinja/chat_template.h"
#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/model.h"
#include "lathe/models/test_text_model.h"
#include "lathe/train/adamw.h"
#include "lathe/train/param_groups.h"

namespace lathe::testing {
namespace {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

constexpr int32_t kImEnd = kQwen3ImEnd;  // <|im_end|>: Qwen3's end of turn, the model's eos_token_id
// Training: the fixture's width (C 64, 2 layers) memorises the 20 answer tokens in 21 steps at this rate
// (constant, no warm-up); the bound only turns a regression into a loud failure instead of a hang.
constexpr int kMaxSteps = 300;
constexpr double kLr = 1e-2;
// Stop once the summed cross-entropy of the answer tokens is below this: then every answer token has
// p > exp(-0.25) = 0.78 > 1/2 under teacher forcing, so it is the argmax with a logit margin of at least
// log(0.78 / 0.22) = 1.27, far above any difference between the training forward and the KV-cached one.
constexpr double kSumLossTarget = 0.25;
constexpr int64_t kContext = 512;  // max_position_embeddings of qwen3_text_model_config()
constexpr int kThreads = 1;  // fixed, so the steps (and the weights) are the same on every machine

std::vector<int32_t> to_i32(const std::vector<uint32_t>& ids) { return {ids.begin(), ids.end()}; }

ToolCallModel make_tool_call_model() {
  ToolCallModel r;
  const fs::path tok_dir = fs::path(tokenizers_root()) / "qwen3";
  if (!fs::exists(tok_dir / "tokenizer.json") || !fs::exists(tok_dir / "tokenizer_config.json")) return r;
  const auto t0 = std::chrono::steady_clock::now();
  Context ctx(kThreads);
  ContextScope scope(ctx);

  // The prompt exactly as a server renders the request (transformers' apply_chat_template), + the answer.
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(tok_dir.string());
  std::ifstream cfg_in(tok_dir / "tokenizer_config.json");
  const ojson tok_config = ojson::parse(cfg_in);
  const ojson& req = tool_call_request();
  const std::string prompt = jinja::apply_chat_template(
      tok_config, {.messages = req["messages"], .add_generation_prompt = true, .extra = {{"tools", req["tools"]}}});
  const std::vector<int32_t> prompt_ids = to_i32(tok.encode_ids(prompt, false));
  std::vector<int32_t> answer_ids = to_i32(tok.encode_ids(kToolCallAnswer, false));
  answer_ids.push_back(kImEnd);
  const auto P = static_cast<int64_t>(prompt_ids.size()), M = static_cast<int64_t>(answer_ids.size());
  r.prompt_tokens = static_cast<int>(P);
  LATHE_CHECK_ARG(P + M <= kContext, "the tool-call conversation (", P + M, " tokens) exceeds the model's context");

  // One row of the P + M - 1 input tokens; outputs only at the rows that predict an answer token.
  std::vector<int32_t> inputs = prompt_ids;
  inputs.insert(inputs.end(), answer_ids.begin(), answer_ids.end() - 1);
  const auto T = static_cast<int64_t>(inputs.size());
  ForwardBatch batch = ForwardBatch::rows(Tensor::from_data_i32({1, T}, inputs));
  std::vector<int32_t> out_rows(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) out_rows[static_cast<size_t>(i)] = static_cast<int32_t>(P - 1 + i);
  batch.output_rows = Tensor::from_data_i32({M}, out_rows);
  const Tensor targets = Tensor::from_data_i32({M}, answer_ids);

  std::unique_ptr<Model> model = Model::create(qwen3_text_model_config().dump(), 11);

  model->set_requires_grad(true);
  train::AdamW opt(train::optim_params(*model, /*decay_embeddings=*/false),
                   {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.0});
  double sum_loss = INFINITY;
  for (r.steps = 0;; ++r.steps) {
    const Tensor loss = model->loss(batch, targets);  // mean over the M answer tokens
    sum_loss = static_cast<double>(loss.item()) * static_cast<double>(M);
    if (sum_loss < kSumLossTarget) break;  // these weights are the ones kept: no update after the check
    if (r.steps == kMaxSteps)
      throw std::runtime_error("tool_call_model: training did not converge: summed answer loss " +
                               std::to_string(sum_loss) + " after " + std::to_string(kMaxSteps) + " steps (target " +
                               std::to_string(kSumLossTarget) + ")");
    backward(loss);
    opt.step(kLr, 1.f, ctx.pool);
    model->zero_grad();
  }
  model->zero_grad();
  model->set_requires_grad(false);

  // The real check: greedy decoding over the KV cache (as a server runs) gives the answer token for token.
  GenerateOptions g{.max_new_tokens = static_cast<int>(M) + 4, .stop_token_ids = {kImEnd}};
  const GenerateResult out = generate(*model, prompt_ids, g);
  const std::vector<int32_t> got(out.tokens.begin() + P, out.tokens.end());
  if (got != answer_ids) {
    const std::vector<uint32_t> got_u(got.begin(), got.end());
    throw std::runtime_error("tool_call_model: greedy decoding does not reproduce the answer after " +
                             std::to_string(r.steps) + " steps (summed loss " + std::to_string(sum_loss) +
                             "): got '" + tok.decode(got_u) + "'");
  }

  r.dir = scratch_dir("qwen3_tool_call_model");
  model->save(r.dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok_dir / f, fs::path(r.dir) / f);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

const nlohmann::ordered_json& tool_call_request() {
  static const ojson req = ojson::parse(R"({
    "messages": [{"content": "What is the weather like in Paris today?", "role": "user"}],
    "tools": [{"function": {"description": "Get the current weather in a city",
                            "name": "get_weather",
                            "parameters": {"properties": {"city": {"description": "The city's name", "type": "string"}},
                                           "required": ["city"], "type": "object"}},
               "type": "function"}]
  })");
  return req;
}

const ToolCallModel& tool_call_model() {
  static const ToolCallModel m = make_tool_call_model();
  return m;
}

}  // namespace lathe::testing
