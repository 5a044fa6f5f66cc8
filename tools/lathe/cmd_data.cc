// lathe data prepare: text / JSONL -> token shards (llm.c format) with a train/val split.
#include <cstdio>
#include <string>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/train/data_prepare.h"
#include "progress.h"

namespace lathe::cli {

int cmd_data_synth(int argc, char** argv);  // world_corpus.cc

namespace {

std::string human(double x) {
  char buf[32];
  if (x >= 1e9) std::snprintf(buf, sizeof(buf), "%.2fG", x / 1e9);
  else if (x >= 1e6) std::snprintf(buf, sizeof(buf), "%.2fM", x / 1e6);
  else if (x >= 1e3) std::snprintf(buf, sizeof(buf), "%.1fk", x / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.0f", x);
  return buf;
}

}  // namespace

const CommandSpec& data_prepare_spec() {
  static const CommandSpec spec{
      .name = "data prepare",
      .usage = "INPUT... --tokenizer TOKENIZER --out DIR [options]",
      .brief = "text / JSONL -> llm.c-format token shards with a val split",
      .summary = "Tokenizes text files or JSONL into llm.c-format token shards DIR/NAME_{train,val}_NNNNNN.bin and\n"
                 "writes the manifest DIR/NAME.json (counts, shard list, tokenizer). Every document is written as\n"
                 "<delimiter> + its tokens. An earlier preparation under the same name is replaced only once the new\n"
                 "one is complete, and only prepare's own outputs are; an output that would overwrite an input is an\n"
                 "error.\n"
                 "INPUT: .jsonl/.json/.ndjson (one JSON object per line) or plain UTF-8 text files.\n",
      .options = {
          {"--tokenizer", "PATH", "tokenizer.json, or a folder holding one (a model folder works); required"},
          {"--out", "DIR", "output folder (required; created)"},
          {"--name", "NAME", "shard name prefix, a plain file name (default: data)"},
          {"--field", "NAME", "JSONL field holding the text (default: text)"},
          {"--text-split", "MODE", "plain text documents: line (default), paragraph or file"},
          {"--val-fraction", "F", "share of documents held out for validation, in [0, 1) (default: 0.01)"},
          {"--shard-tokens", "N", "tokens per shard, >= 1 (default: 100000000)"},
          {"--delimiter", "TOKEN", "token opening each document (default: the tokenizer's BOS, else EOS)"},
          {"--seed", "S", "seed of the train/val split, >= 0 (default: 0)"},
          {"--threads", "N", "tokenizer threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"},
      }};
  return spec;
}

namespace {

int cmd_data_prepare(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 3, data_prepare_spec());
  if (a.help() || a.positional.empty() || !a.has("--tokenizer") || !a.has("--out")) {
    std::fputs(help_text(data_prepare_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  train::PrepareOptions opts;
  opts.inputs = a.positional;
  opts.tokenizer = a.str("--tokenizer", "");
  opts.out_dir = a.str("--out", "");
  opts.name = a.str("--name", "data");
  opts.field = a.str("--field", "text");
  opts.text_split = a.str("--text-split", "line");
  opts.val_fraction = a.number("--val-fraction", 0.01, {.min = 0, .max = 1, .max_open = true});
  opts.shard_tokens = a.integer("--shard-tokens", 100'000'000, 1);
  opts.delimiter = a.str("--delimiter", "");
  opts.seed = static_cast<uint64_t>(a.integer("--seed", 0, 0));
  const int threads = a.threads();
  Progress progress;
  opts.progress = [&](const train::PrepareProgress& p) {
    const double secs = progress.elapsed();
    progress.update(p.bytes_total ? double(p.bytes_done) / double(p.bytes_total) : 1.0,
                    human(double(p.documents)) + " docs, " + human(double(p.tokens)) + " tokens, " +
                        human(p.bytes_done / (secs > 0 ? secs : 1)) + "B/s");
  };
  Context ctx(threads);
  const train::PrepareSummary s = train::prepare_data(opts, ctx.pool);
  progress.finish();
  std::printf("documents: %lld train, %lld val\n", (long long)s.documents_train, (long long)s.documents_val);
  std::printf("tokens:    %lld train, %lld val (%d bytes each, delimiter %s = %d)\n", (long long)s.tokens_train,
              (long long)s.tokens_val, s.width, s.delimiter.c_str(), s.delimiter_id);
  std::printf("shards:    %zu train, %zu val in %s (%.1f s)\n", s.train_shards.size(), s.val_shards.size(),
              opts.out_dir.c_str(), progress.elapsed());
  std::printf("manifest:  %s\n", s.manifest.c_str());
  return 0;
}

}  // namespace

int cmd_data(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub == "prepare") return cmd_data_prepare(argc, argv);
  if (sub == "synth") return cmd_data_synth(argc, argv);
  std::fputs(
      "usage: lathe data prepare INPUT... --tokenizer TOKENIZER --out DIR [options]\n"
      "       lathe data synth --out DIR [--documents N] [--seed S]\n"
      "(each with --help)\n",
      stderr);
  return sub == "--help" || sub == "-h" ? 0 : 2;
}

}  // namespace lathe::cli
