// lathe: one command-line tool for the whole life of a model. Each subcommand lives in cmd_<name>.cc.
#include <cstdio>
#include <cstring>
#include <string>

#include "lathe/base/error.h"

namespace lathe::cli {
int cmd_info(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_chat_template(int argc, char** argv);
int cmd_data(int argc, char** argv);
int cmd_pretrain(int argc, char** argv);
int cmd_plot(int argc, char** argv);
int cmd_checkpoint(int argc, char** argv);
}  // namespace lathe::cli

namespace {
void usage() {
  std::fputs(
      "usage: lathe <command> [options]\n"
      "\n"
      "commands:\n"
      "  info MODEL_DIR                      family, parameter count, dtypes, memory of a Hugging Face folder\n"
      "  generate MODEL_DIR --prompt-ids 1,2,3 [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
      "                                      [--seed S] [--threads N] [--f32]\n"
      "                                      generate token ids with the KV cache (greedy by default)\n"
      "  verify MODEL_DIR REFERENCE.safetensors [--atol A] [--grad-rtol R] [--threads N]\n"
      "                                      compare logits (and grad.* gradients) with a reference file\n"
      "  tokenize TOKENIZER [--special] [--tokens] [--offsets] < texts.jsonl\n"
      "                                      JSON lines {\"text\"} -> {\"ids\", \"tokens\", \"offsets\"}\n"
      "  detokenize TOKENIZER [--skip-special] < ids.jsonl\n"
      "                                      JSON lines {\"ids\"} -> {\"text\"}\n"
      "  data synth --out DIR [--documents N]\n"
      "                                      the quickstart's synthetic corpus and its tokenizer\n"
      "  data prepare INPUT... --tokenizer T --out DIR\n"
      "                                      text / JSONL -> llm.c-format token shards with a val split\n"
      "  pretrain RECIPE.yaml [key=value ...] [--resume | --overwrite]\n"
      "                                      pre-train as the recipe says (progress, checkpoints, samples)\n"
      "  plot RUN_DIR [--out FILE.svg]       loss and learning-rate curves of a run\n"
      "  checkpoint verify DIR               check a checkpoint's (or a run's) files against their checksums\n"
      "  chat-template TOKENIZER [--add-generation-prompt] < conversation.json\n"
      "                                      render {\"messages\", \"tools\", ...} with the model's chat template\n"
      "\n"
      "Run `lathe <command> --help` for details. Docs: README.md and docs/cli.md.\n",
      stderr);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "info") return lathe::cli::cmd_info(argc, argv);
    if (cmd == "generate") return lathe::cli::cmd_generate(argc, argv);
    if (cmd == "verify") return lathe::cli::cmd_verify(argc, argv);
    if (cmd == "tokenize") return lathe::cli::cmd_tokenize(argc, argv);
    if (cmd == "detokenize") return lathe::cli::cmd_detokenize(argc, argv);
    if (cmd == "chat-template") return lathe::cli::cmd_chat_template(argc, argv);
    if (cmd == "data") return lathe::cli::cmd_data(argc, argv);
    if (cmd == "pretrain") return lathe::cli::cmd_pretrain(argc, argv);
    if (cmd == "plot") return lathe::cli::cmd_plot(argc, argv);
    if (cmd == "checkpoint") return lathe::cli::cmd_checkpoint(argc, argv);
    std::fprintf(stderr, "lathe: unknown command '%s'\n\n", cmd.c_str());
    usage();
    return 2;
  } catch (const lathe::Error& e) {
    std::fprintf(stderr, "lathe %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
