// libFuzzer target: the safetensors header parser must reject any byte string with a lathe::Error, never
// crash or read out of bounds. Build: make fuzz; run: build/fuzz/safetensors_fuzz -max_total_time=600
// (seed it with tests/fixtures/models/*/model.safetensors).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exact-size heap block so ASan catches any read past the end.
  std::vector<char> bytes(data, data + size);
  try {
    lathe::SafetensorsFile f = lathe::SafetensorsFile::parse(bytes.data(), bytes.size(), "fuzz");
    // Touch every accepted tensor's bytes: offsets were validated, so this must stay in bounds.
    unsigned sum = 0;
    for (const auto& e : f.entries()) {
      lathe::Tensor t = f.tensor(e.name);
      const char* p = static_cast<const char*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) sum += static_cast<unsigned char>(p[i]);
    }
    if (sum == 0xdeadbeef) std::abort();  // keeps the reads from being optimised away
  } catch (const lathe::Error&) {
  }
  return 0;
}
