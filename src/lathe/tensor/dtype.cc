#include "lathe/tensor/dtype.h"

#include "lathe/base/error.h"

namespace lathe {
namespace {
struct DTypeInfo {
  size_t size;
  std::string_view name, st_name;
};
constexpr DTypeInfo kInfo[] = {
    {4, "f32", "F32"}, {2, "bf16", "BF16"}, {2, "f16", "F16"}, {4, "i32", "I32"},
    {8, "i64", "I64"}, {1, "i8", "I8"},     {1, "u8", "U8"},   {1, "bool", "BOOL"},
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == static_cast<size_t>(DType::kCount));
}  // namespace

size_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
std::string_view dtype_safetensors_name(DType t) { return kInfo[static_cast<int>(t)].st_name; }

bool dtype_from_safetensors_name(std::string_view s, DType* out) {
  for (int i = 0; i < static_cast<int>(DType::kCount); ++i)
    if (kInfo[i].st_name == s) {
      *out = static_cast<DType>(i);
      return true;
    }
  return false;
}

float f16_to_f32(f16 h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1f, mant = h.bits & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      u = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

f16 f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7e00)};
  if (abs >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00)};  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: scale into integer range and round
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24: f16 subnormal unit is 2^-24
    uint32_t m = static_cast<uint32_t>(scaled);
    const float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return f16{static_cast<uint16_t>(sign | m)};
  }
  uint32_t r = abs - ((127 - 15) << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return f16{static_cast<uint16_t>(sign | (r >> 13))};
}

}  // namespace lathe
