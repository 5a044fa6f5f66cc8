// Deterministic, resumable loader over token shards (specs/pretrain.md §2.8).
//
// A sample is a window of T + 1 consecutive tokens of one shard (inputs = the first T, targets = the last
// T); shard s holds (n_s - 1) / T windows starting at multiples of T, so consecutive windows share one
// token and every token is a target exactly once. The global order is a pure function of (seed, epoch):
// shards are permuted, then the windows inside each shard, with the counter-based RNG of base/rng.h.
// The cursor is the number of global samples consumed; global sample k of a step belongs to rank
// k mod world_size, so a run can resume from any cursor and on another world size. Validation data is
// read in shard order, unshuffled.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lathe/train/token_shard.h"

namespace lathe::train {

struct Batch {
  int64_t batch = 0, seq_len = 0;  // B, T
  std::vector<int32_t> inputs;     // [B, T]
  std::vector<int32_t> targets;    // [B, T]
  // Document structure, for masking attention at document boundaries (delimiter_id >= 0):
  std::vector<int32_t> positions;  // [B, T] position inside the document, restarting at each delimiter
  std::vector<int32_t> segments;   // [B, T] document number inside the row, 0-based
};

struct DataLoaderOptions {
  std::vector<std::string> shards;  // token shard paths (order matters only when shuffle is off)
  int64_t seq_len = 0;              // T
  uint64_t seed = 0;
  bool shuffle = true;
  uint64_t vocab_limit = 0;  // > 0: every id must be below it (catches a corrupt shard or wrong tokenizer)
  int32_t delimiter_id = -1;  // token that opens each document; >= 0 fills Batch::positions / segments
};

// The manifest `lathe data prepare` writes next to the shards, DIR/NAME.json, records the tokenizer, the
// delimiter and each split's shards with their token counts. Format 2 stores paths relative to the
// manifest's folder (or absolute); earlier manifests stored the tokenizer and inputs as given to prepare.
inline constexpr int kManifestFormat = 2;

// Whether `j` is a manifest `lathe data prepare` wrote, of any format: a JSON object whose "train" or "val"
// is an object with a "shards" list. `data prepare` replaces an earlier NAME.json only when it is one.
bool is_data_manifest(const nlohmann::json& j);

// The manifest of a data prefix: DATA.json for a name prefix DIR/NAME (DATA itself when it names a .json
// file); for a folder, the one NAME.json in it that has NAME_{train,val}_*.bin shards beside it. nullopt
// when there is none (shards made by other tools, e.g. llm.c's scripts). Throws InvalidArgument when a
// folder holds more than one preparation (name one: DIR/NAME).
std::optional<std::string> find_manifest(const std::string& data);

// The manifest of `data` (find_manifest) with its paths resolved for this process: "tokenizer",
// "inputs" and each split's "shards" are absolute. null when there is none. Throws FormatError naming the
// manifest (and the key) when it is not a manifest or a recorded value has the wrong type or range:
// "format" 1..kManifestFormat, "vocab_size" 1..2^32, "token_bytes" 2 or 4, "delimiter_id" an id below
// vocab_size, "seed" >= 0, "val_fraction" in [0, 1), each split's "documents", "tokens" and
// "shard_tokens" counts >= 0, paths strings; so callers may read them typed (get<int32_t>()).
nlohmann::json read_manifest(const std::string& data);

// The tokenizer a manifest (read_manifest's result) records, resolved; "" when there is no manifest or it
// records none. Throws IoError naming the manifest and the path when the tokenizer is not there (the
// trainer checks this before the first step: checkpoints carry a copy and the samples decode with it).
std::string manifest_tokenizer(const nlohmann::json& manifest);

// The token shards of one split ("train" or "val") of `data`, a folder or name prefix: the ones its
// manifest lists, each checked to exist with the recorded token count and width (IoError / FormatError
// naming the manifest and the shard). Without a manifest, every "<prefix>*_<split>_*.bin" there, sorted,
// and `note` is told that no manifest was found. Throws IoError when there are none.
std::vector<std::string> find_shards(const std::string& data, const std::string& split,
                                     const std::function<void(const std::string&)>& note = {});

class DataLoader {
 public:
  explicit DataLoader(DataLoaderOptions opts);
  ~DataLoader();

  int64_t samples_per_epoch() const { return total_samples_; }
  int64_t tokens() const { return total_tokens_; }
  int64_t seq_len() const { return opts_.seq_len; }

  // Samples [cursor, cursor + n_global) of the global order that belong to `rank` of `world` ranks
  // (k mod world == rank), in order. A pure function of its arguments: thread-safe.
  Batch batch_at(int64_t cursor, int64_t n_global, int rank = 0, int world = 1) const;

  // The next batch after cursor(), then cursor() += n_global. The batch after it is prepared on a
  // background thread while the caller trains on this one.
  Batch next(int64_t n_global, int rank = 0, int world = 1);
  int64_t cursor() const { return cursor_; }
  void seek(int64_t cursor);  // resume: the next call to next() starts at this global sample

 private:
  struct ShardOrder;  // one epoch's shard permutation and one shard's window permutation (cached)
  void sample_tokens(int64_t k, int32_t* out) const;  // T + 1 tokens of global sample k

  DataLoaderOptions opts_;
  std::vector<TokenShard> shards_;
  std::vector<int64_t> windows_;  // per shard: number of windows
  int64_t total_samples_ = 0, total_tokens_ = 0;
  int64_t cursor_ = 0;
  mutable std::unique_ptr<ShardOrder> order_cache_;
  mutable std::mutex cache_mu_;

  struct Pending {
    int64_t cursor = -1, n_global = 0;
    int rank = 0, world = 1;
    std::future<Batch> result;
  };
  Pending pending_;
};

}  // namespace lathe::train
