#!/usr/bin/env python3
"""% of the fp32 FMA peak for gemm_bench results: reads gemm_bench JSON (with BM_PeakFma in the same run,
ideally --benchmark_enable_random_interleaving=true and --benchmark_repetitions=N) and prints, per
benchmark and thread count, the median GFLOP/s over repetitions and its % of the median peak at the same
thread count. For 1 thread it also prints the same ratio in CPU time (the benchmark's thread does all the
work, so time the OS gave to other processes drops out; on a loaded host this is the steadier figure).
  build/release/gemm_bench --benchmark_filter='BM_(PeakFma|Gemm_F32)/' --benchmark_repetitions=5 \\
    --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_format=json > /tmp/g.json
  python3 bench/gemm_peak_pct.py /tmp/g.json
"""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    with open(path) as f:
        data = json.load(f)
    runs, cpu = defaultdict(list), defaultdict(list)  # GFLOP/s in real time, and in CPU time
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration" or "FLOP/s" not in b:
            continue
        name = b["run_name"].replace("/real_time", "")
        runs[name].append(b["FLOP/s"] / 1e9)
        cpu[name].append(b["FLOP/s"] / 1e9 * b["real_time"] / b["cpu_time"])
    peak = {name.rsplit("/", 1)[1]: statistics.median(v) for name, v in runs.items() if name.startswith("BM_PeakFma")}
    peak_cpu = statistics.median(cpu["BM_PeakFma/f32/1"]) if "BM_PeakFma/f32/1" in cpu else float("nan")
    print(f"load average at start: {data['context'].get('load_avg')}")
    print(f"{'benchmark':40s} {'GFLOP/s':>8s} {'% peak':>7s} {'(min..max GFLOP/s, n)':>24s}  1t: % peak in CPU time")
    for name, v in runs.items():
        threads = name.rsplit("/", 1)[1]
        med = statistics.median(v)
        pct = 100 * med / peak[threads] if threads in peak else float("nan")
        line = f"{name:40s} {med:8.1f} {pct:6.1f}% {f'({min(v):.1f}..{max(v):.1f}, {len(v)})':>24s}"
        if threads == "1":
            line += f"  {100 * statistics.median(cpu[name]) / peak_cpu:5.1f}%"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
