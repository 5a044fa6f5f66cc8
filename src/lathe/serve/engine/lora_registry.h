// The LoRA adapters one engine serves (multi-LoRA serving, serving spec §9): each loaded PEFT folder has
// a name (a request's "model"), an id that is never reused (the prefix cache's key: blocks computed with
// an adapter are never served to a request of another adapter, nor of a later adapter loaded under the
// same name) and a Linear slot (Linear::lora_slots; reused after an unload). Unloading removes the name at
// once; the slot is freed when the last request running with it finishes (vLLM keeps such requests
// running too). Single-threaded: the engine loop owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lathe/models/lora_adapters.h"
#include "lathe/serve/engine/engine_request.h"

namespace lathe {

class LoraRegistry {
 public:
  LoraRegistry() = default;
  LoraRegistry(const LoraRegistry&) = delete;
  LoraRegistry& operator=(const LoraRegistry&) = delete;

  // Installs a folder (read_lora_folder against the served model) as `name` in a free slot of the
  // model's Linears, which must not be in use by a forward meanwhile; its new id.
  // InvalidArgument when an adapter of that name is served already.
  int64_t add(const std::string& name, const std::string& path, LoraFolder folder);
  // Removes `name` from the served adapters: new requests cannot name it; running ones finish with it
  // and its slot is freed after the last. The number of requests still using it (0: freed now).
  // InvalidArgument when no adapter has that name.
  int64_t remove(const std::string& name);

  // InvalidArgument when adapter `id` is not loaded (unloaded after a request named it, or never loaded).
  void check_loaded(int64_t id) const;
  // A request of adapter `id` (not 0) with n choices was admitted (check_loaded first) / one choice finished.
  void acquire(int64_t id, int n);
  void release(int64_t id);
  // The Linear slot of adapter `id` (0 for the base, id 0); the adapter must be held (acquired).
  int32_t slot_of(int64_t id) const;

  std::vector<ServedLora> served() const;  // by name; unloaded ones excluded
  int64_t n_slots_used() const { return static_cast<int64_t>(adapters_.size()); }

 private:
  struct Entry {
    ServedLora info;
    int32_t slot = 0;
    LoraFolder folder;        // owns the tensors the slot's Linears hold
    int64_t n_choices = 0;    // running or waiting choices of requests with this adapter
    bool removed = false;     // unloaded: freed when n_choices reaches 0
  };
  void free_entry(std::map<int64_t, Entry>::iterator it);

  std::map<int64_t, Entry> adapters_;  // id -> adapter (removed ones until their last request ends)
  std::vector<int32_t> free_slots_;    // freed slots, reused first
  int32_t next_slot_ = 1;
  int64_t next_id_ = 1;
};

}  // namespace lathe
