// LoRA module selection, initialisation and PEFT folder I/O (see lora_adapters.h).
#include "lathe/models/lora_adapters.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/file_read.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/safetensors.h"

namespace lathe {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

// A Linear's [out, in], whether its weight is float or quantised (an adapter on a QLoRA base).
int64_t linear_out(const Linear& l) { return l.weight.defined() ? l.weight.size(0) : l.quant.out; }
int64_t linear_in(const Linear& l) { return l.weight.defined() ? l.weight.size(1) : l.quant.in; }

// Every Linear weight the model's checkpoint binds, as a module (lm_head too: layer -1), in binding order.
// Quantised Linears count (their binding's slot is the undefined `weight` they replace).
std::vector<LoraModule> linear_modules(Model& m) {
  std::map<const Tensor*, Linear*> linear_of;
  for_each_linear_module(m.weights(), [&](Linear& l) {
    if (l.weight.defined() || l.quant.defined()) linear_of[&l.weight] = &l;
  });
  std::vector<LoraModule> out;
  for (const TensorBinding& b : m.bindings()) {
    if (b.role != ParamRole::kMatmulWeight || !b.name.ends_with(".weight")) continue;
    LoraModule mod;
    mod.path = b.name.substr(0, b.name.size() - 7);
    for (Tensor* slot : b.slots) {
      auto it = linear_of.find(slot);
      if (it == linear_of.end()) break;
      mod.parts.push_back(it->second);
    }
    if (mod.parts.size() != b.slots.size() || mod.parts.empty()) continue;  // not (only) Linears
    mod.in = linear_in(*mod.parts[0]);
    for (const Linear* l : mod.parts) mod.out += linear_out(*l);
    mod.layer = b.layer;
    mod.conv1d = b.transposed;
    out.push_back(std::move(mod));
  }
  return out;
}

// PEFT's check_target_module_exists for a list: the path is a name or ends with "." + a name.
bool matches_name(const std::string& path, const std::string& name) {
  return path == name ||
         (path.size() > name.size() && path.ends_with(name) && path[path.size() - name.size() - 1] == '.');
}

std::regex compile(const std::string& pattern, const char* key) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InvalidArgument(str_cat("LoRA ", key, ": '", pattern, "' is not a valid regular expression: ", e.what()));
  }
}

std::string some_names(const std::vector<LoraModule>& mods) {
  std::string s;
  for (size_t i = 0; i < mods.size() && i < 8; ++i) s += (i ? ", " : "") + mods[i].path;
  return s + (mods.size() > 8 ? ", ..." : "");
}

void check_lora_tensor(const SafetensorsFile& f, const std::string& name, const Shape& want,
                       const std::string& module) {
  LATHE_CHECK_ARG(f.contains(name), f.path(), ": missing tensor '", name, "' (the config adapts module '", module,
                  "')");
  const SafetensorsEntry& e = f.entry(name);
  LATHE_CHECK_ARG(dtype_is_float(e.dtype), f.path(), ": tensor '", name, "' has dtype ", dtype_name(e.dtype),
                  "; LoRA weights must be F32, BF16 or F16");
  LATHE_CHECK_ARG(e.shape == want, f.path(), ": tensor '", name, "' has shape ", shape_str(e.shape), ", module '",
                  module, "' needs ", shape_str(want));
}

// Fills what the config left to the model: default targets, fan_in_fan_out from the modules' layout.
void resolve_lora_defaults(LoraConfig& c, const std::vector<LoraModule>& modules, const Model& m) {
  if (c.target_modules.empty() && c.target_regex.empty()) c.target_modules = default_lora_targets(m.config());
  // PEFT sets fan_in_fan_out for Conv1D targets (and clears it for nn.Linear ones); shapes do not depend on it.
  c.fan_in_fan_out = std::any_of(modules.begin(), modules.end(), [](const LoraModule& mod) { return mod.conv1d; });
}

// Module mod's adapter (A [R, in], B [out, R]) on each of its Linears: a fused module's parts share A and
// each takes its rows of B.
void for_each_part_adapter(const LoraModule& mod, const LoraConfig& c, const Tensor& a, const Tensor& b,
                           const std::function<void(Linear&, LoraAdapter)>& fn) {
  int64_t row = 0;
  for (Linear* l : mod.parts) {
    const int64_t rows = linear_out(*l);
    fn(*l, LoraAdapter{.a = a,
                       .b = mod.parts.size() == 1 ? b : b.slice(0, row, row + rows),
                       .scaling = c.scaling(),
                       .dropout = static_cast<float>(c.lora_dropout),
                       .dropout_stream = hash_name(mod.path)});
    row += rows;
  }
}

}  // namespace

std::string lora_a_name(const std::string& module_path) { return "base_model.model." + module_path + ".lora_A.weight"; }
std::string lora_b_name(const std::string& module_path) { return "base_model.model." + module_path + ".lora_B.weight"; }

std::vector<std::string> default_lora_targets(const ModelConfig& cfg) {
  if (cfg.model_type == "gpt2") return {"c_attn"};
  return {"q_proj", "v_proj"};
}

std::vector<LoraModule> select_lora_modules(Model& m, const LoraConfig& c) {
  const std::vector<LoraModule> all = linear_modules(m);
  const bool all_linear = c.target_regex == "all-linear";
  const bool by_regex = !c.target_regex.empty() && !all_linear;
  const std::vector<std::string> names =
      c.target_modules.empty() && c.target_regex.empty() ? default_lora_targets(m.config()) : c.target_modules;
  std::regex target_re, exclude_re;
  if (by_regex) target_re = compile(c.target_regex, "target_modules");
  if (!c.exclude_regex.empty()) exclude_re = compile(c.exclude_regex, "exclude_modules");
  for (int layer : c.layers_to_transform)
    LATHE_CHECK_ARG(layer < m.config().n_layers, "LoRA layers_to_transform: layer ", layer, " is beyond the model's ",
                    m.config().n_layers, " layers");

  const auto targeted = [&](const LoraModule& mod) {
    if (all_linear) return mod.layer >= 0;  // PEFT's all-linear leaves the output layer out
    if (by_regex) return std::regex_match(mod.path, target_re);
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return matches_name(mod.path, n); });
  };
  const auto excluded = [&](const LoraModule& mod) {
    if (!c.exclude_regex.empty()) return std::regex_match(mod.path, exclude_re);
    return std::any_of(c.exclude_modules.begin(), c.exclude_modules.end(),
                       [&](const std::string& n) { return matches_name(mod.path, n); });
  };
  // A target that matches nothing is a typo or another architecture's name: say so, with the names there are.
  if (!all_linear && !by_regex)
    for (const std::string& n : names)
      LATHE_CHECK_ARG(
          std::any_of(all.begin(), all.end(), [&](const LoraModule& mod) { return matches_name(mod.path, n); }),
          "LoRA target module '", n, "' matches no Linear module of this ", m.config().architecture,
          " model (its modules: ", some_names(all), ")");
  if (by_regex)
    LATHE_CHECK_ARG(std::any_of(all.begin(), all.end(), [&](const LoraModule& mod) { return targeted(mod); }),
                    "LoRA target_modules regex '", c.target_regex, "' matches no Linear module of this ",
                    m.config().architecture, " model (its modules: ", some_names(all), ")");

  std::vector<LoraModule> out;
  for (const LoraModule& mod : all) {
    if (!targeted(mod) || excluded(mod)) continue;
    if (mod.layer < 0)
      throw NotImplemented(str_cat("LoRA on '", mod.path, "' is not supported (only the decoder layers' Linears)"));
    if (!c.layers_to_transform.empty() &&
        std::find(c.layers_to_transform.begin(), c.layers_to_transform.end(), mod.layer) == c.layers_to_transform.end())
      continue;
    out.push_back(mod);
  }
  LATHE_CHECK_ARG(!out.empty(), "the LoRA config selects no module (after exclude_modules and layers_to_transform)");
  return out;
}

void LoraAdapters::attach(size_t i, const Tensor& a, const Tensor& b) {
  for_each_part_adapter(modules_[i], cfg_, a, b, [](Linear& l, LoraAdapter ad) { l.lora = std::move(ad); });
}

LoraAdapters LoraAdapters::create(Model& m, const LoraConfig& c, uint64_t seed) {
  LoraAdapters ad(c, select_lora_modules(m, c));
  resolve_lora_defaults(ad.cfg_, ad.modules_, m);
  for (const LoraModule& mod : ad.modules_)
    LATHE_CHECK_ARG(!mod.parts[0]->lora.defined(), "module '", mod.path, "' already has a LoRA adapter");
  const int64_t R = c.r;
  for (size_t i = 0; i < ad.modules_.size(); ++i) {
    const LoraModule& mod = ad.modules_[i];
    Tensor a = Tensor::empty({R, mod.in});
    // kaiming_uniform_(a=√5) on [R, in]: gain √(2/(1+5)), bound gain·√(3/in) = 1/√in.
    const float bound = 1.f / std::sqrt(static_cast<float>(mod.in));
    CounterRng rng{derive_key(seed, hash_name(lora_a_name(mod.path)))};
    float* ap = a.data<float>();
    for (int64_t j = 0; j < a.numel(); ++j) ap[j] = bound * (2.f * rng.next_float() - 1.f);
    ad.attach(i, a, Tensor::zeros({mod.out, R}));
  }
  return ad;
}

LoraFolder read_lora_folder(Model& m, const std::string& dir) {
  const fs::path root(dir);
  LATHE_CHECK_ARG(fs::is_directory(root), dir, ": not a directory (expected a PEFT adapter folder)");
  const fs::path config_path = root / kConfigFile;
  LATHE_CHECK_ARG(fs::exists(config_path), dir, ": no ", kConfigFile, " (expected a PEFT adapter folder)");
  const json j = read_json_object_file(config_path.string());
  LATHE_CHECK_ARG(j.contains("peft_type"), config_path.string(),
                  ": no 'peft_type' (a PEFT adapter config has \"LORA\")");
  LoraFolder out{.config = lora_config_from_json(j, config_path.string())};
  const LoraConfig& c = out.config;
  const fs::path weights_path = root / kWeightsFile;
  if (!fs::exists(weights_path) && fs::exists(root / "adapter_model.bin"))
    throw NotImplemented(str_cat(dir, ": adapter_model.bin (pickle) is not supported; save the adapter as ",
                                 kWeightsFile, " (PEFT save_pretrained(safe_serialization=True))"));
  const SafetensorsFile f = SafetensorsFile::open(weights_path.string());
  out.modules = select_lora_modules(m, c);
  resolve_lora_defaults(out.config, out.modules, m);
  std::set<std::string> used;
  for (const LoraModule& mod : out.modules) {
    check_lora_tensor(f, lora_a_name(mod.path), {c.r, mod.in}, mod.path);
    check_lora_tensor(f, lora_b_name(mod.path), {mod.out, c.r}, mod.path);
    used.insert(lora_a_name(mod.path));
    used.insert(lora_b_name(mod.path));
  }
  for (const SafetensorsEntry& e : f.entries())
    LATHE_CHECK_ARG(used.count(e.name), f.path(), ": unexpected tensor '", e.name,
                    "' (not a lora_A / lora_B weight of a module the config selects)");
  for (const LoraModule& mod : out.modules) {
    // clone(): owned memory, so training may continue from a loaded adapter and the file may go.
    out.a.push_back(f.tensor(lora_a_name(mod.path)).to(DType::kF32).clone());
    out.b.push_back(f.tensor(lora_b_name(mod.path)).to(DType::kF32).clone());
  }
  return out;
}

void attach_lora_slot(const LoraFolder& f, int32_t slot) {
  LATHE_CHECK_ARG(slot >= 1, "[attach_lora_slot] slot ", slot, " (slot 0 is the base)");
  const auto s = static_cast<size_t>(slot);
  for (const LoraModule& mod : f.modules)
    for (const Linear* l : mod.parts)
      LATHE_CHECK_ARG(l->lora_slots.size() <= s || !l->lora_slots[s].defined(), "[attach_lora_slot] module '",
                      mod.path, "' already holds an adapter in slot ", slot);
  for (size_t i = 0; i < f.modules.size(); ++i)
    for_each_part_adapter(f.modules[i], f.config, f.a[i], f.b[i], [s](Linear& l, LoraAdapter ad) {
      if (l.lora_slots.size() <= s) l.lora_slots.resize(s + 1);
      l.lora_slots[s] = std::move(ad);
    });
}

void clear_lora_slot(const LoraFolder& f, int32_t slot) {
  const auto s = static_cast<size_t>(slot);
  for (const LoraModule& mod : f.modules)
    for (Linear* l : mod.parts) {
      if (l->lora_slots.size() > s) l->lora_slots[s] = LoraAdapter{};
      // Trailing empty slots go, so a model whose adapters are all unloaded is the plain model again.
      while (!l->lora_slots.empty() && !l->lora_slots.back().defined()) l->lora_slots.pop_back();
    }
}

LoraAdapters LoraAdapters::load(Model& m, const std::string& dir) {
  LoraFolder f = read_lora_folder(m, dir);
  LoraAdapters ad(std::move(f.config), std::move(f.modules));
  for (const LoraModule& mod : ad.modules_)
    LATHE_CHECK_ARG(!mod.parts[0]->lora.defined(), "module '", mod.path, "' already has a LoRA adapter");
  for (size_t i = 0; i < ad.modules_.size(); ++i) ad.attach(i, f.a[i], f.b[i]);
  return ad;
}

std::vector<std::pair<std::string, Tensor>> LoraAdapters::peft_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const LoraModule& mod : modules_) {
    out.push_back({lora_a_name(mod.path), mod.parts[0]->lora.a});
    if (mod.parts.size() == 1) {
      out.push_back({lora_b_name(mod.path), mod.parts[0]->lora.b});
      continue;
    }
    Tensor b = Tensor::empty({mod.out, cfg_.r});  // the fused module's B from its parts' rows
    int64_t row = 0;
    for (const Linear* l : mod.parts) {
      b.slice(0, row, row + l->lora.b.size(0)).copy_from(l->lora.b);
      row += l->lora.b.size(0);
    }
    out.push_back({lora_b_name(mod.path), b});
  }
  return out;
}

void LoraAdapters::save(const std::string& dir) const {
  fs::create_directories(dir);
  save_safetensors((fs::path(dir) / kWeightsFile).string(), peft_tensors());
  write_file_atomic((fs::path(dir) / kConfigFile).string(), lora_config_to_json(cfg_).dump(2) + "\n");
}

void LoraAdapters::for_each_param(const ParamFn& fn) {
  for (const LoraModule& mod : modules_) {
    fn(lora_a_name(mod.path), mod.parts[0]->lora.a, mod.layer);
    for (size_t i = 0; i < mod.parts.size(); ++i)
      fn(mod.parts.size() == 1 ? lora_b_name(mod.path) : lora_b_name(mod.path) + "#" + std::to_string(i),
         mod.parts[i]->lora.b, mod.layer);
  }
}

int64_t LoraAdapters::n_params() const {
  int64_t n = 0;
  for (const LoraModule& mod : modules_) n += cfg_.r * (mod.in + mod.out);
  return n;
}

void LoraAdapters::set_requires_grad(bool on) {
  for_each_param([&](const std::string&, Tensor& t, int) { t.set_requires_grad(on); });
}

void LoraAdapters::detach() {
  for (const LoraModule& mod : modules_)
    for (Linear* l : mod.parts) l->lora = LoraAdapter{};
  modules_.clear();
}

}  // namespace lathe
