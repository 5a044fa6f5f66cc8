#include "lathe/posttrain/packing.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "lathe/base/error.h"

namespace lathe::posttrain {

std::vector<std::vector<int64_t>> pack_bfd(std::span<const int64_t> lengths, int64_t capacity) {
  const auto n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<int64_t>> rows;
  // Open rows by free room, then by opening order: lower_bound(len) is the best fit (O(n log n)).
  std::map<std::pair<int64_t, int64_t>, int64_t> by_room;  // (room, row) -> row
  for (int64_t i : order) {
    const int64_t len = lengths[i];
    LATHE_CHECK_ARG(len >= 1 && len <= capacity, "[pack_bfd] example ", i, " has ", len, " tokens; rows hold 1 to ",
                    capacity);
    auto it = by_room.lower_bound({len, -1});
    int64_t row;
    int64_t room;
    if (it == by_room.end()) {
      row = static_cast<int64_t>(rows.size());
      rows.emplace_back();
      room = capacity;
    } else {
      row = it->second;
      room = it->first.first;
      by_room.erase(it);
    }
    rows[row].push_back(i);
    room -= len;
    if (room > 0) by_room[{room, row}] = row;
  }
  return rows;
}

}  // namespace lathe::posttrain
