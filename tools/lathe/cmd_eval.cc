// lathe eval MODEL --data SHARDS: the validation loss of a model folder (f32, bf16 or quantised: int8 / int4 / nf4, as
// loaded for generation) on token shards from `lathe data prepare`, computed as pre-training's evaluation does
// (train/pretrain_objective.h): the mean next-token cross-entropy over the same fixed batches of the val split.
// Compares formats of one model (docs/quantization.md's quality table).
// lathe eval MODEL --tool-calls FILE.jsonl: held-out exact tool-call accuracy (rollout/tool_call_eval.h).
#include <cmath>
#include <cstdio>

#include "args.h"
#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/model.h"
#include "lathe/posttrain/dataset.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/rollout/tool_call_eval.h"
#include "lathe/rollout/tool_call_match.h"
#include "lathe/train/pretrain_objective.h"

namespace lathe::cli {

const CommandSpec &eval_spec() {
  static const CommandSpec spec{
      .name = "eval",
      .usage = "MODEL_DIR (--data SHARDS | --tool-calls FILE.jsonl) [options]",
      .brief =
          "validation loss (and perplexity) of a model folder on prepared "
          "token shards",
      .summary =
          "Loads MODEL_DIR as generate does (a quantised folder stays "
          "quantised) and prints the mean\n"
          "next-token cross-entropy over the first --batches batches of "
          "--batch-size windows of --seq-len\n"
          "tokens of the val split of SHARDS (a `lathe data prepare` folder or "
          "name prefix), as\n"
          "pre-training's eval.batches does, and its exp (perplexity).\n"
          "With --tool-calls: one greedy completion per prompt of a prompt-only JSON Lines file (all\n"
          "batched on the serving engine), its tool calls read by the server's parser and matched against\n"
          "the row's expected calls (--column) as grpo's tool_call reward does; prints the exact\n"
          "accuracy with its standard error, the rate of completions making a well-formed call and the\n"
          "mean fraction of checks passed (name, each argument).\n",
      .options = {{"--data", "SHARDS", "token shards (folder or prefix) with a val split (required)"},
                  {"--tool-calls", "FILE", "prompt-only JSON Lines with the expected calls: tool-call accuracy instead"},
                  {"--column", "NAME", "--tool-calls: the column of expected calls (default: tool_call)"},
                  {"--parser", "NAME", "--tool-calls: the call syntax, hermes | llama3_json | mistral | gemma4 (default: hermes)"},
                  {"--tokenizer", "DIR", "--tool-calls: tokenizer.json + tokenizer_config.json (default: MODEL_DIR)"},
                  {"--max-tokens", "N", "--tool-calls: tokens per completion (default: 128)"},
                  {"--out", "FILE", "--tool-calls: write the figures and every completion as JSON"},
                  {"--seq-len", "T", "tokens per window (default: 128)"},
                  {"--batch-size", "B", "windows per batch (default: 16)"},
                  {"--batches", "N", "batches averaged (default: 16)"},
                  {"--threads", "N",
                   "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: "
                   "0)"}}};
  return spec;
}

namespace {

int eval_tool_call_accuracy(const Args &a, const Model &model) {
  rollout::ToolCallEvalOptions o{.column = a.str("--column", "tool_call"),
                                 .max_new_tokens = a.integer("--max-tokens", 128, 1)};
  o.format = rollout::tool_call_format_to_match(a.str("--parser", "hermes"), "--parser");
  const std::string file = a.str("--tool-calls", "");
  const posttrain::ExampleEncoder enc(tokenizer::read_tokenizer_files(a.str("--tokenizer", a.positional[0])),
                                      posttrain::EncoderOptions{});
  const rollout::ToolCallEvalResult r = rollout::eval_tool_calls(model, enc, posttrain::load_dataset(file), o);
  std::printf("tool-call accuracy %.4f +- %.4f  (exact, %lld of %lld)  calls made %.4f  checks passed %.4f  (%s on %s)\n",
              r.accuracy(), r.accuracy_stderr(), static_cast<long long>(r.exact), static_cast<long long>(r.n),
              r.call_rate(), r.partial(), a.positional[0].c_str(), file.c_str());
  if (a.has("--out")) {
    const nlohmann::ordered_json j = {{"model", a.positional[0]},     {"data", file},
                                      {"n", r.n},                      {"exact", r.exact},
                                      {"accuracy", r.accuracy()},      {"accuracy_stderr", r.accuracy_stderr()},
                                      {"call_rate", r.call_rate()},    {"checks_passed", r.partial()},
                                      {"completions", r.completions}};
    write_file_atomic(a.str("--out", ""), j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

int cmd_eval(int argc, char **argv) {
  const Args a = Args::parse(argc, argv, 2, eval_spec());
  if (a.help() || a.positional.size() != 1 || a.has("--data") == a.has("--tool-calls")) {
    std::fputs(help_text(eval_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  Context ctx(a.threads());
  ContextScope scope(ctx);
  NoGradGuard no_grad;
  const std::unique_ptr<Model> model = Model::load(a.positional[0]);
  if (a.has("--tool-calls")) return eval_tool_call_accuracy(a, *model);
  const std::string data = a.str("--data", "");
  train::PretrainOptions o{.train_data = data,
                           .val_data = data,
                           .seq_len = a.integer("--seq-len", 128, 1),
                           .batch_size = a.integer("--batch-size", 16, 1),
                           .shuffle = false,
                           .eval_batches = a.integer("--batches", 16, 1)};
  LATHE_CHECK_ARG(o.seq_len > 0 && o.batch_size > 0 && o.eval_batches > 0,
                  "--seq-len, --batch-size and --batches must be positive");
  train::PretrainObjective objective(o, 1);
  objective.start({.model = *model, .comm = dist::world(), .forward = {}, .note = [](const std::string &) {}});
  const std::optional<train::ObjectiveEval> e = objective.evaluate(*model);
  LATHE_CHECK_ARG(e.has_value(), data, ": no validation batches (prepare the data with --val-fraction)");
  std::printf(
      "val loss %.5f  perplexity %.4f  (%s, %lld batches of %lld x "
      "%lld tokens)\n",
      e->loss, std::exp(e->loss), a.positional[0].c_str(), static_cast<long long>(o.eval_batches),
      static_cast<long long>(o.batch_size), static_cast<long long>(o.seq_len));
  return 0;
}

}  // namespace lathe::cli
