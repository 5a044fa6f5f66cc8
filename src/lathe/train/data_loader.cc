#include "lathe/train/data_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"

namespace lathe::train {

namespace fs = std::filesystem;

std::vector<std::string> find_shards(const std::string& dir_or_prefix, const std::string& split) {
  // "data/run" is either a folder holding the shards or a name prefix inside a folder.
  fs::path dir = dir_or_prefix;
  std::string prefix;
  if (!fs::is_directory(dir)) {
    prefix = dir.filename().string();
    dir = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  }
  std::vector<std::string> paths;
  if (fs::is_directory(dir)) {
    const std::string tag = "_" + split + "_";
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.size() < 4 || name.compare(name.size() - 4, 4, ".bin") != 0) continue;
      if (name.find(tag) == std::string::npos || name.rfind(prefix, 0) != 0) continue;
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty())
    throw IoError(str_cat("no ", split, " token shards (*_", split, "_*.bin) in ", dir_or_prefix,
                          " (create them with `lathe data prepare`)"));
  return paths;
}

nlohmann::json read_manifest(const std::string& data, const std::string& split) {
  const auto shards = find_shards(data, split);
  const std::string name = fs::path(shards[0]).filename().string();
  const fs::path manifest = fs::path(shards[0]).parent_path() / (name.substr(0, name.find("_" + split + "_")) + ".json");
  if (!fs::exists(manifest)) return nullptr;
  try {
    std::ifstream in(manifest);
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw FormatError(str_cat(manifest.string(), ": ", e.what()));
  }
}

// Cached permutations: the shard order of one epoch, and the window order of recently used shards.
struct DataLoader::ShardOrder {
  int64_t epoch = -1;
  std::vector<int32_t> shard_at;  // [S] epoch position -> shard index
  std::vector<int64_t> start;     // [S] epoch position -> epoch index of the shard's first window
  struct WindowPerm {
    int32_t shard = -1;
    std::shared_ptr<const std::vector<uint32_t>> perm;
  };
  std::vector<WindowPerm> recent;  // small LRU, most recent last
};

namespace {

// Fisher-Yates with a counter-based generator: the same key always gives the same permutation.
template <class T>
void shuffle_with_key(std::vector<T>& v, uint64_t key) {
  CounterRng rng{key, 0};
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.next_below(i)]);
}

}  // namespace

DataLoader::DataLoader(DataLoaderOptions opts) : opts_(std::move(opts)), order_cache_(std::make_unique<ShardOrder>()) {
  LATHE_CHECK_ARG(opts_.seq_len > 0, "data loader: seq_len must be positive");
  LATHE_CHECK_ARG(!opts_.shards.empty(), "data loader: no shards");
  for (const auto& path : opts_.shards) {
    shards_.push_back(TokenShard::open(path));
    const int64_t n = shards_.back().size();
    windows_.push_back(n > opts_.seq_len ? (n - 1) / opts_.seq_len : 0);
    total_samples_ += windows_.back();
    total_tokens_ += n;
  }
  LATHE_CHECK_ARG(total_samples_ > 0, "data loader: the shards hold ", total_tokens_,
                  " tokens, too few for one sequence of ", opts_.seq_len, " + 1 tokens (first shard: ",
                  opts_.shards.front(), ")");
}

DataLoader::~DataLoader() {
  if (pending_.result.valid()) pending_.result.wait();
}

void DataLoader::sample_tokens(int64_t k, int32_t* out) const {
  const int64_t epoch = k / total_samples_;
  const int64_t j = k % total_samples_;
  const int64_t n_shards = static_cast<int64_t>(shards_.size());
  int32_t shard = 0;
  int64_t window = 0;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    ShardOrder& order = *order_cache_;
    if (order.epoch != epoch) {
      order.epoch = epoch;
      order.shard_at.resize(n_shards);
      for (int64_t s = 0; s < n_shards; ++s) order.shard_at[s] = static_cast<int32_t>(s);
      if (opts_.shuffle) shuffle_with_key(order.shard_at, derive_key(opts_.seed, static_cast<uint64_t>(epoch)));
      order.start.resize(n_shards);
      int64_t acc = 0;
      for (int64_t p = 0; p < n_shards; ++p) {
        order.start[p] = acc;
        acc += windows_[order.shard_at[p]];
      }
      order.recent.clear();
    }
    // Last position whose start <= j (empty shards share a start with their successor).
    const int64_t p = std::upper_bound(order.start.begin(), order.start.end(), j) - order.start.begin() - 1;
    shard = order.shard_at[p];
    window = j - order.start[p];
    LATHE_ASSERT(window < windows_[shard]);
    if (opts_.shuffle) {
      auto it = std::find_if(order.recent.begin(), order.recent.end(),
                             [&](const ShardOrder::WindowPerm& w) { return w.shard == shard; });
      std::shared_ptr<const std::vector<uint32_t>> perm;
      if (it != order.recent.end()) {
        perm = it->perm;
        order.recent.erase(it);
      } else {
        auto v = std::make_shared<std::vector<uint32_t>>(windows_[shard]);
        for (int64_t w = 0; w < windows_[shard]; ++w) (*v)[w] = static_cast<uint32_t>(w);
        shuffle_with_key(*v, derive_key(derive_key(opts_.seed, static_cast<uint64_t>(epoch)), 1000003ull + shard));
        perm = std::move(v);
      }
      order.recent.push_back({shard, perm});
      if (order.recent.size() > 4) order.recent.erase(order.recent.begin());
      window = (*perm)[window];
    }
  }
  shards_[shard].read(window * opts_.seq_len, opts_.seq_len + 1, out, opts_.vocab_limit);
}

Batch DataLoader::batch_at(int64_t cursor, int64_t n_global, int rank, int world) const {
  LATHE_CHECK_ARG(cursor >= 0 && n_global > 0 && world > 0 && rank >= 0 && rank < world,
                  "data loader: bad batch request (cursor ", cursor, ", samples ", n_global, ", rank ", rank, "/",
                  world, ")");
  const int64_t T = opts_.seq_len;
  Batch b;
  b.seq_len = T;
  for (int64_t k = cursor; k < cursor + n_global; ++k)
    if (k % world == rank) ++b.batch;
  b.inputs.resize(b.batch * T);
  b.targets.resize(b.batch * T);
  if (opts_.delimiter_id >= 0) {
    b.positions.resize(b.batch * T);
    b.segments.resize(b.batch * T);
  }
  std::vector<int32_t> row(T + 1);
  int64_t r = 0;
  for (int64_t k = cursor; k < cursor + n_global; ++k) {
    if (k % world != rank) continue;
    sample_tokens(k, row.data());
    std::copy(row.begin(), row.begin() + T, b.inputs.begin() + r * T);
    std::copy(row.begin() + 1, row.end(), b.targets.begin() + r * T);
    if (opts_.delimiter_id >= 0) {
      // A delimiter opens a document: it starts a new segment at position 0. The row's first, partial
      // document counts positions from the row start.
      int32_t seg = 0, pos = 0;
      for (int64_t t = 0; t < T; ++t) {
        if (row[t] == opts_.delimiter_id && t > 0) {
          ++seg;
          pos = 0;
        }
        b.segments[r * T + t] = seg;
        b.positions[r * T + t] = pos++;
      }
    }
    ++r;
  }
  return b;
}

Batch DataLoader::next(int64_t n_global, int rank, int world) {
  Batch out;
  if (pending_.result.valid() && pending_.cursor == cursor_ && pending_.n_global == n_global &&
      pending_.rank == rank && pending_.world == world) {
    out = pending_.result.get();
  } else {
    if (pending_.result.valid()) pending_.result.wait();
    out = batch_at(cursor_, n_global, rank, world);
  }
  cursor_ += n_global;
  // Prepare the following batch while the caller trains on this one.
  pending_.cursor = cursor_;
  pending_.n_global = n_global;
  pending_.rank = rank;
  pending_.world = world;
  pending_.result = std::async(std::launch::async, [this, c = cursor_, n_global, rank, world] {
    return batch_at(c, n_global, rank, world);
  });
  return out;
}

void DataLoader::seek(int64_t cursor) {
  LATHE_CHECK_ARG(cursor >= 0, "data loader: negative cursor ", cursor);
  cursor_ = cursor;
}

}  // namespace lathe::train
