// The LoRA commands end to end: `lathe verify --adapter --prefix lora.` passes on the PEFT fixture,
// `lathe merge` writes a folder that verifies against the same reference without an adapter, the base
// alone fails it, and `lathe generate --adapter` runs through the KV cache.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {
using testing::run_shell;

struct Paths {
  std::string base, adapter, ref;
};

Paths fixture_paths() {
  const std::string root = testing::fixtures_root();
  std::ifstream in(root + "/posttrain/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::istringstream base(ref.at("base_model").get<std::string>());  // "models/llama (load ...)"
  std::string base_rel;
  base >> base_rel;
  return {root + "/" + base_rel, root + "/" + ref.at("lora").at("adapter_dir").get<std::string>(),
          root + "/posttrain/reference.safetensors"};
}

TEST(LoraCli, VerifyAdapterMergeAndGenerate) {
  const Paths p = fixture_paths();
  const std::string bin = testing::lathe_bin() + " ";
  auto r =
      run_shell(bin + "verify " + p.base + " " + p.ref + " --adapter " + p.adapter + " --prefix lora. --threads 1");
  EXPECT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find("verify: PASS"), std::string::npos) << r.second;
  r = run_shell(bin + "verify " + p.base + " " + p.ref + " --prefix lora. --threads 1");
  EXPECT_EQ(r.first, 1) << "the base alone must not match base + adapter:\n" << r.second;

  const std::string out = testing::scratch_dir("lora_cli") + "/merged";
  r = run_shell(bin + "merge " + p.base + " " + p.adapter + " " + out + " --threads 1");
  ASSERT_EQ(r.first, 0) << r.second;
  r = run_shell(bin + "verify " + out + " " + p.ref + " --prefix lora. --threads 1");
  EXPECT_EQ(r.first, 0) << r.second;
  r = run_shell(bin + "merge " + p.base + " " + p.adapter + " " + out);
  EXPECT_EQ(r.first, 1) << "a non-empty OUT is refused:\n" << r.second;

  // Greedy ids through the KV cache: base + adapter and the merged folder agree.
  const std::string gen = " --prompt-ids 1,5,9,2 --max-tokens 6 --ignore-eos --threads 1";
  const auto with_adapter = run_shell(bin + "generate " + p.base + gen + " --adapter " + p.adapter);
  const auto merged = run_shell(bin + "generate " + out + gen);
  ASSERT_EQ(with_adapter.first, 0) << with_adapter.second;
  ASSERT_EQ(merged.first, 0) << merged.second;
  const auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  EXPECT_EQ(first_line(with_adapter.second), first_line(merged.second));
}

}  // namespace
}  // namespace lathe
