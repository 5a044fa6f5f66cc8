// Counter-based random numbers: every value is a pure function of (key, counter), so a generator's whole
// state is two integers — trivial to checkpoint, to resume bit for bit, and to split across ranks or
// threads without sequential dependencies. The mixing function is SplitMix64's finaliser (Steele, Lea &
// Flood, "Fast splittable pseudorandom number generators", 2014), which passes BigCrush as a stream.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace lathe {

inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Derives an independent key from a parent key and a label (e.g. seed -> seed for epoch 3).
inline uint64_t derive_key(uint64_t key, uint64_t label) { return mix64(key ^ mix64(label + 0x632BE59BD9B4E019ull)); }

// A stable 64-bit hash of a name (FNV-1a), for keys that must not change between builds or platforms.
inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

struct CounterRng {
  uint64_t key = 0;
  uint64_t counter = 0;

  uint64_t next_u64() { return mix64(key + 0x9E3779B97F4A7C15ull * ++counter); }
  // Uniform in [0, n) (Lemire's multiply-shift; the bias is < n / 2^64, negligible for data indices).
  uint64_t next_below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float next_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  // Standard normal (Box-Muller on two uniforms in (0, 1]).
  float next_normal() {
    const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

}  // namespace lathe
