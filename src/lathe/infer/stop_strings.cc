#include "lathe/infer/stop_strings.h"

#include <algorithm>

#include "lathe/base/error.h"

namespace lathe {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  for (const std::string& s : stops_) LATHE_CHECK_ARG(!s.empty(), "[stop] a stop string is empty");
}

StopStringMatcher::Output StopStringMatcher::push(std::string_view text) {
  Output out;
  if (stopped_) return out;
  pending_.append(text);
  // Everything before pending_ was emitted, and pending_ keeps every suffix that could begin a stop
  // string, so no match can start before it: the earliest match in pending_ is the first in the text.
  size_t first = std::string::npos, length = 0;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at < first || (at == first && s.size() > length)) first = at, length = s.size();
  }
  if (first != std::string::npos) {
    out.text = pending_.substr(0, include_stop_ ? first + length : first);
    out.stopped = stopped_ = true;
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
      if (std::string_view(pending_).substr(pending_.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string rest;
  rest.swap(pending_);
  return stopped_ ? std::string() : rest;
}

}  // namespace lathe
