// <immintrin.h> for the SIMD kernel files. GCC 12 flags the intrinsics' internal _mm512_undefined_*() /
// _mm256_undefined_*() as (maybe-)uninitialized once inlined (GCC PR 105593, fixed in 13); the warning is
// spurious, so it is turned off for the files that include this header (and only them).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
