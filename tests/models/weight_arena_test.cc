// A model's weights live in one huge-page arena (base/huge_page_arena.h): Model::load (f32 and bf16
// checkpoints, as stored and widened), Model::create and the bf16 compute copies put every parameter in
// one writable block with the values the checkpoint holds; map_in_place keeps the stored matrices on the
// read-only map; and a model big enough for 2 MiB pages sits in a mapping advised for them (smaps).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/base/huge_page_arena.h"
#include "lathe/base/memory_region.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

constexpr size_t kMiB = size_t{1} << 20;

bool same_owner(const std::shared_ptr<void>& a, const std::shared_ptr<void>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

// Every parameter's storage is an alias of one block (the arena's), writable, and the block is not
// padded: its span is within the parameters' bytes plus alignment.
void expect_one_arena(const std::vector<const Tensor*>& tensors) {
  ASSERT_FALSE(tensors.empty());
  const std::shared_ptr<void>& block = tensors[0]->storage()->owner;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  size_t bytes = 0;
  for (const Tensor* t : tensors) {
    const Storage& st = *t->storage();
    EXPECT_TRUE(same_owner(st.owner, block)) << shape_str(t->shape());
    EXPECT_FALSE(st.read_only);
    lo = std::min(lo, reinterpret_cast<uintptr_t>(st.data));
    hi = std::max(hi, reinterpret_cast<uintptr_t>(st.data) + st.nbytes);
    bytes += HugePageArena::footprint(st.nbytes);
  }
  EXPECT_LE(hi - lo, bytes);
}

std::vector<const Tensor*> params_of(const Model& m) {
  std::vector<const Tensor*> out;
  m.for_each_param([&](const std::string&, const Tensor& t, ParamRole, int) { out.push_back(&t); });
  return out;
}

// The checkpoint folder `dir` rewritten with bf16 matrices (1-D tensors too: the loader widens them).
std::string bf16_copy_of(const std::string& dir, const std::string& name) {
  const std::string out = testing::scratch_dir("weight_arena_bf16_" + name);
  const SafetensorsFile src = SafetensorsFile::open(dir + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& e : src.entries()) tensors.push_back({e.name, src.tensor(e.name).to(DType::kBF16)});
  save_safetensors(out + "/model.safetensors", tensors);
  fs::copy_file(dir + "/config.json", out + "/config.json");
  return out;
}

TEST(WeightArena, EveryFixtureModelLoadsIntoOneArenaWithTheCheckpointsValues) {
  for (const std::string& name : testing::fixture_model_names()) {
    SCOPED_TRACE(name);
    const std::string f32_dir = testing::fixtures_root() + "/models/" + name;
    for (const std::string& dir : {f32_dir, bf16_copy_of(f32_dir, name)}) {
      for (const bool force_f32 : {false, true}) {
        SCOPED_TRACE(dir + (force_f32 ? " force_f32" : ""));
        const auto m = Model::load(dir, {.force_f32 = force_f32});
        const auto mapped = Model::load(dir, {.force_f32 = force_f32, .map_in_place = true});
        expect_one_arena(params_of(*m));
        const std::vector<const Tensor*> got = params_of(*m), want = params_of(*mapped);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i]->dtype(), want[i]->dtype());
          EXPECT_EQ(got[i]->to_vector(), want[i]->to_vector()) << i;
        }
        if (m->config().tie_embeddings) {
          EXPECT_EQ(m->weights().lm_head.weight.impl(), m->weights().embed_tokens.weight.impl());
        }
      }
    }
  }
}

TEST(WeightArena, GptTwoFusedProjectionsStayViewsOfOneCopy) {
  const auto m = Model::load(testing::fixtures_root() + "/models/gpt2");
  const auto& attn = m->weights().layers[0].self_attn;  // q, k, v: parts of c_attn
  EXPECT_EQ(attn.q_proj.weight.storage(), attn.k_proj.weight.storage());
  EXPECT_EQ(attn.q_proj.weight.storage(), attn.v_proj.weight.storage());
}

TEST(WeightArena, MapInPlaceKeepsStoredMatricesOnTheMap) {
  const auto m = Model::load(testing::fixtures_root() + "/models/llama", {.map_in_place = true});
  m->for_each_param([&](const std::string& n, const Tensor& t, ParamRole, int) {
    EXPECT_TRUE(t.storage()->read_only) << n;  // f32 as stored: nothing is converted
  });
}

TEST(WeightArena, CreatedWeightsAndBf16CopiesHaveAnArenaEach) {
  std::ifstream in(testing::fixtures_root() + "/models/qwen3/config.json");
  std::stringstream cfg;
  cfg << in.rdbuf();
  const auto m = Model::create(cfg.str(), 1);
  expect_one_arena(params_of(*m));
  m->make_bf16_copies();
  std::vector<const Tensor*> copies;
  for_each_linear(m->weights(), [&](const Linear& l) { copies.push_back(&l.bf16); });
  expect_one_arena(copies);
  EXPECT_FALSE(same_owner(copies[0]->storage()->owner, m->weights().norm.weight.storage()->owner));
}

// A Llama with 22 MiB of bf16 weights, all of them matrices under 2 MiB ([C, C]: 0.5 MiB), as in
// the 110M decode benchmark: their one mapping is advised for huge pages, and eligible where THP is on.
TEST(WeightArena, WeightsOfALoadedModelAreOnAHugePageMapping) {
  const std::string mode = transparent_huge_page_mode();
  if (mode.empty() || mode == "never") GTEST_SKIP() << "transparent huge pages are off (mode '" << mode << "')";
  const std::string config = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 2048, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
  const std::string f32_dir = testing::scratch_dir("weight_arena_llama");
  Model::create(config, 3)->save(f32_dir);
  const auto m = Model::load(bf16_copy_of(f32_dir, "big_llama"));
  const Tensor& wq = m->weights().layers[1].self_attn.q_proj.weight;
  ASSERT_EQ(wq.dtype(), DType::kBF16);
  ASSERT_LT(wq.nbytes(), 2 * kMiB);  // alone, it would get 4 KiB pages
  const std::optional<MemoryRegion> r = memory_region_of(wq.raw_data());
  if (!r) GTEST_SKIP() << "no /proc/self/smaps";
  EXPECT_TRUE(r->huge_page_advised);
  EXPECT_TRUE(r->thp_eligible);
  EXPECT_TRUE(r->name.empty()) << "anonymous memory, not the checkpoint's page cache: " << r->name;
  size_t bytes = 0;
  m->for_each_param([&](const std::string& n, const Tensor& t, ParamRole, int) {
    const auto p = reinterpret_cast<uintptr_t>(t.raw_data());
    EXPECT_TRUE(p >= r->begin && p + t.nbytes() <= r->end) << n;
    bytes += t.nbytes();
  });
  ASSERT_GT(bytes, 4 * kMiB);
  RecordProperty("anon_huge_kib", std::to_string(r->anon_huge_bytes / 1024));
}

}  // namespace
}  // namespace lathe
