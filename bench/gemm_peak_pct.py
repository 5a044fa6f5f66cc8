#!/usr/bin/env python3
"""% of peak for gemm_bench results: reads gemm_bench JSON (with BM_PeakFma in the same run, ideally
--benchmark_enable_random_interleaving=true and --benchmark_repetitions=N) and prints, per benchmark and
thread count, the tier it ran (its label: lathe's cpu::gemm_isa()), the median GFLOP/s over repetitions
and its % of the median peak of that tier at the same thread count: fp32_fma_avx2 for avx2,
fp32_fma_avx512 for avx512 (and for f32 products on avx512bf16), bf16_dot_avx512bf16 for the bf16 x bf16
products on avx512bf16; a scalar tier is divided by the widest fp32 peak. For 1 thread it also prints the
same ratio in CPU time (the benchmark's thread does all the work, so time the OS gave to other processes
drops out; on a loaded host this is the steadier figure).
  build/release/gemm_bench --benchmark_filter='BM_(PeakFma|Gemm_F32)/' --benchmark_repetitions=5 \\
    --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_format=json > /tmp/g.json
  python3 bench/gemm_peak_pct.py /tmp/g.json
"""
import json
import statistics
import sys
from collections import defaultdict


def peak_probe(name, tier, peaks):
    """The BM_PeakFma probe a benchmark run on `tier` is divided by (None: no such probe in the run)."""
    if tier == "avx512bf16" and name.startswith("BM_Gemm_Bf16/") and "bf16_dot_avx512bf16" in peaks:
        return "bf16_dot_avx512bf16"
    want = {"avx2": "fp32_fma_avx2", "avx512": "fp32_fma_avx512", "avx512bf16": "fp32_fma_avx512"}.get(tier)
    if want in peaks:
        return want
    fp32 = [p for p in ("fp32_fma_avx512", "fp32_fma_avx2") if p in peaks]
    return fp32[0] if fp32 else None


def main(path):
    with open(path) as f:
        data = json.load(f)
    runs, cpu, tiers = defaultdict(list), defaultdict(list), {}  # GFLOP/s in real and CPU time; label per name
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration" or "FLOP/s" not in b:
            continue
        name = b["run_name"].replace("/real_time", "")
        runs[name].append(b["FLOP/s"] / 1e9)
        cpu[name].append(b["FLOP/s"] / 1e9 * b["real_time"] / b["cpu_time"])
        tiers[name] = b.get("label", "")
    # peaks[probe][threads] = (median GFLOP/s in real time, in CPU time); names BM_PeakFma/<probe>/<threads>
    peaks = defaultdict(dict)
    for name, v in runs.items():
        if name.startswith("BM_PeakFma/"):
            _, probe, threads = name.split("/")
            peaks[probe][threads] = (statistics.median(v), statistics.median(cpu[name]))
    print(f"load average at start: {data['context'].get('load_avg')}")
    print("peaks: " + ", ".join(f"{p} {t}t {v[0]:.1f}" for p in sorted(peaks) for t, v in sorted(peaks[p].items())))
    print(f"{'benchmark':40s} {'tier':>10s} {'GFLOP/s':>8s} {'% peak':>7s} {'of':>20s} {'(min..max GFLOP/s, n)':>24s}"
          "  1t: % peak in CPU time")
    for name, v in runs.items():
        if name.startswith("BM_PeakFma/"):
            continue
        threads = name.rsplit("/", 1)[1]
        tier = tiers.get(name, "")
        probe = peak_probe(name, tier, peaks)
        pk = peaks[probe].get(threads) if probe else None
        med = statistics.median(v)
        pct = 100 * med / pk[0] if pk else float("nan")
        line = (f"{name:40s} {tier:>10s} {med:8.1f} {pct:6.1f}% {probe or '-':>20s} "
                f"{f'({min(v):.1f}..{max(v):.1f}, {len(v)})':>24s}")
        if threads == "1" and pk:
            line += f"  {100 * statistics.median(cpu[name]) / pk[1]:5.1f}%"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
