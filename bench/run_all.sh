#!/usr/bin/env bash
# End-to-end benchmark run: model folders (cached), build, compute peaks of each ISA the CPU has, training
# step lathe vs PyTorch (interleaved A B A B over ROUNDS rounds), batch-1 prefill and decode against the
# bandwidth roofline and, when its binaries are given, llama.cpp; a markdown summary in bench/out/summary.md.
# Runs on any x86-64 CPU. Every lathe figure carries the tier its kernels ran (`lathe bench tier`; force a
# lower one with LATHE_CPU=avx2), PyTorch's the OpenBLAS kernel it chose. Method: docs/benchmarks.md.
#
#   bench/run_all.sh                       # everything (~15-20 min on 2 cores; model generation ~3 min once)
#   ROUNDS=5 THREADS="2" bench/run_all.sh  # knobs below; SKIP_TRAIN=1 / SKIP_DECODE=1 / SKIP_TORCH=1 / SKIP_BUILD=1
#   LLAMA_CPP_BIN=~/llama.cpp/build/bin LLAMA_GGUF_DIR=~/gguf bench/run_all.sh   # + llama.cpp columns
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench/out}
BUILD_DIR=${BUILD_DIR:-build/release}
ROUNDS=${ROUNDS:-3}          # interleaved rounds of (lathe, pytorch) per training configuration
STEPS=${STEPS:-3}            # timed steps per invocation (after 1 warm-up step); the invocation reports the median
THREADS=${THREADS:-"1 2"}
MODELS=${MODELS:-"gpt2 llama"}  # training models: gpt2 (GPT-2 124M, B=4 T=64), llama (Llama-110M, B=4 T=256)
DECODE_REPS=${DECODE_REPS:-3}
DECODE_PROMPT=${DECODE_PROMPT:-128}  # prompt tokens (the prefill figure): llama.cpp's pp128 on the 1B shape
DECODE_NEW=${DECODE_NEW:-64}         # generated tokens: llama.cpp's tg64
PY=${PYTHON:-/usr/bin/python3}  # Debian's python3 (python3-numpy, python3-torch), not a pyenv shim
MAKE_BENCH_MODEL=${MAKE_BENCH_MODEL:-../shared/tools/make_bench_model.py}
# PyTorch must use OpenBLAS (OpenMP build), whatever the system's libblas.so.3 alternative points to.
OPENBLAS_OMP_DIR=${OPENBLAS_OMP_DIR:-/usr/lib/x86_64-linux-gnu/openblas-openmp}
# OpenBLAS detects the CPU and picks its kernel itself (auto); the summary names the one it chose. Where its
# detection falls short (Debian's 0.3.21 takes Zen 5 for "Prescott", SSE3, ~5x slower), set
# TORCH_OPENBLAS_CORETYPE to a kernel this CPU can run (e.g. SkylakeX or Cooperlake on AVX-512, Haswell or
# Zen on AVX2): forcing an AVX-512 kernel on a CPU without AVX-512 crashes or falls back.
TORCH_OPENBLAS_CORETYPE=${TORCH_OPENBLAS_CORETYPE:-auto}
# llama.cpp, the inference peer, built outside this repository (docs/benchmarks.md; never built here):
# LLAMA_CPP_BIN = the folder holding llama-bench; LLAMA_GGUF_DIR = GGUF files of the decode model named as
# ../shared/tools/make_random_llama_gguf.py writes them (llama-1B-F32.gguf, llama-1B-F16.gguf; F16 stands
# beside lathe's bf16). Either unset or a file missing: that llama.cpp column is skipped.
LLAMA_CPP_BIN=${LLAMA_CPP_BIN:-}
LLAMA_GGUF_DIR=${LLAMA_GGUF_DIR:-}

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
  log "building train_step_bench decode_bench lathe in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --target train_step_bench decode_bench lathe -j2 >&2
fi
for b in train_step_bench decode_bench lathe; do [[ -x "$BUILD_DIR/$b" ]] || die "$BUILD_DIR/$b not built"; done
LATHE_TIER=$("$BUILD_DIR/lathe" bench tier)
echo "$LATHE_TIER" > "$RAW/lathe_tier.txt"
log "lathe kernels run the $LATHE_TIER tier${LATHE_CPU:+ (LATHE_CPU=$LATHE_CPU)}"

# --- 3. compute peaks of each ISA the CPU has (bench/peak_fma.cc is standalone; absent ISAs are skipped) ---
PEAK_SRC=(bench/peak_fma.cc src/lathe/backend/cpu/machine_limits_loops.h)
if [[ ! -x "$OUT/peak_fma" || ${PEAK_SRC[0]} -nt "$OUT/peak_fma" || ${PEAK_SRC[1]} -nt "$OUT/peak_fma" ]]; then
  g++ -O2 -fopenmp bench/peak_fma.cc -o "$OUT/peak_fma"  # each loop carries its own target: no -march
fi
log "compute peaks (threads: $THREADS)"
# shellcheck disable=SC2086
"$OUT/peak_fma" $THREADS | tee "$RAW/peak_fma.json" >&2

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
  log "PyTorch's OpenBLAS kernel: $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("openblas_corename"))' \
    "$RAW/train_torch_${m}_t${t}_r${r}.json") (OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE)"
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

# --- 5. prefill + decode with bandwidth probes around every run, then llama.cpp on the same shapes ----------
rm -f "$RAW"/llamacpp_*.json
if [[ -z "${SKIP_DECODE:-}" ]]; then
  log "prefill $DECODE_PROMPT + decode $DECODE_NEW (llama-1B f32 + bf16, $LATHE_TIER), threads: $THREADS"
  "$BUILD_DIR/decode_bench" --f32="$OUT/llama-1B-f32" --bf16="$OUT/llama-1B-bf16" \
    --threads="$(echo $THREADS | tr ' ' ,)" --prompt="$DECODE_PROMPT" --new="$DECODE_NEW" \
    --benchmark_repetitions="$DECODE_REPS" --benchmark_out="$RAW/decode.json" --benchmark_out_format=json >&2
  if [[ -z "$LLAMA_CPP_BIN" || -z "$LLAMA_GGUF_DIR" ]]; then
    log "llama.cpp column skipped: set LLAMA_CPP_BIN (folder with llama-bench) and LLAMA_GGUF_DIR"
  elif [[ ! -x "$LLAMA_CPP_BIN/llama-bench" ]]; then
    log "llama.cpp column skipped: no $LLAMA_CPP_BIN/llama-bench"
  else
    for dt in F32 F16; do
      gguf="$LLAMA_GGUF_DIR/llama-1B-$dt.gguf"
      if [[ ! -f "$gguf" ]]; then log "llama.cpp $dt skipped: no $gguf"; continue; fi
      log "llama.cpp llama-bench $dt: pp$DECODE_PROMPT tg$DECODE_NEW, threads: $THREADS"
      "$LLAMA_CPP_BIN/llama-bench" -m "$gguf" -p "$DECODE_PROMPT" -n "$DECODE_NEW" -t "$(echo $THREADS | tr ' ' ,)" \
        -r "$DECODE_REPS" -o json > "$RAW/llamacpp_$dt.json"
    done
  fi
fi

# --- 6. summary ------------------------------------------------------------------------------------------
"$PY" bench/summarize.py "$RAW" | tee "$OUT/summary.md"
log "wrote $OUT/summary.md"
