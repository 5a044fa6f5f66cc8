#!/usr/bin/python3
"""OpenBLAS sgemm through numpy at N x N x N: GFLOP/s, median of 5 half-second runs, and the kernel
OpenBLAS chose (openblas_get_corename), the peer of `gemm_bench`'s BM_Gemm_F32/1024x1024x1024.

    OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
      LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 bench/openblas_gemm.py [N]

Debian's OpenBLAS 0.3.21 does not know Zen 5 (it falls back to slow kernels): name a kernel the CPU runs
with OPENBLAS_CORETYPE (SkylakeX or Cooperlake on AVX-512, Haswell or Zen on AVX2).
"""
import ctypes
import ctypes.util
import os
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
lib_dir = os.environ.get("LD_LIBRARY_PATH", "").split(":")[0]
lib = ctypes.CDLL(os.path.join(lib_dir, "libopenblas.so.0") if lib_dir else ctypes.util.find_library("openblas"))
lib.openblas_get_corename.restype = ctypes.c_char_p
a = np.random.rand(n, n).astype(np.float32)
b = np.random.rand(n, n).astype(np.float32)
for _ in range(3):
    a @ b  # warm-up
runs = []
for _ in range(5):
    t0, k = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.5:
        a @ b
        k += 1
    runs.append(2 * n**3 * k / (time.perf_counter() - t0) / 1e9)
print(f"openblas {lib.openblas_get_corename().decode()} threads {os.environ.get('OPENBLAS_NUM_THREADS', '?')} "
      f"sgemm {n}^3: median {sorted(runs)[2]:.1f} GFLOP/s (runs {', '.join(f'{r:.1f}' for r in runs)})")
