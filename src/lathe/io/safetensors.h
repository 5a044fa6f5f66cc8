// safetensors reading (zero-copy from a memory map) and writing (crash-safe), plus sharded checkpoints
// (model.safetensors.index.json). Format: 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {str: str}}, then the data.
// Every header field is validated against the file size before any tensor byte is touched, so a
// truncated or lying file fails with a FormatError naming the file and the tensor.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lathe/io/mapped_file.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  size_t begin = 0, end = 0;  // byte range inside the data section
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // Parses and validates a header from memory (also the fuzz entry point). `file_size` bounds offsets.
  static SafetensorsFile parse(const char* data, size_t size, const std::string& path_for_errors);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in data-offset order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  // A read-only tensor over the mapped bytes (copied only when the bytes are misaligned for the dtype).
  Tensor tensor(const std::string& name) const;

 private:
  static void parse_entries(SafetensorsFile& f, const nlohmann::json& header, const std::string& path);
  std::string path_;
  MappedFile file_;
  const char* data_begin_ = nullptr;  // start of the data section
  size_t data_size_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any dtype, any layout; written contiguous) in the layout the reference safetensors
// library produces: header keys sorted, data ordered by dtype size (largest first) then name, header
// padded with spaces to a multiple of 8. Crash-safe (write_file_atomic).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// All tensors of a checkpoint folder: model.safetensors when present (it wins over an index, as in
// transformers), else the shards named by model.safetensors.index.json (or the one other file whose name
// ends in .safetensors.index.json).
class CheckpointReader {
 public:
  static CheckpointReader open_dir(const std::string& dir);
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  Tensor tensor(const std::string& name) const;
  const SafetensorsEntry& entry(const std::string& name) const;  // dtype and shape, without touching data
  const std::string& file_of(const std::string& name) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index in files_
};

}  // namespace lathe
