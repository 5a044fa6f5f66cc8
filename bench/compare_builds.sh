#!/bin/bash
# Old build against new build in one interleaved run (old, new per round): the training step, prefill and
# decode of docs/benchmarks.md, and batched decode of the new build. Google Benchmark JSON per run in OUT.
#   bench/compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR
# Model folders (bench/run_all.sh writes them): GPT2, LLAMA110M, LLAMA1B_F32, LLAMA1B_BF16 (default
# bench/out/...). Knobs: ROUNDS=2 THREADS=2 NEW_TOKENS=16 OUT=bench/out/compare.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR" >&2; exit 2; }
OLD=$1 NEW=$2
M=${MODELS_DIR:-bench/out}
GPT2=${GPT2:-$M/gpt2-124M} LLAMA110M=${LLAMA110M:-$M/tiny-110M-f32}
LLAMA1B_F32=${LLAMA1B_F32:-$M/llama-1B-f32} LLAMA1B_BF16=${LLAMA1B_BF16:-$M/llama-1B-bf16}
ROUNDS=${ROUNDS:-2} THREADS=${THREADS:-2} NEW_TOKENS=${NEW_TOKENS:-16} OUT=${OUT:-bench/out/compare}
mkdir -p "$OUT"
# The tier each build's kernels run here (`lathe bench tier`, LATHE_CPU honoured; builds without that command:
# unknown), beside the CPU: both builds must run the same tier for the comparison to mean anything.
tier() { "$1/lathe" bench tier 2>/dev/null || echo "unknown (no \`lathe bench tier\` in $1)"; }
{ lscpu | grep "Model name"; echo "tier: old $(tier "$OLD"), new $(tier "$NEW")${LATHE_CPU:+ (LATHE_CPU=$LATHE_CPU)}"; date; } \
  > "$OUT/machine.txt"
cat "$OUT/machine.txt" >&2
for round in $(seq "$ROUNDS"); do
  for side in old new; do
    B=$OLD; [[ $side == new ]] && B=$NEW
    "$B/train_step_bench" --gpt2="$GPT2" --llama110m="$LLAMA110M" --threads="$THREADS" \
      --benchmark_format=json > "$OUT/train_${side}_$round.json"
    "$B/decode_bench" --f32="$LLAMA1B_F32" --bf16="$LLAMA1B_BF16" --threads="$THREADS" --new="$NEW_TOKENS" \
      --no_probe_benchmarks --benchmark_format=json > "$OUT/decode_${side}_$round.json"
  done
done
"$NEW/decode_bench" --f32="$LLAMA110M" --threads="$THREADS" --new=32 --batch=1,8 --no_probe_benchmarks \
  --benchmark_format=json > "$OUT/batched_new.json"
date >> "$OUT/machine.txt"
echo "results in $OUT (median rows: \"aggregate_name\": \"median\")"
