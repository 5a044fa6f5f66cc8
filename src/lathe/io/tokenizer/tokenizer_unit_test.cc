// Behaviour the real-file fixtures do not reach, on small hand-built tokenizer.json files: normalizer
// alignment (NFC / NFKC / Lowercase / Strip), added-token flags (lstrip, rstrip, single_word,
// normalized), Digits / Metaspace, unsupported types, invalid UTF-8, streaming decode, config fields.
#include <gtest/gtest.h>

#include <string>

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/normalizer.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {
namespace {

// A byte-level BPE whose vocab is the 256 GPT-2 byte chars plus `extra` tokens and `merges`.
std::string byte_level_json(const std::string& extra_vocab, const std::string& merges, const std::string& added,
                            const std::string& normalizer = "null") {
  const auto& bl = ByteLevelTable::get();
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string s = bl.byte_to_utf8[b];
    if (s == "\"" || s == "\\") s = "\\" + s;
    vocab += "\"" + s + "\": " + std::to_string(b) + ", ";
  }
  if (extra_vocab.empty()) vocab.resize(vocab.size() - 2);  // no trailing comma
  vocab += extra_vocab;
  return R"({"added_tokens": [)" + added + R"(], "normalizer": )" + normalizer +
         R"(, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
         "post_processor": {"type": "ByteLevel", "trim_offsets": false},
         "decoder": {"type": "ByteLevel"},
         "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [)" + merges + "]}}";
}

std::vector<uint32_t> ids_of(const Tokenizer& t, const std::string& s) { return t.encode(s, false).ids; }

TEST(TokenizerUnit, RejectsUnsupportedModels) {
  for (const char* type : {"Unigram", "WordPiece", "WordLevel"}) {
    std::string json = std::string(R"({"model": {"type": ")") + type + R"(", "vocab": []}})";
    try {
      Tokenizer::from_json(json);
      ADD_FAILURE() << type << " accepted";
    } catch (const NotImplemented& e) {
      EXPECT_NE(std::string(e.what()).find("unsupported model type"), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizerUnit, ByteLevelMergesAndOffsets) {
  // "Ġh" "he" -> merges: h e -> he, Ġ he -> Ġhe.
  Tokenizer t = Tokenizer::from_json(
      byte_level_json(R"("he": 300, "Ġhe": 301)", R"("h e", "Ġ he")", ""));
  Encoding e = t.encode("he he", false);
  EXPECT_EQ(e.ids, (std::vector<uint32_t>{300, 301}));
  EXPECT_EQ(e.tokens, (std::vector<std::string>{"he", "Ġhe"}));
  EXPECT_EQ(e.offsets, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 2}, {2, 5}}));
  // A 4-byte emoji is 4 byte tokens, each with the whole character's offsets.
  e = t.encode("\xF0\x9F\x99\x82!", false);
  ASSERT_EQ(e.ids.size(), 5u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(e.offsets[k], (std::pair<uint32_t, uint32_t>{0, 1}));
  EXPECT_EQ(e.offsets[4], (std::pair<uint32_t, uint32_t>{1, 2}));
  EXPECT_EQ(t.decode(e.ids), "\xF0\x9F\x99\x82!");
}

TEST(TokenizerUnit, StreamDecoderHoldsPartialCharacters) {
  Tokenizer t = Tokenizer::from_json(byte_level_json("", "", ""));
  std::vector<uint32_t> ids = ids_of(t, "a\xF0\x9F\x99\x82" "b");
  ASSERT_EQ(ids.size(), 6u);
  StreamDecoder sd(t);
  std::vector<std::string> pieces;
  for (uint32_t id : ids) pieces.push_back(sd.push(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x99\x82", "b"}));
  EXPECT_EQ(sd.text(), "a\xF0\x9F\x99\x82" "b");
}

TEST(TokenizerUnit, InvalidUtf8IsRepairedNotFatal) {
  Tokenizer t = Tokenizer::from_json(byte_level_json("", "", ""));
  Encoding e = t.encode(std::string("a\xFF" "b\xE2\x82", 5), false);
  // Each bad sequence becomes U+FFFD (3 bytes), as Rust's from_utf8_lossy: a, FFFD, b, FFFD.
  EXPECT_EQ(t.decode(e.ids), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(e.offsets.back(), (std::pair<uint32_t, uint32_t>{3, 4}));
  EXPECT_EQ(utf8_repair("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two maximal subparts
  EXPECT_EQ(utf8_repair("\xF0\x9F\x99"), "\xEF\xBF\xBD");          // truncated: one
}

TEST(TokenizerUnit, AddedTokenFlags) {
  std::string added =
      R"({"id": 400, "content": "<x>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true},
         {"id": 401, "content": "cat", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false})";
  Tokenizer t = Tokenizer::from_json(byte_level_json("", "", added));
  Encoding e = t.encode("a  <x>  b", false);
  // lstrip/rstrip: the token swallows the spaces around it.
  ASSERT_EQ(e.ids.size(), 3u);
  EXPECT_EQ(e.ids[1], 400u);
  EXPECT_EQ(e.tokens[1], "  <x>  ");
  EXPECT_EQ(e.offsets[1], (std::pair<uint32_t, uint32_t>{1, 8}));
  // single_word: only matches as a whole word.
  EXPECT_EQ(ids_of(t, "cat").size(), 1u);
  EXPECT_EQ(ids_of(t, "a cat.")[2], 401u);
  EXPECT_EQ(ids_of(t, "concat").size(), 6u);
  EXPECT_EQ(t.decode(ids_of(t, "a<x>b"), true), "ab");
  EXPECT_EQ(t.decode(ids_of(t, "a<x>b"), false), "a<x>b");
  EXPECT_TRUE(t.is_special(400));
  EXPECT_FALSE(t.is_special(401));
  EXPECT_EQ(t.token_to_id("<x>"), 400u);
  EXPECT_EQ(t.id_to_token(401), "cat");
}

TEST(TokenizerUnit, NormalizedAddedTokensMatchAfterNormalization) {
  std::string added =
      R"({"id": 400, "content": "DOG", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false})";
  Tokenizer t = Tokenizer::from_json(byte_level_json("", "", added, R"({"type": "Lowercase"})"));
  Encoding e = t.encode("a DOG dog", false);
  // The pattern is the normalized content "dog": both spellings match.
  int n = 0;
  for (uint32_t id : e.ids) n += id == 400;
  EXPECT_EQ(n, 2);
}

NormalizedString normalized(const char* json, const std::string& text) {
  JsonDoc d = JsonDoc::parse(json);
  Normalizer n = Normalizer::from_json(d.root());
  NormalizedString ns(text, 0);
  n.normalize(ns);
  return ns;
}

TEST(TokenizerUnit, NormalizersKeepAlignment) {
  // NFC composes e + U+0301; the result aligns to the 'e' (as the Rust library reports).
  NormalizedString ns = normalized(R"({"type": "NFC"})", "xe\xCC\x81y");
  EXPECT_EQ(ns.text(), "x\xC3\xA9y");
  EXPECT_EQ(ns.original_range(1, 3), (OffsetPair{1, 2}));
  EXPECT_EQ(ns.original_range(3, 4), (OffsetPair{4, 5}));
  // NFKC expands the ligature; both letters map into it.
  ns = normalized(R"({"type": "NFKC"})", "\xEF\xAC\x81x");
  EXPECT_EQ(ns.text(), "fix");
  EXPECT_EQ(ns.original_range(0, 2), (OffsetPair{0, 3}));
  EXPECT_EQ(ns.original_range(2, 3), (OffsetPair{3, 4}));
  ns = normalized(R"({"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": true, "strip_right": true},
                      {"type": "Lowercase"}, {"type": "Prepend", "prepend": "_"},
                      {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "-"}]})",
                  "  Ab  \xC3\x89 ");
  EXPECT_EQ(ns.text(), "_ab-\xC3\xA9");
  EXPECT_EQ(ns.original_range(0, 1), (OffsetPair{2, 3}));  // prepended char aligns to the first char
  EXPECT_EQ(ns.original_range(3, 4), (OffsetPair{5, 6}));  // replacement aligns to the match's last byte
  EXPECT_EQ(ns.original_range(4, 6), (OffsetPair{6, 8}));
}

TEST(TokenizerUnit, SentencePieceStyleWithDigitsMetaspaceAndFallback) {
  std::string json = R"({"added_tokens": [{"id": 1, "content": "<s>", "special": true, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true}]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
      "vocab": {"<unk>": 0, "<s>": 1, "▁": 2, "a": 3, "b": 4, "▁a": 5, "1": 6, "2": 7, "<0xC3>": 8, "<0xA9>": 9},
      "merges": ["▁ a"]}})";
  Tokenizer t = Tokenizer::from_json(json);
  Encoding e = t.encode("a b12é", true);
  // <s>, ▁a (first word gets the prefix), ▁, b, 1, 2, é by byte fallback.
  EXPECT_EQ(e.ids, (std::vector<uint32_t>{1, 5, 2, 4, 6, 7, 8, 9}));
  EXPECT_EQ(e.offsets.front(), (std::pair<uint32_t, uint32_t>{0, 0}));
  EXPECT_EQ(e.offsets[1], (std::pair<uint32_t, uint32_t>{0, 1}));
  EXPECT_EQ(e.offsets[6], (std::pair<uint32_t, uint32_t>{5, 6}));
  EXPECT_EQ(t.decode(e.ids, true), "a b12\xC3\xA9");
  // An unknown char without byte tokens becomes <unk>, fused with its unknown neighbours.
  EXPECT_EQ(t.encode("a\xE4\xB8\xAD\xE4\xB8\xAD", false).ids, (std::vector<uint32_t>{5, 0}));
}

TEST(TokenizerUnit, ReadsConfigSpecialTokensAndChatTemplate) {
  std::string cfg = R"({"bos_token": {"content": "<x>", "lstrip": false}, "eos_token": "<y>",
                        "add_bos_token": true, "chat_template": [{"name": "tool_use", "template": "T"},
                        {"name": "default", "template": "D"}]})";
  std::string added =
      R"({"id": 400, "content": "<x>", "special": true, "normalized": false}, {"id": 401, "content": "<y>", "special": true, "normalized": false})";
  Tokenizer t = Tokenizer::from_json(byte_level_json("", "", added), cfg, R"({"eos_token": "<x>"})");
  EXPECT_EQ(t.special_tokens().bos, "<x>");
  EXPECT_EQ(t.special_tokens().bos_id, 400u);
  EXPECT_EQ(t.special_tokens().eos, "<x>");  // special_tokens_map.json overrides the config
  EXPECT_TRUE(t.special_tokens().add_bos_token);
  EXPECT_EQ(t.chat_template(), "D");
}

}  // namespace
}  // namespace lathe::tokenizer
