// Cache detection and the gemm block sizes derived from it.
#include "lathe/backend/cpu/cache_info.h"

#include <gtest/gtest.h>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

TEST(CacheInfo, ParsesSysfsSizes) {
  EXPECT_EQ(parse_cache_size("48K"), 48 << 10);
  EXPECT_EQ(parse_cache_size("1280K\n"), 1280 << 10);
  EXPECT_EQ(parse_cache_size("32M"), 32 << 20);
  EXPECT_EQ(parse_cache_size("512"), 512);
  EXPECT_EQ(parse_cache_size(""), 0);
  EXPECT_EQ(parse_cache_size("K"), 0);
}

// Whatever the machine reports (or the defaults), the levels are ordered and plausible.
TEST(CacheInfo, DetectedSizesAreOrdered) {
  const CacheInfo& c = cache_info();
  EXPECT_GE(c.l1d, 4 << 10);
  EXPECT_GT(c.l2, c.l1d);
  EXPECT_GE(c.l3, c.l2 / 4);  // some CPUs have no L3 larger than L2; the default stands in
}

// Block sizes follow the caches: the packed B chunk in half of L2, the A micro-panel in half of L1d, K
// blocks even (bf16 pairs), chunks whole panels; a 512 KiB L2 (Zen 3) gets a smaller chunk than 1.25 MiB.
TEST(GemmBlocking, FollowsCacheSizes) {
  const CacheInfo zen3{.l1d = 32 << 10, .l2 = 512 << 10, .l3 = 32 << 20};
  const CacheInfo icelake{.l1d = 48 << 10, .l2 = 1280 << 10, .l3 = 48 << 20};
  for (const CacheInfo& c : {zen3, icelake, kDefaultCaches})
    for (auto [mr, nr] : {std::pair{6, 16}, std::pair{14, 32}, std::pair{4, 16}}) {
      const GemmBlocking b = gemm_blocking_for(c, mr, nr);
      EXPECT_EQ(b.kc % 2, 0);
      EXPECT_GE(b.kc, 128);
      EXPECT_LE(b.kc * mr * 4, c.l1d / 2);
      EXPECT_EQ(b.nc % nr, 0);
      EXPECT_GE(b.nc, 4 * nr);
      EXPECT_LE(b.kc * b.nc * 4, c.l2 / 2);
      EXPECT_GT(b.a_block, 0);
      EXPECT_LE(b.a_block * 4, c.l3 / 4);
    }
  EXPECT_LT(gemm_blocking_for(zen3, 6, 16).nc, gemm_blocking_for(icelake, 6, 16).nc);
  // Tiny caches still give usable blocks (the lower bounds win).
  const GemmBlocking tiny = gemm_blocking_for(CacheInfo{.l1d = 1 << 10, .l2 = 4 << 10, .l3 = 16 << 10}, 6, 16);
  EXPECT_EQ(tiny.kc, 128);
  EXPECT_EQ(tiny.nc, 64);
  EXPECT_EQ(tiny.a_block, 1 << 16);
}

}  // namespace
}  // namespace lathe::cpu
