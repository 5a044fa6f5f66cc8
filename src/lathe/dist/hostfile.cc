#include "lathe/dist/hostfile.h"

#include <unistd.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "lathe/base/error.h"

namespace lathe::dist {

std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& where) {
  std::vector<HostSlots> hosts;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    HostSlots h;
    if (!(words >> h.host)) continue;  // blank or comment
    for (std::string w; words >> w;) {
      const size_t eq = w.find('=');
      const std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
      if (key == "max_slots" || key == "max-slots") continue;  // mpirun's cap; slots is what we use
      LATHE_CHECK_ARG(key == "slots" || key == "cpu" || key == "count", where, ":", n, ": '", w,
                      "': expected slots=N after the host name");
      size_t used = 0;
      long slots = 0;
      try {
        slots = std::stol(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      LATHE_CHECK_ARG(used == value.size() && used > 0 && slots >= 1 && slots <= std::numeric_limits<int>::max(),
                      where, ":", n, ": '", w, "': slots must be an integer >= 1");
      h.slots = static_cast<int>(slots);
    }
    bool merged = false;
    for (HostSlots& e : hosts)
      if (e.host == h.host) {
        e.slots += h.slots;
        merged = true;
      }
    if (!merged) hosts.push_back(h);
  }
  return hosts;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw IoError(str_cat("hostfile ", path, ": cannot be read"));
  std::stringstream text;
  text << f.rdbuf();
  return parse_hostfile(text.str(), path);
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const HostSlots& h : hosts) n += h.slots;
  return n;
}

std::vector<HostSlots> take_slots(const std::vector<HostSlots>& hosts, int n) {
  std::vector<HostSlots> out;
  for (const HostSlots& h : hosts) {
    if (n <= 0) break;
    out.push_back({h.host, std::min(h.slots, n)});
    n -= out.back().slots;
  }
  return out;
}

std::string format_hostfile(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) out += str_cat(h.host, " slots=", h.slots, "\n");
  return out;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 && host == name;
}

}  // namespace lathe::dist
