#!/usr/bin/env bash
# Training-throughput baseline: llm.c's CPU trainer (train_gpt2.c) on GPT-2 124M, B=4, T=64, fp32,
# forward + backward + AdamW, random init (the pre-training issue's reference; PERF.md "Training: PyTorch
# and llm.c on this CPU"). llm.c is NOT part of this repository: it is built from a separate checkout.
#
#   bench/llmc_bench.sh                          # 2 threads, 10 timed steps
#   THREADS="1 2" STEPS=8 bench/llmc_bench.sh    # knobs below
#   LLMC_DIR=/path/to/llm.c bench/llmc_bench.sh  # use an existing llm.c checkout / extracted tree
#
# Output: one JSON line per thread count on stdout (progress on stderr), e.g.
#   {"impl": "llm.c", "threads": 2, "batch": 4, "seq": 64, "median_step_s": 5.89, "tokens_per_s": 43.4,
#    "steps": [...seconds per step, step 0 excluded...], "loadavg_before": "...", "loadavg_after": "...",
#    "cpu_util": 1.97, "cpu_util_steps": [...], "llmc_commit": "f1e2ace..."}
# cpu_util(_steps) = the trainer's CPU seconds / wall seconds over each timed step (median, per step):
# ~= threads when it had the cores to itself; lower means other load took CPU time from it and the step
# times are pessimistic. With OpenMP's spinning barriers, CPU time is NOT a load-independent cost either:
# under oversubscription a thread spins while its partner is descheduled.
# bench/pretrain_bench.py (or anything else) can take the last line:  bench/llmc_bench.sh | tail -n 1
#
# llm.c version: measured with karpathy/llm.c @ f1e2ace651495b74ae22d45d1723443fd00ecd3a (2025-05-10,
# "Merge pull request #801"), the commit the spec / PERF.md name. train_gpt2.c's CPU path has been stable for a
# long time; another commit should work too, its hash is printed in the JSON.
#
# Getting llm.c (no work tree is needed beyond train_gpt2.c and llmc/*.h):
#   git clone https://github.com/karpathy/llm.c /some/where/llm.c && git -C /some/where/llm.c checkout f1e2ace
#   LLMC_DIR=/some/where/llm.c bench/llmc_bench.sh
# or, from a bare mirror (LLMC_GIT, default /work/.mirror/karpathy+llm.c/repo), the script extracts
# train_gpt2.c and llmc/ into bench/out/llmc/src itself when LLMC_DIR is not set.
#
# What train_gpt2.c does (its main() is fixed: B=4, T=64, steps 0..40; the step count cannot be changed
# without editing llm.c, which this script does not do):
#   - every 10 steps (0, 10, 20, ...) a val loss over 5 forward passes, every 20 steps (20, 40) sampling of
#     63 tokens = 63 full forward passes; both happen OUTSIDE the timed region of the step,
#   - each step prints "step N: train loss X (took Y ms)", timed with CLOCK_MONOTONIC around
#     dataloader_next_batch + forward + zero_grad + backward + AdamW update (lr 1e-4, no weight decay,
#     no gradient clipping).
# This script stops the trainer (SIGTERM, by pid) once "step $STEPS:" has printed, so with STEPS < 20 no
# sampling runs, and reports the median of steps 1..STEPS (step 0 = warm-up: first-touch of the
# activation/gradient/AdamW buffers). tokens/s = B*T / median step time.
#
# Measured on the 2-vCPU Intel Xeon (AVX-512, family 6 model 207) dev machine, 2026-11-30, quiet moments
# (cpu_util ~= threads): 2 threads 5.89 s/step = 43.4 tok/s; 1 thread 12.40 s/step = 20.6 tok/s. (PERF.md's
# 2.85 s / 5.5 s were taken on a 2-core AMD EPYC Zen 5 and do not transfer to this machine.)
#
# Inputs (random, written by bench/make_llmc_gpt2.py into $RUN_DIR, ~500 MB, cached): gpt2_124M.bin,
# dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin, gpt2_tokenizer.bin (needed: without it
# train_gpt2.c samples from an uninitialised EOT id at step 20).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench/out/llmc}
RUN_DIR=${RUN_DIR:-$OUT/run}
THREADS=${THREADS:-2}          # space-separated OMP_NUM_THREADS values, run one after the other
STEPS=${STEPS:-10}             # timed steps (1..STEPS); 1..40. Keep < 20 to avoid the sampling at step 20
TIMEOUT=${TIMEOUT:-600}        # hard limit per run, seconds
PY=${PYTHON:-/usr/bin/python3}
CC=${CC:-gcc}
LLMC_GIT=${LLMC_GIT:-/work/.mirror/karpathy+llm.c/repo}
LLMC_PIN=f1e2ace651495b74ae22d45d1723443fd00ecd3a

log() { printf '[llmc_bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'llmc_bench: %s\n' "$*" >&2; exit 1; }

[[ "$STEPS" =~ ^[0-9]+$ ]] && (( STEPS >= 1 && STEPS <= 40 )) || die "STEPS must be 1..40 (train_gpt2.c runs steps 0..40)"
mkdir -p "$OUT"

# --- llm.c sources -------------------------------------------------------------------------------------
if [[ -z "${LLMC_DIR:-}" ]]; then
  LLMC_DIR="$OUT/src"
  if [[ ! -f "$LLMC_DIR/train_gpt2.c" ]]; then
    if git --git-dir="$LLMC_GIT" rev-parse -q --verify HEAD >/dev/null 2>&1; then
      rev=$LLMC_PIN
      git --git-dir="$LLMC_GIT" cat-file -e "$rev^{commit}" 2>/dev/null || rev=$(git --git-dir="$LLMC_GIT" rev-parse HEAD)
      log "extracting train_gpt2.c + llmc/ from $LLMC_GIT @ $rev into $LLMC_DIR"
      mkdir -p "$LLMC_DIR"
      git --git-dir="$LLMC_GIT" archive "$rev" train_gpt2.c llmc | tar -x -C "$LLMC_DIR"
      echo "$rev" > "$LLMC_DIR/.llmc_commit"
    fi
  fi
fi
if [[ ! -f "$LLMC_DIR/train_gpt2.c" || ! -f "$LLMC_DIR/llmc/dataloader.h" ]]; then
  die "no llm.c sources in '$LLMC_DIR' (need train_gpt2.c and llmc/*.h).
  Get them with:  git clone https://github.com/karpathy/llm.c /path/llm.c && git -C /path/llm.c checkout f1e2ace
  then run:       LLMC_DIR=/path/llm.c $0
  (or point LLMC_GIT at a bare mirror of karpathy/llm.c and leave LLMC_DIR unset)"
fi
LLMC_DIR=$(cd "$LLMC_DIR" && pwd)
if [[ -f "$LLMC_DIR/.llmc_commit" ]]; then
  COMMIT=$(cat "$LLMC_DIR/.llmc_commit")
else
  COMMIT=$(git -C "$LLMC_DIR" rev-parse HEAD 2>/dev/null || echo unknown)
fi

# --- build (flags as llm.c's Makefile for the CPU target, with OpenMP) ----------------------------------
BIN="$OUT/train_gpt2"
CFLAGS="-Ofast -march=native -fopenmp -DOMP -Wno-unused-result"
if [[ ! -x "$BIN" || "$LLMC_DIR/train_gpt2.c" -nt "$BIN" || ! -f "$BIN.flags" || "$(cat "$BIN.flags")" != "$CC $CFLAGS $LLMC_DIR" ]]; then
  log "building $BIN: $CC $CFLAGS -I$LLMC_DIR train_gpt2.c -lm"
  "$CC" $CFLAGS -I"$LLMC_DIR" "$LLMC_DIR/train_gpt2.c" -lm -o "$BIN"
  echo "$CC $CFLAGS $LLMC_DIR" > "$BIN.flags"
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# --- inputs ---------------------------------------------------------------------------------------------
"$PY" bench/make_llmc_gpt2.py --out "$RUN_DIR"

# --- runs -----------------------------------------------------------------------------------------------
# A small Python driver starts the trainer (stdout line-buffered through stdbuf), timestamps each
# "step N:" line together with the trainer's CPU time (/proc/PID/stat utime+stime), stops it by its pid
# (SIGTERM) after step $STEPS or after $TIMEOUT s, and prints the JSON line.
command -v stdbuf >/dev/null || die "stdbuf (coreutils) is needed: train_gpt2's stdout is block-buffered in a pipe"
OUT_ABS=$(cd "$OUT" && pwd)
for t in $THREADS; do
  runlog="$OUT_ABS/train_gpt2.t$t.log"
  log "OMP_NUM_THREADS=$t: running steps 0..$STEPS (load average $(cut -d' ' -f1-3 /proc/loadavg)), log $runlog"
  (cd "$RUN_DIR" && OMP_NUM_THREADS=$t "$PY" - "$BIN" "$runlog" "$t" "$STEPS" "$TIMEOUT" "$COMMIT") <<'EOF'
import json, os, re, signal, statistics, subprocess, sys, time
binary, runlog, threads, steps, timeout, commit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
hz = os.sysconf("SC_CLK_TCK")
def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])
def cpu_s(pid):  # utime + stime of the process (all its threads), seconds
    f = open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz
lb = loadavg()
p = subprocess.Popen(["stdbuf", "-oL", binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                     errors="replace")
signal.signal(signal.SIGALRM, lambda *_: p.send_signal(signal.SIGTERM))
signal.alarm(int(timeout))
ms, cpu, wall = {}, {}, {}
with open(runlog, "w") as logf:
    for line in p.stdout:
        logf.write(line)
        m = re.match(r"step (\d+): train loss (\S+) \(took ([0-9.]+) ms\)", line)
        if m:
            n = int(m.group(1))
            ms[n], wall[n] = float(m.group(3)) / 1e3, time.monotonic()
            try:
                cpu[n] = cpu_s(p.pid)
            except OSError:
                pass
            if n >= steps:
                p.send_signal(signal.SIGTERM)
                break
signal.alarm(0)
p.wait()
la = loadavg()
if steps not in ms:
    sys.exit(f"llmc_bench: train_gpt2 stopped before step {steps} (exit {p.returncode}; timeout {timeout:.0f}s?); see {runlog}")
B, T = 4, 64  # fixed in train_gpt2.c's main()
times = [ms[i] for i in range(1, steps + 1)]
med = statistics.median(times)
# CPU seconds / wall seconds between consecutive step lines (steps 1..N contain only training work):
# ~= threads when the trainer had the cores to itself; lower = other load took CPU time from it.
util = [(cpu[i] - cpu[i - 1]) / (wall[i] - wall[i - 1]) for i in range(1, steps + 1)
        if i in cpu and i - 1 in cpu and wall[i] > wall[i - 1]]
print(json.dumps({"impl": "llm.c", "threads": threads, "batch": B, "seq": T,
                  "median_step_s": round(med, 4), "tokens_per_s": round(B * T / med, 2),
                  "step0_s": round(ms[0], 4), "steps": [round(x, 4) for x in times],
                  "cpu_util": round(statistics.median(util), 2) if util else None,
                  "cpu_util_steps": [round(u, 2) for u in util],
                  "loadavg_before": lb, "loadavg_after": la, "llmc_commit": commit}), flush=True)
EOF
done
