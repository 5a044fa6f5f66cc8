// lathe merge BASE ADAPTER OUT: a PEFT LoRA adapter merged into its base model, written as a Hugging Face
// folder (W' = W + scaling·B·A in the base's dtype; config and tokenizer files copied).
#include <cstdio>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/models/lora_merge.h"

namespace lathe::cli {

const CommandSpec& merge_spec() {
  static const CommandSpec spec{
      .name = "merge",
      .usage = "BASE_DIR ADAPTER_DIR OUT_DIR [options]",
      .brief = "merge a PEFT LoRA adapter into its base model (a Hugging Face folder)",
      .summary = "Writes OUT_DIR (new or empty) as a Hugging Face folder: BASE_DIR's tensors with each adapted\n"
                 "weight replaced by W + scaling * B A (computed in f32, stored in the base's dtype and layout), and\n"
                 "BASE_DIR's config, generation config and tokenizer files. ADAPTER_DIR is a PEFT folder\n"
                 "(adapter_config.json + adapter_model.safetensors).\n",
      .options = {{"--threads", "N", "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"}}};
  return spec;
}

int cmd_merge(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, merge_spec());
  if (a.help() || a.positional.size() != 3) {
    std::fputs(help_text(merge_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  Context ctx(a.threads());
  ContextScope scope(ctx);
  const int n = merge_lora(a.positional[0], a.positional[1], a.positional[2]);
  std::printf("merged %d weight tensors into %s\n", n, a.positional[2].c_str());
  return 0;
}

}  // namespace lathe::cli
