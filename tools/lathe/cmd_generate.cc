// lathe generate MODEL_DIR --prompt-ids 1,2,3: token-id generation with the KV cache.
#include <cstdio>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/infer/generate.h"

namespace lathe::cli {

int cmd_generate(int argc, char** argv) {
  Args a = Args::parse(argc, argv, 2, {"--help", "--f32", "--ignore-eos"});
  if (a.has("--help") || a.positional.size() != 1 || !a.has("--prompt-ids")) {
    std::fputs(
        "usage: lathe generate MODEL_DIR --prompt-ids 1,2,3 [--max-tokens 32] [--temperature 0] [--top-k 0]\n"
        "                      [--top-p 1] [--seed 0] [--threads N] [--f32] [--ignore-eos]\n"
        "Greedy unless --temperature > 0. Prints the prompt and generated ids, then speed on stderr.\n",
        stderr);
    return a.has("--help") ? 0 : 2;
  }
  a.check_known({"--help", "--prompt-ids", "--max-tokens", "--temperature", "--top-k", "--top-p", "--seed", "--threads",
                 "--f32", "--ignore-eos"},
                "generate");
  Context ctx(static_cast<int>(a.integer("--threads", 0)));
  ContextScope scope(ctx);
  auto model = Model::load(a.positional[0], {.force_f32 = a.has("--f32")});
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(a.integer("--max-tokens", 32));
  o.sampling.temperature = static_cast<float>(a.num("--temperature", 0.0));
  o.sampling.top_k = static_cast<int>(a.integer("--top-k", 0));
  o.sampling.top_p = static_cast<float>(a.num("--top-p", 1.0));
  o.sampling.seed = static_cast<uint64_t>(a.integer("--seed", 0));
  if (!a.has("--ignore-eos")) o.stop_token_ids = model->config().eos_token_ids;
  std::vector<int32_t> prompt = parse_id_list(a.str("--prompt-ids", ""));
  GenerateResult r = generate(*model, prompt, o);
  for (size_t i = 0; i < r.tokens.size(); ++i) std::printf("%s%d", i ? "," : "", r.tokens[i]);
  std::printf("\n");
  std::fflush(stdout);
  const int64_t n_new = static_cast<int64_t>(r.tokens.size()) - r.n_prompt;
  std::fprintf(stderr, "prefill %lld tokens in %.3f s (%.1f tok/s), decode %lld tokens in %.3f s (%.1f tok/s)\n",
               static_cast<long long>(r.n_prompt), r.prefill_seconds, r.n_prompt / std::max(r.prefill_seconds, 1e-9),
               static_cast<long long>(n_new), r.decode_seconds,
               n_new > 1 ? (n_new - 1) / std::max(r.decode_seconds, 1e-9) : 0.0);
  return 0;
}

}  // namespace lathe::cli
