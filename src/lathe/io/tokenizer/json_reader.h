// A small, fast read-only JSON document for tokenizer files. Gemma 3's tokenizer.json is 33 MB (a
// 262k-entry vocab and 515k merges): a general DOM (nlohmann) spends most of the load time allocating
// nodes, so this one stores all nodes in one flat array (preorder, 16 bytes each) and unescapes
// strings in place inside the file buffer (a private copy-on-write mapping of the file), which the
// document owns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::tokenizer {

enum class JsonKind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject, kCount };

class JsonDoc;

// A cheap handle to one value of a JsonDoc (valid while the doc lives).
class JsonRef {
 public:
  JsonRef() = default;
  JsonRef(const JsonDoc* doc, uint32_t index) : doc_(doc), index_(index) {}

  bool valid() const { return doc_ != nullptr; }  // false for a missing member
  JsonKind kind() const;
  bool is_null() const { return !valid() || kind() == JsonKind::kNull; }
  bool is_string() const { return valid() && kind() == JsonKind::kString; }
  bool is_number() const { return valid() && kind() == JsonKind::kNumber; }
  bool is_bool() const { return valid() && kind() == JsonKind::kBool; }
  bool is_array() const { return valid() && kind() == JsonKind::kArray; }
  bool is_object() const { return valid() && kind() == JsonKind::kObject; }

  // Typed accessors throw FormatError naming `what` when the kind does not match.
  std::string_view str(const char* what = "value") const;
  double num(const char* what = "value") const;
  int64_t integer(const char* what = "value") const;
  bool boolean(const char* what = "value") const;

  // Object member lookup (linear; objects in these files are small except the vocab, which is
  // iterated). Returns an invalid ref when absent or when this is not an object.
  JsonRef operator[](std::string_view key) const;
  // Number of elements (array) or members (object).
  uint32_t size() const;

  // Iteration: for arrays, visit(JsonRef element); for objects, visit(string_view key, JsonRef value).
  template <class F>
  void for_each_element(F&& visit) const;
  template <class F>
  void for_each_member(F&& visit) const;

 private:
  const JsonDoc* doc_ = nullptr;
  uint32_t index_ = 0;
};

class JsonDoc {
 public:
  // Parses `text` (the document takes ownership). Throws FormatError with the byte offset on bad JSON.
  static JsonDoc parse(std::string text, const std::string& name = "json");
  static JsonDoc parse_file(const std::string& path);  // IoError when unreadable
  JsonRef root() const { return JsonRef(this, 0); }

  // 16 bytes: numbers keep their source text (parsed on access), strings their unescaped bytes.
  struct Node {
    JsonKind kind;
    bool flag;        // bool value
    uint32_t size;    // string / number text length, or element count (array) / member count (object)
    uint32_t end;     // index one past this node's subtree (next sibling)
    uint32_t offset;  // string / number start inside the buffer
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  std::string_view string_at(const Node& n) const { return std::string_view(data_ + n.offset, n.size); }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<void> owner_;  // the text buffer or file mapping data_ points into
  std::vector<Node> nodes_;
  friend class JsonParser;
};

template <class F>
void JsonRef::for_each_element(F&& visit) const {
  if (!is_array()) return;
  const auto& n = doc_->node(index_);
  uint32_t child = index_ + 1;
  for (uint32_t k = 0; k < n.size; ++k) {
    visit(JsonRef(doc_, child));
    child = doc_->node(child).end;
  }
}

template <class F>
void JsonRef::for_each_member(F&& visit) const {
  if (!is_object()) return;
  const auto& n = doc_->node(index_);
  uint32_t child = index_ + 1;
  for (uint32_t k = 0; k < n.size; ++k) {
    std::string_view key = doc_->string_at(doc_->node(child));
    uint32_t value = child + 1;
    visit(key, JsonRef(doc_, value));
    child = doc_->node(value).end;
  }
}

}  // namespace lathe::tokenizer
