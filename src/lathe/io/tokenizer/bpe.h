// The BPE model of tokenizer.json, both GPT-2 byte-level (Qwen, Llama 3) and SentencePiece style
// (Gemma, Mistral / Llama 2: byte_fallback, unk with fuse_unk, ignore_merges). Merges apply by rank
// with a min-heap over a linked list of symbols (Hugging Face's Word::merge_all, O(n log n)); results
// are cached per word. Unigram / WordPiece / WordLevel models are rejected with NotImplemented.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/vocab.h"

namespace lathe::tokenizer {

// A model output: token id and its byte range [start, end) in the word it came from.
struct ModelToken {
  uint32_t id;
  uint32_t start;
  uint32_t end;
};

// Per-call scratch buffers, so a tokenize call allocates nothing once warm.
struct BpeScratch {
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
    uint32_t start, len;
  };
  std::vector<Symbol> symbols;
  std::vector<uint64_t> heap;
  std::vector<ModelToken> word_tokens;
};

class Bpe {
 public:
  // From tokenizer.json's "model"; `byte_level` when the pre-tokenizer emits GPT-2 byte-level words.
  static Bpe from_json(JsonRef model, bool byte_level);

  Bpe() = default;
  Bpe(Bpe&& other) noexcept;
  Bpe& operator=(Bpe&& other) noexcept;

  // Appends the tokens of one word (offsets relative to the word). `use_cache` only when the caller
  // holds the lock from lock_cache().
  void tokenize(std::string_view word, bool byte_level, std::vector<ModelToken>& out, BpeScratch& scratch,
                bool use_cache) const;
  // Tries to take the word cache for one encode call; another thread encoding at the same time
  // simply runs uncached instead of waiting.
  std::unique_lock<std::mutex> lock_cache() const { return std::unique_lock<std::mutex>(cache_mu_, std::try_to_lock); }

  const Vocab& vocab() const { return vocab_; }
  std::optional<uint32_t> unk_id() const { return unk_id_; }

 private:
  struct MergeValue {
    uint32_t rank;
    uint32_t new_id;
  };
  // Open-addressing map (left id, right id) -> merge; key and value share a 16-byte slot.
  struct MergeMap {
    struct Slot {
      uint64_t key;  // (a << 32 | b) + 1; 0 = empty
      MergeValue value;
    };
    std::vector<Slot> slots;
    void reserve(size_t n);
    void prefetch(uint32_t a, uint32_t b) const;
    void insert(uint32_t a, uint32_t b, MergeValue v);
    const MergeValue* find(uint32_t a, uint32_t b) const;
  };
  // Word -> tokens cache (keys and values in arenas; cleared when full).
  struct WordCache {
    std::string keys;
    std::vector<uint32_t> values;  // (id, start, end) triples
    struct Slot {
      uint64_t hash;
      uint32_t key_off, key_len, val_off, val_len;
    };
    std::vector<Slot> slots;
    size_t used = 0;
    bool find(std::string_view word, uint64_t h, std::vector<ModelToken>& out) const;
    void insert(std::string_view word, uint64_t h, const ModelToken* toks, size_t n);
  };

  void add_initial_symbols(std::string_view word, bool byte_level, BpeScratch& s) const;
  void merge_all(BpeScratch& s) const;
  void tokenize_chunk(std::string_view chunk, uint32_t base, bool byte_level, std::vector<ModelToken>& out,
                      BpeScratch& scratch, bool use_cache) const;
  void prepare_tables(bool byte_level);
  void load_merges(JsonRef merges);

  Vocab vocab_;
  MergeMap merges_;
  std::vector<uint32_t> rank_new_id_;  // rank -> merged id (staleness check as in merge_all)
  std::optional<uint32_t> unk_id_;
  std::string continuing_subword_prefix_, end_of_word_suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;

  int32_t byte_ids_[256];            // byte-level: raw byte -> id of its GPT-2 char (-1 if absent)
  int32_t ascii_ids_[128];           // char mode: ASCII char -> id (-1 if absent)
  int32_t byte_fallback_ids_[256];   // "<0xXX>" ids (-1 if absent)
  Vocab raw_vocab_;                  // byte-level + ignore_merges: raw-byte spelling of each token
  // SentencePiece words can be long (Gemma has no whitespace split): they are cut before a "▁" whose
  // preceding char never precedes "▁" inside a vocab token, which no merge can cross.
  bool chunk_on_metaspace_ = false;
  std::vector<char32_t> joins_before_metaspace_;  // sorted chars c with "c▁" inside some token

  mutable std::mutex cache_mu_;
  mutable WordCache cache_;
};

}  // namespace lathe::tokenizer
