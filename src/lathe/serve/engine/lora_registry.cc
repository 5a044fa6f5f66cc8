#include "lathe/serve/engine/lora_registry.h"

#include <algorithm>
#include <utility>

#include "lathe/base/error.h"

namespace lathe {

int64_t LoraRegistry::add(const std::string& name, const std::string& path, LoraFolder folder) {
  LATHE_CHECK_ARG(!name.empty(), "[lora] an adapter needs a name");
  for (const auto& [id, e] : adapters_)
    LATHE_CHECK_ARG(e.removed || e.info.name != name, "[lora] the LoRA adapter '", name, "' has already been loaded");
  int32_t slot = next_slot_;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    ++next_slot_;
  }
  attach_lora_slot(folder, slot);
  const int64_t id = next_id_++;
  adapters_.emplace(id, Entry{.info = {.name = name, .path = path, .id = id}, .slot = slot, .folder = std::move(folder)});
  return id;
}

int64_t LoraRegistry::remove(const std::string& name) {
  const auto it = std::find_if(adapters_.begin(), adapters_.end(),
                               [&](const auto& kv) { return !kv.second.removed && kv.second.info.name == name; });
  LATHE_CHECK_ARG(it != adapters_.end(), "[lora] the LoRA adapter '", name, "' cannot be found");
  const int64_t in_use = it->second.n_choices;
  it->second.removed = true;
  if (in_use == 0) free_entry(it);
  return in_use;
}

void LoraRegistry::check_loaded(int64_t id) const {
  const auto it = adapters_.find(id);
  LATHE_CHECK_ARG(it != adapters_.end() && !it->second.removed, "[lora] LoRA adapter id ", id,
                  " is not loaded (it was unloaded after the request named it)");
}

void LoraRegistry::acquire(int64_t id, int n) {
  check_loaded(id);
  adapters_.at(id).n_choices += n;
}

void LoraRegistry::release(int64_t id) {
  const auto it = adapters_.find(id);
  LATHE_ASSERT(it != adapters_.end() && it->second.n_choices > 0, "[lora] release of an adapter no request holds");
  if (--it->second.n_choices == 0 && it->second.removed) free_entry(it);
}

int32_t LoraRegistry::slot_of(int64_t id) const {
  if (id == 0) return 0;
  const auto it = adapters_.find(id);
  LATHE_CHECK_ARG(it != adapters_.end(), "[lora] LoRA adapter id ", id, " is not loaded");
  return it->second.slot;
}

std::vector<ServedLora> LoraRegistry::served() const {
  std::vector<ServedLora> out;
  for (const auto& [id, e] : adapters_)
    if (!e.removed) out.push_back(e.info);
  std::sort(out.begin(), out.end(), [](const ServedLora& a, const ServedLora& b) { return a.name < b.name; });
  return out;
}

void LoraRegistry::free_entry(std::map<int64_t, Entry>::iterator it) {
  clear_lora_slot(it->second.folder, it->second.slot);
  free_slots_.push_back(it->second.slot);
  adapters_.erase(it);
}

}  // namespace lathe
