#!/usr/bin/env python3
"""Turns bench/run_all.sh's raw JSON (bench/out/raw) into a markdown summary on stdout.

    python3 bench/summarize.py bench/out/raw > bench/out/summary.md

Training: per (model, threads), each round gives a lathe median step time (Google Benchmark median over
its repetitions) and a PyTorch median step time (torch_train_step.py); the table shows the median over
rounds of each, the ratio of those medians (lathe tokens/s / PyTorch tokens/s), the per-round ratios and
the spread (max - min) / median of each side across rounds (over 10%: rerun). Decode: Google Benchmark's
medians over repetitions of decode_bench, beside llama.cpp's llama-bench (pp / tg) where run_all.sh ran it.
Every lathe figure names its tier (lathe_tier.txt, from `lathe bench tier`) and its % of peak divides by the
peak of that tier measured in the same run (peak_fma.json); PyTorch's names the OpenBLAS kernel it chose.
"""
import datetime
import glob
import json
import os
import re
import statistics
import sys

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


# OpenBLAS kernel names (openblas_get_corename) -> the lathe tier whose FMA peak bounds them.
OPENBLAS_TIER = {"skylakex": "avx512", "cooperlake": "avx512", "sapphirerapids": "avx512",
                 "haswell": "avx2", "zen": "avx2", "skylake": "avx2"}


def tier_peaks(p):
    """{tier: {threads: GFLOP/s}} from peak_fma.json: fp32_fma_<tier>_<n>t keys (avx512bf16 runs f32 on the
    avx512 FMAs); "widest" is the widest fp32 FMA present (fp32_fma_gflops_<n>t)."""
    out = {}
    for k, v in p.items():
        m = re.fullmatch(r"fp32_fma_(avx2|avx512|gflops)_(\d+)t", k)
        if m:
            out.setdefault({"gflops": "widest"}.get(m.group(1), m.group(1)), {})[int(m.group(2))] = v
    if "avx512" in out:
        out["avx512bf16"] = out["avx512"]
    return out


def peak_for(peaks, tier, t):
    """(GFLOP/s, tier name) of the peak a figure of `tier` at t threads is divided by, or (None, '')."""
    if tier in peaks and t in peaks[tier]:
        return peaks[tier][t], tier
    if "widest" in peaks and t in peaks["widest"]:
        return peaks["widest"][t], "widest fp32"
    return None, ""


def main():
    raw = sys.argv[1] if len(sys.argv) > 1 else "bench/out/raw"
    out = []
    files = glob.glob(os.path.join(raw, "*.json"))
    if files:
        stamps = sorted(os.path.getmtime(f) for f in files)
        fmt = lambda t: datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")
        out.append(f"# lathe benchmark summary\n\nRaw results in `{raw}`, written {fmt(stamps[0])} .. {fmt(stamps[-1])}.\n")

    # % of peak divides by the peak measured in this run, for the tier that ran.
    peaks = {}
    pf = os.path.join(raw, "peak_fma.json")
    if os.path.exists(pf):
        p = load(pf)
        peaks = tier_peaks(p)
        figures = ", ".join(f"{k.rsplit('_', 1)[0]} {v:.0f} ({k.rsplit('_', 1)[1]})" for k, v in p.items()
                            if isinstance(v, (int, float)) and not k.startswith("fp32_fma_gflops"))
        absent = ", ".join(p.get("absent", [])) or "none"
        out.append(f"Compute peaks measured by bench/peak_fma in this run (GFLOP/s, int8: GOP/s; threads): {figures}. "
                   f"Absent on this CPU (skipped): {absent}. % of peak below divides by the fp32 FMA peak of the "
                   "tier that ran, at the same thread count.\n")
    else:
        out.append("No peak_fma.json in this run: no % of peak.\n")
    tf = os.path.join(raw, "lathe_tier.txt")
    lathe_tier = open(tf).read().strip() if os.path.exists(tf) else "?"
    out.append(f"lathe's kernels ran the **{lathe_tier}** tier (`lathe bench tier`; LATHE_CPU caps it).\n")

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
            d["meta"]["corename"] = doc.get("openblas_corename") or "?"
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
            corename = meta.get("corename", "?")
            torch_tier = OPENBLAS_TIER.get(corename.lower(), "widest")

            def fmt_side(s, tier, who):
                if s is None:
                    return "-", "-", "-"
                g = gf / s
                pk, of = peak_for(peaks, tier, t)
                tail = f", {who}" if who else ""
                return f"{s:.3f}", f"{tokens / s:.0f}", \
                    f"{g:.0f} ({100 * g / pk:.0f}% of the {of} peak{tail})" if pk else f"{g:.0f} ({tier}{tail})"

            l1, l2, l3 = fmt_side(ls, lathe_tier, "")
            t1, t2, t3 = fmt_side(ts, torch_tier, f"OpenBLAS {corename}")
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
            names = sorted({m["meta"].get("corename", "?") for m in runs.values() if m["meta"].get("blas")})
            out.append(f"PyTorch BLAS: `{os.path.basename(blas[-1])}` ({os.path.dirname(blas[-1])}), OpenBLAS kernel "
                       f"{', '.join(names)} (OPENBLAS_CORETYPE={', '.join(cts)}; auto = OpenBLAS's own detection).\n")

    # ---- decode (and llama.cpp's llama-bench on the same shape, when run_all.sh ran it) ----
    llama = {}  # (lathe dtype, threads) -> {"pp": tok/s, "tg": tok/s, "pp_n": prompt, "tg_n": generated}
    for dt_llama, dt_lathe in (("F32", "F32"), ("F16", "BF16")):  # F16 is llama.cpp's 16-bit peer of bf16
        f = os.path.join(raw, f"llamacpp_{dt_llama}.json")
        if not os.path.exists(f):
            continue
        try:
            records = load(f)
        except (json.JSONDecodeError, OSError):
            continue
        for rec in records:
            d = llama.setdefault((dt_lathe, int(rec["n_threads"])), {"name": dt_llama})
            if rec.get("n_gen", 0) > 0 and rec.get("n_prompt", 0) == 0:
                d["tg"], d["tg_n"] = rec["avg_ts"], rec["n_gen"]
            elif rec.get("n_prompt", 0) > 0 and rec.get("n_gen", 0) == 0:
                d["pp"], d["pp_n"] = rec["avg_ts"], rec["n_prompt"]
    dec = os.path.join(raw, "decode.json")
    if os.path.exists(dec):
        rows = gb_median(load(dec))
        out.append("## Batch-1 prefill and decode, llama-1B (random prompt, greedy, KV cache)\n")
        out.append("Roofline tok/s = bandwidth / weight bytes per token (all matrices incl. the tied head, in the loaded "
                   "dtype); bandwidth = mean of the probes right before and after each run (best of 3 passes each). "
                   "Target: >= 80%." + (" llama.cpp: llama-bench on the GGUF of the same shape (F16 beside lathe's "
                                        "bf16), ratio = lathe / llama.cpp." if llama else
                                        " (llama.cpp columns skipped: LLAMA_CPP_BIN / LLAMA_GGUF_DIR not set.)") + "\n")
        head = ("| weights | tier | threads | decode tok/s | prefill tok/s | GB/token | achieved GB/s | read-only GB/s | "
                "% of read roofline | triad GB/s | % of triad roofline | probe drift | target (read / triad) |")
        if llama:
            head += " llama.cpp pp tok/s | prefill ratio | llama.cpp tg tok/s | decode ratio |"
        out.append(head)
        out.append("|" + " --- |" * (head.count("|") - 1))
        for b in rows:
            n = b.get("run_name", b["name"])
            if not n.startswith("BM_Decode"):
                continue
            dt = n.split("/")[0].split("_")[-1]  # BM_Decode_Llama1B_F32/threads:1 -> F32
            t = int(b["threads"])
            pr, pt = b["roofline_pct_read"], b["roofline_pct_triad"]
            tgt = "/".join("met" if x >= DECODE_TARGET_PCT else "MISSED" for x in (pr, pt))
            line = (f"| {dt} | {lathe_tier} | {t} | {b['decode_tok/s']:.2f} | {b['prefill_tok/s']:.1f} | "
                    f"{b['weight_GB/tok']:.3f} | {b['achieved_GB/s']:.1f} | {b['read_GB/s']:.1f} | {pr:.0f}% | "
                    f"{b['triad_GB/s']:.1f} | {pt:.0f}% | {b['bw_drift_pct']:.0f}% | {tgt} |")
            if llama:
                ll = llama.get((dt, t), {})
                pp, tg = ll.get("pp"), ll.get("tg")
                line += (f" {pp:.1f} ({ll['name']} pp{ll['pp_n']}) | {b['prefill_tok/s'] / pp:.2f}x |" if pp else " - | - |")
                line += (f" {tg:.2f} ({ll['name']} tg{ll['tg_n']}) | {b['decode_tok/s'] / tg:.2f}x |" if tg else " - | - |")
            out.append(line)
        probes = [b for b in rows if b.get("run_name", b["name"]).startswith("BM_Bandwidth")]
        if probes:
            out.append("\nStand-alone probes (GB/s): " + ", ".join(
                f"{re.sub(r'/iterations.*', '', b.get('run_name', b['name']).replace('BM_Bandwidth_', ''))} {b['GB/s']:.1f}"
                for b in probes))
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
