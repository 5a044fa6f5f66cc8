#!/usr/bin/env bash
# `make demo`: the whole life of a model on the quickstart's synthetic world, on the CPU, in a few minutes.
#   1. pre-train a small Llama on the world corpus          (recipes/quickstart.yaml)      -> runs/quickstart
#   2. SFT it into a food-logging assistant                  (recipes/lifecycle/sft.yaml)   -> runs/lifecycle-sft
#   3. GRPO with a correctness and a format reward           (recipes/lifecycle/grpo.yaml)  -> runs/lifecycle-grpo
#      and, beside it, the reward-hacking guard: GRPO on the format reward alone        -> runs/lifecycle-grpo-format
#   4. held-out exact tool-call accuracy after every stage   (lathe eval --tool-calls)      -> RUN/eval_tool_calls.json
#   5. serve the result and answer one request through the OpenAI API (lathe serve, curl)
#   6. one picture and one table of the whole lifecycle      (lathe plot --lifecycle)       -> runs/lifecycle.{svg,md}
# Usage: tools/lifecycle_demo.sh LATHE_BINARY DATA_DIR   (the Makefile passes build/release/lathe data/quickstart)
set -euo pipefail

lathe=${1:?usage: lifecycle_demo.sh LATHE_BINARY DATA_DIR}
data=${2:?usage: lifecycle_demo.sh LATHE_BINARY DATA_DIR}
port=${LATHE_DEMO_PORT:-8765}
start=$(date +%s)

step() { echo; echo "== [$(( $(date +%s) - start ))s] $*"; }

# Held-out accuracy of MODEL, written into RUN (where `lathe plot --lifecycle` finds it).
evaluate() {
  "$lathe" eval "$1" --tool-calls "$data/food_eval.jsonl" --tokenizer "$data/tokenizer" \
    --out "$2/eval_tool_calls.json"
}

step "lathe data synth --out $data --tool-calls"
"$lathe" data synth --out "$data" --tool-calls

step "lathe data prepare $data/world.jsonl"
"$lathe" data prepare "$data/world.jsonl" --tokenizer "$data/tokenizer" --out "$data" --name world --val-fraction 0.02

step "lathe pretrain recipes/quickstart.yaml --overwrite"
"$lathe" pretrain recipes/quickstart.yaml data.train="$data/world" data.val="$data/world" --overwrite
pretrained=$(ls -d runs/quickstart/checkpoints/step_* | tail -n 1)
evaluate "$pretrained" runs/quickstart

step "lathe sft recipes/lifecycle/sft.yaml --overwrite"
"$lathe" sft recipes/lifecycle/sft.yaml model.base="$pretrained" data.train="$data/food_sft.jsonl" \
  sft.tokenizer="$data/tokenizer" --overwrite
evaluate runs/lifecycle-sft/model runs/lifecycle-sft

step "lathe grpo recipes/lifecycle/grpo.yaml --overwrite"
"$lathe" grpo recipes/lifecycle/grpo.yaml data.train="$data/food_grpo.jsonl" grpo.tokenizer="$data/tokenizer" --overwrite
evaluate runs/lifecycle-grpo/model runs/lifecycle-grpo

# The guard: a reward that only checks the call's shape gives no reason to get item, quantity or meal right.
step "lathe grpo recipes/lifecycle/grpo.yaml: the format reward alone"
"$lathe" grpo recipes/lifecycle/grpo.yaml data.train="$data/food_grpo.jsonl" grpo.tokenizer="$data/tokenizer" \
  run.dir=runs/lifecycle-grpo-format grpo.rewards='[{type: format, name: format, pattern: "^<tool_call>\\{\"name\":\"log_food\",\"arguments\":\\{.*\\}\\}</tool_call>$"}]' \
  --overwrite
evaluate runs/lifecycle-grpo-format/model runs/lifecycle-grpo-format

step "lathe serve runs/lifecycle-grpo/model --port $port, one OpenAI chat completion"
"$lathe" serve runs/lifecycle-grpo/model --port "$port" --served-model-name food-logger --tool-call-parser hermes > runs/lifecycle-serve.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 $server 2>/dev/null || { cat runs/lifecycle-serve.log; exit 1; }
  sleep 0.1
done
tool='{"type":"function","function":{"name":"log_food","parameters":{"type":"object","properties":{"item":{"type":"string"},"quantity":{"type":"integer"},"meal":{"type":"string"}}}}}'
request='{"model":"food-logger","messages":[{"role":"user","content":"I had two bananas for breakfast."}],"tools":['"$tool"'],"max_tokens":128,"temperature":0}'
echo "POST /v1/chat/completions $request"
curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$request"
echo
kill -TERM $server
wait $server || true
trap - EXIT

step "lathe plot --lifecycle"
"$lathe" plot --lifecycle pre-train=runs/quickstart SFT=runs/lifecycle-sft GRPO=runs/lifecycle-grpo \
  "GRPO format only=runs/lifecycle-grpo-format" --out runs/lifecycle.svg --table runs/lifecycle.md
echo "lifecycle done in $(( $(date +%s) - start ))s: runs/lifecycle.svg, runs/lifecycle.md"
