// Hostile model folders, references and tokenizer files (issue 9 rows 3, 4, 7, 9, 16, 17, 18): each gets a
// clean error (non-zero exit, no signal, no hang) naming the file, key or tensor at fault.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/byte_tokenizer.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::is_clean_error;
using testing::run_lathe_bounded;

constexpr int kTimeout = 60;  // seconds; a hang shows as exit 124

std::string fixture(const std::string& family) { return testing::fixtures_root() + "/models/" + family; }

json read_json(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// A copy of a fixture model folder with its config.json edited.
std::string model_copy(const std::string& family, const std::string& name, const std::function<void(json&)>& edit = {}) {
  const std::string dir = testing::scratch_dir("hardening_" + name);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::copy_file(fixture(family) + "/" + f, dir + "/" + f);
  if (edit) {
    json c = read_json(dir + "/config.json");
    edit(c);
    std::ofstream(dir + "/config.json") << c.dump(2);
  }
  return dir;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// ---- Row 4 and its class: config values that divide, count or index ----

TEST(ModelInputHardening, Gemma3SlidingWindowPatternZero) {
  const std::string m = model_copy("gemma3", "swp0", [](json& c) { c["sliding_window_pattern"] = 0; });
  for (const std::string& cmd : {"info " + m, "generate " + m + " --prompt-ids 1,2",
                                "verify " + m + " " + fixture("gemma3") + "/reference.safetensors"}) {
    auto r = run_lathe_bounded(cmd, kTimeout);
    EXPECT_TRUE(is_clean_error(r, "sliding_window_pattern")) << cmd << "\n" << r.second;
  }
}

TEST(ModelInputHardening, Gpt2NHeadZero) {
  const std::string m = model_copy("gpt2", "nhead0", [](json& c) { c["n_head"] = 0; });
  for (const std::string& cmd : {"info " + m, "generate " + m + " --prompt-ids 1,2",
                                "verify " + m + " " + fixture("gpt2") + "/reference.safetensors"}) {
    auto r = run_lathe_bounded(cmd, kTimeout);
    EXPECT_TRUE(is_clean_error(r, "n_head")) << cmd << "\n" << r.second;
  }
}

// Other members of the class: other divisors, counts and ranges, in other families.
TEST(ModelInputHardening, OtherConfigDivisorsAndCounts) {
  struct Case {
    const char* family;
    const char* key;
    json value;
    const char* needle;
  };
  const Case cases[] = {
      {"gpt2", "n_embd", 65, "n_embd"},                            // not divisible by n_head
      {"gpt2", "n_layer", -1, "n_layer"},
      {"gpt2", "n_positions", 0, "n_positions"},
      {"llama", "num_key_value_heads", 3, "num_key_value_heads"},  // 4 heads over 3 groups
      {"llama", "num_key_value_heads", 0, "num_key_value_heads"},
      {"llama", "num_hidden_layers", -1, "num_hidden_layers"},
      {"llama", "num_hidden_layers", 1000000000, "num_hidden_layers"},
      {"llama", "vocab_size", 0, "vocab_size"},
      {"llama", "head_dim", -16, "head_dim"},
      {"llama", "partial_rotary_factor", 0.01, "partial_rotary_factor"},
      {"llama", "rope_theta", 0, "rope_theta"},
      {"qwen3", "intermediate_size", -5, "intermediate_size"},
      {"qwen3_moe", "num_experts_per_tok", 0, "num_experts_per_tok"},
      {"qwen3_moe", "num_experts_per_tok", 9, "num_experts_per_tok"},
      {"qwen3_moe", "decoder_sparse_step", 0, "decoder_sparse_step"},
      {"qwen3_moe", "mlp_only_layers", json::array({7}), "mlp_only_layers"},
      {"gemma2", "sliding_window", -4, "sliding_window"},
      {"gemma3", "query_pre_attn_scalar", 0, "query_pre_attn_scalar"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string m = model_copy(c.family, "class" + std::to_string(i++), [&](json& j) { j[c.key] = c.value; });
    auto r = run_lathe_bounded("info " + m, kTimeout);
    EXPECT_TRUE(is_clean_error(r, c.needle)) << c.family << " " << c.key << "=" << c.value.dump() << "\n" << r.second;
  }
}

// ---- Row 16 (config parts): wrong JSON types and shapes of config.json ----

TEST(ModelInputHardening, ConfigNotAnObject) {
  for (const char* text : {"null", "[]", "3", "\"llama\""}) {
    const std::string m = model_copy("llama", "notobj");
    write_text(m + "/config.json", text);
    auto r = run_lathe_bounded("info " + m, kTimeout);
    EXPECT_TRUE(is_clean_error(r, "must be a JSON object")) << text << "\n" << r.second;
    EXPECT_NE(r.second.find("config.json"), std::string::npos) << r.second;
  }
}

TEST(ModelInputHardening, NegativeLayerCountNamesTheKey) {
  const std::string m = model_copy("llama", "neglayers", [](json& c) { c["num_hidden_layers"] = -1; });
  auto r = run_lathe_bounded("info " + m, kTimeout);
  EXPECT_TRUE(is_clean_error(r, "num_hidden_layers")) << r.second;
  EXPECT_EQ(r.second.find("max_size"), std::string::npos) << r.second;
}

TEST(ModelInputHardening, WrongTypesInsideConfig) {
  const std::pair<const char*, json> cases[] = {{"eos_token_id", json::array({"x"})},
                                                {"mlp_only_layers", "all"},
                                                {"num_attention_heads", 4.5},
                                                {"num_experts", 18446744073709551615ull}};
  for (const auto& [key, value] : cases) {
    const std::string m = model_copy("qwen3_moe", "types", [&](json& c) { c[key] = value; });
    auto r = run_lathe_bounded("info " + m, kTimeout);
    EXPECT_TRUE(is_clean_error(r, key)) << key << "\n" << r.second;
  }
}

// ---- Row 17 (layer_types) ----

TEST(ModelInputHardening, Gemma3UnknownLayerTypes) {
  const std::string m = model_copy("gemma3", "lt_foo", [](json& c) { c["layer_types"] = {"foo", "bar"}; });
  auto r = run_lathe_bounded("info " + m, kTimeout);
  EXPECT_TRUE(is_clean_error(r, "layer_types")) << r.second;
  EXPECT_NE(r.second.find("full_attention"), std::string::npos) << r.second;
  EXPECT_NE(r.second.find("sliding_attention"), std::string::npos) << r.second;
}

TEST(ModelInputHardening, LayerTypesLengthAndTypeMismatch) {
  for (const char* family : {"gemma3", "gemma2"}) {
    const std::string m = model_copy(family, "lt_len", [](json& c) { c["layer_types"] = {"full_attention"}; });
    auto r = run_lathe_bounded("info " + m, kTimeout);
    EXPECT_TRUE(is_clean_error(r, "layer_types")) << family << "\n" << r.second;
    EXPECT_NE(r.second.find("num_hidden_layers"), std::string::npos) << r.second;
  }
  const std::string m = model_copy("gemma3", "lt_type", [](json& c) { c["layer_types"] = {1, 2}; });
  EXPECT_TRUE(is_clean_error(run_lathe_bounded("info " + m, kTimeout), "layer_types"));
}

// ---- Row 7 and its class: something other than a regular file where lathe reads one ----

TEST(ModelInputHardening, FifoModelSafetensorsDoesNotBlock) {
  const std::string m = model_copy("llama", "fifo_st");
  fs::remove(m + "/model.safetensors");
  ASSERT_EQ(::mkfifo((m + "/model.safetensors").c_str(), 0644), 0);
  auto r = run_lathe_bounded("info " + m, 20);
  EXPECT_TRUE(is_clean_error(r, m + "/model.safetensors")) << r.second;
  EXPECT_NE(r.second.find("not a regular file"), std::string::npos) << r.second;
}

TEST(ModelInputHardening, FifoOrFolderOrDeviceInPlaceOfOtherModelFiles) {
  // config.json a FIFO / a folder, generation_config.json a device, the index a FIFO, a shard a socket.
  {
    const std::string m = model_copy("llama", "fifo_cfg");
    fs::remove(m + "/config.json");
    ASSERT_EQ(::mkfifo((m + "/config.json").c_str(), 0644), 0);
    auto r = run_lathe_bounded("info " + m, 20);
    EXPECT_TRUE(is_clean_error(r, "config.json: is a FIFO")) << r.second;
  }
  {
    const std::string m = model_copy("llama", "dir_cfg");
    fs::remove(m + "/config.json");
    fs::create_directory(m + "/config.json");
    auto r = run_lathe_bounded("info " + m, 20);
    EXPECT_TRUE(is_clean_error(r, "config.json: is a directory, not a regular file")) << r.second;
  }
  {
    const std::string m = model_copy("llama", "dev_gen");
    fs::remove(m + "/generation_config.json");
    fs::create_symlink("/dev/zero", m + "/generation_config.json");
    auto r = run_lathe_bounded("info " + m, 20);
    EXPECT_TRUE(is_clean_error(r, "generation_config.json: is a character device")) << r.second;
  }
  {
    const std::string m = model_copy("llama", "fifo_index");
    fs::remove(m + "/model.safetensors");
    ASSERT_EQ(::mkfifo((m + "/model.safetensors.index.json").c_str(), 0644), 0);
    auto r = run_lathe_bounded("info " + m, 20);
    EXPECT_TRUE(is_clean_error(r, "model.safetensors.index.json: is a FIFO")) << r.second;
  }
  {
    const std::string m = model_copy("llama", "sock_shard");
    fs::rename(m + "/model.safetensors", m + "/unused");
    json idx = {{"weight_map", {{"model.embed_tokens.weight", "shard.safetensors"}}}};
    write_text(m + "/model.safetensors.index.json", idx.dump());
    const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string sp = m + "/shard.safetensors";
    ASSERT_LT(sp.size(), sizeof(addr.sun_path));
    std::copy(sp.begin(), sp.end(), addr.sun_path);
    ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    auto r = run_lathe_bounded("info " + m, 20);
    ::close(s);
    EXPECT_TRUE(is_clean_error(r, "shard.safetensors: is a socket")) << r.second;
  }
}

TEST(ModelInputHardening, FifoOrFolderInPlaceOfTokenizerFiles) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string t = testing::scratch_dir("hardening_tok_fifo");
    train::write_byte_level_tokenizer(t);
    fs::remove(t + "/" + name);
    ASSERT_EQ(::mkfifo((t + "/" + name).c_str(), 0644), 0);
    auto r = run_lathe_bounded("tokenize " + t + " < /dev/null", 20);
    EXPECT_TRUE(is_clean_error(r, std::string(name) + ": is a FIFO")) << name << "\n" << r.second;
  }
  const std::string t = testing::scratch_dir("hardening_tok_dir");
  train::write_byte_level_tokenizer(t);
  fs::remove(t + "/tokenizer_config.json");
  fs::create_directory(t + "/tokenizer_config.json");
  auto r = run_lathe_bounded("chat-template " + t + " < /dev/null", 20);
  EXPECT_TRUE(is_clean_error(r, "tokenizer_config.json: is a directory")) << r.second;
}

// ---- Row 16 (tokenizer part): tokenizer files of the wrong JSON type ----

TEST(ModelInputHardening, TokenizerConfigNotAnObject) {
  const std::string conv = testing::scratch_dir("hardening_conv") + "/conv.json";
  write_text(conv, R"({"messages": [{"role": "user", "content": "hi"}]})");
  for (const char* text : {"[]", "3", "null"}) {
    const std::string t = testing::scratch_dir("hardening_tokcfg");
    train::write_byte_level_tokenizer(t);
    write_text(t + "/tokenizer_config.json", text);
    for (const std::string& cmd : {"tokenize " + t + " < /dev/null", "chat-template " + t + " < " + conv}) {
      auto r = run_lathe_bounded(cmd, 20);
      EXPECT_TRUE(is_clean_error(r, "tokenizer_config.json")) << cmd << " with " << text << "\n" << r.second;
      EXPECT_NE(r.second.find("JSON object"), std::string::npos) << r.second;
      EXPECT_EQ(r.second.find("erase()"), std::string::npos) << r.second;
    }
  }
  // Another tokenizer file: special_tokens_map.json, and tokenizer.json itself.
  const std::string t = testing::scratch_dir("hardening_tokstm");
  train::write_byte_level_tokenizer(t);
  write_text(t + "/special_tokens_map.json", "[1, 2]");
  auto r = run_lathe_bounded("tokenize " + t + " < /dev/null", 20);
  EXPECT_TRUE(is_clean_error(r, "special_tokens_map.json")) << r.second;
  write_text(t + "/special_tokens_map.json", "{}");
  write_text(t + "/tokenizer.json", "[]");
  r = run_lathe_bounded("tokenize " + t + " < /dev/null", 20);
  EXPECT_TRUE(is_clean_error(r, t + "/tokenizer.json")) << r.second;
}

// ---- Row 16 (token ids): an id far outside the vocabulary ----

TEST(ModelInputHardening, GeneratePromptIdOutsideVocab) {
  const int vocab = read_json(fixture("llama") + "/config.json")["vocab_size"].get<int>();
  for (const char* family : {"llama", "gpt2"}) {
    auto r = run_lathe_bounded("generate " + fixture(family) + " --prompt-ids 1,1000000000", kTimeout);
    EXPECT_TRUE(is_clean_error(r, "1000000000")) << r.second;
    EXPECT_NE(r.second.find(std::to_string(vocab)), std::string::npos) << r.second;
    EXPECT_EQ(r.second.find("bad_alloc"), std::string::npos) << r.second;
  }
}

// ---- Rows 3 and 9: verify against malformed references ----

class VerifyReference : public ::testing::Test {
 protected:
  std::string dir_ = testing::scratch_dir("hardening_verify");
  std::string ref_ = dir_ + "/reference.safetensors";

  // The llama fixture's reference with `edit` applied to its tensor list.
  void write_reference(const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit) {
    SafetensorsFile f = SafetensorsFile::open(fixture("llama") + "/reference.safetensors");
    std::vector<std::pair<std::string, Tensor>> t;
    for (const auto& e : f.entries()) t.push_back({e.name, f.tensor(e.name).clone()});
    edit(t);
    save_safetensors(ref_, t);
  }
  static void replace(std::vector<std::pair<std::string, Tensor>>& t, const std::string& name, Tensor value) {
    for (auto& p : t)
      if (p.first == name) p.second = value;
  }
  std::pair<int, std::string> verify() { return run_lathe_bounded("verify " + fixture("llama") + " " + ref_, kTimeout); }
};

TEST_F(VerifyReference, GradOfZeroLength) {
  write_reference([](auto& t) { replace(t, "grad.lm_head.weight", Tensor::zeros({0})); });
  auto r = verify();
  EXPECT_TRUE(is_clean_error(r, "grad.lm_head.weight")) << r.second;
  EXPECT_NE(r.second.find("[0]"), std::string::npos) << r.second;
}

TEST_F(VerifyReference, GradShorterThanTheParameter) {
  write_reference([](auto& t) { replace(t, "grad.model.norm.weight", Tensor::zeros({3})); });
  auto r = verify();
  EXPECT_TRUE(is_clean_error(r, "grad.model.norm.weight")) << r.second;
}

TEST_F(VerifyReference, LogitsOfTheWrongShapeOrDtype) {
  write_reference([](auto& t) { replace(t, "logits", Tensor::zeros({2, 3})); });
  EXPECT_TRUE(is_clean_error(verify(), "'logits' has shape [2, 3]"));
  write_reference([](auto& t) { replace(t, "logits", Tensor::zeros({2, 12, 320}, DType::kI32)); });
  EXPECT_TRUE(is_clean_error(verify(), "'logits' must be F32"));
}

TEST_F(VerifyReference, NothingToCompare) {
  // Only input_ids, and a misnamed key ("gradient." instead of "grad."): nothing compared is not a PASS.
  write_reference([](auto& t) {
    std::erase_if(t, [](auto& p) { return p.first != "input_ids"; });
  });
  auto r = verify();
  EXPECT_TRUE(is_clean_error(r, "nothing to compare")) << r.second;
  EXPECT_EQ(r.second.find("PASS"), std::string::npos) << r.second;
  write_reference([](auto& t) {
    for (auto& p : t)
      if (p.first.starts_with("grad.")) p.first = "gradient." + p.first.substr(5);
    std::erase_if(t, [](auto& p) { return p.first == "logits"; });
  });
  r = verify();
  EXPECT_TRUE(is_clean_error(r, "nothing to compare")) << r.second;
}

TEST_F(VerifyReference, BadInputIds) {
  write_reference([](auto& t) { std::erase_if(t, [](auto& p) { return p.first == "input_ids"; }); });
  EXPECT_TRUE(is_clean_error(verify(), "input_ids"));
  write_reference([](auto& t) { replace(t, "input_ids", Tensor::zeros({24})); });
  EXPECT_TRUE(is_clean_error(verify(), "input_ids"));
  write_reference([](auto& t) { replace(t, "input_ids", Tensor::zeros({2, 12}, DType::kI32).view({24})); });
  EXPECT_TRUE(is_clean_error(verify(), "'input_ids' must be [B, T]"));
  write_reference([](auto& t) {
    Tensor ids = Tensor::zeros({2, 12}, DType::kI64);
    ids.data<int64_t>()[5] = 1000000000;
    replace(t, "input_ids", ids);
  });
  auto r = verify();
  EXPECT_TRUE(is_clean_error(r, "1000000000")) << r.second;
  EXPECT_NE(r.second.find("320"), std::string::npos) << r.second;
}

// ---- Row 18 (index vs single file) ----

TEST(ModelInputHardening, SingleFileWinsOverAnIndex) {
  // The index names a shard that does not exist: it must not be read when model.safetensors is there.
  const std::string m = model_copy("llama", "both");
  write_text(m + "/model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "gone.safetensors"}})");
  auto r = run_lathe_bounded("verify " + m + " " + fixture("llama") + "/reference.safetensors", kTimeout);
  EXPECT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find("verify: PASS"), std::string::npos) << r.second;
}

}  // namespace
}  // namespace lathe
