// Model::create's weights are a pure function of (config, seed) that must not drift: a run from scratch
// started by one build is continued by the next. tests/models/create_digests.json holds, per config, the
// XXH3 digest of every saved tensor of Model::create(config, 7), written by an earlier build
// (LATHE_WRITE_CREATE_DIGESTS=1 rewrites it; do that only on purpose, when the initialisation changes).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "lathe/io/checksum.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"

namespace lathe {
namespace {
using nlohmann::json;

const std::string kDigests = std::string(LATHE_SOURCE_DIR) + "/tests/models/create_digests.json";

// name -> digest of the bytes of each tensor as save() writes it (checkpoint names and layouts).
json digests_of(const Model& m) {
  const std::string dir = testing::scratch_dir("create_digests");
  m.save(dir);
  SafetensorsFile f = SafetensorsFile::open(dir + "/model.safetensors");
  json out = json::object();
  for (const SafetensorsEntry& e : f.entries()) {
    const Tensor t = f.tensor(e.name).contiguous();
    out[e.name] = digest_bytes(t.raw_data(), t.nbytes()).xxh3_128;
  }
  return out;
}

TEST(ModelCreate, WeightsMatchTheDigestsOfEarlierBuilds) {
  if (std::getenv("LATHE_WRITE_CREATE_DIGESTS")) {
    // The configs are stored with their digests, so the check does not depend on LATHE_FIXTURES.
    json out = json::object();
    const auto config_of = [](const std::string& family) {
      std::ifstream in(testing::fixtures_root() + "/models/" + family + "/config.json");
      return json::parse(in);
    };
    for (const char* family : {"llama", "qwen3", "qwen3_moe", "gemma2", "gemma3", "gpt2"})
      out[family]["config"] = config_of(family);
    // Qwen2 (q/k/v biases) and Mistral (sliding window), which have no fixture folder: the llama config
    // under their names.
    for (const auto& [family, arch] : {std::pair{"qwen2", "Qwen2ForCausalLM"}, {"mistral", "MistralForCausalLM"}}) {
      json c = config_of("llama");
      c["architectures"] = {arch};
      c["model_type"] = family;
      c.erase("rope_scaling");
      out[family]["config"] = c;
    }
    for (auto& [family, entry] : out.items()) {
      auto m = Model::create(entry["config"].dump(), 7);
      entry["tensors"] = digests_of(*m);
      // The optimizer's parameter list as the trainer of this build makes it (train/trainer.cc
      // optim_params, matmul_params): names, weight decay (decay_embeddings off) and the MFU count.
      json params = json::array();
      std::set<TensorImpl*> seen;
      const TensorImpl* embed = m->weights().embed.impl();
      const TensorImpl* pos = m->weights().pos_embed.defined() ? m->weights().pos_embed.impl() : nullptr;
      int64_t n_matmul = 0;
      const auto& c = m->config();
      for (const TensorBinding& b : m->bindings())
        for (size_t i = 0; i < b.slots.size(); ++i) {
          Tensor* t = b.slots[i];
          if (!t->defined() || !seen.insert(t->impl()).second) continue;
          const bool is_embedding = t->impl() == embed || t->impl() == pos;
          params.push_back({{"name", b.slots.size() == 1 ? b.name : b.name + "#" + std::to_string(i)},
                            {"decay", t->dim() >= 2 && !is_embedding}});
          if (t->dim() < 2 || t->impl() == pos || (t->impl() == embed && !c.tie_embeddings)) continue;
          n_matmul += t->dim() == 3 && c.n_experts > 0 ? t->numel() * c.top_k / c.n_experts : t->numel();
        }
      entry["optimizer_params"] = params;
      entry["matmul_params"] = n_matmul;
      entry["n_params"] = m->n_params();
    }
    std::ofstream(kDigests) << out.dump(1) << "\n";
    GTEST_SKIP() << "wrote " << kDigests;
  }
  std::ifstream in(kDigests);
  ASSERT_TRUE(in) << kDigests;
  const json golden = json::parse(in);
  ASSERT_GE(golden.size(), 8u);
  for (const auto& [family, entry] : golden.items()) {
    SCOPED_TRACE(family);
    const json got = digests_of(*Model::create(entry["config"].dump(), 7));
    EXPECT_EQ(got.size(), entry["tensors"].size());
    for (const auto& [name, digest] : entry["tensors"].items()) {
      ASSERT_TRUE(got.contains(name)) << name;
      EXPECT_EQ(got[name], digest) << name;
    }
  }
}

}  // namespace
}  // namespace lathe
