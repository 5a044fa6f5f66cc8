// lathe: one command-line tool for the whole life of a model. Each subcommand lives in cmd_<name>.cc.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "args.h"
#include "lathe/base/error.h"
#include "lathe/base/thread_pool.h"
#include "lathe/dist/communicator.h"

namespace lathe::cli {
int cmd_info(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_chat_template(int argc, char** argv);
int cmd_data(int argc, char** argv);
int cmd_pretrain(int argc, char** argv);
int cmd_sft(int argc, char** argv);
int cmd_dpo(int argc, char** argv);
int cmd_grpo(int argc, char** argv);
int cmd_distill(int argc, char** argv);
int cmd_distill_cache(int argc, char** argv);
int cmd_plot(int argc, char** argv);
int cmd_checkpoint(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_merge(int argc, char** argv);
int cmd_launch(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_eval(int argc, char** argv);
// Each command's options, as its parser reads them (one table for parsing and --help).
const CommandSpec& info_spec();
const CommandSpec& generate_spec();
const CommandSpec& chat_spec();
const CommandSpec& serve_spec();
const CommandSpec& verify_spec();
const CommandSpec& tokenize_spec();
const CommandSpec& detokenize_spec();
const CommandSpec& chat_template_spec();
const CommandSpec& data_synth_spec();
const CommandSpec& data_prepare_spec();
const CommandSpec& pretrain_spec();
const CommandSpec& sft_spec();
const CommandSpec& dpo_spec();
const CommandSpec& grpo_spec();
const CommandSpec& distill_spec();
const CommandSpec& distill_cache_spec();
const CommandSpec& plot_spec();
const CommandSpec& checkpoint_verify_spec();
const CommandSpec& bench_roofline_spec();
const CommandSpec& bench_tier_spec();
const CommandSpec& bench_serve_spec();
const CommandSpec& bench_episodes_spec();
const CommandSpec& merge_spec();
const CommandSpec& launch_spec();
const CommandSpec& quantize_spec();
const CommandSpec& eval_spec();
}  // namespace lathe::cli

namespace {

// LATHE_VERSION and LATHE_GIT_COMMIT come from CMake: project(... VERSION) and `git describe` when the
// build was configured (empty outside a git checkout).
std::string version_line() {
  std::string v = std::string("lathe ") + LATHE_VERSION;
  if (*LATHE_GIT_COMMIT) v += std::string(" (") + LATHE_GIT_COMMIT + ")";
  return v + "\n";
}

void usage() {
  using namespace lathe::cli;
  std::string s =
      "usage: lathe <command> [options]\n"
      "       lathe --version\n"
      "\n"
      "commands:\n";
  for (const CommandSpec* spec : {&info_spec(), &generate_spec(), &chat_spec(), &serve_spec(), &verify_spec(),
                                  &tokenize_spec(), &detokenize_spec(), &data_synth_spec(), &data_prepare_spec(),
                                  &pretrain_spec(), &sft_spec(), &dpo_spec(), &grpo_spec(), &distill_spec(),
                                  &distill_cache_spec(), &launch_spec(), &merge_spec(), &quantize_spec(), &eval_spec(), &plot_spec(),
                                  &checkpoint_verify_spec(), &chat_template_spec(),
                                  &bench_roofline_spec(), &bench_tier_spec(), &bench_serve_spec(),
                                  &bench_episodes_spec()})
    s += help_overview(*spec);
  s +=
      "\n"
      "Every command takes --help. Switches also take =true/false/yes/no/1/0. LATHE_NUM_THREADS sets the\n"
      "default thread count (an integer in [0, " +
      std::to_string(lathe::kMaxThreadCount) + "]; 0 or unset: all cores). Docs: README.md, docs/cli.md.\n";
  std::fputs(s.c_str(), stderr);
}

// Runs the command named by argv[1]; its exit status.
int run_command(int argc, char** argv) {
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::fputs(version_line().c_str(), stdout);
    return 0;
  }
  try {
    if (cmd == "info") return lathe::cli::cmd_info(argc, argv);
    if (cmd == "generate") return lathe::cli::cmd_generate(argc, argv);
    if (cmd == "chat") return lathe::cli::cmd_chat(argc, argv);
    if (cmd == "serve") return lathe::cli::cmd_serve(argc, argv);
    if (cmd == "verify") return lathe::cli::cmd_verify(argc, argv);
    if (cmd == "tokenize") return lathe::cli::cmd_tokenize(argc, argv);
    if (cmd == "detokenize") return lathe::cli::cmd_detokenize(argc, argv);
    if (cmd == "chat-template") return lathe::cli::cmd_chat_template(argc, argv);
    if (cmd == "data") return lathe::cli::cmd_data(argc, argv);
    if (cmd == "pretrain") return lathe::cli::cmd_pretrain(argc, argv);
    if (cmd == "sft") return lathe::cli::cmd_sft(argc, argv);
    if (cmd == "dpo") return lathe::cli::cmd_dpo(argc, argv);
    if (cmd == "grpo") return lathe::cli::cmd_grpo(argc, argv);
    if (cmd == "distill") return lathe::cli::cmd_distill(argc, argv);
    if (cmd == "distill-cache") return lathe::cli::cmd_distill_cache(argc, argv);
    if (cmd == "plot") return lathe::cli::cmd_plot(argc, argv);
    if (cmd == "checkpoint") return lathe::cli::cmd_checkpoint(argc, argv);
    if (cmd == "bench") return lathe::cli::cmd_bench(argc, argv);
    if (cmd == "merge") return lathe::cli::cmd_merge(argc, argv);
    if (cmd == "launch") return lathe::cli::cmd_launch(argc, argv);
    if (cmd == "quantize") return lathe::cli::cmd_quantize(argc, argv);
    if (cmd == "eval") return lathe::cli::cmd_eval(argc, argv);
    std::fprintf(stderr, "lathe: unknown command '%s'\n\n", cmd.c_str());
    usage();
    return 2;
  } catch (const lathe::dist::CollectiveTimeout& e) {
    // MPI cannot finish normally with a silent rank (MPI_Finalize would wait for it): end the whole job.
    std::fprintf(stderr, "lathe %s: error: %s\n", cmd.c_str(), e.what());
    std::fflush(stderr);
    lathe::dist::world().abort(1);
    return 1;  // not reached
  } catch (const lathe::Error& e) {
    std::fprintf(stderr, "lathe %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const int rc = run_command(argc, argv);
  // Every write checks its result, standard output too (std::cout shares stdout's buffer): a full disk or
  // a closed pipe under `lathe tokenize > out.jsonl` is an error, not a silently short file.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "lathe %s: error: writing standard output failed: %s\n", argv[1], std::strerror(errno));
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
