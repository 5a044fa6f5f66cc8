// Added and special tokens (tokenizer.json "added_tokens"): found in the text before the model runs,
// leftmost-longest, honouring single_word, lstrip, rstrip and normalized (Hugging Face
// AddedVocabulary). Non-normalized tokens are matched in the raw input, normalized ones in each
// normalized piece.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/vocab.h"

namespace lathe::tokenizer {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A piece of a sentence: an added token (id >= 0) or text to tokenize (id < 0), bytes [start, end).
struct AddedSplit {
  int64_t id;
  uint32_t start;
  uint32_t end;
};

class AddedVocabulary {
 public:
  // From the "added_tokens" array. `normalize` maps a normalized token's content to its normalized
  // form (the pattern searched after normalization).
  template <class NormalizeFn>
  void load(JsonRef added_tokens, NormalizeFn&& normalize);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* by_id(uint32_t id) const;
  int64_t find(std::string_view content) const { return by_content_.find(content); }
  bool is_special_id(uint32_t id) const {
    const AddedToken* t = by_id(id);
    return t && t->special;
  }
  bool has_normalized() const { return !normalized_trie_.empty(); }

  // Splits `sentence` by the non-normalized (raw = true) or normalized tokens. Appends to out.
  void split(std::string_view sentence, bool raw, std::vector<AddedSplit>& out) const;

 private:
  // Byte trie for leftmost-longest matching; node 0 is the root (dense first-byte table).
  struct Trie {
    struct Node {
      int32_t token = -1;  // index into tokens_, or -1
      std::vector<std::pair<uint8_t, uint32_t>> kids;  // sorted by byte
    };
    std::vector<Node> nodes;
    uint32_t root_next[256] = {};  // 0 = none
    bool empty() const { return nodes.size() <= 1; }
    void insert(std::string_view s, int32_t token);
    // Longest match starting at s[i]; returns its token index (or -1) and sets end.
    int32_t longest(std::string_view s, size_t i, size_t& end) const;
  };
  void add(AddedToken t, std::string normalized_pattern);

  std::vector<AddedToken> tokens_;
  std::unordered_map<uint32_t, uint32_t> index_of_id_;
  Vocab by_content_;
  Trie raw_trie_, normalized_trie_;
};

template <class NormalizeFn>
void AddedVocabulary::load(JsonRef added_tokens, NormalizeFn&& normalize) {
  added_tokens.for_each_element([&](JsonRef j) {
    AddedToken t;
    t.content = std::string(j["content"].str("added token content"));
    t.id = uint32_t(j["id"].integer("added token id"));
    auto flag = [&](const char* k, bool d) { return j[k].is_bool() ? j[k].boolean() : d; };
    t.special = flag("special", false);
    t.single_word = flag("single_word", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.normalized = flag("normalized", !t.special);
    std::string pattern = t.normalized ? normalize(t.content) : t.content;
    add(std::move(t), std::move(pattern));
  });
}

}  // namespace lathe::tokenizer
