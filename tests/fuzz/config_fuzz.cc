// libFuzzer target: any byte string as config.json goes through parse_model_config (every family of the
// registry, then validate_config) and, when accepted, through the family's tensor bindings. Any input
// must end in a lathe::Error or a config that validate_config accepts again, never a crash, leak, hang
// or an unbounded allocation. Build: cmake --preset fuzz && cmake --build --preset fuzz --target config_fuzz;
// run: build/fuzz/config_fuzz -max_total_time=600 build/fuzz/seeds/config (tests/fuzz/make_seeds.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lathe/base/error.h"
#include "lathe/models/config.h"
#include "lathe/models/family.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    lathe::ModelConfig c = lathe::parse_model_config(text, "fuzz/config.json");
    lathe::validate_config(c);  // what parse accepted stays valid
    if (static_cast<int64_t>(c.layers.size()) != c.n_layers || c.head_dim <= 0) std::abort();
    // The bindings compute every tensor shape from the counts; keep the work per input small.
    if (c.n_layers * (c.n_experts + 1) <= 256) {
      lathe::ModelWeights w;
      w.layers.resize(static_cast<size_t>(c.n_layers));
      const auto bindings = lathe::find_family(c.hf_config).bindings(c, w);
      for (const lathe::TensorBinding& b : bindings)
        for (int64_t d : b.shape)
          if (d < 0) std::abort();  // a negative dimension slipped through validation
    }
  } catch (const lathe::Error&) {
  }
  return 0;
}
