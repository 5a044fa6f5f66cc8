#!/usr/bin/env bash
# End-to-end benchmark run: model folders (cached), build, FMA peak, training step lathe vs PyTorch
# (interleaved A B A B over ROUNDS rounds), batch-1 decode against the bandwidth roofline, and a markdown
# summary in bench/out/summary.md. Method and figures: docs/benchmarks.md.
#
#   bench/run_all.sh                       # everything (~15-20 min on 2 cores; model generation ~3 min once)
#   ROUNDS=5 THREADS="2" bench/run_all.sh  # knobs below; SKIP_TRAIN=1 / SKIP_DECODE=1 / SKIP_TORCH=1 / SKIP_BUILD=1
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench/out}
BUILD_DIR=${BUILD_DIR:-build/release}
ROUNDS=${ROUNDS:-3}          # interleaved rounds of (lathe, pytorch) per training configuration
STEPS=${STEPS:-3}            # timed steps per invocation (after 1 warm-up step); the invocation reports the median
THREADS=${THREADS:-"1 2"}
MODELS=${MODELS:-"gpt2 llama"}  # training models: gpt2 (GPT-2 124M, B=4 T=64), llama (Llama-110M, B=4 T=256)
DECODE_REPS=${DECODE_REPS:-3}
DECODE_NEW=${DECODE_NEW:-64}
PY=${PYTHON:-/usr/bin/python3}  # Debian's python3 (python3-numpy, python3-torch), not a pyenv shim
MAKE_BENCH_MODEL=${MAKE_BENCH_MODEL:-../shared/tools/make_bench_model.py}
# PyTorch must use OpenBLAS (OpenMP build), whatever the system's libblas.so.3 alternative points to.
OPENBLAS_OMP_DIR=${OPENBLAS_OMP_DIR:-/usr/lib/x86_64-linux-gnu/openblas-openmp}
# Debian's OpenBLAS 0.3.21 does not know Zen 5 and falls back to its generic "Prescott" (SSE3) kernels,
# ~5x slower than its AVX-512 ones: the baseline is PyTorch with the best OpenBLAS kernel for this CPU
# (Cooperlake: AVX-512 + bf16, measured fastest here). TORCH_OPENBLAS_CORETYPE=auto measures the default.
TORCH_OPENBLAS_CORETYPE=${TORCH_OPENBLAS_CORETYPE:-Cooperlake}

RAW="$OUT/raw"
mkdir -p "$OUT" "$RAW"
log() { printf '[run_all %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'run_all.sh: %s\n' "$*" >&2; exit 1; }

"$PY" -c 'import numpy' 2>/dev/null || die "$PY has no numpy (Debian: apt-get install python3-numpy)"

# --- 1. model folders (generated once; a .complete marker guards against half-written folders) -----------
gen() {  # gen DIR COMMAND...
  local dir=$1; shift
  if [[ -f "$dir/.complete" ]]; then log "cached: $dir"; return; fi
  log "writing $dir"
  rm -rf "$dir"
  "$@" --out "$dir" >&2
  touch "$dir/.complete"
}
need_bench_model() {
  [[ -f "$MAKE_BENCH_MODEL" ]] || die "missing $MAKE_BENCH_MODEL (the shared Llama bench-model writer; set MAKE_BENCH_MODEL=path)"
}
if [[ -z "${SKIP_TRAIN:-}" ]]; then
  [[ " $MODELS " == *" gpt2 "* ]] && gen "$OUT/gpt2-124M" "$PY" bench/make_gpt2_model.py
  if [[ " $MODELS " == *" llama "* ]]; then
    need_bench_model
    gen "$OUT/tiny-110M-f32" "$PY" "$MAKE_BENCH_MODEL" --shape tiny-110M --dtype f32
  fi
fi
if [[ -z "${SKIP_DECODE:-}" ]]; then
  need_bench_model
  gen "$OUT/llama-1B-f32" "$PY" "$MAKE_BENCH_MODEL" --shape llama-1B --dtype f32
  gen "$OUT/llama-1B-bf16" "$PY" "$MAKE_BENCH_MODEL" --shape llama-1B --dtype bf16
fi

# --- 2. build --------------------------------------------------------------------------------------------
if [[ -z "${SKIP_BUILD:-}" ]]; then
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    if [[ "$BUILD_DIR" == build/release ]]; then cmake --preset release >&2
    else cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" >&2; fi
  fi
  log "building train_step_bench decode_bench in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --target train_step_bench decode_bench -j2 >&2
fi
for b in train_step_bench decode_bench; do [[ -x "$BUILD_DIR/$b" ]] || die "$BUILD_DIR/$b not built"; done

# --- 3. FMA peak (bench/peak_fma.cc is standalone) -------------------------------------------------------
if [[ -f bench/peak_fma.cc ]]; then
  if [[ ! -x "$OUT/peak_fma" || bench/peak_fma.cc -nt "$OUT/peak_fma" ]]; then
    g++ -O2 -march=native -fopenmp bench/peak_fma.cc -o "$OUT/peak_fma"
  fi
  log "FMA peak"
  "$OUT/peak_fma" | tee "$RAW/peak_fma.json" >&2
else
  log "bench/peak_fma.cc absent: % of peak uses docs/PERF figures"
  rm -f "$RAW/peak_fma.json"
fi

# --- 4. training step, interleaved: lathe, pytorch, lathe, pytorch ... ---------------------------------------
lathe_train() {  # model threads round
  local m=$1 t=$2 r=$3 flag filter
  if [[ $m == gpt2 ]]; then flag="--gpt2=$OUT/gpt2-124M"; filter="BM_TrainStep_GPT2_124M"
  else flag="--llama110m=$OUT/tiny-110M-f32"; filter="BM_TrainStep_Llama110M"; fi
  "$BUILD_DIR/train_step_bench" "$flag" --threads="$t" --benchmark_filter="$filter" \
    --benchmark_repetitions="$STEPS" --benchmark_out="$RAW/train_lathe_${m}_t${t}_r${r}.json" \
    --benchmark_out_format=json >&2
}
torch_train() {  # model threads round
  local m=$1 t=$2 r=$3 tm
  tm=$([[ $m == gpt2 ]] && echo gpt2 || echo llama110m)
  local ct=()
  [[ $TORCH_OPENBLAS_CORETYPE != auto ]] && ct=(OPENBLAS_CORETYPE="$TORCH_OPENBLAS_CORETYPE")
  env "${ct[@]}" OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" \
    LD_LIBRARY_PATH="$OPENBLAS_OMP_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$PY" bench/torch_train_step.py --model "$tm" --threads "$t" --warmup 1 --steps "$STEPS" \
    > "$RAW/train_torch_${m}_t${t}_r${r}.json"
  cat "$RAW/train_torch_${m}_t${t}_r${r}.json" >&2
}
if [[ -z "${SKIP_TRAIN:-}" ]]; then
  for m in $MODELS; do for t in $THREADS; do rm -f "$RAW"/train_*_"${m}"_t"${t}"_r*.json; done; done
  for r in $(seq 1 "$ROUNDS"); do
    for m in $MODELS; do
      for t in $THREADS; do
        log "train round $r/$ROUNDS: $m, $t thread(s): lathe"
        lathe_train "$m" "$t" "$r"
        if [[ -z "${SKIP_TORCH:-}" ]]; then
          log "train round $r/$ROUNDS: $m, $t thread(s): pytorch"
          torch_train "$m" "$t" "$r"
        fi
      done
    done
  done
fi

# --- 5. decode with bandwidth probes around every run ---------------------------------------------------
if [[ -z "${SKIP_DECODE:-}" ]]; then
  log "decode (llama-1B f32 + bf16), threads: $THREADS"
  "$BUILD_DIR/decode_bench" --f32="$OUT/llama-1B-f32" --bf16="$OUT/llama-1B-bf16" \
    --threads="$(echo $THREADS | tr ' ' ,)" --new="$DECODE_NEW" --benchmark_repetitions="$DECODE_REPS" \
    --benchmark_out="$RAW/decode.json" --benchmark_out_format=json >&2
fi

# --- 6. summary ------------------------------------------------------------------------------------------
"$PY" bench/summarize.py "$RAW" | tee "$OUT/summary.md"
log "wrote $OUT/summary.md"
