// Where the kernel put a block of memory: the /proc/self/smaps entry of the mapping holding an address,
// so tests and benchmarks can check that weights sit on transparent huge pages (base/huge_page_arena.h).
// Linux only: elsewhere (or without procfs) the queries return nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace lathe {

struct MemoryRegion {
  uintptr_t begin = 0, end = 0;    // the mapping (the kernel may merge neighbours with equal flags)
  std::string name;                // the mapped file, "[heap]", or "" for anonymous memory
  size_t rss_bytes = 0;            // Rss: resident
  size_t anon_huge_bytes = 0;      // AnonHugePages: resident on 2 MiB anonymous pages
  bool huge_page_advised = false;  // VmFlags "hg": madvise(MADV_HUGEPAGE)
  bool thp_eligible = false;       // THPeligible: 1, the kernel may back it with huge pages
};

// The mapping that holds p, or nullopt (no such mapping, or no /proc/self/smaps).
std::optional<MemoryRegion> memory_region_of(const void* p);

// The selected mode of /sys/kernel/mm/transparent_hugepage/enabled: "always", "madvise" or "never";
// "" when the kernel has no THP.
std::string transparent_huge_page_mode();

}  // namespace lathe
