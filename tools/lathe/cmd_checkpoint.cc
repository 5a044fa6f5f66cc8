// lathe checkpoint verify DIR: checks a checkpoint folder (or every checkpoint of a run folder) against the
// sizes and XXH3-128 digests its state.json records; prints OK / FAIL per file, exits 1 on any failure.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.h"
#include "lathe/base/error.h"
#include "lathe/train/checkpoint.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

// The checkpoint folders DIR names: itself, or those of a run folder (temporaries of interrupted writes
// are not checkpoints and are not listed).
std::vector<fs::path> checkpoints_of(const fs::path& dir) {
  LATHE_CHECK_ARG(fs::is_directory(dir), "checkpoint verify: ", dir.string(), " is not a folder");
  if (fs::exists(dir / "state.json") || fs::exists(dir / "DONE") || fs::exists(dir / "model.safetensors")) return {dir};
  const fs::path root = fs::is_directory(dir / "checkpoints") ? dir / "checkpoints" : dir;
  const std::vector<fs::path> out = train::checkpoint_folders(root);
  LATHE_CHECK_ARG(!out.empty(), "checkpoint verify: ", dir.string(),
                  " is neither a checkpoint folder (no state.json) nor a run folder (no checkpoints/step_*)");
  return out;
}

}  // namespace

const CommandSpec& checkpoint_verify_spec() {
  static const CommandSpec spec{
      .name = "checkpoint verify",
      .usage = "DIR",
      .brief = "check a checkpoint's (or a run's) files against their checksums",
      .summary = "DIR is a checkpoint folder (RUN/checkpoints/step_N) or a run folder (every checkpoint in it).\n"
                 "Checks DONE, state.json and every file state.json lists (size and XXH3-128 checksum); prints OK or\n"
                 "FAIL per file and exits 1 when any checkpoint is damaged or incomplete.\n",
      .options = {}};
  return spec;
}

int cmd_checkpoint(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub != "verify") {
    std::fputs("usage: lathe checkpoint verify DIR (with --help)\n", stderr);
    if (sub == "--help" || sub == "-h") return 0;
    LATHE_CHECK_ARG(sub.empty(), "checkpoint: unknown subcommand '", sub, "' (the only one is: verify)");
    return 2;
  }
  const Args a = Args::parse(argc, argv, 3, checkpoint_verify_spec());
  if (a.help() || a.positional.empty()) {
    std::fputs(help_text(checkpoint_verify_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  LATHE_CHECK_ARG(a.positional.size() == 1, "checkpoint verify: expected one DIR, got ", a.positional.size());
  int bad = 0;
  const std::vector<fs::path> dirs = checkpoints_of(a.positional[0]);
  for (const fs::path& d : dirs) {
    const train::CheckpointCheck c = train::verify_checkpoint(d.string());
    std::printf("%s: %s\n", d.string().c_str(), c.ok() ? "OK" : "FAIL");
    for (const auto& f : c.files)
      std::printf("  %-4s %s%s%s\n", f.ok ? "OK" : "FAIL", f.name.c_str(), f.detail.empty() ? "" : ": ",
                  f.detail.c_str());
    if (!c.ok()) ++bad;
  }
  if (dirs.size() > 1) std::printf("%zu of %zu checkpoints intact\n", dirs.size() - bad, dirs.size());
  return bad == 0 ? 0 : 1;
}

}  // namespace lathe::cli
