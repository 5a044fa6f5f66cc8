#!/usr/bin/env python3
"""Training throughput, lathe vs PyTorch, side by side in one run (issue: pre-training speed).

Both run a full training step (forward, backward, global-norm clipping, AdamW) in fp32 on random tokens:
lathe through `lathe pretrain` with recipes/gpt2-124M.yaml or recipes/llama-110M.yaml (random-token shards
written here), PyTorch through bench/torch_train_step.py --optimizer. The two alternate (A B A B ...) so a
busy machine slows both alike. Reported: median tokens/s over the timed steps, the ratio, and each
process's peak RSS (getrusage of the child).

    bench/pretrain_bench.py [--rounds 2] [--steps 4] [--threads 2] [--models gpt2,llama] [--out bench/out/pretrain]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from make_llmc_gpt2 import write_shard  # same folder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {  # name: (recipe, batch, seq, vocab, torch model name)
    "gpt2": ("recipes/gpt2-124M.yaml", 4, 64, 50257, "gpt2"),
    "llama": ("recipes/llama-110M.yaml", 8, 256, 32000, "llama110m"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per run (after one warm-up step)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/out/pretrain"))
    ap.add_argument("--lathe", default=os.path.join(ROOT, "build/release/lathe"))
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env_torch = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads),
                     LD_LIBRARY_PATH="/usr/lib/x86_64-linux-gnu/openblas-openmp")
    # OpenBLAS picks its own kernel for this CPU unless TORCH_OPENBLAS_CORETYPE names one (run_all.sh's knob).
    if os.environ.get("TORCH_OPENBLAS_CORETYPE", "auto") != "auto":
        env_torch["OPENBLAS_CORETYPE"] = os.environ["TORCH_OPENBLAS_CORETYPE"]
    tier = subprocess.run([a.lathe, "bench", "tier"], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    corename = "?"
    results = []
    for name in a.models.split(","):
        recipe, B, T, vocab, torch_name = SHAPES[name]
        data = os.path.join(a.out, f"data_{name}")
        os.makedirs(data, exist_ok=True)
        shard = os.path.join(data, "rand_train_000000.bin")
        if not os.path.exists(shard):
            write_shard(shard, B * T * (a.steps + 2) * 4 + 1, 0, vocab)
        lathe_rates, torch_rates, lathe_rss, torch_rss = [], [], [], []
        for r in range(a.rounds):
            run_dir = os.path.join(a.out, f"run_{name}_{r}")
            subprocess.run(["rm", "-rf", run_dir])
            # Separate measurement processes: RUSAGE_CHILDREN's max only grows, so take each peak from a
            # wrapper that reports its own child's ru_maxrss.
            cmd = [a.python, "-c", WRAP, a.lathe, "pretrain", recipe, f"data.train={data}/rand", "data.val=",
                   f"data.batch_size={B}", f"data.seq_len={T}", f"schedule.steps={a.steps + 1}",
                   "schedule.warmup_steps=1", f"run.threads={a.threads}", f"run.dir={run_dir}", "eval.every=0",
                   "checkpoint.every=0", "--no-samples"]
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
            if out.returncode != 0:
                sys.exit(f"lathe failed: {out.stderr[-3000:]}")
            rss = json.loads(out.stdout.strip().splitlines()[-1])["maxrss_mb"]
            steps = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"loss"' in l]
            lathe_rates.append(statistics.median(s["tokens_per_s"] for s in steps[1:]))
            lathe_rss.append(rss)
            cmd = [a.python, "-c", WRAP, a.python, os.path.join(ROOT, "bench/torch_train_step.py"), "--model", torch_name,
                   "--threads", str(a.threads), "--batch", str(B), "--seq", str(T), "--steps", str(a.steps),
                   "--optimizer"]
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env_torch)
            if out.returncode != 0:
                sys.exit(f"torch failed: {out.stderr[-3000:]}")
            lines = out.stdout.strip().splitlines()
            torch_rates.append(json.loads(lines[-2])["tokens_per_s"])
            corename = json.loads(lines[-2]).get("openblas_corename") or "?"
            torch_rss.append(json.loads(lines[-1])["maxrss_mb"])
            print(f"[{time.strftime('%H:%M:%S')}] {name} round {r}: lathe ({tier}) {lathe_rates[-1]:.0f} tok/s "
                  f"({lathe_rss[-1]:.0f} MB), pytorch (OpenBLAS {corename}) {torch_rates[-1]:.0f} tok/s ({torch_rss[-1]:.0f} MB), "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
        lt, tt = statistics.median(lathe_rates), statistics.median(torch_rates)
        results.append({"model": name, "batch": B, "seq": T, "threads": a.threads, "lathe_tier": tier,
                        "openblas_corename": corename, "lathe_tok_s": lt,
                        "torch_tok_s": tt, "ratio": lt / tt, "lathe_rss_mb": max(lathe_rss),
                        "torch_rss_mb": max(torch_rss), "lathe_rounds": lathe_rates, "torch_rounds": torch_rates})
    print("| model | B, T | threads | lathe tok/s (tier) | PyTorch tok/s (OpenBLAS kernel) | ratio (target 1.5x) | "
          "peak RSS lathe / PyTorch (MB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['model']} | {r['batch']}, {r['seq']} | {r['threads']} | {r['lathe_tok_s']:.0f} ({r['lathe_tier']}) | "
              f"{r['torch_tok_s']:.0f} ({r['openblas_corename']}) | "
              f"{r['ratio']:.2f}x | {r['lathe_rss_mb']:.0f} / {r['torch_rss_mb']:.0f} |")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


# Runs argv[1:] as a child and prints its output, then {"maxrss_mb": ...} of that child alone.
WRAP = r"""
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)
sys.stdout.write(p.stdout)
print(json.dumps({"maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0}))
sys.exit(0 if p.returncode in (0, 3) else p.returncode)
"""

if __name__ == "__main__":
    main()
