// libFuzzer target: the GGUF reader, and the tokenizer built from a file's metadata, must reject any byte
// string with a lathe::Error, never crash or read out of bounds. Build: make fuzz; run:
// build/fuzz/gguf_fuzz -max_total_time=600 (seed it with small GGUF files, e.g. those the GgufImport tests
// write under build/release/test_scratch).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/io/gguf.h"
#include "lathe/io/tokenizer/gguf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exact-size heap block so ASan catches any read past the end.
  std::vector<char> bytes(data, data + size);
  try {
    const lathe::GgufFile g = lathe::GgufFile::parse(bytes.data(), bytes.size(), "fuzz");
    // Touch every accepted tensor's bytes: offsets and sizes were validated, so this must stay in bounds.
    unsigned sum = 0;
    for (const lathe::GgufTensorInfo& t : g.tensors()) {
      const char* p = g.tensor_data(t);
      for (size_t i = 0; i < t.nbytes; ++i) sum += static_cast<unsigned char>(p[i]);
    }
    if (sum == 0xdeadbeef) std::abort();  // keeps the reads from being optimised away
    if (lathe::tokenizer::gguf_has_tokenizer(g)) lathe::tokenizer::gguf_tokenizer_files(g);
  } catch (const lathe::Error&) {
  }
  return 0;
}
