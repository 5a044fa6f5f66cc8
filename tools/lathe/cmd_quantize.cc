// lathe quantize IN OUT --format F [--skip a,b]: a Hugging Face folder with its Linear weights quantised
// (docs/quantization.md), which generate, serve and verify load as they load any model folder.
#include <cstdio>
#include <sstream>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/models/quantize.h"

namespace lathe::cli {

const CommandSpec& quantize_spec() {
  static const CommandSpec spec{
      .name = "quantize",
      .usage = "IN_DIR OUT_DIR --format int8|int4|int4-g32|int4-g64|int4-g128|int6|nf4 [options]",
      .brief = "write a model folder with its Linear weights quantised (int8, int6 or int4 groups)",
      .summary =
          "Writes OUT_DIR (new or empty) as a Hugging Face folder: IN_DIR's tensors with every plain Linear\n"
          "weight stored quantised along its input dimension (int8: Q8_0-style, scale per 32; int4:\n"
          "Q4_0-style symmetric, scale per 32; int4-gN: asymmetric, scale and minimum per N = 32, 64 or\n"
          "128; int6: as int4 at 6 bits, scale per 32; nf4: bitsandbytes' NF4 layout, block 64,\n"
          "double-quantised), the rest as stored, and config.json with a quantization_config. The LM head (a\n"
          "tied one too, written as a quantised lm_head beside the float embedding table) takes --head-format:\n"
          "int6 under a 4-bit format by default (llama.cpp's Q4_0 files keep a 6-bit head too); nf4 keeps\n"
          "it as stored, as bitsandbytes folders do. Embeddings, norms, MoE experts and GPT-2's transposed\n"
          "Conv1D weights stay as they are. Layout: docs/quantization.md.\n",
      .options = {{"--format", "F", "int8, int4, int4-g32, int4-g64, int4-g128, int6 or nf4 (bitsandbytes layout) (required)"},
                  {"--head-format", "F",
                   "the LM head's format (default: int6 for the 4-bit formats, else --format); --skip lm_head "
                   "keeps it unquantised"},
                  {"--skip", "A,B",
                   "modules to keep unquantised: a path or its last parts (lm_head, down_proj, ...); repeatable", true},
                  {"--threads", "N", "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"}}};
  return spec;
}

int cmd_quantize(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, quantize_spec());
  if (a.help() || a.positional.size() != 2 || !a.has("--format")) {
    std::fputs(help_text(quantize_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  Context ctx(a.threads());
  ContextScope scope(ctx);
  QuantizeOptions opts;
  opts.spec = parse_quant_spec(a.str("--format", ""));
  if (a.has("--head-format")) opts.head = parse_quant_spec(a.str("--head-format", ""));
  for (const std::string& list : a.all("--skip")) {
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) opts.skip.push_back(item);
  }
  const QuantizeReport r = quantize_checkpoint(a.positional[0], a.positional[1], opts);
  for (const std::string& k : r.kept) std::printf("kept %s\n", k.c_str());
  std::printf("quantised %d Linear weights to %s: %.1f MB -> %.1f MB, written to %s\n", r.n_quantized,
              quant_spec_name(opts.spec).c_str(), r.bytes_in / 1e6, r.bytes_out / 1e6, a.positional[1].c_str());
  return 0;
}

}  // namespace lathe::cli
