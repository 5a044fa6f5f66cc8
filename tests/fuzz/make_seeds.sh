#!/usr/bin/env bash
# Writes seed corpora for the libFuzzer targets (one input per file):
#   OUT/tokenizer      the strings of tests/fixtures/tokenizers/corpus.json and the encode-case inputs,
#                      the special tokens of each tokenizer, and a few invalid UTF-8 byte strings;
#   OUT/chat_template  the chat templates of the real tokenizer_config.json files, the snippets under
#                      tests/fuzz/seeds/chat_template/, and the fixture chat-template test cases' templates;
#   OUT/recipe         the shipped recipes/*.yaml, some with NUL-separated key=value overrides appended (the
#                      recipe_fuzz input format), and a few YAML shapes recipes refuse (aliases, repeated keys).
#   OUT/config         the fixture models' config.json files and the configs under tests/fuzz/seeds/config/.
# Usage: tests/fuzz/make_seeds.sh [OUT_DIR=build/fuzz/seeds] [TOKENIZERS_DIR=$LATHE_TOKENIZERS or ~/.cache/lathe/tokenizers]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build/fuzz/seeds}
toks=${2:-${LATHE_TOKENIZERS:-$HOME/.cache/lathe/tokenizers}}
mkdir -p "$out/tokenizer" "$out/chat_template" "$out/recipe" "$out/config"
python3 - "$root" "$out" "$toks" <<'EOF'
import glob, hashlib, json, os, sys
root, out, toks = sys.argv[1:4]

def put(kind, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if not data:
        return
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out, kind, name), "wb") as f:
        f.write(data)

for s in json.load(open(os.path.join(root, "tests/fixtures/tokenizers/corpus.json"))):
    put("tokenizer", s)
for p in sorted(glob.glob(os.path.join(root, "tests/fixtures/tokenizers/*/encode_cases.json"))):
    doc = json.load(open(p))
    cases = doc.get("cases", doc) if isinstance(doc, dict) else doc
    for c in cases:
        if isinstance(c, dict):
            for k in ("text", "input"):
                if isinstance(c.get(k), str):
                    put("tokenizer", c[k])
for name in ("qwen3", "llama3", "gemma3", "llama2"):
    tj = os.path.join(toks, name, "tokenizer.json")
    if os.path.exists(tj):
        added = [a["content"] for a in json.load(open(tj, encoding="utf-8"))["added_tokens"]][:40]
        put("tokenizer", "Hi " + " x ".join(added) + "\n")
    cfg = os.path.join(toks, name, "tokenizer_config.json")
    if os.path.exists(cfg):
        ct = json.load(open(cfg, encoding="utf-8")).get("chat_template")
        if isinstance(ct, list):
            for e in ct:
                put("chat_template", e.get("template", ""))
        elif isinstance(ct, str):
            put("chat_template", ct)
for b in (b"\xff", b"\xc3", b"a\x80b", b"\xe2\x82", b"\xed\xa0\x80x", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80",
          b"\xc0\xaf", b"caf\xe9 na\xefve", b"\xef\xbf\xbd\xef\xbf\xbd", b"<|im_start|>\xff<|im_end|>",
          b"\xe2\x96\x81\xe2\x96\x81 x", b" \t\r\n\x00\x01", "e\u0301 \u212b \uac00\u11a8".encode()):
    put("tokenizer", b)
for p in sorted(glob.glob(os.path.join(root, "tests/fuzz/seeds/chat_template/*"))):
    put("chat_template", open(p, "rb").read())
for p in sorted(glob.glob(os.path.join(root, "recipes/*.yaml"))):
    text = open(p, "rb").read()
    put("recipe", text)
    put("recipe", text + b"\0optimizer.lr=1e-3\0eval.batches=0\0samples.prompts=[a, b]")
for b in (b"a: &x [1, 2]\nb: *x\n", b"data: {seq_len: 8, seq_len: 9}\n", b"base: &b {lr: 1}\nopt: {<<: *b}\n",
          b"run:\n  threads: 99999999999999999999\n", b"optimizer: {lr: 1e999}\n", b"[[[[[[[[]]]]]]]]\n",
          b"a: 1\n---\nb: 2\n", b"? [a]\n: 1\n", b"a: \"\\ud800\"\n"):
    put("recipe", b)
for p in sorted(glob.glob(os.path.join(root, "tests/fixtures/models/*/config.json")) +
                glob.glob(os.path.join(root, "tests/fuzz/seeds/config/*.json"))):
    put("config", open(p, "rb").read())
EOF
echo "seeds: $(ls "$out/tokenizer" | wc -l) tokenizer, $(ls "$out/chat_template" | wc -l) chat_template," \
  "$(ls "$out/recipe" | wc -l) recipe, $(ls "$out/config" | wc -l) config -> $out"
