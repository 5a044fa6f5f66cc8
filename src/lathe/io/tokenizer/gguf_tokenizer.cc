#include "lathe/io/tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>

#include "lathe/base/error.h"

namespace lathe::tokenizer {
// nlohmann::json (a sorted map): key order means nothing in tokenizer.json, and ordered_json inserts in
// linear time (a 150k-token vocabulary took a minute).
using ojson = nlohmann::json;

namespace {

// llama.cpp's llama_token_type.
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The pre-tokenizer regexes of tokenizer.ggml.pre (llama.cpp's llama-vocab.cpp), as the Hugging Face
// tokenizer.json of those models spells them.
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;  // kNormal when absent
};

Vocab read_vocab(const GgufFile& g) {
  Vocab v;
  const GgufValue* t = g.find("tokenizer.ggml.tokens");
  LATHE_CHECK_FORMAT(t && t->type == GgufType::kArray && t->elem == GgufType::kString, g.path(),
                     ": tokenizer.ggml.tokens must be an array of strings");
  v.tokens = t->strings;
  v.types.assign(v.tokens.size(), kNormal);
  if (const GgufValue* ty = g.find("tokenizer.ggml.token_type")) {
    LATHE_CHECK_FORMAT(ty->type == GgufType::kArray && ty->ints.size() == v.tokens.size(), g.path(),
                       ": tokenizer.ggml.token_type must be an integer array of ", v.tokens.size(), " entries");
    v.types = ty->ints;
  }
  return v;
}

ojson added_tokens(const Vocab& v) {
  ojson out = ojson::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const int64_t t = v.types[id];
    if (t != kControl && t != kUserDefined && t != kUnknown) continue;
    out.push_back({{"id", id}, {"content", v.tokens[id]}, {"single_word", false}, {"lstrip", false},
                   {"rstrip", false}, {"normalized", false}, {"special", t != kUserDefined}});
  }
  return out;
}

std::optional<std::string> token_at(const GgufFile& g, const Vocab& v, const char* key) {
  const GgufValue* id = g.find(key);
  if (!id) return std::nullopt;
  LATHE_CHECK_FORMAT(id->is_integer(), g.path(), ": ", key, " must be an integer");
  if (id->i < 0) return std::nullopt;  // -1: none (llama.cpp writes it for a missing token)
  LATHE_CHECK_FORMAT(static_cast<size_t>(id->i) < v.tokens.size(), g.path(), ": ", key, " ", id->i,
                     " is outside the token list (", v.tokens.size(), " tokens)");
  return v.tokens[id->i];
}

// BOS (and EOS) around each sequence when add_bos_token (add_eos_token) is set, as transformers'
// LlamaTokenizerFast.update_post_processor writes it.
ojson template_post_processor(const std::optional<std::string>& bos, const std::optional<std::string>& eos,
                              bool add_bos, bool add_eos, const GgufFile& g) {
  ojson single = ojson::array(), pair = ojson::array(), specials = ojson::object();
  const auto special = [&](const std::string& tok, int type_id, ojson& seq) {
    seq.push_back({{"SpecialToken", {{"id", tok}, {"type_id", type_id}}}});
  };
  for (int part = 0; part < 2; ++part) {
    for (ojson* seq : {&single, &pair}) {
      if (seq == &single && part == 1) continue;
      if (add_bos && bos) special(*bos, part, *seq);
      seq->push_back({{"Sequence", {{"id", part == 0 ? "A" : "B"}, {"type_id", part}}}});
      if (add_eos && eos) special(*eos, part, *seq);
    }
  }
  const auto id_of = [&](const std::string& key) { return g.integer(key); };
  if (add_bos && bos) specials[*bos] = {{"id", *bos}, {"ids", {id_of("tokenizer.ggml.bos_token_id")}}, {"tokens", {*bos}}};
  if (add_eos && eos) specials[*eos] = {{"id", *eos}, {"ids", {id_of("tokenizer.ggml.eos_token_id")}}, {"tokens", {*eos}}};
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

// Merges of a SentencePiece BPE vocabulary from its scores (transformers' SentencePieceExtractor.extract):
// every split of a piece into two pieces of the vocabulary, the merged piece's score deciding the rank
// (higher first), ties in vocabulary order of (merged, left, right). Splits fall on code-point boundaries.
ojson spm_merges(const GgufFile& g, const Vocab& v) {
  const GgufValue* sc = g.find("tokenizer.ggml.scores");
  LATHE_CHECK_FORMAT(sc && sc->type == GgufType::kArray && sc->floats.size() == v.tokens.size(), g.path(),
                     ": tokenizer.ggml.scores must be a float array of ", v.tokens.size(), " entries");
  std::unordered_map<std::string, int64_t> id;
  for (size_t i = 0; i < v.tokens.size(); ++i) id.emplace(v.tokens[i], static_cast<int64_t>(i));
  struct Merge {
    double score;
    int64_t merged, left, right;
    size_t split;
  };
  std::vector<Merge> merges;
  for (size_t t = 0; t < v.tokens.size(); ++t) {
    const std::string& piece = v.tokens[t];
    for (size_t k = 1; k < piece.size(); ++k) {
      if ((static_cast<unsigned char>(piece[k]) & 0xC0) == 0x80) continue;  // inside a UTF-8 sequence
      const auto l = id.find(piece.substr(0, k)), r = id.find(piece.substr(k));
      if (l != id.end() && r != id.end()) merges.push_back({sc->floats[t], static_cast<int64_t>(t), l->second, r->second, k});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(b.score, a.merged, a.left, a.right) < std::tie(a.score, b.merged, b.left, b.right);
  });
  ojson out = ojson::array();
  for (const Merge& m : merges) {
    const std::string& p = v.tokens[m.merged];
    out.push_back({p.substr(0, m.split), p.substr(m.split)});
  }
  return out;
}

ojson vocab_object(const Vocab& v) {
  ojson out = ojson::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) out[v.tokens[i]] = i;  // a repeated piece keeps its last id
  return out;
}

ojson llama_tokenizer(const GgufFile& g, const Vocab& v, const std::optional<std::string>& unk, ojson post) {
  ojson j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added_tokens(v)}};
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = std::move(post);
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", unk ? ojson(*unk) : ojson(nullptr)},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", vocab_object(v)},
                {"merges", spm_merges(g, v)}};
  return j;
}

ojson gpt2_tokenizer(const GgufFile& g, const Vocab& v, ojson post) {
  const std::string pre = g.string_or("tokenizer.ggml.pre", "default");
  ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ojson pre_tok, normalizer = nullptr;
  bool ignore_merges = false;
  const auto split_then_bytes = [&](const char* regex) {
    return ojson{{"type", "Sequence"},
                 {"pretokenizers",
                  {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                   byte_level}}};
  };
  if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
    pre_tok = byte_level;
    pre_tok["use_regex"] = true;  // GPT-2's own pattern
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    pre_tok = split_then_bytes(kLlama3Regex);
    ignore_merges = true;  // as Llama 3's tokenizer.json (and llama.cpp for this pre-tokenizer)
  } else if (pre == "qwen2") {
    pre_tok = split_then_bytes(kQwen2Regex);
    normalizer = {{"type", "NFC"}};
  } else {
    throw NotImplemented(str_cat(g.path(), ": tokenizer.ggml.pre '", pre,
                                 "' is not supported (default, gpt2, llama-bpe, qwen2)"));
  }
  const GgufValue* mv = g.find("tokenizer.ggml.merges");
  LATHE_CHECK_FORMAT(mv && mv->type == GgufType::kArray && mv->elem == GgufType::kString, g.path(),
                     ": a gpt2 tokenizer needs tokenizer.ggml.merges (an array of strings)");
  ojson merges = ojson::array();
  for (size_t i = 0; i < mv->strings.size(); ++i) {
    const std::string& m = mv->strings[i];
    const size_t sp = m.find(' ', 1);
    LATHE_CHECK_FORMAT(sp != std::string::npos && sp + 1 < m.size(), g.path(), ": tokenizer.ggml.merges[", i, "] '",
                       m, "' is not two pieces separated by a space");
    merges.push_back({m.substr(0, sp), m.substr(sp + 1)});
  }
  ojson j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added_tokens(v)}};
  j["normalizer"] = std::move(normalizer);
  j["pre_tokenizer"] = std::move(pre_tok);
  j["post_processor"] = std::move(post);
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                {"ignore_merges", ignore_merges}, {"vocab", vocab_object(v)}, {"merges", std::move(merges)}};
  return j;
}

}  // namespace

bool gguf_has_tokenizer(const GgufFile& g) {
  return g.find("tokenizer.ggml.model") && g.find("tokenizer.ggml.tokens");
}

TokenizerFiles gguf_tokenizer_files(const GgufFile& g) {
  const std::string model = g.string("tokenizer.ggml.model");
  const Vocab v = read_vocab(g);
  const auto bos = token_at(g, v, "tokenizer.ggml.bos_token_id");
  const auto eos = token_at(g, v, "tokenizer.ggml.eos_token_id");
  const auto unk = token_at(g, v, "tokenizer.ggml.unknown_token_id");
  const auto pad = token_at(g, v, "tokenizer.ggml.padding_token_id");
  // llama.cpp's defaults when the keys are absent: BOS for SentencePiece vocabularies, none for byte-level.
  const bool add_bos = g.boolean_or("tokenizer.ggml.add_bos_token", model == "llama");
  const bool add_eos = g.boolean_or("tokenizer.ggml.add_eos_token", false);
  ojson tok;
  if (model == "llama") {
    tok = llama_tokenizer(g, v, unk, template_post_processor(bos, eos, add_bos, add_eos, g));
  } else if (model == "gpt2") {
    ojson post = add_bos || add_eos
                     ? template_post_processor(bos, eos, add_bos, add_eos, g)
                     : ojson{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    tok = gpt2_tokenizer(g, v, std::move(post));
  } else {
    throw NotImplemented(str_cat(g.path(), ": tokenizer.ggml.model '", model, "' is not supported (llama, gpt2)"));
  }
  ojson config = ojson::object();
  if (bos) config["bos_token"] = *bos;
  if (eos) config["eos_token"] = *eos;
  if (unk) config["unk_token"] = *unk;
  if (pad) config["pad_token"] = *pad;
  config["add_bos_token"] = add_bos;
  config["add_eos_token"] = add_eos;
  if (const GgufValue* t = g.find("tokenizer.chat_template")) {
    LATHE_CHECK_FORMAT(t->type == GgufType::kString, g.path(), ": tokenizer.chat_template must be a string");
    config["chat_template"] = t->s;
  }
  TokenizerFiles f;
  try {
    f.tokenizer_json = tok.dump();
  } catch (const nlohmann::json::exception&) {  // a token or merge that is not UTF-8
    throw FormatError(str_cat(g.path(), ": the tokenizer metadata holds a string that is not valid UTF-8"));
  }
  f.tokenizer_json_name = g.path() + " (tokenizer.ggml.*)";
  try {
    f.config_json = config.dump();
  } catch (const nlohmann::json::exception&) {
    throw FormatError(str_cat(g.path(), ": a special token or the chat template is not valid UTF-8"));
  }
  f.config_json_name = g.path() + " (tokenizer.ggml.*)";
  return f;
}

}  // namespace lathe::tokenizer
