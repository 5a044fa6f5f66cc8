// Element types, their sizes and names, and the bf16 / f16 scalar conversions every layer shares.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace lathe {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64, kI8, kU8, kBool, kCount };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);             // "f32", "bf16", ...
std::string_view dtype_safetensors_name(DType t);  // "F32", "BF16", ...
bool dtype_from_safetensors_name(std::string_view s, DType* out);  // false when unknown
inline bool dtype_is_float(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// bfloat16: the top 16 bits of an IEEE f32.
struct bf16 {
  uint16_t bits;
};
inline float bf16_to_f32(bf16 h) {
  uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even, NaN kept quiet (as torch's c10::BFloat16).
inline bf16 f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// Stochastic rounding to one of the two bf16 neighbours of f: adding 16 uniform random bits r to the 16
// bits that truncation drops carries into the kept part with probability (dropped bits) / 2^16, so
// E[result] = f (unbiased; Gupta et al. 2015, llm.c `stochastic_rounding`). Rounds the magnitude, so
// negative values are unbiased too; f beyond the largest bf16 may round to infinity. NaN stays quiet.
inline bf16 f32_to_bf16_stochastic(float f, uint16_t r) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += r;  // ±inf has no dropped bits: it stays
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// IEEE half precision.
struct f16 {
  uint16_t bits;
};
float f16_to_f32(f16 h);
f16 f32_to_f16(float f);

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<bf16>() { return DType::kBF16; }
template <> constexpr DType dtype_of<f16>() { return DType::kF16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kI64; }
template <> constexpr DType dtype_of<int8_t>() { return DType::kI8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kU8; }
template <> constexpr DType dtype_of<bool>() { return DType::kBool; }

}  // namespace lathe
