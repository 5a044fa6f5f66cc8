// lathe info MODEL_DIR|FILE.gguf: what a checkpoint is, without running it.
#include <cstdio>
#include <map>

#include "args.h"
#include "lathe/io/gguf.h"
#include "lathe/io/tokenizer/gguf_tokenizer.h"
#include "lathe/models/gguf_import.h"
#include "lathe/models/model.h"

namespace lathe::cli {

const CommandSpec& info_spec() {
  static const CommandSpec spec{
      .name = "info",
      .usage = "MODEL_DIR|FILE.gguf",
      .brief = "family, parameter count, dtypes and memory of a Hugging Face model folder or a GGUF file",
      .summary = "Prints the family, the parameter count, dtypes, in-memory weight size, shape and KV-cache size\n"
                 "per token of a Hugging Face model folder or a GGUF file (then also its version, tensor types,\n"
                 "tokenizer and main metadata: docs/gguf.md).\n",
      .options = {}};
  return spec;
}

namespace {

// The GGUF file's own view: version, tensor types as stored, tokenizer, and the metadata a user checks.
void print_gguf_summary(const GgufFile& g) {
  std::map<std::string, int> by_type;
  for (const GgufTensorInfo& t : g.tensors()) ++by_type[ggml_type_name(t.type)];
  std::printf("gguf          version %u, %zu tensors (", g.version(), g.tensors().size());
  bool first = true;
  for (const auto& [type, n] : by_type) {
    std::printf("%s%s: %d", first ? "" : ", ", type.c_str(), n);
    first = false;
  }
  std::printf("), %zu metadata keys\n", g.keys().size());
  if (tokenizer::gguf_has_tokenizer(g)) {
    const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
    std::printf("tokenizer     %s%s, %zu tokens%s\n", g.string("tokenizer.ggml.model").c_str(),
                g.find("tokenizer.ggml.pre") ? (" (pre " + g.string("tokenizer.ggml.pre") + ")").c_str() : "",
                tokens->array_size(), g.find("tokenizer.chat_template") ? ", chat template" : "");
  } else {
    std::printf("tokenizer     none in the file\n");
  }
  for (const char* key : {"general.name", "general.architecture", "general.file_type", "general.quantization_version"}) {
    const GgufValue* v = g.find(key);
    if (!v) continue;
    if (v->type == GgufType::kString) std::printf("%-13s %s\n", key + 8, v->s.c_str());
    else if (v->is_integer()) std::printf("%-13s %lld\n", key + 8, static_cast<long long>(v->i));
  }
}

}  // namespace

int cmd_info(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, info_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(info_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  auto m = Model::load(a.positional[0], {.map_in_place = true});  // reads shapes only
  const ModelConfig& c = m->config();
  std::map<std::string, int64_t> by_dtype;
  int64_t bytes = 0;
  m->for_each_param([&](const std::string&, const Tensor& t, ParamRole, int) {
    by_dtype[std::string(dtype_name(t.dtype()))] += t.numel();
    bytes += static_cast<int64_t>(t.nbytes());
  });
  // Quantised Linears (lathe quantize) hold codes and scales, not a parameter tensor: counted by format.
  int64_t n_quant = 0;
  // A tied head stored quantised is a copy of the embedding table: its bytes count, its parameters do not.
  const Linear* head = &m->weights().lm_head;
  for_each_linear_module(m->weights(), [&](const Linear& l) {
    if (!l.quant.defined()) return;
    by_dtype[quant_spec_name(l.quant.spec)] += l.quant.out * l.quant.in;
    if (!(c.tie_embeddings && &l == head)) n_quant += l.quant.out * l.quant.in;
    bytes += static_cast<int64_t>(l.quant.nbytes());
  });
  const int64_t n_params = m->n_params() + n_quant;
  std::printf("model         %s\n", a.positional[0].c_str());
  std::printf("family        %s (%s)\n", c.family.c_str(), c.architecture.c_str());
  std::printf("parameters    %lld (%.2fM)\n", static_cast<long long>(n_params), n_params / 1e6);
  std::printf("dtypes       ");
  for (auto& [d, n] : by_dtype) std::printf(" %s: %lld", d.c_str(), static_cast<long long>(n));
  std::printf("\n");
  std::printf("weights       %.2f MiB in memory (as generate and serve hold them)\n", bytes / 1048576.0);
  std::printf("shape         layers %lld, hidden %lld, heads %lld (kv %lld, dim %lld), ffn %lld, vocab %lld\n",
              static_cast<long long>(c.n_layers), static_cast<long long>(c.hidden), static_cast<long long>(c.n_heads),
              static_cast<long long>(c.n_kv_heads), static_cast<long long>(c.head_dim), static_cast<long long>(c.ffn),
              static_cast<long long>(c.vocab_size));
  if (c.n_experts > 0)
    std::printf("experts       %lld, top-%lld, width %lld%s\n", static_cast<long long>(c.n_experts),
                static_cast<long long>(c.top_k), static_cast<long long>(c.moe_ffn),
                c.norm_topk_prob ? ", renormalised" : "");
  const double kv_per_token = 2.0 * c.n_layers * c.kv_dim() * 4;
  std::printf("kv cache      %.1f KiB per token (f32)\n", kv_per_token / 1024);
  std::printf("tied head     %s\n", !c.tie_embeddings               ? "no"
                                   : m->weights().lm_head.quant.defined() ? "yes (quantised copy beside the table)"
                                                                          : "yes");
  if (is_gguf_path(a.positional[0])) print_gguf_summary(GgufFile::open(a.positional[0]));
  return 0;
}

}  // namespace lathe::cli
