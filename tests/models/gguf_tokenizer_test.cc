// A GGUF file's tokenizer (io/tokenizer/gguf_tokenizer.h) against the Hugging Face tokenizer.json it was
// converted from: the token list, types, scores (SentencePiece) or merges (byte-level BPE) written as
// llama.cpp's convert_hf_to_gguf.py writes them, then every text of the fixture corpus encoded and decoded
// through both. Uses the real tokenizers under LATHE_TOKENIZERS (skipped when absent).
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf_writer.h"
#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/gguf_tokenizer.h"

namespace lathe {
namespace {
using nlohmann::json;

// llama.cpp's token types.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

std::vector<std::string> corpus() {
  const json c = json::parse(read_file(testing::fixtures_root() + "/tokenizers/corpus.json"));
  return c.get<std::vector<std::string>>();
}

// Writes tokenizer.json's vocabulary as GGUF tokenizer metadata: "llama" (SentencePiece: tokens, types,
// scores) or "gpt2" (tokens, types, merges) with `pre`.
std::string write_tokenizer_gguf(const std::string& name, const std::string& model, const std::string& pre) {
  const std::string dir = testing::tokenizers_root() + "/" + name;
  const json tj = json::parse(read_file(dir + "/tokenizer.json"));
  const json cfg = json::parse(read_file(dir + "/tokenizer_config.json"));
  std::map<int64_t, std::string> by_id;
  for (const auto& [tok, id] : tj["model"]["vocab"].items()) by_id[id.get<int64_t>()] = tok;
  std::map<int64_t, bool> added;  // id -> special
  for (const json& a : tj["added_tokens"]) {
    by_id[a["id"].get<int64_t>()] = a["content"].get<std::string>();
    added[a["id"].get<int64_t>()] = a["special"].get<bool>();
  }
  const int64_t n = by_id.rbegin()->first + 1;
  // A SentencePiece model's scores, recovered from the merges transformers derived from them: a piece
  // scores minus the rank of the first merge that makes it (pieces no merge makes: far below).
  std::map<std::string, int64_t> first_rank;
  int64_t rank = 0;
  for (const json& m : tj["model"]["merges"]) {
    const std::string s = m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>();
    const size_t sp = s.find(' ', 1);
    first_rank.emplace(s.substr(0, sp) + s.substr(sp + 1), rank++);
  }
  const auto merged_score = [&](const std::string& piece) {
    const auto it = first_rank.find(piece);
    return it == first_rank.end() ? -1e9f : -static_cast<float>(it->second);
  };
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, kNormal);
  std::vector<float> scores(n, 0.f);
  for (int64_t id = 0; id < n; ++id) {
    // Ids no token names (gaps) are written as llama.cpp's converter pads them.
    tokens[id] = by_id.count(id) ? by_id[id] : "[PAD" + std::to_string(id) + "]";
    if (!by_id.count(id)) types[id] = kUserDefined;
    if (added.count(id)) types[id] = added[id] ? kControl : kUserDefined;
    if (model == "llama") {
      if (tokens[id].size() == 6 && tokens[id].starts_with("<0x")) types[id] = kByte;
      if (tokens[id] == "<unk>") types[id] = kUnknown;
      if (types[id] == kNormal) scores[id] = merged_score(tokens[id]);
    }
  }
  testing::GgufWriter w;
  w.str("general.architecture", "llama");
  w.str("tokenizer.ggml.model", model);
  if (!pre.empty()) w.str("tokenizer.ggml.pre", pre);
  w.strings("tokenizer.ggml.tokens", tokens);
  w.i32s("tokenizer.ggml.token_type", types);
  if (model == "llama") w.f32s("tokenizer.ggml.scores", scores);
  if (model == "gpt2") {
    std::vector<std::string> merges;
    for (const json& m : tj["model"]["merges"])
      merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
    w.strings("tokenizer.ggml.merges", merges);
  }
  const auto id_of = [&](const char* key) -> int64_t {
    if (!cfg.contains(key) || cfg[key].is_null()) return -1;
    const std::string t = cfg[key].is_string() ? cfg[key].get<std::string>() : cfg[key]["content"].get<std::string>();
    for (int64_t id = 0; id < n; ++id)
      if (tokens[id] == t) return id;
    return -1;
  };
  if (id_of("bos_token") >= 0) w.u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id_of("bos_token")));
  if (id_of("eos_token") >= 0) w.u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id_of("eos_token")));
  w.boolean("tokenizer.ggml.add_bos_token", cfg.value("add_bos_token", false));
  if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
    w.str("tokenizer.chat_template", cfg["chat_template"].get<std::string>());
  const std::string path = testing::scratch_dir("gguf_tok_" + name) + "/tok.gguf";
  w.write(path);
  return path;
}

void expect_same_tokenizer(const std::string& name, const std::string& model, const std::string& pre) {
  const std::string dir = testing::tokenizers_root() + "/" + name;
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " absent (LATHE_TOKENIZERS)";
  const tokenizer::Tokenizer hf = tokenizer::Tokenizer::load(dir);
  const GgufFile g = GgufFile::open(write_tokenizer_gguf(name, model, pre));
  ASSERT_TRUE(tokenizer::gguf_has_tokenizer(g));
  const tokenizer::Tokenizer gg = tokenizer::Tokenizer::from_files(tokenizer::gguf_tokenizer_files(g));
  EXPECT_EQ(gg.vocab_size(), hf.vocab_size());
  EXPECT_EQ(gg.chat_template(), hf.chat_template());
  int n = 0;
  for (const std::string& text : corpus()) {
    const std::vector<uint32_t> want = hf.encode_ids(text, false), got = gg.encode_ids(text, false);
    EXPECT_EQ(got, want) << name << ": '" << text << "'";
    EXPECT_EQ(gg.decode(got), hf.decode(want)) << name << ": '" << text << "'";
    ++n;
  }
  EXPECT_GT(n, 10);
  // Special tokens: both add the same BOS (or none).
  EXPECT_EQ(gg.encode_ids("Hello world", true), hf.encode_ids("Hello world", true)) << name;
}

TEST(GgufTokenizer, SentencePieceLlama2) { expect_same_tokenizer("llama2", "llama", ""); }
TEST(GgufTokenizer, ByteLevelLlama3) { expect_same_tokenizer("llama3", "gpt2", "llama-bpe"); }
TEST(GgufTokenizer, ByteLevelQwen3) { expect_same_tokenizer("qwen3", "gpt2", "qwen2"); }

TEST(GgufTokenizer, UnknownModelOrPreTokenizerIsNamed) {
  testing::GgufWriter w;
  w.str("tokenizer.ggml.model", "bert");
  w.strings("tokenizer.ggml.tokens", {"a"});
  const std::string path = testing::scratch_dir("gguf_tok_bad") + "/bert.gguf";
  w.write(path);
  try {
    tokenizer::gguf_tokenizer_files(GgufFile::open(path));
    ADD_FAILURE();
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model 'bert' is not supported"), std::string::npos) << e.what();
  }
}

TEST(GgufTokenizer, InvalidUtf8IsAFormatError) {
  testing::GgufWriter w;
  w.str("tokenizer.ggml.model", "llama");
  w.strings("tokenizer.ggml.tokens", {"<unk>", "a", "\xFF\xFE"});
  w.f32s("tokenizer.ggml.scores", {0.f, -1.f, -2.f});
  const std::string path = testing::scratch_dir("gguf_tok_utf8") + "/bad.gguf";
  w.write(path);
  try {
    tokenizer::gguf_tokenizer_files(GgufFile::open(path));
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": the tokenizer metadata holds a string that is not valid UTF-8"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lathe
