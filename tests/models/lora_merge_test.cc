// lathe merge: the fixture adapter merged into its base gives the logits of base + adapter (within 1e-5,
// the bound), keeps the base's tensor names and dtypes, and copies the config files; a bf16 base
// stays bf16; a non-empty output folder is refused.
#include "lathe/models/lora_merge.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/lora_adapters.h"
#include "lora_fixture.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using testing::load_lora_fixture;
using testing::max_abs_diff;

TEST(LoraMerge, MergedFolderGivesBasePlusAdapterLogits) {
  const testing::LoraFixture f = load_lora_fixture();
  const std::string out = testing::scratch_dir("lora_merge") + "/merged";
  const int n = merge_lora(f.base_dir, f.adapter_dir, out);
  auto adapted = Model::load(f.base_dir, {.force_f32 = true});
  const LoraAdapters ad = LoraAdapters::load(*adapted, f.adapter_dir);
  EXPECT_EQ(n, static_cast<int>(ad.modules().size()));
  auto merged = Model::load(out, {.force_f32 = true});
  NoGradGuard ng;
  // 1e-5: f32 rounding of W + s·B·A (one add per weight) moves logits by ~1e-7; the bound.
  EXPECT_LE(max_abs_diff(merged->forward(f.ids), adapted->forward(f.ids)), 1e-5);
  EXPECT_GT(max_abs_diff(merged->forward(f.ids), adapted->forward(f.ids, {.lora = false})), 1e-3)
      << "the merge must change the weights";
  for (const auto& e : fs::directory_iterator(f.base_dir)) {
    const std::string leaf = e.path().filename().string();
    if (leaf.ends_with(".json")) {
      EXPECT_EQ(testing::read_bytes(out + "/" + leaf), testing::read_bytes(e.path().string())) << leaf;
    }
  }
  // Same names, shapes and dtypes as the base checkpoint.
  const CheckpointReader a = CheckpointReader::open_dir(f.base_dir), b = CheckpointReader::open_dir(out);
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    EXPECT_EQ(a.tensor(name).dtype(), b.tensor(name).dtype()) << name;
    EXPECT_EQ(a.tensor(name).shape(), b.tensor(name).shape()) << name;
  }
  EXPECT_THROW(merge_lora(f.base_dir, f.adapter_dir, out), InvalidArgument) << "out is not empty now";
}

TEST(LoraMerge, Bf16BaseStaysBf16) {
  const testing::LoraFixture f = load_lora_fixture();
  // A bf16 copy of the base (2-D weights bf16, as a bf16 checkpoint stores them).
  const std::string base16 = testing::scratch_dir("lora_merge_bf16_base");
  {
    const CheckpointReader src = CheckpointReader::open_dir(f.base_dir);
    std::vector<std::pair<std::string, Tensor>> t;
    for (const std::string& name : src.names()) {
      const Tensor x = src.tensor(name);
      t.push_back({name, x.dim() == 2 ? x.to(DType::kBF16) : x});
    }
    save_safetensors(base16 + "/model.safetensors", t);
    fs::copy_file(f.base_dir + "/config.json", base16 + "/config.json");
  }
  const std::string out = testing::scratch_dir("lora_merge_bf16") + "/merged";
  merge_lora(base16, f.adapter_dir, out);
  const CheckpointReader merged = CheckpointReader::open_dir(out);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_EQ(merged.tensor(q).dtype(), DType::kBF16);
  // Merged in f32, rounded once: within half a bf16 ulp of the f32 merge (2^-9 relative).
  auto adapted = Model::load(base16, {.force_f32 = true});
  LoraAdapters::load(*adapted, f.adapter_dir);
  const std::vector<float> got = merged.tensor(q).to_vector();
  const Linear& l = adapted->weights().layers[0].self_attn.q_proj;
  NoGradGuard ng;
  // W + s·B·A row by row: the Linear applied to the identity gives (W + s·B·A)ᵀ rows.
  const int64_t in = l.weight.size(1), out_dim = l.weight.size(0);
  Tensor eye = Tensor::zeros({in, in});
  for (int64_t i = 0; i < in; ++i) eye.data<float>()[i * in + i] = 1.f;
  const std::vector<float> wt = linear(eye, l).to_vector();  // [in, out]: (W' )ᵀ
  for (int64_t o = 0; o < out_dim; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const float want = wt[i * out_dim + o];
      EXPECT_NEAR(got[o * in + i], want, std::fabs(want) * 0x1p-8f + 1e-6f) << o << "," << i;
    }
}

}  // namespace
}  // namespace lathe
