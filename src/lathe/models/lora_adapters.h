// LoRA adapters on a Model (specs/posttrain.md §3): which Linears a LoraConfig selects (PEFT's
// target_modules rules over Hugging Face module paths), new adapters for training, and PEFT adapter folders
// read and written (adapter_config.json + adapter_model.safetensors, tensor names
// "base_model.model.<module path>.lora_A.weight" / ".lora_B.weight", A [R, in], B [out, R]).
// The tensors live in the Linears (Linear::lora), where linear() applies them; this object knows which
// module each belongs to. GPT-2's fused c_attn is one PEFT module over our q, k and v Linears: they share
// its A and each holds its rows of B (PEFT's A [R, C], B [3C, R]).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/models/lora_config.h"
#include "lathe/models/model.h"

namespace lathe {

// One module an adapter covers.
struct LoraModule {
  std::string path;            // HF module path: "model.layers.0.self_attn.q_proj", "transformer.h.0.attn.c_attn"
  std::vector<Linear*> parts;  // the Linears it covers, in B's row order (GPT-2 c_attn: q, k, v)
  int64_t in = 0, out = 0;     // PEFT's in_features / out_features (out: all parts' rows)
  int layer = -1;              // decoder layer
  bool conv1d = false;         // the checkpoint stores its weight [in, out] (GPT-2 Conv1D: fan_in_fan_out)
};

// PEFT's default target_modules for the model's family (peft TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING):
// {"c_attn"} for GPT-2, {"q_proj", "v_proj"} for the Llama-style families.
std::vector<std::string> default_lora_targets(const ModelConfig& cfg);

// The modules of m that c selects: targeted (by name, regex or "all-linear"; c's defaults when it names
// none), not excluded, and in layers_to_transform when given. Throws InvalidArgument for a target name or
// regex that matches no module (listing the module names there are), a bad regex, a layer index beyond the
// model, or an empty selection; NotImplemented for the LM head (the fused head reads its weight directly).
std::vector<LoraModule> select_lora_modules(Model& m, const LoraConfig& c);

// A PEFT adapter folder read and checked against a model, not attached to it yet: the modules its config
// selects and their tensors (f32, owned). LoraAdapters::load attaches one as the model's adapter
// (Linear::lora); a serving engine attaches several side by side, each in its own slot (attach_lora_slot).
struct LoraFolder {
  LoraConfig config;                // as read, with the model's defaults filled in (target_modules, fan_in_fan_out)
  std::vector<LoraModule> modules;  // the modules the config selects, in binding order
  std::vector<Tensor> a, b;         // [modules]: A [R, in], B [out, R] (a fused module's B whole)
};

// dir/adapter_config.json and dir/adapter_model.safetensors, checked against m: every selected module
// needs both tensors with its shapes; a tensor the config does not explain is an error (each message
// names the tensor); a target module the model lacks is an error naming the modules there are. m is only
// read (its Linears are named in the result, not changed).
LoraFolder read_lora_folder(Model& m, const std::string& dir);

// Serving (Linear::lora_slots): puts f's adapter in slot `slot` (>= 1) of every Linear it adapts (their
// slot lists grow as needed), or removes it. The Linears must not be in use by a forward meanwhile.
// attach: InvalidArgument when one of them already holds an adapter in that slot.
void attach_lora_slot(const LoraFolder& f, int32_t slot);
void clear_lora_slot(const LoraFolder& f, int32_t slot);

class LoraAdapters {
 public:
  // New adapters on the modules c selects, as PEFT initialises them (init_lora_weights=true):
  // A ~ kaiming_uniform(a=√5) = U(-1/√in, 1/√in), each tensor drawn from CounterRng keyed by (seed, its
  // name); B = 0, so the adapted model starts exactly at the base. c's default targets are resolved
  // (written to adapter_config.json). Throws InvalidArgument when m already has adapters.
  static LoraAdapters create(Model& m, const LoraConfig& c, uint64_t seed);
  // A PEFT adapter folder: dir/adapter_config.json and dir/adapter_model.safetensors. Every selected
  // module needs both tensors with its shapes; a tensor the config does not explain is an error (each
  // message names the tensor). Tensors are converted to f32, in owned (writable) memory.
  static LoraAdapters load(Model& m, const std::string& dir);

  LoraAdapters(LoraAdapters&&) = default;
  LoraAdapters& operator=(LoraAdapters&&) = default;
  LoraAdapters(const LoraAdapters&) = delete;
  LoraAdapters& operator=(const LoraAdapters&) = delete;
  // The adapters stay on the model when this object goes (detach() removes them); it must not outlive it.
  ~LoraAdapters() = default;

  const LoraConfig& config() const { return cfg_; }
  const std::vector<LoraModule>& modules() const { return modules_; }

  // PEFT's file view: name -> A [R, in] or B [out, R] (a fused module's B concatenated from its parts), in
  // module order, A before B.
  std::vector<std::pair<std::string, Tensor>> peft_tensors() const;
  // Writes dir/adapter_config.json and dir/adapter_model.safetensors (each crash-safe; dir created).
  void save(const std::string& dir) const;

  // The parameter walk of the adapters: fn(name, tensor, layer) once per distinct tensor: A under its PEFT
  // name, B too, or "<PEFT name>#i" for part i of a fused module's B (as Model::for_each_param names the
  // parts of GPT-2's c_attn). Optimizer state is saved under these names.
  using ParamFn = std::function<void(const std::string& name, Tensor& t, int layer)>;
  void for_each_param(const ParamFn& fn);
  int64_t n_params() const;
  void set_requires_grad(bool on);
  // Removes the adapters from the model's Linears (the model is the base again).
  void detach();

 private:
  LoraAdapters(LoraConfig c, std::vector<LoraModule> modules) : cfg_(std::move(c)), modules_(std::move(modules)) {}
  // Installs A [R, in] and B [out, R] on module i's parts (B split by rows).
  void attach(size_t i, const Tensor& a, const Tensor& b);
  LoraConfig cfg_;
  std::vector<LoraModule> modules_;
};

// "base_model.model.<path>.lora_A.weight" / ".lora_B.weight": PEFT's tensor names (no adapter name).
std::string lora_a_name(const std::string& module_path);
std::string lora_b_name(const std::string& module_path);

}  // namespace lathe
