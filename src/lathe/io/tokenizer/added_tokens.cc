// AddedVocabulary matching (tokenizers/src/tokenizer/added_vocabulary.rs find_matches).
#include "lathe/io/tokenizer/added_tokens.h"

#include <algorithm>

#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

namespace {

// Last / first char of s is a word char (regex \w$ / ^\w).
bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t cs = s.size() - 1;
  while (cs > 0 && is_utf8_continuation(uint8_t(s[cs]))) --cs;
  size_t i = cs;
  return is_word_char(utf8_next(s, i));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(utf8_next(s, i));
}

// Start of the trailing whitespace run of s (regex \s*$).
size_t space_leftmost_at_end(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t cs = e - 1;
    while (cs > 0 && is_utf8_continuation(uint8_t(s[cs]))) --cs;
    size_t i = cs;
    if (!is_whitespace(utf8_next(s, i))) break;
    e = cs;
  }
  return e;
}

// End of the leading whitespace run of s (regex ^\s*).
size_t space_rightmost_at_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t k = i;
    if (!is_whitespace(utf8_next(s, k))) break;
    i = k;
  }
  return i;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view s, int32_t token) {
  if (s.empty()) return;
  if (nodes.empty()) nodes.emplace_back();
  uint32_t n = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    uint8_t b = uint8_t(s[k]);
    uint32_t child = 0;
    if (n == 0) {
      child = root_next[b];
    } else {
      auto& kids = nodes[n].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, uint32_t(0)));
      if (it != kids.end() && it->first == b) child = it->second;
    }
    if (child == 0) {
      child = uint32_t(nodes.size());
      nodes.emplace_back();
      if (n == 0) {
        root_next[b] = child;
      } else {
        auto& kids = nodes[n].kids;
        auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, uint32_t(0)));
        kids.insert(it, {b, child});
      }
    }
    n = child;
  }
  nodes[n].token = token;  // a later token with the same pattern replaces the earlier
}

int32_t AddedVocabulary::Trie::longest(std::string_view s, size_t i, size_t& end) const {
  uint32_t n = root_next[uint8_t(s[i])];
  int32_t best = -1;
  size_t k = i + 1;
  while (n != 0) {
    if (nodes[n].token >= 0) {
      best = nodes[n].token;
      end = k;
    }
    if (k >= s.size()) break;
    const auto& kids = nodes[n].kids;
    uint8_t b = uint8_t(s[k]);
    uint32_t next = 0;
    for (const auto& [kb, kc] : kids) {
      if (kb == b) {
        next = kc;
        break;
      }
      if (kb > b) break;
    }
    n = next;
    ++k;
  }
  return best;
}

void AddedVocabulary::add(AddedToken t, std::string pattern) {
  uint32_t index = uint32_t(tokens_.size());
  index_of_id_[t.id] = index;
  by_content_.add(t.content, t.id);
  (t.normalized ? normalized_trie_ : raw_trie_).insert(pattern, int32_t(index));
  tokens_.push_back(std::move(t));
}

const AddedToken* AddedVocabulary::by_id(uint32_t id) const {
  auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split(std::string_view s, bool raw, std::vector<AddedSplit>& out) const {
  const Trie& trie = raw ? raw_trie_ : normalized_trie_;
  if (s.empty()) return;
  if (trie.empty()) {
    out.push_back({-1, 0, uint32_t(s.size())});
    return;
  }
  size_t start_offset = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (trie.root_next[uint8_t(s[i])] == 0) {
      ++i;
      continue;
    }
    size_t stop = 0;
    int32_t idx = trie.longest(s, i, stop);
    if (idx < 0) {
      ++i;
      continue;
    }
    size_t start = i;
    i = stop;  // the automaton resumes after the match, whatever the flags do below
    const AddedToken& t = tokens_[size_t(idx)];
    if (t.single_word) {
      bool start_space = start == 0 || !ends_with_word(s.substr(0, start));
      bool stop_space = stop == s.size() || !starts_with_word(s.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) start = std::max(space_leftmost_at_end(s.substr(0, start)), start_offset);
    if (t.rstrip) stop += space_rightmost_at_start(s.substr(stop));
    if (start_offset < start) out.push_back({-1, uint32_t(start_offset), uint32_t(start)});
    out.push_back({int64_t(t.id), uint32_t(start), uint32_t(stop)});
    start_offset = stop;
    if (i < stop) i = stop;
  }
  if (start_offset != s.size()) out.push_back({-1, uint32_t(start_offset), uint32_t(s.size())});
}

}  // namespace lathe::tokenizer
