// The allocator's block cache: size classes, reuse, the bound (cached + live <= peak + swing, cached <=
// max_cached), LRU eviction, and a randomized run against a model of the cache (CacheModel below).
#include "lathe/base/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

namespace lathe {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

uintptr_t address(const std::shared_ptr<void>& p) { return reinterpret_cast<uintptr_t>(p.get()); }

TEST(Allocator, BlockBytesRoundsToEighthOctaveClasses) {
  // Below 1 MiB: 64-byte multiples. From 2^k up: multiples of 2^k / 8.
  EXPECT_EQ(Allocator::block_bytes(0), 0u);
  EXPECT_EQ(Allocator::block_bytes(1), 64u);
  EXPECT_EQ(Allocator::block_bytes(65), 128u);
  EXPECT_EQ(Allocator::block_bytes(kMiB - 64 - 1), kMiB - 64);
  EXPECT_EQ(Allocator::block_bytes(kMiB - 1), kMiB);  // 64-rounding reaches the first class
  EXPECT_EQ(Allocator::block_bytes(kMiB), kMiB);
  EXPECT_EQ(Allocator::block_bytes(kMiB + 1), kMiB + kMiB / 8);
  EXPECT_EQ(Allocator::block_bytes(2 * kMiB - 1), 2 * kMiB);
  EXPECT_EQ(Allocator::block_bytes(2 * kMiB + 64), 2 * kMiB + kMiB / 4);
  EXPECT_EQ(Allocator::block_bytes(15 * kMiB + kMiB / 2), 16 * kMiB);
  EXPECT_EQ(Allocator::block_bytes(16 * kMiB + 1), 18 * kMiB);  // from 16 MiB: whole 2 MiB multiples
  EXPECT_EQ(Allocator::block_bytes(100 * kMiB), 104 * kMiB);
  EXPECT_EQ(Allocator::block_bytes(size_t{3} << 30), size_t{3} << 30);
}

TEST(Allocator, ClassesWasteUnderAnEighthAndEightPerOctave) {
  size_t previous_class = 0, n_classes = 0;
  for (size_t bytes = kMiB; bytes <= 8 * kMiB; bytes += 4096 + 64) {
    const size_t block = Allocator::block_bytes(bytes);
    EXPECT_GE(block, bytes);
    EXPECT_LT(block - bytes, bytes / 8) << bytes;
    EXPECT_EQ(Allocator::block_bytes(block), block) << bytes;  // a class is its own class
    EXPECT_GE(block, previous_class) << bytes;                 // monotonic
    if (block != previous_class) ++n_classes;
    previous_class = block;
  }
  EXPECT_EQ(n_classes, 3 * Allocator::kClassesPerOctave + 1);  // [1, 8) MiB, and 8 MiB itself
}

TEST(Allocator, EveryClassIsAlignedAndUsableToItsEnd) {
  const Allocator alloc;
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, kMiB - 64}) {
    const auto p = alloc.allocate(bytes);
    EXPECT_EQ(address(p) % 64, 0u) << bytes;
  }
  // Each class from 1 to 64 MiB, asked for by its smallest request: the block is the class's size, 64-byte
  // aligned, and from 2 MiB up on a huge-page boundary (so the kernel can back it with huge pages).
  for (size_t lo = kMiB; lo < 64 * kMiB; lo *= 2) {
    for (size_t i = 0; i < Allocator::kClassesPerOctave; ++i) {
      const size_t cls = lo + i * (lo / Allocator::kClassesPerOctave);
      const size_t request = i == 0 ? cls : cls - lo / Allocator::kClassesPerOctave + 64;
      ASSERT_EQ(Allocator::block_bytes(request), cls);
      const auto p = alloc.allocate(request);
      EXPECT_EQ(address(p) % (cls >= 2 * kMiB ? 2 * kMiB : 64), 0u) << cls;
      auto* bytes = static_cast<unsigned char*>(p.get());
      bytes[0] = 1;
      bytes[cls - 1] = 1;  // a later request anywhere in the class may use all of it
    }
  }
  const auto p = alloc.allocate((size_t{5} << 20) + 64);
  std::memset(p.get(), 1, (size_t{5} << 20) + 64);
}

TEST(Allocator, FreedLargeBlocksAreReusedBySize) {
  const Allocator alloc;
  uintptr_t first = 0;
  {
    const auto p = alloc.allocate(size_t{3} << 20);
    first = address(p);
  }
  EXPECT_EQ(alloc.cached_bytes(), size_t{3} << 20);
  const auto q = alloc.allocate(size_t{3} << 20);
  EXPECT_EQ(address(q), first);
  EXPECT_EQ(alloc.cached_bytes(), 0u);
  EXPECT_EQ(alloc.stats().hits, 1);
  EXPECT_EQ(alloc.stats().misses, 1);
}

TEST(Allocator, NearSizesShareOneClassOthersDoNot) {
  const Allocator alloc;
  uintptr_t first = 0;
  {
    const auto p = alloc.allocate(3 * kMiB + 64);  // class 3.25 MiB
    first = address(p);
  }
  {
    const auto q = alloc.allocate(3 * kMiB + 200 * 1024);  // the same class: the same block
    EXPECT_EQ(address(q), first);
    EXPECT_EQ(alloc.stats().hits, 1);
  }
  const auto r = alloc.allocate(3 * kMiB + kMiB / 4 + 64);  // the next class: a new block
  EXPECT_NE(address(r), first);
  EXPECT_EQ(alloc.stats().misses, 2);
  const auto small = alloc.allocate(kMiB - 128);  // below 1 MiB: not counted, not cached
  EXPECT_EQ(alloc.stats().misses, 2);
  EXPECT_EQ(alloc.cached_bytes(), 3 * kMiB + kMiB / 4);  // the first block still waits in the cache
}

TEST(Allocator, EvictsLeastRecentlyFreedBlocksOfAnyClass) {
  const size_t a = kMiB, b = kMiB + kMiB / 8, c = kMiB + kMiB / 4, d = kMiB + 3 * kMiB / 8;
  const Allocator alloc(/*max_cached_bytes=*/b + c + d);
  std::shared_ptr<void> pa = alloc.allocate(a), pb = alloc.allocate(b), pc = alloc.allocate(c),
                        pd = alloc.allocate(d);  // all live at once: the peak allows caching all four
  const uintptr_t addr_a = address(pa), addr_c = address(pc);
  pa.reset();
  pb.reset();
  pc.reset();
  EXPECT_EQ(alloc.cached_bytes(), a + b + c);
  pa = alloc.allocate(a);  // taken and freed again: now the most recently freed
  EXPECT_EQ(address(pa), addr_a);
  pa.reset();
  pd.reset();  // over max_cached by a + b + c + d - (b + c + d) = a: b, the least recently freed, goes
  EXPECT_EQ(alloc.cached_bytes(), a + c + d);
  EXPECT_EQ(alloc.stats().evictions, 1);
  pc = alloc.allocate(c);
  EXPECT_EQ(address(pc), addr_c);
  pa = alloc.allocate(a);
  EXPECT_EQ(address(pa), addr_a);
  const int64_t misses = alloc.stats().misses;
  pb = alloc.allocate(b);
  EXPECT_EQ(alloc.stats().misses, misses + 1);
}

TEST(Allocator, SizesSeenOneAtATimeKeepTwoBlocksNotOnePerSize) {
  // One live block at a time, each of a new class (a server's [sampled rows, V] logits): peak and swing
  // are the last sizes, so the cache keeps the last two blocks and evicts the older ones.
  const Allocator alloc;
  for (size_t i = 0; i <= 8; ++i) {  // classes 4, 4.5, ..., 8 MiB
    const auto p = alloc.allocate(4 * kMiB + i * (kMiB / 2));
    const AllocatorStats s = alloc.stats();
    EXPECT_LE(s.cached_bytes + s.live_bytes, s.peak_live_bytes + s.swing_bytes);
  }
  EXPECT_EQ(alloc.cached_bytes(), 8 * kMiB + 7 * kMiB + kMiB / 2);
  EXPECT_EQ(alloc.stats().evictions, 7);
}

TEST(Allocator, DefaultHasNoFixedCap) {
  // A training step may free more than any fixed number (GPT-2's [8 x 1024, V] logits alone: 1.6 GB).
  const Allocator alloc;
  { const auto p = alloc.allocate(size_t{3} << 29); }  // 1.5 GiB of address space, never touched
  EXPECT_EQ(alloc.cached_bytes(), size_t{3} << 29);
}

TEST(Allocator, BlockLargerThanMaxCachedIsFreedAndEvictsNothing) {
  const Allocator alloc(/*max_cached_bytes=*/4 * kMiB);
  auto big = alloc.allocate(8 * kMiB);
  { const auto p = alloc.allocate(2 * kMiB); }
  EXPECT_EQ(alloc.cached_bytes(), 2 * kMiB);
  big.reset();
  EXPECT_EQ(alloc.cached_bytes(), 2 * kMiB);
  EXPECT_EQ(alloc.stats().evictions, 0);
  EXPECT_EQ(alloc.stats().live_bytes, 0u);
}

TEST(Allocator, BlocksOutliveTheAllocator) {
  std::shared_ptr<void> large, small;
  {
    const Allocator alloc;
    large = alloc.allocate(3 * kMiB);
    small = alloc.allocate(100);
    const auto cached = alloc.allocate(2 * kMiB);  // freed into the cache before the Allocator goes
  }
  std::memset(large.get(), 1, 3 * kMiB);
  std::memset(small.get(), 1, 100);
  large.reset();  // into the cache the Allocator left behind, freed with it (ASan: no leak, no use after free)
  small.reset();
}

TEST(Allocator, ReleaseCacheFreesEveryCachedBlock) {
  const Allocator alloc;
  auto live = alloc.allocate(2 * kMiB);
  { const auto p = alloc.allocate(5 * kMiB), q = alloc.allocate(kMiB); }
  EXPECT_EQ(alloc.cached_bytes(), 6 * kMiB);
  alloc.release_cache();
  EXPECT_EQ(alloc.cached_bytes(), 0u);
  live.reset();
  EXPECT_EQ(alloc.cached_bytes(), 2 * kMiB);
  const auto again = alloc.allocate(2 * kMiB);
  EXPECT_EQ(alloc.stats().hits, 1);
}

TEST(Allocator, TrainingStepsReuseEveryBufferAfterTheFirst) {
  // A transformer step's shape: forward keeps each layer's activations and makes temporaries, the
  // logits and their gradient are the peak, backward frees activations while making gradients.
  constexpr size_t kTokens = 2048, kWidth = 256, kFfn = 768, kVocab = 4096, kLayers = 4;
  const Allocator alloc;
  const auto params = alloc.allocate(12 * kMiB);  // parameters and optimizer state: live throughout
  const auto step = [&] {
    std::vector<std::shared_ptr<void>> acts;
    for (size_t l = 0; l < kLayers; ++l) {
      acts.push_back(alloc.allocate(kTokens * kWidth * 4));
      { const auto qkv = alloc.allocate(kTokens * 2 * kWidth * 4); }
      acts.push_back(alloc.allocate(kTokens * kFfn * 4));
    }
    auto logits = alloc.allocate(kTokens * kVocab * 4);
    const auto dlogits = alloc.allocate(kTokens * kVocab * 4);
    logits.reset();
    while (!acts.empty()) {
      const auto grad = alloc.allocate(kTokens * kFfn * 4);
      acts.pop_back();
    }
  };
  // The first step finds the peak and the swing; what it had to evict before knowing them, the second
  // step allocates again; from then on every buffer comes from the cache.
  step();
  step();
  const int64_t misses = alloc.stats().misses;
  for (int i = 0; i < 4; ++i) step();
  EXPECT_EQ(alloc.stats().misses, misses);
  EXPECT_EQ(alloc.stats().evictions, 0);
}

TEST(Allocator, ServingStepsCacheAboutOneStepNotEverySize) {
  // Each step: [rows, V] logits for a changing number of sampled rows, and a [rows, 4C] activation.
  constexpr size_t kVocab = 50257, kWidth = 768;
  const Allocator alloc;
  const auto weights = alloc.allocate(256 * kMiB);  // weights and KV cache: live throughout
  std::mt19937 rng(7);
  size_t largest_step = 0;
  for (int i = 0; i < 400; ++i) {
    const size_t rows = 6 + rng() % 195;
    const auto logits = alloc.allocate(rows * kVocab * 4);
    const auto act = alloc.allocate(rows * 4 * kWidth * 4);
    largest_step = std::max(largest_step, Allocator::block_bytes(rows * kVocab * 4) +
                                              Allocator::block_bytes(rows * 4 * kWidth * 4));
  }
  EXPECT_LE(alloc.cached_bytes(), 2 * largest_step);  // the swing is one step: the bound, at most two
  EXPECT_GT(alloc.stats().hits, 0);
}

// The specification of the cache, in the plainest form: a list in LRU order.
struct CacheModel {
  struct Block {
    size_t bytes;
    uintptr_t address;
  };
  std::deque<Block> lru;  // most recently freed first
  size_t max_cached = 0, live = 0, peak = 0, swing = 0, cached = 0;
  int64_t hits = 0, misses = 0, evictions = 0;

  size_t budget() const { return std::min(max_cached, peak + swing - live); }
  void evict_to(size_t target) {
    for (; cached > target; ++evictions) {
      cached -= lru.back().bytes;
      lru.pop_back();
    }
  }
  // The address the allocator must hand out (the most recently freed block of the class), or 0: a new one.
  uintptr_t allocate(size_t bytes) {
    live += bytes;
    peak = std::max(peak, live);
    for (auto it = lru.begin(); it != lru.end(); ++it) {
      if (it->bytes != bytes) continue;
      const uintptr_t a = it->address;
      cached -= bytes;
      lru.erase(it);
      ++hits;
      return a;
    }
    ++misses;
    evict_to(budget());
    return 0;
  }
  void free(size_t bytes, uintptr_t address) {
    live -= bytes;
    swing = std::max(swing, peak - live);
    if (bytes > max_cached) return;
    evict_to(budget() - bytes);
    lru.push_front({bytes, address});
    cached += bytes;
  }
};

// Random allocations and frees, checked op by op against CacheModel: every hit's address, every counter,
// and the bound. Returns the model, to check what the run exercised.
CacheModel run_against_model(size_t max_cached, uint64_t seed) {
  const Allocator alloc(max_cached);
  CacheModel model{.max_cached = max_cached};
  struct Live {
    std::shared_ptr<void> p;
    size_t bytes;
  };
  std::vector<Live> live;
  std::mt19937_64 rng(seed);
  for (int op = 0; op < 20000; ++op) {
    // Phases of many and few live blocks, so the peak and the swing rise, then bind.
    const size_t max_live = (op / 2000) % 2 == 0 ? 24 : 4;
    const bool do_allocate = live.empty() || (live.size() < max_live && rng() % 2 == 0);
    if (do_allocate) {
      // Mostly a few classes (hits), sometimes anything up to 48 MiB.
      const size_t nbytes = rng() % 8 == 0 ? rng() % (48 * kMiB) : kMiB / 2 + (rng() % 12) * (kMiB / 3);
      const size_t bytes = Allocator::block_bytes(nbytes);
      auto p = alloc.allocate(nbytes);
      if (bytes >= Allocator::kMinCachedBlock) {
        const uintptr_t expected = model.allocate(bytes);
        if (expected != 0) {
          EXPECT_EQ(address(p), expected) << "op " << op;
        }
        live.push_back({std::move(p), bytes});
      }
    } else {
      const size_t i = rng() % live.size();
      model.free(live[i].bytes, address(live[i].p));
      std::swap(live[i], live.back());
      live.pop_back();
    }
    const AllocatorStats s = alloc.stats();
    EXPECT_EQ(s.live_bytes, model.live) << "op " << op;
    EXPECT_EQ(s.peak_live_bytes, model.peak) << "op " << op;
    EXPECT_EQ(s.swing_bytes, model.swing) << "op " << op;
    EXPECT_EQ(s.cached_bytes, model.cached) << "op " << op;
    EXPECT_EQ(s.hits, model.hits) << "op " << op;
    EXPECT_EQ(s.misses, model.misses) << "op " << op;
    EXPECT_EQ(s.evictions, model.evictions) << "op " << op;
    EXPECT_LE(s.cached_bytes, max_cached) << "op " << op;
    EXPECT_LE(s.cached_bytes + s.live_bytes, s.peak_live_bytes + s.swing_bytes) << "op " << op;
    if (testing::Test::HasFailure()) break;  // the first difference, not thousands after it
  }
  return model;
}

TEST(Allocator, RandomAllocationsMatchTheModelUnderTheAdaptiveBound) {
  const CacheModel model = run_against_model(Allocator::kNoCap, 42);
  EXPECT_GT(model.hits, 1000);     // the run exercised reuse
  EXPECT_GT(model.evictions, 100);  // and eviction by the bound
}

TEST(Allocator, RandomAllocationsMatchTheModelUnderAFixedCap) {
  const CacheModel model = run_against_model(40 * kMiB, 43);
  EXPECT_GT(model.hits, 1000);
  EXPECT_GT(model.evictions, 100);
  EXPECT_GT(model.peak + model.swing, 40 * kMiB);  // the cap, not the bound, was the limit
}

TEST(Allocator, ThreadsShareOneCacheWithinItsBound) {
  constexpr size_t kMaxCached = 24 * kMiB;
  const Allocator alloc(kMaxCached);
  constexpr int kThreads = 4, kOps = 3000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&alloc, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::shared_ptr<void>> live;
      for (int op = 0; op < kOps; ++op) {
        if (live.size() < 6 && rng() % 2 == 0) {
          live.push_back(alloc.allocate(kMiB + (rng() % 10) * (kMiB / 2)));
          static_cast<unsigned char*>(live.back().get())[0] = 1;
        } else if (!live.empty()) {
          live.erase(live.begin() + rng() % live.size());
        }
        const size_t cached = alloc.cached_bytes();
        if (cached > kMaxCached) ADD_FAILURE() << cached;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_LE(s.cached_bytes, std::min(kMaxCached, s.peak_live_bytes + s.swing_bytes));
  EXPECT_GT(s.hits, 0);
}

}  // namespace
}  // namespace lathe
