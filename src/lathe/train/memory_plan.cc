// The memory plan's terms (memory_plan.h): what each allocation of a training step is, and where in lathe
// it is made; the table, the budget check, and the /proc readers.
#include "lathe/train/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "lathe/base/error.h"
#include "lathe/models/model.h"
#include "lathe/ops/cross_entropy.h"

namespace lathe::train {

int64_t memory_plan_layer_bytes(const MemoryPlanLayer& l, bool bf16) {
  const int64_t C = l.hidden, Q = l.q_dim, KV = l.kv_dim, F = l.ffn;
  // f32 values per token. The tape keeps what gradient rules save (autograd/node.h: a node's edges point at
  // the producing nodes, not at their outputs), so the count is decoder.cc's saved tensors, one by one.
  int64_t f = 0;
  // Residual stream: the layer input and the input plus the attention's projection (the two pre-norms
  // save their inputs; the adds save nothing, so the projections' outputs are freed).
  f += 2 * C;
  f += 2 * C + 2;                          // the two pre-norms' outputs and their rstd
  if (l.sandwich_norms) f += 2 * C + 2;    // Gemma's post-attention and post-MLP norms save their inputs
  f += Q + 2 * KV;  // q, k (rotated: rope saves nothing, so the unrotated ones are freed) and v
  if (l.qk_norm) f += Q + KV + l.heads + l.kv_heads;  // q, k before their norms, and the per-head rstd
  // The attention output and its log-sum-exp [H]. The probabilities [H, T, T] are never stored: the
  // attention is flash-style and its backward recomputes them from the lse (ops/attention.cc).
  f += Q + l.heads;
  switch (l.mlp) {
    case MlpKind::kGated: f += 3 * F; break;  // gate, up, act(gate)·up
    case MlpKind::kPlain: f += 2 * F; break;  // up, act(up)
    case MlpKind::kMoe:
      // ops/moe.cc keeps, per routed row (K per token), its gathered input, gate, up and expert output,
      // plus the router's probabilities [E] and each row's expert and weight.
      f += l.top_k * (2 * C + 2 * F) + l.experts + 2 * l.top_k;
      break;
    case MlpKind::kCount: break;
  }
  // LoRA on a Linear (ops/linear.cc's low-rank term): the scaled x·Aᵀ [R]; the product with B is added
  // into the output by the GEMM (no delta tensor); with dropout also the dropped input and its mask [in].
  f += l.lora_rank + 2 * l.lora_dropout_in;
  int64_t bytes = 4 * f;
  if (bf16) {
    // A Linear's input is rounded to bf16 (nn/linear.cc linear_input); the graph keeps the f32 tensor's
    // producer, not the tensor, so it is freed and its bf16 copy kept: the first pre-norm's output, and for a
    // dense MLP the second's and the activation's (the moe op reads f32). The attention output stays f32
    // (the attention saves it) and gains a bf16 copy.
    const int64_t rounded = C + (l.mlp == MlpKind::kMoe ? 0 : C + F);
    bytes += 2 * (rounded + Q) - 4 * rounded;
  }
  return bytes;
}

namespace {

// f32 gradients in flight per token while one layer's rules run (backward() frees each node's saved
// tensors and each consumed gradient as it goes): the residual stream's [C] and, at the widest rule, the
// gradients it produces while its input gradient is still held and the activation before it already freed:
// the gated MLP's d(act), dgate and dup less act (2F); the attention's dq, dk, dv; the moe op's per routed row.
int64_t backward_values(const MemoryPlanLayer& l) {
  const int64_t mlp = l.mlp == MlpKind::kMoe ? l.top_k * (l.hidden + 2 * l.ffn) : 2 * l.ffn;
  return l.hidden + std::max(mlp, l.q_dim + 2 * l.kv_dim);
}

}  // namespace

int64_t memory_plan_activation_bytes(const MemoryPlanActivations& a) {
  const int64_t C = a.hidden;
  // Recompute (autograd checkpoint): each layer keeps only its input.
  int64_t layers = 4 * C * static_cast<int64_t>(a.layers.size());
  if (!a.recompute) {
    layers = 0;
    for (const MemoryPlanLayer& l : a.layers) layers += memory_plan_layer_bytes(l, a.bf16);
  }
  // Before layer 0 (its input is counted there): the lookup's extra tensors (scaled, position lookup and
  // sum). After the last layer: its output, the final norm's output (the fused head's bf16 copy of it in
  // bf16 compute) and rstd.
  const int64_t ends = 4 * (a.embedding_tensors - 1) * C + 4 * C + (a.bf16 ? 2 : 4) * C + 4;
  return a.tokens * (layers + ends);
}

int64_t memory_plan_backward_bytes(const MemoryPlanActivations& a) {
  // The widest layer's gradients in flight; with recompute that layer's activations first come back (its
  // forward re-run with recording).
  int64_t b = 0;
  for (const MemoryPlanLayer& l : a.layers)
    b = std::max(b, 4 * backward_values(l) + (a.recompute ? memory_plan_layer_bytes(l, a.bf16) : 0));
  return a.tokens * b;
}

int64_t memory_plan_head_bytes(int64_t tokens, int64_t vocab) {
  const LinearCrossEntropyOptions head;  // Model::loss and token_logprobs use the ops' defaults
  const int64_t logits = 4 * tokens * vocab;
  const int64_t chunk = logits <= head.keep_logits_bytes ? logits : 4 * tokens * std::min(vocab, head.chunk_size);
  return chunk + 4 * tokens;  // + the rows' log-sum-exp [N], kept for the backward
}

std::vector<MemoryPlanItem> memory_plan_items(const MemoryPlanInputs& in) {
  std::vector<MemoryPlanItem> items;
  const auto add = [&](std::string name, int64_t bytes) {
    if (bytes > 0) items.push_back({std::move(name), bytes});
  };
  add("policy weights (f32 masters)", in.policy_bytes);
  add("bf16 compute copies", in.bf16_copy_bytes);
  add("LoRA adapters (f32)", 4 * in.adapter_params);
  // Gradients: f32, for the trainable tensors only (a LoRA run's base takes none). Freed after each step
  // (zero_grad), but they build up during the backward and persist across micro-batches of a step.
  add("gradients (f32)", 4 * in.trainable_params);
  add("AdamW m and v (f32)", 8 * in.optimizer_params);
  add("ZeRO-1 checkpoint gather (rank 0)", in.zero_gather ? 8 * in.trainable_params : 0);
  // Data parallel: the all-reduce packs every gradient into one flat f32 buffer (or the buckets of the
  // overlapped one, which together hold as many).
  add("all-reduce buffer (f32)", in.world > 1 ? 4 * in.trainable_params : 0);
  add(str_cat("activations (", in.activations.tokens, " tokens)"), memory_plan_activation_bytes(in.activations));
  add("backward working set", memory_plan_backward_bytes(in.activations));
  const int64_t head = in.fused_head ? memory_plan_head_bytes(in.activations.tokens, in.vocab) : 0;
  add("LM head logits (chunked)", head);
  // The context allocator (base/allocator.h) keeps freed blocks of >= 1 MiB for reuse by requests of their
  // size class, up to a step's swing (what it frees at its end). Fixed [B, T] micro-batches reuse them;
  // micro-batches of other lengths need other classes, so a step's freed activations can stay cached next
  // to the next one's.
  if (in.varying_lengths)
    add("allocator cache (other lengths)",
        memory_plan_activation_bytes(in.activations) + memory_plan_backward_bytes(in.activations) + head);
  for (const MemoryPlanItem& it : in.objective) add(it.name, it.bytes);
  return items;
}

int64_t memory_plan_weight_bytes(const Model& m) {
  int64_t n = 0;
  const Model::ConstParamFn add = [&](const std::string&, const Tensor& t, ParamRole, int) {
    n += static_cast<int64_t>(t.nbytes());
  };
  m.for_each_param(add);
  return n;
}

int64_t memory_plan_bf16_copy_bytes(const Model& m) {
  int64_t n = 0;
  for_each_linear(m.weights(), [&](const Linear& l) {
    if (l.bf16.defined()) n += static_cast<int64_t>(l.bf16.nbytes());
  });
  return n;
}

MemoryPlanActivations memory_plan_activations(const Model& m, int64_t tokens, const ForwardOptions& o) {
  const ModelConfig& c = m.config();
  MemoryPlanActivations a{.tokens = tokens,
                          .hidden = c.hidden,
                          .embedding_tensors = 1 + (c.embed_scale != 1.f ? 1 : 0) + (c.learned_positions ? 2 : 0),
                          .bf16 = o.bf16,
                          .recompute = o.recompute};
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const MlpKind kind = c.layers[static_cast<size_t>(i)].mlp;
    MemoryPlanLayer l{.hidden = c.hidden,
                      .q_dim = c.q_dim(),
                      .kv_dim = c.kv_dim(),
                      .heads = c.n_heads,
                      .kv_heads = c.n_kv_heads,
                      .mlp = kind,
                      .ffn = kind == MlpKind::kMoe ? c.moe_ffn : c.ffn,
                      .experts = c.n_experts,
                      .top_k = c.top_k,
                      .qk_norm = c.qk_norm,
                      .sandwich_norms = c.sandwich_norms};
    const DecoderLayer& w = m.weights().layers[static_cast<size_t>(i)];
    for (const Linear* lin : {&w.self_attn.q_proj, &w.self_attn.k_proj, &w.self_attn.v_proj, &w.self_attn.o_proj,
                              &w.mlp.gate_proj, &w.mlp.up_proj, &w.mlp.down_proj}) {
      if (!o.lora || !lin->lora.defined()) continue;
      l.lora_rank += lin->lora.a.size(0);
      // A's [R, in] gives the Linear's in (its weight may be quantised: QLoRA).
      if (o.lora_dropout && lin->lora.dropout > 0.f) l.lora_dropout_in += lin->lora.a.size(1);
    }
    a.layers.push_back(l);
  }
  return a;
}

int64_t memory_plan_total(const std::vector<MemoryPlanItem>& items) {
  int64_t total = 0;
  for (const auto& it : items) total += it.bytes;
  return total;
}

std::string memory_bytes_human(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return str_cat(bytes, " B");
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string memory_plan_table(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes,
                              const std::string& budget_source) {
  std::string out = "memory plan (per rank, before step 1):\n";
  char line[200];
  for (const auto& it : items) {
    std::snprintf(line, sizeof line, "  %-36s %12s\n", it.name.c_str(), memory_bytes_human(it.bytes).c_str());
    out += line;
  }
  const std::string total = memory_bytes_human(memory_plan_total(items));
  if (budget_bytes < 0)
    std::snprintf(line, sizeof line, "  %-36s %12s (%s)\n", "total", total.c_str(), budget_source.c_str());
  else
    std::snprintf(line, sizeof line, "  %-36s %12s of %s (%s)\n", "total", total.c_str(),
                  memory_bytes_human(budget_bytes).c_str(), budget_source.c_str());
  return out + line;
}

namespace {

// What shrinks an item, by the start of its name.
std::string knobs_for(const std::string& item) {
  const auto starts = [&](const char* p) { return item.rfind(p, 0) == 0; };
  const std::string batch =
      "a smaller data.batch_size (the micro-batch; data.grad_accum keeps the step's batch), a shorter sequence "
      "(data.seq_len, sft.max_length, dpo.max_length)";
  if (starts("activations")) return batch + ", run.recompute_layers: true, run.precision: bf16";
  if (starts("backward") || starts("LM head") || starts("teacher activations") || starts("allocator")) return batch;
  if (starts("gradients") || starts("AdamW") || starts("all-reduce") || starts("ZeRO"))
    return "a lora: section instead of full fine-tuning (gradients and AdamW state for the adapters only), "
           "run.zero: 1 under mpirun (AdamW state split over the ranks)";
  if (starts("reference model"))
    return "a lora: section (the reference is then the base with the adapter off, no copy)";
  if (starts("cached reference")) return "dpo.cache_ref_log_probs: false (recompute them every step)";
  if (starts("teacher weights")) return "a teacher stored in bf16 (its weights are used as stored)";
  if (starts("distillation head")) return "a smaller distill.chunk_rows";
  if (starts("bf16 compute")) return "run.precision: f32 (no copies, but larger activations)";
  if (starts("policy weights") || starts("LoRA adapters"))
    return "a smaller model (training keeps f32 master weights; bf16 checkpoints are widened at load)";
  return "a smaller data.train";
}

}  // namespace

std::string memory_plan_check(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes,
                              const std::string& budget_source) {
  const int64_t total = memory_plan_total(items);
  if (total <= budget_bytes) return {};
  std::vector<MemoryPlanItem> sorted = items;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const MemoryPlanItem& a, const MemoryPlanItem& b) { return a.bytes > b.bytes; });
  std::string msg = str_cat("the memory plan needs ", memory_bytes_human(total), " but the budget is ",
                            memory_bytes_human(budget_bytes), " (", budget_source, "); stopped before step 1\n",
                            memory_plan_table(items, budget_bytes, budget_source), "biggest:\n");
  for (size_t i = 0; i < sorted.size() && i < 2; ++i) {
    const std::string knobs = knobs_for(sorted[i].name);
    const bool same = i == 1 && knobs == knobs_for(sorted[0].name);
    msg += str_cat("  ", sorted[i].name, " (", memory_bytes_human(sorted[i].bytes), "): ", same ? "the same" : knobs,
                   "\n");
  }
  msg += "or raise memory.budget, or set memory.check: warn to train anyway (docs/recipes.md)";
  return msg;
}

int64_t memory_plan_parse_meminfo(const std::string& meminfo_text) {
  std::istringstream is(meminfo_text);
  for (std::string line; std::getline(is, line);) {
    std::istringstream ls(line);
    std::string key;
    int64_t kb = 0;
    if (ls >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

namespace {

// A /proc file's text ("" when it cannot be read). Not io's read_file: /proc files report size 0.
std::string proc_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int64_t memory_available_bytes() { return memory_plan_parse_meminfo(proc_text("/proc/meminfo")); }

namespace {

// A "Key: N kB" line of /proc/self/status, in bytes; -1 when absent.
int64_t status_bytes(const std::string& key) {
  std::istringstream is(proc_text("/proc/self/status"));
  for (std::string line; std::getline(is, line);) {
    std::istringstream ls(line);
    std::string k;
    int64_t kb = 0;
    if (ls >> k >> kb && k == key) return kb * 1024;
  }
  return -1;
}

}  // namespace

int64_t resident_bytes() { return status_bytes("VmRSS:"); }
int64_t peak_resident_bytes() { return status_bytes("VmHWM:"); }

int64_t parse_byte_size(const std::string& text, const std::string& key) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(str_cat(key, " = '", text, "': ", why,
                                   " (a size such as 20GiB, 500MB or 1048576: B, KB/MB/GB/TB = 1000^k, "
                                   "KiB/MiB/GiB/TiB = 1024^k)"));
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  if (number.empty() || number.front() == '.' || number.back() == '.' ||
      std::count(number.begin(), number.end(), '.') > 1)
    throw bad("not a number followed by a unit");
  size_t u = i;
  while (u < text.size() && text[u] == ' ') ++u;
  std::string unit = text.substr(u);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},           {"b", 1},           {"kb", 1e3},         {"mb", 1e6},         {"gb", 1e9},
      {"tb", 1e12},      {"kib", 1024.0},    {"mib", 1048576.0},  {"gib", 1073741824.0},
      {"tib", 1099511627776.0}};
  const auto it = std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& p) { return unit == p.first; });
  if (it == std::end(kUnits)) throw bad("unknown unit '" + text.substr(u) + "'");
  const double bytes = std::stod(number) * it->second;
  if (!(bytes >= 1)) throw bad("must be at least 1 byte");
  if (bytes >= 9.2e18) throw bad("too large");
  return static_cast<int64_t>(std::llround(bytes));
}

}  // namespace lathe::train
