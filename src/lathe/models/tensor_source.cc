#include "lathe/models/tensor_source.h"

#include <set>

#include "lathe/base/error.h"

namespace lathe {

namespace {
// The checkpoint names of a quantised Linear weight "X.weight": its codes (X.weight), scales and mins.
std::string quant_stem(const std::string& weight_name) {
  return weight_name.ends_with(".weight") ? weight_name.substr(0, weight_name.size() - 7) : weight_name;
}
}  // namespace

FolderTensors::FolderTensors(const std::string& dir, std::optional<QuantSpec> quant, std::optional<QuantSpec> head)
    : dir_(dir), ckpt_(CheckpointReader::open_dir(dir)), quant_(quant), head_(head ? head : quant) {}

std::vector<std::string> FolderTensors::names() const {
  std::vector<std::string> all = ckpt_.names();
  if (!quant_) return all;
  // X.scales and X.mins belong to the quantised X.weight beside them.
  std::set<std::string> parts;
  for (const std::string& n : all)
    if (n.ends_with(".weight") && ckpt_.contains(quant_stem(n) + ".scales"))
      for (const char* p : {".scales", ".mins"}) parts.insert(quant_stem(n) + p);
  std::vector<std::string> out;
  for (const std::string& n : all)
    if (!parts.count(n)) out.push_back(n);
  return out;
}

std::optional<QuantWeight> FolderTensors::quant_weight(const std::string& name, bool linear) const {
  const std::string stem = quant_stem(name);
  if (!quant_ || !ckpt_.contains(stem + ".scales")) return std::nullopt;
  LATHE_CHECK_ARG(linear, ckpt_.file_of(name), ": '", name, "' is stored quantised, but only a plain Linear weight can be");
  QuantWeight q;
  q.spec = name == "lm_head.weight" ? *head_ : *quant_;
  q.codes = ckpt_.tensor(name);
  q.scales = ckpt_.tensor(stem + ".scales");
  if (quant_has_mins(q.spec.format)) {
    LATHE_CHECK_ARG(ckpt_.contains(stem + ".mins"), ckpt_.file_of(name), ": no '", stem, ".mins' (format ",
                    quant_spec_name(q.spec), " stores a minimum per group)");
    q.mins = ckpt_.tensor(stem + ".mins");
  }
  return q;
}

}  // namespace lathe
