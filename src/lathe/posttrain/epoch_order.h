// The order in which a post-training objective visits its N examples (rows, pairs): epoch after epoch, each a
// Fisher-Yates shuffle from a counter RNG keyed by (key, epoch), or the stored order when shuffling is off.
// A pure function of the global position, so a resumed run visits the same examples.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "lathe/base/rng.h"

namespace lathe::posttrain {

class EpochOrder {
 public:
  // key: e.g. derive_key(seed, hash_name("sft rows")), one per objective so their orders differ.
  EpochOrder(uint64_t key, bool shuffle) : key_(key), shuffle_(shuffle) {}

  // The index, in [0, n), of the example at global position g (n > 0, the same every call).
  int64_t at(int64_t g, int64_t n) {
    const int64_t epoch = g / n;
    if (!shuffle_) return g % n;
    if (epoch != epoch_) {
      order_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order_[i] = i;
      CounterRng rng{.key = derive_key(key_, static_cast<uint64_t>(epoch))};
      for (int64_t i = n - 1; i > 0; --i)
        std::swap(order_[i], order_[static_cast<int64_t>(rng.next_below(static_cast<uint64_t>(i + 1)))]);
      epoch_ = epoch;
    }
    return order_[g % n];
  }

 private:
  uint64_t key_;
  bool shuffle_;
  int64_t epoch_ = -1;  // the epoch whose order `order_` holds
  std::vector<int64_t> order_;
};

}  // namespace lathe::posttrain
