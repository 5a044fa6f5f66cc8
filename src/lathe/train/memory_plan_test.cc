// The memory plan: its activation and head terms against the bytes the tape really holds after a forward of
// the fixture Llama (the context allocator counts every block of >= 1 MiB: the sizes below make every
// [N, ·] tensor one), the items of full, LoRA and ZeRO runs, the over-budget report, and the byte sizes
// memory.budget takes.
#include "lathe/train/memory_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/ops/cross_entropy.h"
#include "lathe/train/lora_params.h"

namespace lathe::train {
namespace {

int64_t item(const std::vector<MemoryPlanItem>& items, const std::string& name) {
  for (const auto& it : items)
    if (it.name == name) return it.bytes;
  return -1;
}

// A micro-batch of B rows of T tokens: N = 8192, so [N, Hkv·D] = [N, 32] f32 is 1 MiB, the allocator's
// smallest counted block (the fixture Llama: C 64, H 4, Hkv 2, D 16, F 128, V 320, T <= 128).
constexpr int64_t kB = 64, kT = 128, kN = kB * kT;

std::unique_ptr<Model> fixture_llama() {
  auto m = Model::load(testing::fixtures_root() + "/models/llama", {.force_f32 = true});
  m->set_requires_grad(true);
  return m;
}

// Bytes the allocator holds after one forward of kN tokens through model.loss (graph and head kept for the
// backward), above what it held before.
int64_t bytes_held_by_forward(const Model& m, const ForwardOptions& o, Context& ctx) {
  std::vector<int32_t> ids(kN), targets(kN);
  for (int64_t i = 0; i < kN; ++i) {
    ids[i] = static_cast<int32_t>((i * 7) % 300 + 3);
    targets[i] = static_cast<int32_t>((i * 11) % 300 + 3);
  }
  const Tensor ids_t = Tensor::from_data_i32({kB, kT}, ids), targets_t = Tensor::from_data_i32({kN}, targets);
  const auto before = static_cast<int64_t>(ctx.alloc.stats().live_bytes);
  const Tensor loss = m.loss(ForwardBatch::rows(ids_t), targets_t, o);
  EXPECT_TRUE(loss.requires_grad());
  return static_cast<int64_t>(ctx.alloc.stats().live_bytes) - before;
}

// What the plan says the same forward holds: the tape's activations and the head's buffers.
int64_t planned_forward(const Model& m, const ForwardOptions& o) {
  return memory_plan_activation_bytes(memory_plan_activations(m, kN, o)) +
         memory_plan_head_bytes(kN, m.config().vocab_size);
}

// The plan may exceed the measurement by the tensors under 1 MiB the allocator does not count: the norms'
// rstd [N] and the attention's lse [H·N], 6 of ~1000 f32 per token and layer. 2% covers them; a missing or
// extra [N, C] tensor per layer (6% of a layer) does not fit in it.
constexpr double kUncounted = 0.02;

TEST(MemoryPlan, ActivationsMatchWhatTheTapeHoldsInF32) {
  Context ctx(2);
  ContextScope scope(ctx);
  const auto m = fixture_llama();
  const double held = static_cast<double>(bytes_held_by_forward(*m, {}, ctx));
  const double plan = static_cast<double>(planned_forward(*m, {}));
  EXPECT_NEAR(plan, held, kUncounted * held) << "plan " << plan << " held " << held;
}

TEST(MemoryPlan, ActivationsMatchWhatTheTapeHoldsInBf16AndWithRecompute) {
  Context ctx(2);
  ContextScope scope(ctx);
  const auto m = fixture_llama();
  m->make_bf16_copies();
  m->round_bf16_copies(1);
  const ForwardOptions bf16{.bf16 = true};
  double held = static_cast<double>(bytes_held_by_forward(*m, bf16, ctx));
  double plan = static_cast<double>(planned_forward(*m, bf16));
  EXPECT_NEAR(plan, held, kUncounted * held) << "bf16: plan " << plan << " held " << held;
  // Recompute keeps each layer's input only: the rest comes back one layer at a time in the backward.
  const ForwardOptions recompute{.recompute = true};
  held = static_cast<double>(bytes_held_by_forward(*m, recompute, ctx));
  plan = static_cast<double>(planned_forward(*m, recompute));
  EXPECT_NEAR(plan, held, kUncounted * held) << "recompute: plan " << plan << " held " << held;
  EXPECT_LT(plan, static_cast<double>(planned_forward(*m, {})) / 2);
}

TEST(MemoryPlan, ActivationsMatchWhatTheTapeHoldsWithLora) {
  Context ctx(2);
  ContextScope scope(ctx);
  const auto m = fixture_llama();
  LoraConfig lc;
  lc.r = 32;  // [N, R] f32 = 1 MiB: counted
  lc.target_regex = "all-linear";  // every Linear of the decoder layers
  LoraAdapters lora = LoraAdapters::create(*m, lc, 1);
  freeze_base_for_lora(*m, lora);
  const ForwardOptions o{.lora = true};
  const double held = static_cast<double>(bytes_held_by_forward(*m, o, ctx));
  const double plan = static_cast<double>(planned_forward(*m, o));
  // Layer 0 of a frozen base keeps less than the plan says: its input needs no gradient, so the input and
  // the first norm's rstd are freed (under 4% of this 2-layer model, an upper bound by < 2/L in general).
  EXPECT_GE(plan, held);
  EXPECT_LE(plan, (1 + kUncounted + 0.04) * held) << "plan " << plan << " held " << held;
}

// Forward and backward together: the allocator's peak above the loaded weights stays within the plan's
// activations, head and backward working set (the gradients are blocks under 1 MiB here, not counted), and
// reaches `low` of it: the plan adds the items, while the head's logits are freed before the layers'
// backward starts (with recompute, the re-run layer is the peak: about the logits' share lower).
void expect_step_peak_within_plan(const ForwardOptions& o, double low) {
  Context ctx(2);
  ContextScope scope(ctx);
  const auto m = fixture_llama();
  const auto loaded = static_cast<double>(ctx.alloc.stats().live_bytes);
  std::vector<int32_t> ids(kN), targets(kN);
  for (int64_t i = 0; i < kN; ++i) {
    ids[i] = static_cast<int32_t>((i * 5) % 300 + 3);
    targets[i] = static_cast<int32_t>((i * 13) % 300 + 3);
  }
  backward(m->loss(ForwardBatch::rows(Tensor::from_data_i32({kB, kT}, ids)), Tensor::from_data_i32({kN}, targets), o));
  const double peak = static_cast<double>(ctx.alloc.stats().peak_live_bytes) - loaded;
  const double plan =
      static_cast<double>(planned_forward(*m, o) + memory_plan_backward_bytes(memory_plan_activations(*m, kN, o)));
  EXPECT_LE(peak, plan) << "recompute " << o.recompute;
  EXPECT_GE(peak, low * plan) << "recompute " << o.recompute;
}

TEST(MemoryPlan, TrainingStepPeakIsThePlanned) {
  expect_step_peak_within_plan({}, 0.85);
  expect_step_peak_within_plan({.recompute = true}, 0.7);
}

TEST(MemoryPlan, LayerTermsFollowTheDecoderOps) {
  // A Llama layer in f32 keeps per token: the residual stream x and x + attn (2C), not the projections'
  // outputs (their adds save nothing); the two norms' outputs and rstd (2C + 2); rotated q, k and v
  // (Q + 2KV), not the unrotated q, k (rope saves nothing); the attention output and lse (Q + H); gate,
  // up, act (3F). No [H, T, T] probabilities: flash-style attention keeps lse only.
  const MemoryPlanLayer l{.hidden = 64, .q_dim = 64, .kv_dim = 32, .heads = 4, .kv_heads = 2, .ffn = 128};
  EXPECT_EQ(memory_plan_layer_bytes(l, false), 4 * (4 * 64 + 2 * 64 + 2 * 32 + 4 + 2 + 3 * 128));
  MemoryPlanLayer qk = l;
  qk.qk_norm = true;  // q, k before their norms and the per-head rstd
  EXPECT_EQ(memory_plan_layer_bytes(qk, false) - memory_plan_layer_bytes(l, false), 4 * (64 + 32 + 4 + 2));
  // bf16: three f32 Linear inputs become bf16 (2 bytes saved each value), the attention output gains a copy.
  EXPECT_EQ(memory_plan_layer_bytes(l, false) - memory_plan_layer_bytes(l, true), 2 * (64 + 64 + 128) - 2 * 64);
}

TEST(MemoryPlan, HeadKeepsLogitsUpToTheOpsLimitElseOneChunk) {
  const LinearCrossEntropyOptions ops;
  EXPECT_EQ(memory_plan_head_bytes(100, 320), 4 * 100 * 320 + 4 * 100);
  const int64_t n = ops.keep_logits_bytes / (4 * 32000) + 1;  // [n, 32000] f32 just over the limit
  EXPECT_EQ(memory_plan_head_bytes(n, 32000), 4 * n * ops.chunk_size + 4 * n);
}

TEST(MemoryPlan, OptimizerStateAndGradientsFollowTheTrainableTensors) {
  MemoryPlanInputs full{.policy_bytes = 4000, .trainable_params = 1000, .optimizer_params = 1000};
  auto items = memory_plan_items(full);
  EXPECT_EQ(item(items, "policy weights (f32 masters)"), 4000);
  EXPECT_EQ(item(items, "gradients (f32)"), 4000);
  EXPECT_EQ(item(items, "AdamW m and v (f32)"), 8000);
  EXPECT_EQ(item(items, "all-reduce buffer (f32)"), -1);  // one rank
  // LoRA: the base frozen, gradients and moments for the adapters only.
  MemoryPlanInputs lora{.policy_bytes = 4000, .adapter_params = 50, .trainable_params = 50, .optimizer_params = 50};
  items = memory_plan_items(lora);
  EXPECT_EQ(item(items, "LoRA adapters (f32)"), 200);
  EXPECT_EQ(item(items, "gradients (f32)"), 200);
  EXPECT_EQ(item(items, "AdamW m and v (f32)"), 400);
  // ZeRO-1 on two ranks: half the moments here, a flat all-reduce buffer, rank 0 gathers the whole state.
  MemoryPlanInputs zero = full;
  zero.optimizer_params = 500;
  zero.world = 2;
  zero.zero_gather = true;
  items = memory_plan_items(zero);
  EXPECT_EQ(item(items, "AdamW m and v (f32)"), 4000);
  EXPECT_EQ(item(items, "all-reduce buffer (f32)"), 4000);
  EXPECT_EQ(item(items, "ZeRO-1 checkpoint gather (rank 0)"), 8000);
  // The objective's items come last, as given; an item of 0 bytes is left out.
  MemoryPlanInputs dpo = full;
  dpo.objective = {{"reference model (f32, frozen)", 4000}, {"cached reference log-probs", 0}};
  items = memory_plan_items(dpo);
  EXPECT_EQ(items.back().name, "reference model (f32, frozen)");
  EXPECT_EQ(item(items, "cached reference log-probs"), -1);
}

// Micro-batches of varying length (packed examples) leave their freed blocks in the allocator's cache, by
// size class, next to the next micro-batch's: a step's activations, backward and head once more.
TEST(MemoryPlan, VaryingLengthsAddTheAllocatorsCache) {
  MemoryPlanInputs in{.policy_bytes = 4000, .trainable_params = 1000, .optimizer_params = 1000};
  in.activations.tokens = 100;
  in.activations.hidden = 64;
  in.activations.layers = {{.hidden = 64, .q_dim = 64, .kv_dim = 32, .heads = 4, .kv_heads = 2, .ffn = 128}};
  in.vocab = 320;
  EXPECT_EQ(item(memory_plan_items(in), "allocator cache (other lengths)"), -1);
  in.varying_lengths = true;
  const auto items = memory_plan_items(in);
  EXPECT_EQ(item(items, "allocator cache (other lengths)"),
            item(items, "activations (100 tokens)") + item(items, "backward working set") +
                item(items, "LM head logits (chunked)"));
}

TEST(MemoryPlan, OverBudgetReportNamesTheTwoBiggestItemsAndTheirKnobs) {
  const std::vector<MemoryPlanItem> items = {
      {"policy weights (f32 masters)", 100}, {"AdamW m and v (f32)", 300}, {"activations (64 tokens)", 200}};
  EXPECT_EQ(memory_plan_total(items), 600);
  EXPECT_TRUE(memory_plan_check(items, 600, "memory.budget").empty());
  const std::string err = memory_plan_check(items, 599, "memory.budget");
  EXPECT_NE(err.find("needs 600 B but the budget is 599 B (memory.budget)"), std::string::npos) << err;
  EXPECT_NE(err.find(memory_plan_table(items, 599, "memory.budget")), std::string::npos) << err;
  const size_t first = err.find("  AdamW m and v (f32) (300 B): a lora: section"),
               second = err.find("  activations (64 tokens) (200 B): a smaller data.batch_size");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_NE(second, std::string::npos) << err;
  EXPECT_LT(first, second);
  EXPECT_EQ(err.find("policy weights (f32 masters) (100 B)"), std::string::npos) << "only the two biggest";
  EXPECT_NE(memory_plan_table(items, -1, "no budget").find("600 B (no budget)"), std::string::npos);
}

TEST(MemoryPlan, ByteSizes) {
  EXPECT_EQ(parse_byte_size("20GiB", "k"), int64_t{20} << 30);
  EXPECT_EQ(parse_byte_size("500MB", "k"), 500'000'000);
  EXPECT_EQ(parse_byte_size("1.5 GiB", "k"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("1048576", "k"), 1048576);
  EXPECT_EQ(parse_byte_size("64 kib", "k"), 65536);
  EXPECT_EQ(parse_byte_size("2TB", "k"), 2'000'000'000'000);
  EXPECT_EQ(parse_byte_size("7B", "k"), 7);
  for (const char* bad :
       {"", "GiB", "20XB", "-1GB", "0", "0.1B", "1..5GB", ".5GB", "20 GiB x", "1e3MB", "99999999TiB"}) {
    try {
      parse_byte_size(bad, "r.yaml: memory.budget");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("r.yaml: memory.budget = '") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(memory_bytes_human(512), "512 B");
  EXPECT_EQ(memory_bytes_human(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(memory_bytes_human(int64_t{812} << 20), "812.0 MiB");
}

TEST(MemoryPlan, ProcReaders) {
  EXPECT_EQ(memory_plan_parse_meminfo("MemTotal: 100 kB\nMemAvailable:   2048 kB\n"), 2048 * 1024);
  EXPECT_EQ(memory_plan_parse_meminfo("MemTotal: 100 kB\n"), -1);
  // This process (Linux): resident now, and a peak at least as high.
  const int64_t now = resident_bytes(), peak = peak_resident_bytes();
  EXPECT_GT(now, 0);
  EXPECT_GE(peak, now);
  EXPECT_GT(memory_available_bytes(), 0);
}

}  // namespace
}  // namespace lathe::train
