#!/usr/bin/env bash
# Quantised decode and prefill against llama.cpp at the same bits, same machine, same run (issue 15):
# batch-1 decode tokens/s (lathe decode_bench, a 16-token prompt then NEW tokens; llama-bench tg NEW) and
# prefill tokens/s (decode_bench --prompt=PP --new=2; llama-bench pp PP), lathe int8 against Q8_0 and lathe
# int4 against Q4_0, interleaved (lathe, llama.cpp, lathe, ...) for ROUNDS rounds at each thread count.
# decode_bench brackets each decode run with read-bandwidth probes and reports roofline_pct_read: decode
# tokens/s against (read GB/s / weight bytes per token); llama.cpp's share of the same bound is its tg
# times its own bytes per token (the GGUF's tensor bytes) over that bandwidth.
#
# Usage: LLAMA_CPP_BIN=DIR bench/quant_bench.sh LABEL LATHE_INT8 GGUF_Q8_0 LATHE_INT4 GGUF_Q4_0
#   LATHE_INT8 / LATHE_INT4: folders written by `lathe quantize --format int8|int4` from the model the
#   GGUF files were made from (../shared/tools/make_random_llama_gguf.py writes both; llama-quantize makes
#   Q8_0 / Q4_0 from its F32 file). Knobs: THREADS="1 2" ROUNDS=2 NEW=64 PP=128 BUILD_DIR=build/release
#   OUT=bench/out/quant. Writes OUT/LABEL-*.json and prints one line per run, then the medians.
set -euo pipefail
cd "$(dirname "$0")/.."

LABEL=${1:?usage: bench/quant_bench.sh LABEL LATHE_INT8 GGUF_Q8_0 LATHE_INT4 GGUF_Q4_0}
INT8=${2:?}; Q8=${3:?}; INT4=${4:?}; Q4=${5:?}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-2}
NEW=${NEW:-64}
PP=${PP:-128}
BUILD_DIR=${BUILD_DIR:-build/release}
OUT=${OUT:-bench/out/quant}
LLAMA_BENCH=${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the folder holding llama-bench}/llama-bench
mkdir -p "$OUT"
[[ -x $BUILD_DIR/decode_bench ]] || { echo "quant_bench: build decode_bench first" >&2; exit 1; }

results=$OUT/$LABEL-results.txt
: > "$results"
lathe_run() {  # fmt dir threads mode(tg|pp) round
  local json=$OUT/$LABEL-lathe-$1-t$3-$4-r$5.json prompt=16 new=$NEW
  [[ $4 == pp ]] && { prompt=$PP; new=2; }
  "$BUILD_DIR/decode_bench" --"$1"="$2" --threads="$3" --prompt="$prompt" --new="$new" --no_probe_benchmarks \
    --benchmark_repetitions=3 --benchmark_format=json > "$json" 2> /dev/null
  python3 - "$json" "$4" "$1" "$3" "$5" >> "$results" <<'EOF'
import json, statistics, sys
path, mode, fmt, threads, rnd = sys.argv[1:]
bench = json.load(open(path))["benchmarks"]
# decode_bench reports the medians of its repetitions (or the runs, with --benchmark_report_aggregates_only=false)
runs = [b for b in bench if b.get("aggregate_name") == "median"] or [b for b in bench if b.get("run_type") == "iteration"]
key = "decode_tok/s" if mode == "tg" else "prefill_tok/s"
v = statistics.median(b[key] for b in runs)
read = statistics.median(b["read_GB/s"] for b in runs)
gb = runs[0]["weight_GB/tok"]
pct = statistics.median(b["roofline_pct_read"] for b in runs)
print(f"lathe {fmt} t{threads} {mode} r{rnd} {v:.2f} tok/s  read {read:.1f} GB/s  {gb:.3f} GB/tok  "
      f"{pct:.1f}% of read bound" if mode == "tg" else f"lathe {fmt} t{threads} {mode} r{rnd} {v:.2f} tok/s")
EOF
}
llama_run() {  # gguf threads mode round fmt
  local json=$OUT/$LABEL-llama-$5-t$2-$3-r$4.json args
  if [[ $3 == tg ]]; then args=(-p 0 -n "$NEW"); else args=(-p "$PP" -n 0); fi
  "$LLAMA_BENCH" -m "$1" -t "$2" -r 3 "${args[@]}" -o json > "$json" 2> /dev/null
  python3 - "$json" "$3" "$5" "$2" "$4" "$1" >> "$results" <<'EOF'
import json, os, sys
path, mode, fmt, threads, rnd, gguf = sys.argv[1:]
r = json.load(open(path))[0]
print(f"llama {fmt} t{threads} {mode} r{rnd} {r['avg_ts']:.2f} tok/s  (stddev {r['stddev_ts']:.2f})  "
      f"model {r['model_size'] / 1e9:.3f} GB")
EOF
}

for round in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    for mode in tg pp; do
      lathe_run int8 "$INT8" "$t" "$mode" "$round"; llama_run "$Q8" "$t" "$mode" "$round" q8_0
      lathe_run int4 "$INT4" "$t" "$mode" "$round"; llama_run "$Q4" "$t" "$mode" "$round" q4_0
      tail -n 4 "$results"
    done
  done
done
