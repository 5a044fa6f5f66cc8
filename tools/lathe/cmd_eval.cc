// lathe eval MODEL --data SHARDS: the validation loss of a model folder (f32, bf16 or quantised: int8 / int4 / nf4, as
// loaded for generation) on token shards from `lathe data prepare`, computed as pre-training's evaluation does
// (train/pretrain_objective.h): the mean next-token cross-entropy over the same fixed batches of the val split.
// Compares formats of one model (docs/quantization.md's quality table).
#include <cmath>
#include <cstdio>

#include "args.h"
#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/models/model.h"
#include "lathe/train/pretrain_objective.h"

namespace lathe::cli {

const CommandSpec &eval_spec() {
  static const CommandSpec spec{
      .name = "eval",
      .usage = "MODEL_DIR --data SHARDS [options]",
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
          "pre-training's eval.batches does, and its exp (perplexity).\n",
      .options = {{"--data", "SHARDS", "token shards (folder or prefix) with a val split (required)"},
                  {"--seq-len", "T", "tokens per window (default: 128)"},
                  {"--batch-size", "B", "windows per batch (default: 16)"},
                  {"--batches", "N", "batches averaged (default: 16)"},
                  {"--threads", "N",
                   "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: "
                   "0)"}}};
  return spec;
}

int cmd_eval(int argc, char **argv) {
  const Args a = Args::parse(argc, argv, 2, eval_spec());
  if (a.help() || a.positional.size() != 1 || !a.has("--data")) {
    std::fputs(help_text(eval_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  Context ctx(a.threads());
  ContextScope scope(ctx);
  NoGradGuard no_grad;
  const std::unique_ptr<Model> model = Model::load(a.positional[0]);
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
