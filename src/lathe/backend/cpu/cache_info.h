// Data cache sizes of the CPU this runs on, for the gemm's cache blocking (gemm.cc): blocks sized for one
// chip's caches (a 768 KiB packed B chunk for a 1.25 MiB L2) spill on another (Zen 3: 512 KiB L2).
#pragma once

#include <cstdint>

namespace lathe::cpu {

struct CacheInfo {
  int64_t l1d = 0;  // bytes, per core
  int64_t l2 = 0;   // bytes, per core
  int64_t l3 = 0;   // bytes, the whole last-level cache (shared by the cores)
};

// Read once: Linux's /sys/devices/system/cpu/cpu0/cache, else cpuid (leaf 4 on Intel, 0x8000001D on AMD),
// else kDefaultCaches; each level that cannot be read keeps its default.
const CacheInfo& cache_info();

// Parses one sysfs "size" field ("48K", "1280K", "48M", "512"): bytes, or 0 when unreadable.
int64_t parse_cache_size(const char* text);

inline constexpr CacheInfo kDefaultCaches{.l1d = 32 << 10, .l2 = 512 << 10, .l3 = 8 << 20};

}  // namespace lathe::cpu
