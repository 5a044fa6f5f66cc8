// Memory plan before step 1 (specs/posttrain.md §8 item 1): what one rank of a training run will hold at
// its peak, item by item (policy, gradients, AdamW state, reference, teacher, activations, head chunks),
// estimated from the model, the recipe and the objective before any step runs, and checked against a
// budget (recipe memory.budget / memory.check), so a run that cannot fit stops with a report instead of
// being killed mid-step. The estimate follows how lathe allocates (each term's comment in memory_plan.cc
// says which tensors it counts); it is a plan, not a measurement: allocator slack, thread stacks, the
// binary and small buffers are not in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/models/config.h"

namespace lathe {
class Model;
struct ForwardOptions;
}  // namespace lathe

namespace lathe::train {

struct MemoryPlanItem {
  std::string name;
  int64_t bytes = 0;
};

// One decoder layer's widths and switches: what decoder.cc's ops keep for the backward.
struct MemoryPlanLayer {
  int64_t hidden = 0;    // C
  int64_t q_dim = 0;     // H·D
  int64_t kv_dim = 0;    // Hkv·D
  int64_t heads = 0;     // H
  int64_t kv_heads = 0;  // Hkv
  MlpKind mlp = MlpKind::kGated;
  int64_t ffn = 0;                 // F (MoE: an expert's width)
  int64_t experts = 0, top_k = 0;  // E, K (MoE layers)
  bool qk_norm = false, sandwich_norms = false;
  // LoRA adapters on the layer's Linears: Σ of their ranks, and Σ of the input widths of those that apply
  // dropout.
  int64_t lora_rank = 0, lora_dropout_in = 0;
};

// Bytes per token that one layer's forward keeps for the backward (f32, or with bf16 compute).
int64_t memory_plan_layer_bytes(const MemoryPlanLayer& l, bool bf16);

// The activations of one training micro-batch: the decoder's N rows through every layer.
struct MemoryPlanActivations {
  int64_t tokens = 0;  // N, rows of the micro-batch on this rank
  int64_t hidden = 0;  // C
  std::vector<MemoryPlanLayer> layers;
  int64_t embedding_tensors = 1;  // [N, C] tensors before layer 0: the lookup, + scale, + learned positions
  bool bf16 = false, recompute = false;
};
// What the tape holds after the forward (the head's buffers apart).
int64_t memory_plan_activation_bytes(const MemoryPlanActivations& a);
// What the backward adds at its peak.
int64_t memory_plan_backward_bytes(const MemoryPlanActivations& a);

// The fused, vocabulary-chunked head (ops/chunked_head.h) on N rows with autograd: the [N, V] logits are
// kept for the backward when they fit in the ops' keep_logits_bytes, else one [N, chunk_size] buffer.
int64_t memory_plan_head_bytes(int64_t tokens, int64_t vocab);

// Everything the plan is made from, for one rank.
struct MemoryPlanInputs {
  int64_t policy_bytes = 0;      // the policy's weights as held: f32 masters (open_model loads force_f32)
  int64_t bf16_copy_bytes = 0;   // run.precision bf16: the bf16 compute copies of the Linear weights
  int64_t adapter_params = 0;    // LoRA A and B (f32, the only trainable tensors); 0: full fine-tuning
  int64_t trainable_params = 0;  // elements with a gradient: every parameter, or the adapters
  int64_t optimizer_params = 0;  // elements with AdamW m and v on this rank (ZeRO-1: its range)
  int world = 1;                 // data-parallel ranks
  bool zero_gather = false;      // ZeRO-1 on rank 0: the whole state gathered to write a checkpoint
  MemoryPlanActivations activations;
  int64_t vocab = 0;         // V
  bool fused_head = true;    // the loss runs the model's fused head (false: the objective counts its own)
  bool varying_lengths = false;  // micro-batches differ in tokens: the allocator's cache rarely fits the next
  std::vector<MemoryPlanItem> objective;  // what the objective holds: reference, teacher, caches, data
};
std::vector<MemoryPlanItem> memory_plan_items(const MemoryPlanInputs& in);

// Model-derived parts of the inputs. Bytes of every parameter tensor as held (its dtype: a teacher's bf16
// weights stay bf16).
int64_t memory_plan_weight_bytes(const Model& m);
// Bytes of the bf16 compute copies (Model::make_bf16_copies) the model holds.
int64_t memory_plan_bf16_copy_bytes(const Model& m);
// The activations of `tokens` rows through m's decoder under the run options o (bf16, recompute, LoRA
// dropout), with the adapters m's Linears carry.
MemoryPlanActivations memory_plan_activations(const Model& m, int64_t tokens, const ForwardOptions& o);

int64_t memory_plan_total(const std::vector<MemoryPlanItem>& items);
// "812.0 MiB", "1.50 GiB", "512 B".
std::string memory_bytes_human(int64_t bytes);
// The plan as one short block: an aligned line per item, then the total against the budget
// (budget_source says where the budget came from: "memory.budget" or "MemAvailable"; a budget < 0: none).
std::string memory_plan_table(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes,
                              const std::string& budget_source);
// Empty when the plan fits the budget; otherwise the error: the table, the two biggest items and the
// recipe knobs that shrink them.
std::string memory_plan_check(const std::vector<MemoryPlanItem>& items, int64_t budget_bytes,
                              const std::string& budget_source);

// MemAvailable in bytes from /proc/meminfo text ("MemAvailable: N kB"); -1 when absent.
int64_t memory_plan_parse_meminfo(const std::string& meminfo_text);
// MemAvailable of this machine now (/proc/meminfo); -1 when it cannot be read.
int64_t memory_available_bytes();
// This process's resident set now (VmRSS of /proc/self/status) and its peak so far (VmHWM), bytes; -1
// when unknown.
int64_t resident_bytes();
int64_t peak_resident_bytes();

// A byte size as the recipe writes it: a positive number with an optional unit, "20GiB", "500MB",
// "1.5 GiB", "1048576" (bytes). Units: B, KB / MB / GB / TB (powers of 1000), KiB / MiB / GiB / TiB
// (powers of 1024), case-insensitive. Throws InvalidArgument naming `key` for anything else.
int64_t parse_byte_size(const std::string& text, const std::string& key);

}  // namespace lathe::train
