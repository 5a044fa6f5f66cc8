// Model::create's weights are a pure function of (config, seed) that must not drift: a run from scratch
// started by one build is continued by the next. tests/models/create_digests.json holds, per config, the
// XXH3 digest of every saved tensor of Model::create(config, 7) and the optimizer's parameter names and
// groups, first written by the build before nn/ and the roles-driven init (commit 99f9aeb), whose trainer
// named and grouped parameters by impl comparisons. LATHE_WRITE_CREATE_DIGESTS=1 rewrites it: only on
// purpose, when the initialisation or the checkpointed optimizer names change (old runs then do not resume).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/io/checksum.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/train/param_groups.h"

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

// The optimizer's view of the parameters (train/param_groups.h): names (under which checkpoints keep the
// optimizer state), weight decay with decay_embeddings off, the MFU count, and the parameter count.
json optimizer_view(Model& m) {
  json params = json::array();
  for (const train::OptimParam& p : train::optim_params(m, false)) params.push_back({{"name", p.name}, {"decay", p.decay}});
  return {{"optimizer_params", params}, {"matmul_params", train::matmul_params(m)}, {"n_params", m.n_params()}};
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
      entry.update(optimizer_view(*m));
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
    auto m = Model::create(entry["config"].dump(), 7);
    const json got = digests_of(*m);
    EXPECT_EQ(got.size(), entry["tensors"].size());
    for (const auto& [name, digest] : entry["tensors"].items()) {
      ASSERT_TRUE(got.contains(name)) << name;
      EXPECT_EQ(got[name], digest) << name;
    }
    const json view = optimizer_view(*m);
    for (const char* key : {"optimizer_params", "matmul_params", "n_params"}) EXPECT_EQ(view[key], entry[key]) << key;
  }
}

}  // namespace
}  // namespace lathe
