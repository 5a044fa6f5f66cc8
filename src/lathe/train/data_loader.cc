#include "lathe/train/data_loader.h"

#include <algorithm>
#include <filesystem>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/file_read.h"

namespace lathe::train {

namespace fs = std::filesystem;

namespace {

// Every "<prefix>*_<split>_*.bin" of the folder or name prefix `data`, sorted.
std::vector<std::string> glob_shards(const std::string& data, const std::string& split) {
  // "data/run" is either a folder holding the shards or a name prefix inside a folder.
  fs::path dir = data;
  std::string prefix;
  if (!fs::is_directory(dir)) {
    prefix = dir.filename().string();
    dir = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  }
  std::vector<std::string> paths;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    const std::string tag = "_" + split + "_";
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(".bin") || name.find(tag) == std::string::npos || name.rfind(prefix, 0) != 0) continue;
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// A path recorded in a manifest, resolved for this process. Format 2: relative to the manifest's folder.
// Earlier manifests recorded the tokenizer and inputs as given to `data prepare`, relative to the folder
// it ran in: taken as they are when they exist from here, else tried relative to the manifest.
std::string resolve_recorded(const std::string& p, const fs::path& manifest_dir, int format) {
  std::error_code ec;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  const fs::path beside = manifest_dir / p;
  if (format < kManifestFormat && fs::exists(p, ec) && !fs::exists(beside, ec))
    return fs::weakly_canonical(fs::absolute(p)).string();
  return fs::weakly_canonical(fs::absolute(beside)).string();
}


// An integer of the manifest `path` in [lo, hi] (hi >= 0), else FormatError naming the manifest and the key.
int64_t manifest_int(const nlohmann::json& v, const std::string& path, const std::string& key, int64_t lo, int64_t hi) {
  bool ok = v.is_number_integer();
  if (ok && v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();  // may exceed INT64_MAX
    ok = u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  } else if (ok) {
    ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  }
  LATHE_CHECK_FORMAT(ok, path, ": \"", key, "\" must be an integer from ", lo, " to ", hi, ", got ", json_for_message(v),
                     " (re-run `lathe data prepare`)");
  return v.get<int64_t>();
}

// Checks the type and range of every number and string a manifest of `lathe data prepare` records, so that
// callers can read them typed; FormatError naming the manifest and the key.
void check_manifest_values(const nlohmann::json& m, const std::string& path) {
  const auto get = [&](const nlohmann::json& obj, const char* key) -> const nlohmann::json* {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  };
  int64_t vocab = 0;
  if (const auto* v = get(m, "vocab_size")) vocab = manifest_int(*v, path, "vocab_size", 1, int64_t{1} << 32);
  if (const auto* v = get(m, "token_bytes")) {
    const int64_t width = manifest_int(*v, path, "token_bytes", 2, 4);
    LATHE_CHECK_FORMAT(width != 3, path, ": \"token_bytes\" must be 2 or 4, got 3 (re-run `lathe data prepare`)");
    LATHE_CHECK_FORMAT(width == 4 || vocab <= 65536, path, ": \"token_bytes\" 2 cannot hold the ids of \"vocab_size\" ",
                       vocab, " (re-run `lathe data prepare`)");
  }
  if (const auto* v = get(m, "delimiter_id"))
    manifest_int(*v, path, "delimiter_id", 0, vocab > 0 ? std::min<int64_t>(vocab - 1, INT32_MAX) : INT32_MAX);
  if (const auto* v = get(m, "delimiter"))
    LATHE_CHECK_FORMAT(v->is_string(), path, ": \"delimiter\" must be a string (a token), got ", json_for_message(*v));
  if (const auto* v = get(m, "seed"))
    LATHE_CHECK_FORMAT(v->is_number_unsigned(), path, ": \"seed\" must be an integer >= 0, got ", json_for_message(*v));
  if (const auto* v = get(m, "val_fraction"))
    LATHE_CHECK_FORMAT(v->is_number() && v->get<double>() >= 0 && v->get<double>() < 1, path,
                       ": \"val_fraction\" must be a number in [0, 1), got ", json_for_message(*v));
  if (const auto* v = get(m, "inputs"))
    LATHE_CHECK_FORMAT(v->is_array(), path, ": \"inputs\" must be a list of paths, got ", json_for_message(*v));
  for (const char* split : {"train", "val"}) {
    const auto* s = get(m, split);
    if (!s || !s->is_object()) continue;  // read_manifest names a split that is not an object
    for (const char* key : {"documents", "tokens"})
      if (const auto* v = get(*s, key)) manifest_int(*v, path, str_cat(split, ".", key), 0, INT64_MAX);
    if (const auto* v = get(*s, "shard_tokens"); v && v->is_array())
      for (size_t i = 0; i < v->size(); ++i)
        manifest_int((*v)[i], path, str_cat(split, ".shard_tokens[", i, "]"), 0, INT32_MAX);
  }
}

}  // namespace

bool is_data_manifest(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  for (const char* split : {"train", "val"}) {
    const auto it = j.find(split);
    if (it != j.end() && it->is_object() && it->contains("shards") && (*it)["shards"].is_array()) return true;
  }
  return false;
}

std::optional<std::string> find_manifest(const std::string& data) {
  const fs::path p = data;
  std::error_code ec;
  // A NAME.json that is not a regular file (a FIFO, a folder) is still taken as the manifest, so reading it
  // fails naming what it is rather than falling back to every shard of the folder.
  if (p.extension() == ".json" && fs::exists(p, ec)) return data;
  if (fs::is_directory(p, ec)) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(p)) {
      const std::string name = e.path().filename().string();
      if (!name.ends_with(".json")) continue;
      const std::string stem = name.substr(0, name.size() - 5);
      if (!glob_shards((p / stem).string(), "train").empty() || !glob_shards((p / stem).string(), "val").empty())
        found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    if (found.size() > 1) {
      std::string list;
      for (const auto& f : found) list += (list.empty() ? "" : ", ") + f;
      throw InvalidArgument(str_cat(data, " holds more than one preparation (", list,
                                    "): name one as DIR/NAME, e.g. ", (p / fs::path(found[0]).stem()).string()));
    }
    if (found.size() == 1) return found[0];
    return std::nullopt;
  }
  const std::string beside = data + ".json";
  if (fs::exists(beside, ec)) return beside;
  return std::nullopt;
}

nlohmann::json read_manifest(const std::string& data) {
  const std::optional<std::string> path = find_manifest(data);
  if (!path) return nullptr;
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_file(*path));  // a FIFO, folder or device: an IoError naming it
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(str_cat(*path, ": not a data manifest (invalid JSON: ", e.what(), ")"));
  }
  LATHE_CHECK_FORMAT(m.is_object(), *path, ": not a data manifest (expected a JSON object from `lathe data prepare`)");
  const int format = m.contains("format") ? static_cast<int>(manifest_int(m["format"], *path, "format", 1, INT32_MAX)) : 1;
  LATHE_CHECK_FORMAT(format <= kManifestFormat, *path, ": manifest format ", format, " is newer than this lathe reads (",
                     kManifestFormat, ")");
  check_manifest_values(m, *path);
  const fs::path dir = fs::path(*path).parent_path();
  const auto check_string = [&](const nlohmann::json& v, const std::string& key) {
    LATHE_CHECK_FORMAT(v.is_string(), *path, ": \"", key, "\" must be a string (path)");
  };
  if (m.contains("tokenizer")) {
    check_string(m["tokenizer"], "tokenizer");
    m["tokenizer_as_recorded"] = m["tokenizer"];
    m["tokenizer"] = resolve_recorded(m["tokenizer"].get<std::string>(), dir, format);
  }
  if (m.contains("inputs") && m["inputs"].is_array())
    for (auto& in : m["inputs"]) {
      check_string(in, "inputs");
      in = resolve_recorded(in.get<std::string>(), dir, format);
    }
  for (const char* split : {"train", "val"}) {
    if (!m.contains(split)) continue;
    nlohmann::json& s = m[split];
    LATHE_CHECK_FORMAT(s.is_object() && s.contains("shards") && s["shards"].is_array(), *path, ": \"", split,
                       "\" must be an object with a \"shards\" list");
    for (auto& shard : s["shards"]) {
      check_string(shard, str_cat(split, ".shards"));
      shard = (dir / shard.get<std::string>()).string();  // file names beside the manifest, in both formats
    }
    if (s.contains("shard_tokens"))
      LATHE_CHECK_FORMAT(s["shard_tokens"].is_array() && s["shard_tokens"].size() == s["shards"].size(), *path, ": \"",
                         split, ".shard_tokens\" must list one count per shard");
  }
  m["path"] = *path;
  return m;
}

std::string manifest_tokenizer(const nlohmann::json& m) {
  if (!m.is_object() || !m.contains("tokenizer")) return "";
  const std::string tok = m["tokenizer"].get<std::string>();
  std::error_code ec;
  if (!fs::exists(tok, ec))
    throw IoError(str_cat(
        m["path"].get<std::string>(), ": the tokenizer recorded as ", m["tokenizer_as_recorded"].get<std::string>(),
        " (looked for at ", tok, ") does not exist; checkpoints carry a copy of it and the samples decode with it",
        m.contains("format") ? "" : " (manifests before format 2 record it relative to the folder `data prepare` ran in)",
        "; re-run `lathe data prepare`"));
  return tok;
}

std::vector<std::string> find_shards(const std::string& data, const std::string& split,
                                     const std::function<void(const std::string&)>& note) {
  const nlohmann::json m = read_manifest(data);
  if (m.is_null()) {
    std::vector<std::string> paths = glob_shards(data, split);
    if (paths.empty())
      throw IoError(str_cat("no ", split, " token shards (*_", split, "_*.bin) in ", data,
                            " (create them with `lathe data prepare`)"));
    if (note)
      note(str_cat("note: no data manifest (NAME.json from `lathe data prepare`) for ", data, ": reading every *_",
                   split, "_*.bin there (", paths.size(), " shards)"));
    return paths;
  }
  const std::string path = m["path"].get<std::string>();
  LATHE_CHECK_FORMAT(m.contains(split), path, ": no \"", split, "\" split in the data manifest");
  const nlohmann::json& s = m[split];
  std::vector<std::string> paths = s["shards"].get<std::vector<std::string>>();
  if (paths.empty())
    throw IoError(str_cat(path, ": the data manifest lists no ", split, " shards (", split == "val" ? "val_fraction 0, or too few documents?" : "too few documents?", ")"));
  const int width = m.contains("token_bytes") ? m["token_bytes"].get<int>() : 0;  // read_manifest: 2 or 4
  int64_t total = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::error_code ec;
    if (!fs::exists(paths[i], ec))
      throw IoError(str_cat(path, ": lists the ", split, " shard ", paths[i], ", which is missing (re-run `lathe data prepare`)"));
    const TokenShard shard = TokenShard::open(paths[i]);
    total += shard.size();
    if (s.contains("shard_tokens")) {
      const int64_t want = s["shard_tokens"][i].get<int64_t>();  // read_manifest: an integer >= 0
      LATHE_CHECK_FORMAT(shard.size() == want, paths[i], ": holds ", shard.size(), " tokens, but the manifest ", path,
                         " records ", s["shard_tokens"][i].dump(), " (re-run `lathe data prepare`)");
    }
    LATHE_CHECK_FORMAT(width == 0 || shard.width() == width, paths[i], ": ", shard.width(),
                       "-byte tokens, but the manifest ", path, " records token_bytes ", width);
  }
  if (s.contains("tokens"))
    LATHE_CHECK_FORMAT(total == s["tokens"].get<int64_t>(), path, ": records ", s["tokens"].get<int64_t>(), " ", split,
                       " tokens, but its shards hold ", total, " (re-run `lathe data prepare`)");
  return paths;
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
