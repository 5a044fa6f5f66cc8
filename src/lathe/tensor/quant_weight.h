// Quantised weight formats: a Linear weight W [N, K] stored as small integer codes with one f16 scale (and,
// for the asymmetric format, one f16 minimum) per group of G consecutive inputs of a row. The codes follow
// llama.cpp's Q8_0 / Q4_0 / Q4_1 blocks (int6 is Q4_0's rule at 6 bits, the bits llama.cpp's Q6_K spends on
// the LM head); the storage is plain [N, ...] planes (docs/quantization.md), so a row's codes, scales and
// minimums are each contiguous and a kernel streams them without a block struct.
// NF4 is bitsandbytes' layout instead (specs/posttrain.md §3.3): the flattened weight in blocks of 64 (not
// per row), two codes a byte with the first in the high nibble, and double-quantised block statistics.
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
  kInt6,      // w = d·(q - 32), q in [0, 63], d = (the signed value of largest |x|) / -32
  kNf4,       // w = nf4[q]·absmax, q in [0, 15], absmax per block of the flattened weight (bitsandbytes)
  kCount
};

// Codes are packed in units of 32 inputs: int8 takes 32 bytes; int4 takes 16 bytes, byte j holding input j
// in its low nibble and input j + 16 in its high one (Q4_0's order: a 16-byte load splits into two runs
// of 16 consecutive inputs with one shift and one mask). int6 stores a row as two planes: its low 4 bits
// exactly as int4 (K / 2 bytes), then its high 2 bits (K / 4 bytes), 8 bytes per unit: byte b of unit u
// holds those of inputs 32u + b, + 8, + 16, + 24 in its bit pairs 0-1, 2-3, 4-5, 6-7 (two variable shifts
// of the unit's 8 bytes, broadcast, place them beside the int4 halves' 16 low nibbles).
inline constexpr int64_t kQuantUnit = 32;

struct QuantSpec {
  QuantFormat format = QuantFormat::kInt8;
  int64_t group = 32;  // inputs per scale: 32 for int8 and int4; 32, 64 or 128 for int4-asym; nf4's blocksize
};

// Format names as the CLI and config.json spell them: "int8", "int4" (symmetric, group 32),
// "int4-g32" / "int4-g64" / "int4-g128" (asymmetric, with a minimum per group), "int6" (symmetric, group
// 32) and "nf4" (blocksize 64, double quantisation). InvalidArgument otherwise.
QuantSpec parse_quant_spec(std::string_view name);
std::string quant_spec_name(const QuantSpec& s);
// InvalidArgument unless the format takes this group size.
void check_quant_spec(const QuantSpec& s);

inline bool quant_has_mins(QuantFormat f) { return f == QuantFormat::kInt4Asym; }
// Bytes of packed codes per row of K inputs (K a multiple of kQuantUnit; nf4: K even).
inline int64_t quant_row_bytes(QuantFormat f, int64_t k) {
  return f == QuantFormat::kInt8 ? k : f == QuantFormat::kInt6 ? k / 2 + k / 4 : k / 2;
}
// int6: where a row's high-bit plane starts (after its K / 2 bytes of low nibbles).
inline int64_t int6_high_plane(int64_t k) { return k / 2; }

// NF4's block statistics as bitsandbytes stores them (its QuantState): with double quantisation
// (`nested`) each block's absmax is an 8-bit code of the dynamic map (absmax − offset, blocks of 256,
// an f32 absmax per block of 256); without it, the f32 absmax itself.
struct Nf4Stats {
  bool nested = false;
  Tensor absmax;            // [blocks] u8 (nested) or f32: the file's X.weight.absmax
  Tensor nested_absmax;     // [ceil(blocks / nested_blocksize)] f32, nested only
  Tensor nested_quant_map;  // [256] f32, the map the absmax codes index (nested only)
  int64_t nested_blocksize = 256;
  float offset = 0.f;             // nested_offset: the mean absmax taken off before the 8-bit code
  std::string dtype = "float32";  // the quant_state's "dtype": what the weight was quantised from
};

// A quantised W [out, in]. int8 / int4 / int6: codes [out, in] i8 (int8), [out, in/2] u8 (int4) or
// [out, 3·in/4] u8 (int6), scales
// [out, in/group] f16, mins [out, in/group] f16 (int4-asym) or undefined. nf4: codes [ceil(out·in / 2), 1]
// u8 (bitsandbytes' shape: the flattened weight, element 2i in the high nibble of byte i), scales [blocks]
// f32 (each block's absmax as the kernels use it: dequantised from `nf4` when nested), `nf4` the stored
// statistics. Immutable once made; copies share the tensors.
struct QuantWeight {
  QuantSpec spec;
  int64_t out = 0, in = 0;
  Tensor codes;
  Tensor scales;
  Tensor mins;
  Nf4Stats nf4;
  bool defined() const { return codes.defined(); }
  // InvalidArgument (prefixed with `where`) unless the tensors have this format's dtypes and shapes and are
  // contiguous.
  void check(const std::string& where) const;
  // The bytes the kernels read (nf4: codes and the f32 absmax they use).
  size_t nbytes() const { return codes.nbytes() + scales.nbytes() + (mins.defined() ? mins.nbytes() : 0); }
};

// NF4 blocks of a weight with `numel` elements: ceil(numel / blocksize).
inline int64_t nf4_blocks(int64_t numel, int64_t blocksize) { return (numel + blocksize - 1) / blocksize; }

}  // namespace lathe
