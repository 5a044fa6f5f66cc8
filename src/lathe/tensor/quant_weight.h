// Quantised weight formats: a Linear weight W [N, K] stored as small integer codes with one f16 scale (and,
// for the asymmetric format, one f16 minimum) per group of G consecutive inputs of a row. The codes follow
// llama.cpp's Q8_0 / Q4_0 / Q4_1 blocks; the storage is plain [N, ...] planes (docs/quantization.md), so a
// row's codes, scales and minimums are each contiguous and a kernel streams them without a block struct.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/tensor/tensor.h"

namespace lathe {

enum class QuantFormat : uint8_t {
  kInt8,      // w = d·q, q in [-127, 127] (int8), d = amax / 127                     (Q8_0)
  kInt4,      // w = d·(q - 8), q in [0, 15], d = (the signed value of largest |x|) / -8   (Q4_0)
  kInt4Asym,  // w = d·q + m, q in [0, 15], d = (max - min) / 15, m = min                 (Q4_1)
  kCount
};

// Codes are packed in units of 32 inputs: int8 takes 32 bytes; int4 takes 16 bytes, byte j holding input j
// in its low nibble and input j + 16 in its high one (Q4_0's order: a 16-byte load splits into two runs
// of 16 consecutive inputs with one shift and one mask).
inline constexpr int64_t kQuantUnit = 32;

struct QuantSpec {
  QuantFormat format = QuantFormat::kInt8;
  int64_t group = 32;  // inputs per scale: 32 for int8 and int4; 32, 64 or 128 for int4-asym
};

// Format names as the CLI and config.json spell them: "int8", "int4" (symmetric, group 32) and
// "int4-g32" / "int4-g64" / "int4-g128" (asymmetric, with a minimum per group). InvalidArgument otherwise.
QuantSpec parse_quant_spec(std::string_view name);
std::string quant_spec_name(const QuantSpec& s);
// InvalidArgument unless the format takes this group size.
void check_quant_spec(const QuantSpec& s);

inline bool quant_has_mins(QuantFormat f) { return f == QuantFormat::kInt4Asym; }
// Bytes of packed codes per row of K inputs (K a multiple of kQuantUnit).
inline int64_t quant_row_bytes(QuantFormat f, int64_t k) { return f == QuantFormat::kInt8 ? k : k / 2; }

// A quantised W [out, in]: codes [out, in] i8 (int8) or [out, in/2] u8 (int4), scales [out, in/group] f16,
// mins [out, in/group] f16 (int4-asym) or undefined. Immutable once made; copies share the tensors.
struct QuantWeight {
  QuantSpec spec;
  int64_t out = 0, in = 0;
  Tensor codes;
  Tensor scales;
  Tensor mins;
  bool defined() const { return codes.defined(); }
  // InvalidArgument (prefixed with `where`) unless the three tensors have this format's dtypes and shapes
  // and are contiguous.
  void check(const std::string& where) const;
  size_t nbytes() const { return codes.nbytes() + scales.nbytes() + (mins.defined() ? mins.nbytes() : 0); }
};

}  // namespace lathe
