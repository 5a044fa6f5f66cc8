#!/usr/bin/env bash
# Learning matches a reference: lathe pre-trains the quickstart model for 100 steps (saving its initial
# weights), then bench/torch_pretrain_ref.py re-runs the same model, data order, AdamW, clipping and
# schedule in PyTorch from those weights and compares the loss step by step (tolerance 1e-3 relative).
#   bench/pretrain_reference.sh            # ~3 min on 2 cores; needs python3-torch, python3-numpy
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out/pretrain_reference}
LATHE=${LATHE:-build/release/lathe}
PY=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-100}
mkdir -p "$OUT"
[[ -f "$OUT/data/world.json" ]] || {
  "$LATHE" data synth --out "$OUT/world"
  "$LATHE" data prepare "$OUT/world/world.jsonl" --tokenizer "$OUT/world/tokenizer" --out "$OUT/data" --name world \
    --val-fraction 0.02
}
rm -rf "$OUT/run"
"$LATHE" pretrain recipes/quickstart.yaml data.train="$OUT/data/world" data.val="$OUT/data/world" \
  run.dir="$OUT/run" schedule.steps="$STEPS" schedule.warmup_steps=10 checkpoint.save_initial=true eval.every=0 eval.target_val_loss=0 \
  --no-samples
# PyTorch's OpenMP threads spin-wait and collapse on a busy host; passive waits keep the comparison usable.
OMP_WAIT_POLICY=passive "$PY" bench/torch_pretrain_ref.py "$OUT/run" --steps "$STEPS" --threads "${THREADS:-2}"
