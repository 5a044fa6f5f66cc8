// checked_size<T>(value, what): a size, count or id read from a file, converted to T only when it is an
// integer inside [lo, hi]; otherwise an InvalidArgument naming `what` (e.g. "config.json: 'n_head'").
// The one rule for every such conversion, instead of static_casts that wrap, truncate or go negative.
#pragma once

#include <cmath>
#include <concepts>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "lathe/base/error.h"

namespace lathe {

template <std::integral To, class From>
  requires std::is_arithmetic_v<From>
To checked_size(From value, std::string_view what, To lo = 0, To hi = std::numeric_limits<To>::max()) {
  bool ok;
  if constexpr (std::is_floating_point_v<From>) {
    // long double holds every int64 exactly (x86-64: 64-bit mantissa), so the bounds compare exactly.
    const long double v = value;
    ok = std::isfinite(v) && v == std::floor(v) && v >= static_cast<long double>(lo) &&
         v <= static_cast<long double>(hi);
  } else {
    ok = std::cmp_greater_equal(value, lo) && std::cmp_less_equal(value, hi);
  }
  if (!ok) throw InvalidArgument(str_cat(what, " must be an integer in [", +lo, ", ", +hi, "], got ", +value));
  return static_cast<To>(value);
}

}  // namespace lathe
