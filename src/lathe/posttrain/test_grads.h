// Test helpers of the post-training losses: a model's gradients by name, and their distance to a reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "lathe/models/model.h"

namespace lathe::testing {

using Grads = std::map<std::string, std::vector<float>>;

// m's gradients by parameter name; the model's gradients are cleared.
inline Grads take_grads(Model& m) {
  Grads g;
  for (auto& [n, t] : m.gradients_by_name()) g[n] = t.to_vector();
  m.zero_grad();
  return g;
}

// ||a − b|| / ||b|| over all parameters.
inline double grad_rel_diff(const Grads& a, const Grads& b) {
  double d2 = 0, r2 = 0;
  for (const auto& [n, bv] : b) {
    const std::vector<float>& av = a.at(n);
    for (size_t i = 0; i < bv.size(); ++i) {
      d2 += (static_cast<double>(av[i]) - bv[i]) * (static_cast<double>(av[i]) - bv[i]);
      r2 += static_cast<double>(bv[i]) * bv[i];
    }
  }
  return std::sqrt(d2) / std::max(std::sqrt(r2), 1e-30);
}

}  // namespace lathe::testing
