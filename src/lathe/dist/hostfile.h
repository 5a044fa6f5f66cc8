// OpenMPI hostfiles: one host per line, `HOST [slots=N]` (slots: processes it may run, default 1), `#`
// comments. `lathe launch` re-reads the file before every attempt, so editing it adds or removes hosts
// from a running elastic job (docs/multi-node.md).
#pragma once

#include <string>
#include <vector>

namespace lathe::dist {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// The hosts of a hostfile's text, in order, a host named twice merged (slots added). `where` prefixes
// errors: InvalidArgument for a malformed line (line number and text).
std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& where);
// parse_hostfile of a file; IoError when it cannot be read.
std::vector<HostSlots> read_hostfile(const std::string& path);

int total_slots(const std::vector<HostSlots>& hosts);

// The first `n` slots in host order (rank 0 on the first host): what one attempt's mpirun gets.
std::vector<HostSlots> take_slots(const std::vector<HostSlots>& hosts, int n);

// The text of a hostfile for `hosts` ("HOST slots=N" lines).
std::string format_hostfile(const std::vector<HostSlots>& hosts);

// localhost, 127.x.y.z, ::1 or this machine's hostname: no ssh needed to reach it.
bool is_local_host(const std::string& host);

}  // namespace lathe::dist
