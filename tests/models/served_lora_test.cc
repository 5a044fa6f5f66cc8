// Served LoRA adapters (Linear::lora_slots, ForwardBatch::lora_slots): in one batch each sequence's rows
// give the logits of its own model (the base, or base + its adapter as LoraAdapters::load applies it),
// with and without a KV store; a batch without slots is the base bit for bit; a folder that does not fit
// the model is refused with the tensor's name; clearing a slot leaves the plain model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/paged_kv_store.h"
#include "lathe/ops/reshape.h"
#include "lora_fixture.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using testing::load_lora_fixture;
using testing::max_abs_diff;

// Rows [begin, end) of a [N, V] tensor.
Tensor rows_of(const Tensor& t, int64_t begin, int64_t end) { return t.slice(0, begin, end).contiguous(); }

TEST(ServedLora, EachSequenceOfAMixedBatchGetsItsOwnModelsLogits) {
  const testing::LoraFixture f = load_lora_fixture();
  auto base = Model::load(f.base_dir, {.force_f32 = true});
  auto adapted = Model::load(f.base_dir, {.force_f32 = true});
  LoraAdapters::load(*adapted, f.adapter_dir);
  auto served = Model::load(f.base_dir, {.force_f32 = true});
  const LoraFolder folder = read_lora_folder(*served, f.adapter_dir);
  attach_lora_slot(folder, 1);

  const Tensor ids = f.ids.slice(0, 0, 1).contiguous();  // [1, T]
  const int64_t T = ids.size(1), V = served->config().vocab_size;
  NoGradGuard ng;
  const Tensor want_base = reshape(base->forward(ids), {T, V});
  const Tensor want_adapted = reshape(adapted->forward(ids), {T, V});
  ASSERT_GT(max_abs_diff(want_base, want_adapted), 1e-3) << "the adapter must change the logits";

  // Four sequences (the same tokens): adapter, base, adapter, adapter -> runs [0, T), [2T, 4T).
  const Tensor ids4 = Tensor::empty({4, T}, DType::kI32);
  for (int s = 0; s < 4; ++s) ids4.slice(0, s, s + 1).copy_from(ids);
  ForwardBatch batch = ForwardBatch::rows(ids4);
  batch.lora_slots = {1, 0, 1, 1};
  const Tensor got = served->forward(batch);  // [4T, V]
  // 1e-5: the same GEMMs over fewer rows; only the kernels' row blocking may differ (f32 rounding).
  for (int s : {0, 2, 3}) EXPECT_LE(max_abs_diff(rows_of(got, s * T, (s + 1) * T), want_adapted), 1e-5) << s;
  EXPECT_LE(max_abs_diff(rows_of(got, T, 2 * T), want_base), 1e-5);
  EXPECT_LE(max_abs_diff(want_adapted, reshape(f.logits.slice(0, 0, 1).contiguous(), {T, V})), 1e-4)
      << "LoraAdapters::load matches PEFT (the reference the served slot is compared through)";

  // Without slots the served model is the base exactly; all-zero slots too.
  EXPECT_EQ(served->forward(ids).to_vector(), base->forward(ids).to_vector());
  ForwardBatch all_base = ForwardBatch::rows(ids);
  all_base.lora_slots = {0};
  EXPECT_EQ(served->forward(all_base).to_vector(), base->forward(ids).to_vector());

  // Over a KV store (the serving path): two sequences, one per model, in one call.
  PagedKvStore kv(paged_kv_store_config(served->config(), 16, 16));
  std::vector<int32_t> toks(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) toks[static_cast<size_t>(i)] = ids.data<int32_t>()[i];
  const std::vector<int32_t> table0 = {1, 2, 3}, table1 = {4, 5, 6};
  const std::vector<SequenceChunk> chunks = {
      {.tokens = toks, .block_table = table0, .want_all = true, .lora_slot = 0},
      {.tokens = toks, .block_table = table1, .want_all = true, .lora_slot = 1}};
  const Tensor cached = served->forward(cached_batch(kv, chunks));  // [2T, V]
  EXPECT_LE(max_abs_diff(rows_of(cached, 0, T), want_base), 1e-4);
  EXPECT_LE(max_abs_diff(rows_of(cached, T, 2 * T), want_adapted), 1e-4);

  // Clearing the slot leaves the plain model (no slot lists left).
  clear_lora_slot(folder, 1);
  for (const auto& layer : served->weights().layers) EXPECT_TRUE(layer.self_attn.q_proj.lora_slots.empty());
}

TEST(ServedLora, RefusesGradientsAndBadSlots) {
  const testing::LoraFixture f = load_lora_fixture();
  auto served = Model::load(f.base_dir, {.force_f32 = true});
  const LoraFolder folder = read_lora_folder(*served, f.adapter_dir);
  attach_lora_slot(folder, 2);
  EXPECT_THROW(attach_lora_slot(folder, 2), InvalidArgument) << "slot 2 is taken";
  EXPECT_THROW(attach_lora_slot(folder, 0), InvalidArgument) << "slot 0 is the base";
  ForwardBatch batch = ForwardBatch::rows(f.ids);
  batch.lora_slots = {2};  // f.ids has more than one sequence
  EXPECT_THROW(served->forward(batch), InvalidArgument) << "one slot per sequence";
  batch.lora_slots.assign(static_cast<size_t>(batch.n_seqs()), 2);
  EXPECT_THROW(served->forward(batch), InvalidArgument) << "served adapters are inference-only";
}

TEST(ServedLora, AFolderThatDoesNotFitTheModelIsRefusedByName) {
  const testing::LoraFixture f = load_lora_fixture();
  auto m = Model::load(f.base_dir, {.force_f32 = true});
  const std::string dir = testing::scratch_dir("served_lora_bad");
  // The fixture's config with a target the Llama model does not have.
  nlohmann::json cfg = nlohmann::json::parse(testing::read_bytes(f.adapter_dir + "/adapter_config.json"));
  cfg["target_modules"] = {"q_proj", "c_attn"};
  {
    std::ofstream(dir + "/adapter_config.json") << cfg.dump();
    fs::copy_file(f.adapter_dir + "/adapter_model.safetensors", dir + "/adapter_model.safetensors",
                  fs::copy_options::overwrite_existing);
  }
  try {
    read_lora_folder(*m, dir);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'c_attn' matches no Linear module"), std::string::npos) << e.what();
  }
  // Rank 8 in the config, rank 4 in the file: the shape error names the tensor.
  cfg["target_modules"] = {"q_proj"};
  cfg["r"] = 8;
  std::ofstream(dir + "/adapter_config.json") << cfg.dump();
  try {
    read_lora_folder(*m, dir);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("self_attn.q_proj.lora_A.weight' has shape"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_lora_folder(*m, dir + "/missing"), InvalidArgument);
}

}  // namespace
}  // namespace lathe
