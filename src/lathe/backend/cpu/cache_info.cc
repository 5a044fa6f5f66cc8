// Cache sizes: sysfs first (it also holds what a hypervisor chose to report), cpuid as the fallback.
#include "lathe/backend/cpu/cache_info.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace lathe::cpu {

int64_t parse_cache_size(const char* text) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || v <= 0) return 0;
  switch (*end) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    default: return v;
  }
}

namespace {

// First line of a small text file, or "" when it cannot be read.
std::string read_line(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[64] = {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  std::string s = ok ? buf : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Sets the size of each data or unified cache level found in `info`.
void read_sysfs(CacheInfo& info) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string type = read_line(dir + "type");
    if (type.empty()) break;
    if (type != "Data" && type != "Unified") continue;
    const int64_t size = parse_cache_size(read_line(dir + "size").c_str());
    const std::string level = read_line(dir + "level");
    if (size <= 0) continue;
    if (level == "1") info.l1d = size;
    if (level == "2") info.l2 = size;
    if (level == "3") info.l3 = size;
  }
}

// Deterministic cache parameters (same layout on Intel leaf 4 and AMD leaf 0x8000001D): one sub-leaf per
// cache, type 0 ends the list.
void read_cpuid(CacheInfo& info) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __cpuid(0, eax, ebx, ecx, edx);
  const bool amd = ebx == 0x68747541;  // "Auth"enticAMD
  const unsigned leaf = amd ? 0x8000001D : 4;
  if (amd) {
    __cpuid(0x80000000, eax, ebx, ecx, edx);
    if (eax < leaf) return;
  } else if (eax < leaf) {
    return;
  }
  for (unsigned sub = 0; sub < 16; ++sub) {
    __cpuid_count(leaf, sub, eax, ebx, ecx, edx);
    const unsigned type = eax & 0x1f, level = (eax >> 5) & 7;
    if (type == 0) break;
    if (type != 1 && type != 3) continue;  // 1 data, 3 unified (2 is instruction)
    const int64_t size = int64_t{((ebx >> 22) & 0x3ff) + 1} * (((ebx >> 12) & 0x3ff) + 1) * ((ebx & 0xfff) + 1) *
                         (int64_t{ecx} + 1);
    if (level == 1) info.l1d = size;
    if (level == 2) info.l2 = size;
    if (level == 3) info.l3 = size;
  }
#else
  (void)info;
#endif
}

}  // namespace

const CacheInfo& cache_info() {
  static const CacheInfo info = [] {
    CacheInfo found;
    read_sysfs(found);
    if (found.l1d == 0 || found.l2 == 0) read_cpuid(found);
    return CacheInfo{.l1d = found.l1d > 0 ? found.l1d : kDefaultCaches.l1d,
                     .l2 = found.l2 > 0 ? found.l2 : kDefaultCaches.l2,
                     .l3 = found.l3 > 0 ? found.l3 : kDefaultCaches.l3};
  }();
  return info;
}

}  // namespace lathe::cpu
