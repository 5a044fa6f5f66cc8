// GGUF reading (llama.cpp's single-file model format, versions 2 and 3), zero-copy over a memory map.
// Layout (ggml/docs/gguf.md): "GGUF", u32 version, u64 tensor count, u64 key/value count, the key/values
// (string key, u32 type, value; arrays are u32 element type, u64 count, elements), the tensor infos
// (string name, u32 n_dims, u64 dims innermost first, u32 ggml type, u64 offset into the data section),
// padding to general.alignment (default 32), then the data. Strings are u64 length + bytes, all little
// endian. Every count, length and offset is checked against the file size before it is used, so a
// truncated or lying file fails with a FormatError naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lathe/io/mapped_file.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

// Metadata value types (gguf_type).
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12, kCount
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars: integers (and bools) in `i` (a u64 above INT64_MAX is refused), floats in
// `f`, strings in `s`. Arrays: element type in `elem`; integer / bool elements in `ints`, float elements in
// `floats`, string elements in `strings`, nested arrays in `items`.
struct GgufValue {
  GgufType type = GgufType::kU32;
  GgufType elem = GgufType::kU8;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<GgufValue> items;
  bool is_integer() const;  // an integer or bool scalar
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
  size_t array_size() const;  // elements of an array (0 for a scalar)
};

// ggml tensor types (ggml.h's ggml_type); only some are read (gguf_tensor_supported).
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39
};
// "F32", "Q4_0", "Q6_K", ... ("type 31" for a number ggml does not define).
std::string ggml_type_name(GgmlType t);
// Elements per block and bytes per block (0, 0 for a type ggml does not define).
struct GgmlBlock {
  int64_t elems = 0;
  int64_t bytes = 0;
};
GgmlBlock ggml_block(GgmlType t);
// Block sizes of the two quantised types lathe imports: f16 d, then 32 int8 codes / 16 bytes of nibbles.
inline constexpr int64_t kQ8_0BlockBytes = 34;
inline constexpr int64_t kQ4_0BlockBytes = 18;

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  Shape shape;        // PyTorch order: the reverse of GGUF's dims (dims[0], the row, is the last)
  size_t offset = 0;  // into the data section
  size_t nbytes = 0;
};

class GgufFile {
 public:
  // Throws IoError (unreadable) or FormatError (not GGUF, an unsupported version, truncated, malformed).
  static GgufFile open(const std::string& path);
  // Parses a whole file image in memory (also the fuzz entry point); `owner` keeps the bytes alive for
  // tensors returned by tensor() (null: tensors are copied).
  static GgufFile parse(const char* data, size_t size, const std::string& path_for_errors,
                        std::shared_ptr<void> owner = nullptr);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // of the data section, from the file's start

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<std::string>& keys() const { return key_order_; }  // in file order
  const GgufValue* find(const std::string& key) const;
  // Typed reads; absent: the fallback (or FormatError "<path>: no metadata key 'K'" without one); the
  // wrong type: FormatError naming the key, its type and the expected one.
  int64_t integer(const std::string& key) const;
  int64_t integer_or(const std::string& key, int64_t fallback) const;
  double number(const std::string& key) const;  // an integer or a float
  double number_or(const std::string& key, double fallback) const;
  std::string string(const std::string& key) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const GgufTensorInfo& tensor_info(const std::string& name) const;  // FormatError naming it when absent
  // The tensor's bytes (tensor_info(name).nbytes of them, inside the file).
  const char* tensor_data(const GgufTensorInfo& t) const { return data_ + data_offset_ + t.offset; }
  // An F32 / F16 / BF16 tensor over the mapped bytes (copied when misaligned or not mapped). NotImplemented
  // naming the tensor and its type for any other type.
  Tensor tensor(const std::string& name) const;

 private:
  std::string path_;
  MappedFile file_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<void> owner_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<std::string> key_order_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
};

// Dense dtype of an F32 / F16 / BF16 tensor type, nullopt for every other.
std::optional<DType> ggml_dense_dtype(GgmlType t);

}  // namespace lathe
