#include "lathe/base/memory_region.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace lathe {
namespace {

// "Rss:   16 kB" -> 16384 when the line starts with `key`.
bool read_kb(const std::string& line, const char* key, size_t* bytes) {
  if (line.rfind(key, 0) != 0) return false;
  unsigned long long kb = 0;
  if (std::sscanf(line.c_str() + std::char_traits<char>::length(key), " %llu", &kb) == 1) *bytes = kb * 1024;
  return true;
}

}  // namespace

std::optional<MemoryRegion> memory_region_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::optional<MemoryRegion> found;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    int name_at = 0;
    // A mapping's header: "begin-end perms offset dev inode [name]"; its fields follow on "Key: value" lines.
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %n", &begin, &end, &name_at) >= 2 &&
        name_at > 0) {
      if (found) return found;  // the fields of the mapping holding p are complete
      if (addr >= begin && addr < end) found = MemoryRegion{.begin = begin, .end = end, .name = line.substr(name_at)};
      continue;
    }
    if (!found) continue;
    if (read_kb(line, "Rss:", &found->rss_bytes) || read_kb(line, "AnonHugePages:", &found->anon_huge_bytes)) continue;
    if (line.rfind("THPeligible:", 0) == 0) {
      found->thp_eligible = line.find('1') != std::string::npos;  // "THPeligible:    1"
      continue;
    }
    if (line.rfind("VmFlags:", 0) == 0) {
      std::istringstream flags(line.substr(8));
      for (std::string f; flags >> f;) found->huge_page_advised = found->huge_page_advised || f == "hg";
    }
  }
  return found;
}

std::string transparent_huge_page_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);  // "always [madvise] never": the selected one in brackets
  const size_t open = modes.find('['), close = modes.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return modes.substr(open + 1, close - open - 1);
}

}  // namespace lathe
