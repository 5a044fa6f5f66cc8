#!/usr/bin/python3
"""OpenBLAS sgemm through numpy: GFLOP/s, median of 5 half-second runs, and the kernel OpenBLAS chose
(openblas_get_corename), the peer of `gemm_bench`'s BM_Gemm_F32 shapes.

    OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
      LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 bench/openblas_gemm.py [N]
    ... bench/openblas_gemm.py --shapes [--json OUT.json]   # gemm_bench's 40 training shapes, same names

Debian's OpenBLAS 0.3.21 does not know Zen 5 (it falls back to slow kernels): name a kernel the CPU runs
with OPENBLAS_CORETYPE (SkylakeX or Cooperlake on AVX-512, Haswell or Zen on AVX2). On CPUs it knows
(Zen 2/3, Intel up to Ice Lake), leave it unset: it picks its own.
"""
import ctypes
import ctypes.util
import json
import os
import sys
import time

import numpy as np


def gemm_bench_shapes():
    """gemm_bench.cc's BM_Gemm_F32 shapes: (name, trans_a, trans_b, M, N, K)."""
    shapes = [("1024x1024x1024", False, False, 1024, 1024, 1024)]
    c = 768
    for name, out, inp in [("qkv", 3 * c, c), ("attn_proj", c, c), ("fc", 4 * c, c), ("fc_proj", c, 4 * c),
                           ("lm_head", 50257, c)]:
        shapes += [(f"fwd_{name}", False, True, 256, out, inp), (f"dX_{name}", False, False, 256, inp, out),
                   (f"dW_{name}", True, False, out, inp, 256)]
    for batch in (4, 8):
        tokens, prefix = batch * 256, "llama_" if batch == 4 else f"llama{batch}_"
        for name, out, inp in [("attn", c, c), ("up", 2048, c), ("down", c, 2048), ("lm_head", 32000, c)]:
            shapes += [(f"{prefix}fwd_{name}", False, True, tokens, out, inp),
                       (f"{prefix}dX_{name}", False, False, tokens, inp, out),
                       (f"{prefix}dW_{name}", True, False, out, inp, tokens)]
    return shapes


def measure(trans_a, trans_b, m, n, k, seconds=0.5, runs=5):
    """Median GFLOP/s of C = op(A) @ op(B); transposed operands are views (numpy passes the flag to sgemm)."""
    rng = np.random.default_rng(0)
    a = rng.random((k, m) if trans_a else (m, k), dtype=np.float32)
    b = rng.random((n, k) if trans_b else (k, n), dtype=np.float32)
    a_op, b_op = (a.T if trans_a else a), (b.T if trans_b else b)
    c = np.empty((m, n), dtype=np.float32)
    for _ in range(2):
        np.matmul(a_op, b_op, out=c)  # warm-up
    rates = []
    for _ in range(runs):
        t0, calls = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            np.matmul(a_op, b_op, out=c)
            calls += 1
        rates.append(2 * m * n * k * calls / (time.perf_counter() - t0) / 1e9)
    return sorted(rates)[len(rates) // 2], rates


def main(argv):
    lib_dir = os.environ.get("LD_LIBRARY_PATH", "").split(":")[0]
    lib = ctypes.CDLL(os.path.join(lib_dir, "libopenblas.so.0") if lib_dir else ctypes.util.find_library("openblas"))
    lib.openblas_get_corename.restype = ctypes.c_char_p
    core, threads = lib.openblas_get_corename().decode(), os.environ.get("OPENBLAS_NUM_THREADS", "?")
    if "--shapes" in argv:
        out = argv[argv.index("--json") + 1] if "--json" in argv else None
        results = {}
        for name, ta, tb, m, n, k in gemm_bench_shapes():
            median, _ = measure(ta, tb, m, n, k, seconds=0.2, runs=3)
            results[name] = median
            print(f"openblas {core} threads {threads} {name} ({m}x{n}x{k}): {median:.1f} GFLOP/s", flush=True)
        if out:
            with open(out, "w") as f:
                json.dump({"openblas_corename": core, "threads": threads, "gflops": results}, f, indent=1)
        return
    n = int(argv[1]) if len(argv) > 1 else 1024
    median, runs = measure(False, False, n, n, n)
    print(f"openblas {core} threads {threads} sgemm {n}^3: median {median:.1f} GFLOP/s "
          f"(runs {', '.join(f'{r:.1f}' for r in runs)})")


if __name__ == "__main__":
    main(sys.argv)
