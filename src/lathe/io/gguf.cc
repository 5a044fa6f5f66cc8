#include "lathe/io/gguf.h"

#include <cstring>
#include <limits>

#include "lathe/base/error.h"

namespace lathe {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
// Bounds against absurd counts before anything is reserved (the file size bounds them again as read).
constexpr uint64_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr uint64_t kMaxNesting = 8;

struct TypeInfo {
  const char* name;
  size_t size;  // of a scalar (0: string / array)
};
constexpr TypeInfo kTypes[] = {{"UINT8", 1},  {"INT8", 1},  {"UINT16", 2}, {"INT16", 2}, {"UINT32", 4},
                               {"INT32", 4},  {"FLOAT32", 4}, {"BOOL", 1}, {"STRING", 0}, {"ARRAY", 0},
                               {"UINT64", 8}, {"INT64", 8}, {"FLOAT64", 8}};
static_assert(std::size(kTypes) == static_cast<size_t>(GgufType::kCount));

// A bounds-checked little-endian cursor over the file image; `what` names the field being read.
class Cursor {
 public:
  Cursor(const char* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}
  size_t pos() const { return pos_; }
  void need(uint64_t n, const std::string& what) const {
    LATHE_CHECK_FORMAT(n <= size_ - pos_, path_, ": truncated GGUF file: ", what, " needs ", n, " bytes at offset ",
                       pos_, " but the file has ", size_, " bytes");
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (length)");
    need(n, what);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

GgufType read_type(Cursor& c, const std::string& what, const std::string& path) {
  const uint32_t t = c.read<uint32_t>(what);
  LATHE_CHECK_FORMAT(t < static_cast<uint32_t>(GgufType::kCount), path, ": ", what, " is ", t,
                     ", not a GGUF value type (0..12)");
  return static_cast<GgufType>(t);
}

bool integer_type(GgufType t) { return t <= GgufType::kI32 || t == GgufType::kBool || t == GgufType::kU64 || t == GgufType::kI64; }

// One integer / bool scalar of type t as int64 (a u64 above INT64_MAX is a FormatError).
int64_t read_integer(Cursor& c, GgufType t, const std::string& what, const std::string& path) {
  switch (t) {
    case GgufType::kU8: return c.read<uint8_t>(what);
    case GgufType::kI8: return c.read<int8_t>(what);
    case GgufType::kU16: return c.read<uint16_t>(what);
    case GgufType::kI16: return c.read<int16_t>(what);
    case GgufType::kU32: return c.read<uint32_t>(what);
    case GgufType::kI32: return c.read<int32_t>(what);
    case GgufType::kI64: return c.read<int64_t>(what);
    case GgufType::kBool: {
      const uint8_t b = c.read<uint8_t>(what);
      LATHE_CHECK_FORMAT(b <= 1, path, ": ", what, " is a BOOL of value ", int{b}, " (0 or 1)");
      return b;
    }
    case GgufType::kU64: {
      const uint64_t v = c.read<uint64_t>(what);
      LATHE_CHECK_FORMAT(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), path, ": ", what,
                         " is a UINT64 too large to read (", v, ")");
      return static_cast<int64_t>(v);
    }
    default: LATHE_ASSERT(false, "not an integer type");
  }
  return 0;
}

double read_float(Cursor& c, GgufType t, const std::string& what) {
  return t == GgufType::kF32 ? double{c.read<float>(what)} : c.read<double>(what);
}

GgufValue read_value(Cursor& c, GgufType t, const std::string& what, const std::string& path, uint64_t depth) {
  GgufValue v;
  v.type = t;
  if (integer_type(t)) {
    v.i = read_integer(c, t, what, path);
  } else if (t == GgufType::kF32 || t == GgufType::kF64) {
    v.f = read_float(c, t, what);
  } else if (t == GgufType::kString) {
    v.s = c.string(what);
  } else {  // array
    LATHE_CHECK_FORMAT(depth < kMaxNesting, path, ": ", what, " nests arrays more than ", kMaxNesting, " deep");
    v.elem = read_type(c, what + " (element type)", path);
    const uint64_t n = c.read<uint64_t>(what + " (count)");
    const size_t elem_size = kTypes[static_cast<size_t>(v.elem)].size;
    // A scalar element takes its size, a string or array at least its 8-byte length: bounds n by the
    // file before anything is reserved (n <= size first, so the product cannot overflow).
    c.need(n, what + " (elements)");
    c.need(n * (elem_size ? elem_size : 8), what + " (elements)");
    if (integer_type(v.elem)) {
      v.ints.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.ints.push_back(read_integer(c, v.elem, what, path));
    } else if (v.elem == GgufType::kF32 || v.elem == GgufType::kF64) {
      v.floats.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.floats.push_back(read_float(c, v.elem, what));
    } else if (v.elem == GgufType::kString) {
      v.strings.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.strings.push_back(c.string(what + "[" + std::to_string(k) + "]"));
    } else {
      for (uint64_t k = 0; k < n; ++k)
        v.items.push_back(read_value(c, v.elem, what + "[" + std::to_string(k) + "]", path, depth + 1));
    }
  }
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  return t < GgufType::kCount ? kTypes[static_cast<size_t>(t)].name : "?";
}

bool GgufValue::is_integer() const { return type != GgufType::kArray && integer_type(type); }

size_t GgufValue::array_size() const {
  if (type != GgufType::kArray) return 0;
  return ints.size() + floats.size() + strings.size() + items.size();
}

std::string ggml_type_name(GgmlType t) {
  static const std::map<uint32_t, const char*> kNames = {
      {0, "F32"},      {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {6, "Q5_0"},     {7, "Q5_1"},
      {8, "Q8_0"},     {9, "Q8_1"},    {10, "Q2_K"},   {11, "Q3_K"},   {12, "Q4_K"},    {13, "Q5_K"},
      {14, "Q6_K"},    {15, "Q8_K"},   {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
      {20, "IQ4_NL"},  {21, "IQ3_S"},  {22, "IQ2_S"},  {23, "IQ4_XS"}, {24, "I8"},      {25, "I16"},
      {26, "I32"},     {27, "I64"},    {28, "F64"},    {29, "IQ1_M"},  {30, "BF16"},    {34, "TQ1_0"},
      {35, "TQ2_0"},   {39, "MXFP4"}};
  const auto it = kNames.find(static_cast<uint32_t>(t));
  return it != kNames.end() ? it->second : "type " + std::to_string(static_cast<uint32_t>(t));
}

GgmlBlock ggml_block(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: case GgmlType::kI32: return {1, 4};
    case GgmlType::kF16: case GgmlType::kBF16: case GgmlType::kI16: return {1, 2};
    case GgmlType::kI8: return {1, 1};
    case GgmlType::kI64: case GgmlType::kF64: return {1, 8};
    case GgmlType::kQ4_0: case GgmlType::kIQ4_NL: return {32, 18};
    case GgmlType::kQ4_1: return {32, 20};
    case GgmlType::kQ5_0: return {32, 22};
    case GgmlType::kQ5_1: return {32, 24};
    case GgmlType::kQ8_0: return {32, 34};
    case GgmlType::kQ8_1: return {32, 36};
    case GgmlType::kMXFP4: return {32, 17};
    case GgmlType::kQ2_K: return {256, 84};
    case GgmlType::kQ3_K: case GgmlType::kIQ3_S: return {256, 110};
    case GgmlType::kQ4_K: return {256, 144};
    case GgmlType::kQ5_K: return {256, 176};
    case GgmlType::kQ6_K: return {256, 210};
    case GgmlType::kQ8_K: return {256, 292};
    case GgmlType::kIQ2_XXS: case GgmlType::kTQ2_0: return {256, 66};
    case GgmlType::kIQ2_XS: return {256, 74};
    case GgmlType::kIQ3_XXS: return {256, 98};
    case GgmlType::kIQ1_S: return {256, 50};
    case GgmlType::kIQ2_S: return {256, 82};
    case GgmlType::kIQ4_XS: return {256, 136};
    case GgmlType::kIQ1_M: return {256, 56};
    case GgmlType::kTQ1_0: return {256, 54};
  }
  return {0, 0};
}

std::optional<DType> ggml_dense_dtype(GgmlType t) {
  if (t == GgmlType::kF32) return DType::kF32;
  if (t == GgmlType::kF16) return DType::kF16;
  if (t == GgmlType::kBF16) return DType::kBF16;
  return std::nullopt;
}

GgufFile GgufFile::open(const std::string& path) {
  MappedFile f = MappedFile::open(path);
  GgufFile g = parse(f.data, f.size, path, f.owner);
  g.file_ = std::move(f);
  return g;
}

GgufFile GgufFile::parse(const char* data, size_t size, const std::string& path, std::shared_ptr<void> owner) {
  GgufFile g;
  g.path_ = path;
  g.data_ = data;
  g.size_ = size;
  g.owner_ = std::move(owner);
  Cursor c(data, size, path);
  LATHE_CHECK_FORMAT(size >= 4 && c.read<uint32_t>("magic") == kMagic, path, ": not a GGUF file (no \"GGUF\" magic)");
  g.version_ = c.read<uint32_t>("version");
  LATHE_CHECK_FORMAT(g.version_ == 2 || g.version_ == 3, path, ": GGUF version ", g.version_,
                     " is not supported (lathe reads versions 2 and 3)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key/value takes at least 12 bytes, a tensor info at least 24: bound the counts by the file first.
  c.need(n_kv, "metadata (" + std::to_string(n_kv) + " key/values)");
  c.need(n_kv * 12, "metadata (" + std::to_string(n_kv) + " key/values)");
  c.need(n_tensors, "tensor infos (" + std::to_string(n_tensors) + ")");
  c.need(n_tensors * 24, "tensor infos (" + std::to_string(n_tensors) + ")");
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = c.string("metadata key " + std::to_string(k));
    const GgufType t = read_type(c, "type of metadata '" + key + "'", path);
    GgufValue v = read_value(c, t, "metadata '" + key + "'", path, 0);
    LATHE_CHECK_FORMAT(g.metadata_.count(key) == 0, path, ": metadata key '", key, "' appears twice");
    g.key_order_.push_back(key);
    g.metadata_.emplace(key, std::move(v));
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    LATHE_CHECK_FORMAT(a->is_integer() && a->i > 0 && a->i <= (1 << 30) && (a->i & (a->i - 1)) == 0, path,
                       ": general.alignment must be a power of two, got ",
                       a->is_integer() ? std::to_string(a->i) : gguf_type_name(a->type));
    g.alignment_ = static_cast<size_t>(a->i);
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.string("name of tensor " + std::to_string(k));
    const std::string what = "tensor '" + t.name + "'";
    const uint32_t n_dims = c.read<uint32_t>(what + " (dimension count)");
    LATHE_CHECK_FORMAT(n_dims >= 1 && n_dims <= kMaxDims, path, ": ", what, " has ", n_dims,
                       " dimensions (1 to 4)");
    std::vector<int64_t> dims(n_dims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.read<uint64_t>(what + " (dimension)");
      LATHE_CHECK_FORMAT(n <= (uint64_t{1} << 40) && (n == 0 || numel <= std::numeric_limits<int64_t>::max() /
                                                                              static_cast<int64_t>(n)),
                         path, ": ", what, " has an absurd dimension ", n);
      dims[d] = static_cast<int64_t>(n);
      numel *= dims[d];
    }
    t.shape.assign(dims.rbegin(), dims.rend());
    t.type = static_cast<GgmlType>(c.read<uint32_t>(what + " (type)"));
    const GgmlBlock blk = ggml_block(t.type);
    LATHE_CHECK_FORMAT(blk.elems > 0, path, ": ", what, " has unknown ggml type ", static_cast<uint32_t>(t.type));
    LATHE_CHECK_FORMAT(dims[0] % blk.elems == 0, path, ": ", what, " of type ", ggml_type_name(t.type),
                       " has rows of ", dims[0], " elements, not a multiple of its block of ", blk.elems);
    // Bounded by the file before the product (a lying dimension must not wrap the byte count).
    LATHE_CHECK_FORMAT(numel / blk.elems <= static_cast<int64_t>(size / static_cast<size_t>(blk.bytes)), path,
                       ": truncated GGUF file: ", what, " (", ggml_type_name(t.type), ", ", numel,
                       " elements) is larger than the file (", size, " bytes)");
    t.nbytes = static_cast<size_t>(numel / blk.elems * blk.bytes);
    t.offset = c.read<uint64_t>(what + " (offset)");
    LATHE_CHECK_FORMAT(t.offset % g.alignment_ == 0, path, ": ", what, " starts at data offset ", t.offset,
                       ", not a multiple of the alignment ", g.alignment_);
    LATHE_CHECK_FORMAT(g.index_.count(t.name) == 0, path, ": tensor '", t.name, "' appears twice");
    g.index_[t.name] = g.tensors_.size();
    g.tensors_.push_back(std::move(t));
  }
  g.data_offset_ = (c.pos() + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  LATHE_CHECK_FORMAT(g.data_offset_ <= size || g.tensors_.empty(), path,
                     ": truncated GGUF file: the data section starts at ", g.data_offset_, " past its end ", size);
  const size_t data_size = size - std::min(size, g.data_offset_);
  for (const GgufTensorInfo& t : g.tensors_)
    LATHE_CHECK_FORMAT(t.offset <= data_size && t.nbytes <= data_size - t.offset, path,
                       ": truncated GGUF file: tensor '", t.name, "' (", ggml_type_name(t.type), " ",
                       shape_str(t.shape), ", ", t.nbytes, " bytes at data offset ", t.offset,
                       ") ends past the data section's ", data_size, " bytes");
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
const GgufValue& require(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  LATHE_CHECK_FORMAT(v, g.path(), ": no metadata key '", key, "'");
  return *v;
}
[[noreturn]] void wrong_type(const GgufFile& g, const std::string& key, const GgufValue& v, const char* expected) {
  throw FormatError(str_cat(g.path(), ": metadata '", key, "' is ", gguf_type_name(v.type), ", expected ", expected));
}
}  // namespace

int64_t GgufFile::integer(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (!v.is_integer()) wrong_type(*this, key, v, "an integer");
  return v.i;
}
int64_t GgufFile::integer_or(const std::string& key, int64_t fallback) const {
  return find(key) ? integer(key) : fallback;
}
double GgufFile::number(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (v.is_float()) return v.f;
  if (v.is_integer()) return static_cast<double>(v.i);
  wrong_type(*this, key, v, "a number");
}
double GgufFile::number_or(const std::string& key, double fallback) const { return find(key) ? number(key) : fallback; }
std::string GgufFile::string(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufType::kString) wrong_type(*this, key, v, "a STRING");
  return v.s;
}
std::string GgufFile::string_or(const std::string& key, const std::string& fallback) const {
  return find(key) ? string(key) : fallback;
}
bool GgufFile::boolean_or(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (!v->is_integer()) wrong_type(*this, key, *v, "a BOOL");
  return v->i != 0;
}

const GgufTensorInfo& GgufFile::tensor_info(const std::string& name) const {
  const auto it = index_.find(name);
  LATHE_CHECK_FORMAT(it != index_.end(), path_, ": no tensor '", name, "'");
  return tensors_[it->second];
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& t = tensor_info(name);
  const std::optional<DType> dt = ggml_dense_dtype(t.type);
  if (!dt)
    throw NotImplemented(str_cat(path_, ": tensor '", name, "' has type ", ggml_type_name(t.type),
                                 ", which is not a dense type (F32, F16, BF16)"));
  const char* p = tensor_data(t);
  if (owner_ && reinterpret_cast<uintptr_t>(p) % dtype_size(*dt) == 0) {
    auto st = std::make_shared<Storage>();
    st->data = const_cast<char*>(p);
    st->nbytes = t.nbytes;
    st->read_only = true;
    st->owner = owner_;
    return Tensor::from_storage(std::move(st), t.shape, *dt);
  }
  Tensor out = Tensor::empty(t.shape, *dt);
  if (t.nbytes) std::memcpy(out.raw_data(), p, t.nbytes);
  return out;
}

}  // namespace lathe
