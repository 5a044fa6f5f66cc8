#!/usr/bin/env bash
# lathe serve against llama.cpp's llama-server on the same weights shape, same machine, same run:
# `lathe bench serve` (random 256-token id prompts, 128 output tokens, ignore_eos, streamed) at
# concurrency 1 and 8, servers interleaved (lathe, llama-server, lathe, ...) for ROUNDS rounds; then the
# prefix cache: TTFT of prompts sharing a 512-token prefix with different 32-token endings against
# prompts of the same 544 tokens with nothing shared, on lathe alone (and llama-server when present).
#
# Usage: bench/serve_bench.sh LATHE_MODEL_DIR [GGUF_FILE]
#   LATHE_MODEL_DIR: a Hugging Face folder (../shared/tools/make_bench_model.py --shape tiny-110M);
#     without a tokenizer.json, the llama2 tokenizer (the same 32000 ids) is copied in from
#     $LATHE_TOKENIZERS (make setup fetches it): lathe serve needs one, the benchmark sends token ids.
#   GGUF_FILE: the same shape for llama-server (../shared/tools/make_random_llama_gguf.py); needs
#     LLAMA_CPP_BIN (the folder holding llama-server); without either, the llama.cpp rows are skipped.
# Knobs: THREADS=2 ROUNDS=2 NUM_C1=16 NUM_C8=64 OUT=bench/out/serve BUILD_DIR=build/release
#        LATHE_SERVE_ARGS="" (e.g. --f32) LLAMA_ARGS=""
# Writes OUT/*.json (one report per run) and OUT/summary.txt (medians and ratios).
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:?usage: bench/serve_bench.sh LATHE_MODEL_DIR [GGUF_FILE]}
GGUF=${2:-}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
NUM_C1=${NUM_C1:-16}
NUM_C8=${NUM_C8:-64}
OUT=${OUT:-bench/out/serve}
BUILD_DIR=${BUILD_DIR:-build/release}
LATHE=$BUILD_DIR/lathe
TOKENIZERS=${LATHE_TOKENIZERS:-$HOME/.cache/lathe/tokenizers}
PORT_LATHE=${PORT_LATHE:-18401}
PORT_LLAMA=${PORT_LLAMA:-18402}
mkdir -p "$OUT"

log() { echo "serve_bench: $*" >&2; }
die() { log "$*"; exit 1; }
[[ -x $LATHE ]] || die "$LATHE not built (cmake --build --preset release --target lathe)"
if [[ ! -f $MODEL/tokenizer.json ]]; then
  [[ -f $TOKENIZERS/llama2/tokenizer.json ]] || die "$MODEL has no tokenizer.json and $TOKENIZERS/llama2 is absent (make setup)"
  log "copying the llama2 tokenizer (32000 ids) into $MODEL"
  cp "$TOKENIZERS/llama2/tokenizer.json" "$TOKENIZERS/llama2/tokenizer_config.json" "$MODEL/"
fi
LLAMA=""
if [[ -n $GGUF && -n ${LLAMA_CPP_BIN:-} && -x ${LLAMA_CPP_BIN}/llama-server ]]; then LLAMA=$LLAMA_CPP_BIN/llama-server
else log "no GGUF_FILE or LLAMA_CPP_BIN/llama-server: the llama.cpp rows are skipped"; fi

SERVER_PID=""
stop_server() { [[ -n $SERVER_PID ]] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; }
trap stop_server EXIT
wait_ready() {  # $1 port
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "server on port $1 did not become ready"
}
start_lathe() {
  # The KV cache holds 8 full sequences of 544 + 128 tokens with room to spare; prefix caching is on.
  # shellcheck disable=SC2086
  "$LATHE" serve "$MODEL" --port "$PORT_LATHE" --threads "$THREADS" --max-model-len 1024 \
    --kv-cache-memory 1GiB --served-model-name bench ${LATHE_SERVE_ARGS:-} >"$OUT/lathe_server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "$PORT_LATHE"
}
start_llama() {
  # --parallel 8 slots of 1024 tokens each; continuous batching and its prompt cache are llama-server's defaults.
  # shellcheck disable=SC2086
  "$LLAMA" -m "$GGUF" --port "$PORT_LLAMA" -t "$THREADS" --parallel 8 -c 8192 -a bench ${LLAMA_ARGS:-} \
    >"$OUT/llama_server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "$PORT_LLAMA"
}
# The random-weight models sample byte tokens (ids 3-258 of the llama2 / synthetic vocab) now and then;
# llama-server (build 3f545becc) fails a stream whose text ends in a lone UTF-8 continuation byte ("does
# not match the expected Content-only format"), so both servers get the same logit_bias against them.
NO_BYTE_TOKENS=$(python3 -c 'import json; print(json.dumps({"logit_bias": {str(i): -100 for i in range(3, 259)}}))')
bench() {  # $1 name $2 port, then lathe bench serve options
  local name=$1 port=$2; shift 2
  "$LATHE" bench serve --base-url "http://127.0.0.1:$port" --model bench --json "$OUT/$name.json" \
    --extra-body "$NO_BYTE_TOKENS" "$@" \
    >"$OUT/$name.txt" 2>&1 || die "bench $name failed: $(tail -3 "$OUT/$name.txt")"
  log "$name: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("output %.1f tok/s, TTFT p50 %.0f ms, TPOT mean %.1f ms, failed %d" % (r["output_throughput"], r["ttft_ms"]["median"], r["tpot_ms"]["mean"], r["failed"]))' "$OUT/$name.json")"
}
run_levels() {  # $1 server name $2 port $3 round
  bench "$1_c1_r$3" "$2" --num-prompts "$NUM_C1" --max-concurrency 1 --input-len 256 --output-len 128 --seed "$3"
  bench "$1_c8_r$3" "$2" --num-prompts "$NUM_C8" --max-concurrency 8 --input-len 256 --output-len 128 --seed "$3"
}
run_prefix() {  # $1 server name $2 port: 16 prompts one at a time, shared prefix vs none (same total length)
  bench "$1_prefix512" "$2" --num-prompts 16 --max-concurrency 1 --prefix-len 512 --input-len 32 --output-len 16 --seed 7
  bench "$1_noprefix544" "$2" --num-prompts 16 --max-concurrency 1 --input-len 544 --output-len 16 --seed 8
}

for r in $(seq 1 "$ROUNDS"); do
  start_lathe; run_levels lathe "$PORT_LATHE" "$r"; [[ $r == 1 ]] && run_prefix lathe "$PORT_LATHE"; stop_server
  if [[ -n $LLAMA ]]; then start_llama; run_levels llama "$PORT_LLAMA" "$r"; [[ $r == 1 ]] && run_prefix llama "$PORT_LLAMA"; stop_server; fi
done

python3 - "$OUT" "$ROUNDS" <<'EOF' | tee "$OUT/summary.txt"
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def get(r, key):
    return r[key] if "." not in key else r[key.split(".")[0]][key.split(".")[1]]
def med(server, level, key):
    v = [get(r, key) for r in (load(f"{server}_{level}_r{i}") for i in range(1, rounds + 1)) if r]
    return statistics.median(v) if v else None
rows = []
for level in ("c1", "c8"):
    for key, label in (("output_throughput", "output tok/s"), ("ttft_ms.median", "TTFT p50 ms"),
                       ("tpot_ms.mean", "TPOT mean ms"), ("e2el_ms.median", "e2e p50 ms")):
        a, b = med("lathe", level, key), med("llama", level, key)
        ratio = f"{a / b:.2f}x" if a and b else "-"
        rows.append(f"{level:3} {label:14} lathe {a if a is None else round(a, 1)!s:>9}  llama-server {b if b is None else round(b, 1)!s:>9}  lathe/llama {ratio}")
for s in ("lathe", "llama"):
    c1, c8 = med(s, "c1", "output_throughput"), med(s, "c8", "output_throughput")
    if c1 and c8: rows.append(f"{s}: concurrency 8 / concurrency 1 output tok/s = {c8 / c1:.2f}x")
    p, n = load(f"{s}_prefix512"), load(f"{s}_noprefix544")
    if p and n: rows.append(f"{s}: TTFT p50 544 tokens unshared {n['ttft_ms']['median']:.1f} ms, 512 shared + 32 new {p['ttft_ms']['median']:.1f} ms: {n['ttft_ms']['median'] / p['ttft_ms']['median']:.1f}x")
failed = sum(load(f[:-5])["failed"] for f in os.listdir(out) if f.endswith(".json"))
rows.append(f"failed requests over every run: {failed}")
print("\n".join(rows))
EOF
