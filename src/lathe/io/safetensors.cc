#include "lathe/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"

namespace lathe {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference library's own limit

uint64_t read_le_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  MappedFile mf = MappedFile::open(path);
  SafetensorsFile f = parse(mf.data, mf.size, path);
  f.file_ = std::move(mf);
  return f;
}

SafetensorsFile SafetensorsFile::parse(const char* data, size_t size, const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  LATHE_CHECK_FORMAT(size >= 8, path, ": not a safetensors file: ", size, " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_le_u64(data);
  LATHE_CHECK_FORMAT(n <= kMaxHeaderBytes, path, ": header length ", n, " exceeds the 100 MB limit (corrupt file?)");
  LATHE_CHECK_FORMAT(n <= size - 8, path, ": truncated: header claims ", n, " bytes but the file has ", size - 8,
                     " after the length field");
  f.data_begin_ = data + 8 + n;
  f.data_size_ = size - 8 - n;
  json header;
  try {
    header = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    throw FormatError(str_cat(path, ": header is not valid JSON: ", e.what()));
  }
  LATHE_CHECK_FORMAT(header.is_object(), path, ": header is not a JSON object");
  try {
    parse_entries(f, header, path);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type
    throw FormatError(str_cat(path, ": malformed header: ", e.what()));
  }
  return f;
}

void SafetensorsFile::parse_entries(SafetensorsFile& f, const nlohmann::json& header, const std::string& path) {
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      LATHE_CHECK_FORMAT(v.is_object(), path, ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        LATHE_CHECK_FORMAT(m.value().is_string(), path, ": __metadata__ value of '", m.key(), "' is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    LATHE_CHECK_FORMAT(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                       path, ": tensor '", name, "': entry needs dtype, shape and data_offsets");
    SafetensorsEntry e;
    e.name = name;
    LATHE_CHECK_FORMAT(v["dtype"].is_string(), path, ": tensor '", name, "': dtype is not a string");
    const std::string dt = v["dtype"].get<std::string>();
    if (!dtype_from_safetensors_name(dt, &e.dtype))
      throw NotImplemented(str_cat(path, ": tensor '", name, "': unsupported dtype ", dt,
                                   " (supported: F32, BF16, F16, I32, I64, I8, U8, BOOL)"));
    LATHE_CHECK_FORMAT(v["shape"].is_array(), path, ": tensor '", name, "': shape is not an array");
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      LATHE_CHECK_FORMAT(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), path,
                         ": tensor '", name, "': shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      LATHE_CHECK_FORMAT(dim == 0 || numel <= std::numeric_limits<uint64_t>::max() / 16 / dim, path, ": tensor '",
                         name, "': shape overflows");
      numel *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    const json& off = v["data_offsets"];
    LATHE_CHECK_FORMAT(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
                       path, ": tensor '", name, "': data_offsets must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    LATHE_CHECK_FORMAT(e.begin <= e.end && e.end <= f.data_size_, path, ": tensor '", name, "': data_offsets [",
                       e.begin, ", ", e.end, ") lie outside the ", f.data_size_, "-byte data section (truncated file?)");
    LATHE_CHECK_FORMAT(e.end - e.begin == numel * dtype_size(e.dtype), path, ": tensor '", name, "': shape ",
                       shape_str(e.shape), " of ", dt, " needs ", numel * dtype_size(e.dtype), " bytes but data_offsets span ",
                       e.end - e.begin);
    f.entries_.push_back(std::move(e));
  }
  std::sort(f.entries_.begin(), f.entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < f.entries_.size(); ++i) {
    if (i > 0 && f.entries_[i].begin < f.entries_[i - 1].end && f.entries_[i].begin != f.entries_[i].end)
      throw FormatError(str_cat(path, ": tensor '", f.entries_[i].name, "' overlaps tensor '", f.entries_[i - 1].name,
                                "' in the data section"));
    f.index_[f.entries_[i].name] = i;
  }
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  LATHE_CHECK_ARG(it != index_.end(), path_, ": no tensor named '", name, "'");
  return entries_[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const char* p = data_begin_ + e.begin;
  const size_t es = dtype_size(e.dtype);
  if (file_.owner && reinterpret_cast<uintptr_t>(p) % es == 0) {
    auto st = std::make_shared<Storage>();
    st->data = const_cast<char*>(p);
    st->nbytes = e.end - e.begin;
    st->read_only = true;
    st->owner = file_.owner;
    return Tensor::from_storage(std::move(st), e.shape, e.dtype);
  }
  Tensor t = Tensor::empty(e.shape, e.dtype);
  if (t.nbytes()) std::memcpy(t.raw_data(), p, t.nbytes());
  return t;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> sorted = tensors;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    const size_t sa = dtype_size(a.second.dtype()), sb = dtype_size(b.second.dtype());
    return sa != sb ? sa > sb : a.first < b.first;
  });
  for (size_t i = 1; i < sorted.size(); ++i)
    LATHE_CHECK_ARG(sorted[i].first != sorted[i - 1].first, "[save_safetensors] duplicate tensor name '", sorted[i].first, "'");
  // Header: keys in byte order (as serde_json's BTreeMap / Python's sorted dict), compact separators.
  std::map<std::string, json> entries;
  size_t offset = 0;
  for (auto& [name, t] : sorted) {
    json e = json::object();
    e["dtype"] = std::string(dtype_safetensors_name(t.dtype()));
    e["shape"] = t.shape();
    e["data_offsets"] = {offset, offset + t.nbytes()};
    offset += t.nbytes();
    entries[name] = std::move(e);
  }
  std::string header = "{";
  bool first = true;
  auto emit = [&](const std::string& key, const std::string& value_json) {
    header += (first ? "" : ",") + json(key).dump() + ":" + value_json;
    first = false;
  };
  if (!metadata.empty()) emit("__metadata__", json(metadata).dump());
  for (auto& [name, e] : entries)
    emit(name, "{\"dtype\":" + e["dtype"].dump() + ",\"shape\":" + e["shape"].dump() + ",\"data_offsets\":" +
                   e["data_offsets"].dump() + "}");
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  write_file_atomic(path, [&](const std::function<void(const void*, size_t)>& append) {
    char len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    append(len, 8);
    append(header.data(), header.size());
    for (auto& [name, t] : sorted) {
      Tensor c = t.contiguous();
      append(c.raw_data(), c.nbytes());
    }
  });
}

CheckpointReader CheckpointReader::open_dir(const std::string& dir) {
  CheckpointReader r;
  LATHE_CHECK_ARG(fs::is_directory(dir), dir, ": not a directory");
  // A single model.safetensors wins over an index, as in transformers (a folder holding both is usually
  // a re-saved model whose old shards were left behind).
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(fs::symlink_status(single))) {  // also a dangling link: fails naming it
    r.files_.push_back(SafetensorsFile::open(single.string()));
    for (const SafetensorsEntry& e : r.files_[0].entries()) r.where_[e.name] = 0;
    return r;
  }
  std::vector<std::string> index_paths;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string fname = entry.path().filename().string();
    if (fname.size() > 23 && fname.ends_with(".safetensors.index.json")) index_paths.push_back(entry.path().string());
  }
  LATHE_CHECK_ARG(!index_paths.empty(), dir, ": no model.safetensors or *.safetensors.index.json");
  std::sort(index_paths.begin(), index_paths.end());
  const std::string standard = (fs::path(dir) / "model.safetensors.index.json").string();
  if (std::find(index_paths.begin(), index_paths.end(), standard) != index_paths.end()) index_paths = {standard};
  LATHE_CHECK_ARG(index_paths.size() == 1, dir, ": several checkpoint indexes (", index_paths[0], ", ", index_paths[1],
                  "); keep one");
  const std::string& index_path = index_paths[0];
  const json idx = read_json_object_file(index_path);
  LATHE_CHECK_FORMAT(idx.contains("weight_map") && idx["weight_map"].is_object(), index_path, ": no weight_map object");
  std::map<std::string, size_t> file_ids;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    LATHE_CHECK_FORMAT(it.value().is_string(), index_path, ": weight_map entry '", it.key(), "' is not a file name");
    const std::string shard = it.value().get<std::string>();
    LATHE_CHECK_FORMAT(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..",
                       index_path, ": shard name '", shard, "' must be a plain file name");
    if (!file_ids.count(shard)) {
      file_ids[shard] = r.files_.size();
      r.files_.push_back(SafetensorsFile::open((fs::path(dir) / shard).string()));
    }
    const SafetensorsFile& f = r.files_[file_ids[shard]];
    LATHE_CHECK_FORMAT(f.contains(it.key()), index_path, ": tensor '", it.key(), "' is mapped to ", shard,
                       " which does not contain it");
    r.where_[it.key()] = file_ids[shard];
  }
  return r;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : where_) out.push_back(n);
  return out;
}

Tensor CheckpointReader::tensor(const std::string& name) const {
  auto it = where_.find(name);
  LATHE_CHECK_ARG(it != where_.end(), "checkpoint has no tensor named '", name, "'");
  return files_[it->second].tensor(name);
}

const SafetensorsEntry& CheckpointReader::entry(const std::string& name) const {
  auto it = where_.find(name);
  LATHE_CHECK_ARG(it != where_.end(), "checkpoint has no tensor named '", name, "'");
  return files_[it->second].entry(name);
}

const std::string& CheckpointReader::file_of(const std::string& name) const {
  auto it = where_.find(name);
  LATHE_CHECK_ARG(it != where_.end(), "checkpoint has no tensor named '", name, "'");
  return files_[it->second].path();
}

}  // namespace lathe
