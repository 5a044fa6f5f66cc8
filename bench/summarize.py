#!/usr/bin/env python3
"""Turns bench/run_all.sh's raw JSON (bench/out/raw) into a markdown summary on stdout.

    python3 bench/summarize.py bench/out/raw > bench/out/summary.md

Training: per (model, threads), each round gives a lathe median step time (Google Benchmark median over
its repetitions) and a PyTorch median step time (torch_train_step.py); the table shows the median over
rounds of each, the ratio of those medians (lathe tokens/s / PyTorch tokens/s), the per-round ratios and
the spread (max - min) / median of each side across rounds (over 10%: rerun). Decode: Google Benchmark's
medians over repetitions of decode_bench.
"""
import datetime
import glob
import json
import os
import re
import statistics
import sys

# fp32 FMA peak of this machine, GFLOP/s (/work/shared/PERF.md; 2 cores: 514-545, the top taken).
PERF_MD_FMA_PEAK = {1: 273.0, 2: 545.0}
TRAIN_TARGET_RATIO = 1.5
DECODE_TARGET_PCT = 80.0


def load(path):
    with open(path) as f:
        return json.load(f)


def gb_median(doc):
    """The 'median' aggregate of a Google Benchmark JSON (or the single run when not repeated)."""
    rows = doc.get("benchmarks", [])
    med = [b for b in rows if b.get("aggregate_name") == "median"]
    return med or [b for b in rows if b.get("run_type") == "iteration"]


def to_seconds(b):
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
    return b["real_time"] * unit


def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) * 100 if len(xs) > 1 else 0.0


def main():
    raw = sys.argv[1] if len(sys.argv) > 1 else "bench/out/raw"
    out = []
    files = glob.glob(os.path.join(raw, "*.json"))
    if files:
        stamps = sorted(os.path.getmtime(f) for f in files)
        fmt = lambda t: datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")
        out.append(f"# lathe benchmark summary\n\nRaw results in `{raw}`, written {fmt(stamps[0])} .. {fmt(stamps[-1])}.\n")

    # % of peak divides by the peak measured in this run (these machines are not PERF.md's Zen 5);
    # PERF.md's figures only when no measurement is present.
    peak = dict(PERF_MD_FMA_PEAK)
    pf = os.path.join(raw, "peak_fma.json")
    if os.path.exists(pf):
        p = load(pf)
        peak = {1: p['fp32_fma_gflops_1t'], 2: p['fp32_fma_gflops_2t']}
        out.append(f"FMA peak measured by bench/peak_fma in this run: fp32 {p['fp32_fma_gflops_1t']:.0f} GFLOP/s at 1 thread, "
                   f"{p['fp32_fma_gflops_2t']:.0f} at 2 (PERF.md: 273 / 514-545); bf16 dot {p.get('bf16_dot_gflops_1t', 0):.0f} / "
                   f"{p.get('bf16_dot_gflops_2t', 0):.0f} (PERF.md: 555 / 1071). % of peak below divides by these measured "
                   "figures.\n")

    # ---- training ----
    runs = {}  # (model, threads) -> {"lathe": [(round, s)], "torch": [(round, s)], ...}
    for f in glob.glob(os.path.join(raw, "train_*.json")):
        m = re.match(r"train_(lathe|torch)_(\w+?)_t(\d+)_r(\d+)\.json", os.path.basename(f))
        if not m:
            continue
        impl, model, t, r = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        d = runs.setdefault((model, t), {"lathe": [], "torch": [], "lathe_cpu": [], "torch_cpu": [], "meta": {}})
        try:
            doc = load(f)
        except (json.JSONDecodeError, OSError):
            continue
        if impl == "lathe":
            rows = gb_median(doc)
            if not rows:
                continue
            b = rows[0]
            d["lathe"].append((r, to_seconds(b)))
            d["lathe_cpu"].append(b["cpu_time"] * to_seconds(b) / b["real_time"])
            d["meta"]["lathe_gflop_step"] = b["GFLOP/s"] * to_seconds(b)
            d["meta"]["tokens"] = b["tokens/s"] * to_seconds(b)
            d["meta"]["name"] = b.get("run_name", b["name"])
            bt = re.search(r"_B(\d+)_T(\d+)", d["meta"]["name"])
            if bt:
                d["meta"].setdefault("shape", f"B={bt.group(1)} T={bt.group(2)}")
        else:
            d["torch"].append((r, doc["median_step_s"]))
            if "median_cpu_s" in doc:
                d["torch_cpu"].append(doc["median_cpu_s"])
            d["meta"]["torch_gflop_step"] = doc["gflops_per_step"]
            d["meta"]["tokens"] = doc["batch"] * doc["seq"]
            d["meta"]["shape"] = f"B={doc['batch']} T={doc['seq']}"
            d["meta"]["blas"] = doc.get("blas", [])
            d["meta"]["coretype"] = doc.get("openblas_coretype", "auto")
    if runs:
        out.append("## Training step (fp32, forward + backward, no optimizer)\n")
        out.append("FLOPs per step = 6 N (B T) + 12 L T C (B T); medians over interleaved rounds; ratio = lathe tok/s "
                   "/ PyTorch tok/s (target >= 1.5x at 2 threads). CPU-s/step: CPU seconds of all the process's threads per step (medians; spin-waiting counts): on a shared host it shows the work done when the wall-clock figures are distorted by time-slicing.\n")
        out.append("| model | shape | threads | lathe s/step | lathe tok/s | lathe GFLOP/s (% FMA peak) | PyTorch s/step | "
                   "PyTorch tok/s | PyTorch GFLOP/s (% peak) | ratio | per-round ratios | spread lathe / torch | target | "
                   "CPU-s/step lathe / torch (ratio) |")
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for (model, t) in sorted(runs):
            d = runs[(model, t)]
            meta = d["meta"]
            tokens = meta.get("tokens", 0)
            name = {"gpt2": "GPT-2 124M", "llama": "Llama-110M"}.get(model, model)
            shape = meta.get("shape", "")
            ls = statistics.median([s for _, s in d["lathe"]]) if d["lathe"] else None
            ts = statistics.median([s for _, s in d["torch"]]) if d["torch"] else None
            gf = meta.get("lathe_gflop_step") or meta.get("torch_gflop_step") or 0
            pk = peak.get(t)

            def fmt_side(s):
                if s is None:
                    return "-", "-", "-"
                g = gf / s
                return f"{s:.3f}", f"{tokens / s:.0f}", f"{g:.0f} ({100 * g / pk:.0f}%)" if pk else f"{g:.0f}"

            l1, l2, l3 = fmt_side(ls)
            t1, t2, t3 = fmt_side(ts)
            ratio = ts / ls if ls and ts else None
            per_round = []
            lr, tr = dict(d["lathe"]), dict(d["torch"])
            for r in sorted(set(lr) & set(tr)):
                per_round.append(f"{tr[r] / lr[r]:.2f}")
            sp = f"{spread([s for _, s in d['lathe']]):.0f}% / {spread([s for _, s in d['torch']]):.0f}%" \
                if d["lathe"] and d["torch"] else "-"
            cpu_col = "-"
            if d["lathe_cpu"] and d["torch_cpu"]:
                lc, tc = statistics.median(d["lathe_cpu"]), statistics.median(d["torch_cpu"])
                cpu_col = f"{lc:.2f} / {tc:.2f} ({tc / lc:.2f}x)"
            target = "-"
            if ratio is not None and t == 2:
                target = "met" if ratio >= TRAIN_TARGET_RATIO else "MISSED"
            out.append(f"| {name} | {shape} | {t} | {l1} | {l2} | {l3} | {t1} | {t2} | {t3} | "
                       f"{f'{ratio:.2f}x' if ratio else '-'} | {' '.join(per_round) or '-'} | {sp} | {target} | {cpu_col} |")
        out.append("")
        blas = next((m["meta"].get("blas") for m in runs.values() if m["meta"].get("blas")), None)
        if blas:
            cts = sorted({m["meta"].get("coretype", "auto") for m in runs.values() if m["meta"].get("blas")})
            out.append(f"PyTorch BLAS: `{os.path.basename(blas[-1])}` ({os.path.dirname(blas[-1])}), "
                       f"OPENBLAS_CORETYPE={', '.join(cts)} (auto = OpenBLAS's detection: Prescott/SSE3 on Zen 5).\n")

    # ---- decode ----
    dec = os.path.join(raw, "decode.json")
    if os.path.exists(dec):
        rows = gb_median(load(dec))
        out.append("## Batch-1 decode, llama-1B (16-token prompt, greedy, KV cache)\n")
        out.append("Roofline tok/s = bandwidth / weight bytes per token (all matrices incl. the tied head, in the loaded "
                   "dtype); bandwidth = mean of the probes right before and after each run (best of 3 passes each). "
                   "Target: >= 80%.\n")
        out.append("| weights | threads | decode tok/s | prefill tok/s | GB/token | achieved GB/s | read-only GB/s | "
                   "% of read roofline | triad GB/s | % of triad roofline | probe drift | target (read / triad) |")
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for b in rows:
            n = b.get("run_name", b["name"])
            if not n.startswith("BM_Decode"):
                continue
            dt = n.split("/")[0].split("_")[-1]  # BM_Decode_Llama1B_F32/threads:1 -> F32
            t = int(b["threads"])
            pr, pt = b["roofline_pct_read"], b["roofline_pct_triad"]
            tgt = "/".join("met" if x >= DECODE_TARGET_PCT else "MISSED" for x in (pr, pt))
            out.append(f"| {dt} | {t} | {b['decode_tok/s']:.2f} | {b['prefill_tok/s']:.1f} | {b['weight_GB/tok']:.3f} | "
                       f"{b['achieved_GB/s']:.1f} | {b['read_GB/s']:.1f} | {pr:.0f}% | {b['triad_GB/s']:.1f} | {pt:.0f}% | "
                       f"{b['bw_drift_pct']:.0f}% | {tgt} |")
        probes = [b for b in rows if b.get("run_name", b["name"]).startswith("BM_Bandwidth")]
        if probes:
            out.append("\nStand-alone probes (GB/s): " + ", ".join(
                f"{re.sub(r'/iterations.*', '', b.get('run_name', b['name']).replace('BM_Bandwidth_', ''))} {b['GB/s']:.1f}"
                for b in probes))
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
