#!/usr/bin/env bash
# Speed and id comparison: lathe's tokenizer (build/release/tokenizer_bench) against Hugging Face's Rust
# tokenizers through its official Node binding (npm tokenizers, pinned in bench/tokenizers_node/package.json),
# for qwen3, llama3, gemma3 and llama2, on one thread each.
#
#   bench/tokenizer_compare.sh [ROUNDS=3]
#   env: LATHE_TOKENIZERS (default ~/.cache/lathe/tokenizers), CORPUS_MB (default 12), OUT_DIR
#        (default build/tokenizer_compare), SKIP_BUILD=1 to use an existing build/release/tokenizer_bench.
#
# 1. Builds build/release/tokenizer_bench (release preset) and installs the Node package (npm ci).
# 2. Generates a deterministic mixed corpus (OUT_DIR/corpus.txt, sha256 printed): English prose from
#    /usr/share/common-licenses/*, C headers from /usr/include/**/*.h, Python from /usr/lib/python3*/*.py and
#    the strings of tests/fixtures/tokenizers/corpus.json repeated (multilingual), files in sorted order and
#    interleaved to fixed byte quotas, decoded as UTF-8 with invalid bytes replaced so both sides see the
#    same valid text. It depends only on the files of this machine's Debian packages.
# 3. For each tokenizer runs lathe then Node, A B A B, ROUNDS times, each in a fresh process. Both encode
#    the corpus split into paragraphs (at "\n\n"), without special tokens: lathe with encode() per paragraph
#    (full Encoding: ids, tokens, offsets) and encode_ids(), Node with one encodeBatch over all paragraphs
#    (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false). Times are CPU time (lathe: thread CPU time;
#    Node: process CPU time) because the machine may be shared; Node's wall time is reported too.
#    Load time: best of 3 loads of tokenizer.json in the process.
# 4. Prints medians and ratios, and fails if the ids differ (count + hash of all ids) between the two.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
toks=${LATHE_TOKENIZERS:-$HOME/.cache/lathe/tokenizers}
out=${OUT_DIR:-$root/build/tokenizer_compare}
corpus_mb=${CORPUS_MB:-12}
bench=$root/build/release/tokenizer_bench
mkdir -p "$out"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  [[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
  cmake --build build/release --target tokenizer_bench -j "${JOBS:-2}" >/dev/null
fi
[[ -x "$bench" ]] || { echo "tokenizer_compare: $bench missing" >&2; exit 1; }
if [[ ! -d bench/tokenizers_node/node_modules/tokenizers ]]; then
  (cd bench/tokenizers_node && npm ci --no-audit --no-fund --silent)
fi

python3 - "$root" "$out/corpus.txt" "$corpus_mb" <<'EOF'
import glob, json, os, sys
root, path, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
target = int(mb * 1e6)

def files(pattern, recursive=False):
    return [p for p in sorted(glob.glob(pattern, recursive=recursive)) if os.path.isfile(p)]

def read(p):
    with open(p, "rb") as f:
        return f.read().decode("utf-8", "replace")

multi = "\n".join(json.load(open(os.path.join(root, "tests/fixtures/tokenizers/corpus.json"), encoding="utf-8")))
sources = {  # name: (byte quota fraction, list of texts, loaded lazily)
    "prose": (0.25, files("/usr/share/common-licenses/*")),
    "c": (0.35, files("/usr/include/**/*.h", recursive=True)),
    "python": (0.25, files("/usr/lib/python3*/*.py")),
    "multilingual": (0.15, None),
}
fill = {k: 0 for k in sources}
cursor = {k: 0 for k in sources}
parts, total = [], 0
while total < target:
    # The category furthest below its quota gets the next file (ties: dict order): deterministic.
    k = min(sources, key=lambda k: fill[k] / sources[k][0])
    frac, lst = sources[k]
    if lst is None:
        text = multi
    else:
        if not lst:
            sys.exit(f"tokenizer_compare: no files for {k}")
        text = read(lst[cursor[k] % len(lst)])
        cursor[k] += 1
    text = text.strip("\n") + "\n\n"
    n = len(text.encode("utf-8"))
    parts.append(text)
    fill[k] += n
    total += n
data = "".join(parts).encode("utf-8")
with open(path, "wb") as f:
    f.write(data)
mix = ", ".join(f"{k} {fill[k] / total:.0%}" for k in sources)
print(f"corpus: {len(data) / 1e6:.2f} MB ({mix}; {cursor['prose']} licence, {cursor['c']} header, "
      f"{cursor['python']} python files)", file=sys.stderr)
EOF
echo "corpus sha256: $(sha256sum "$out/corpus.txt" | cut -d' ' -f1)" >&2
echo "load: $(uptime | sed 's/.*load average/load average/') on $(nproc) CPUs" >&2

results=$out/results.jsonl
: >"$results"
for name in qwen3 llama3 gemma3 llama2; do
  [[ -f "$toks/$name/tokenizer.json" ]] || { echo "tokenizer_compare: no $toks/$name/tokenizer.json" >&2; exit 1; }
  one=$out/tok_$name
  rm -rf "$one" && mkdir -p "$one" && ln -s "$toks/$name" "$one/$name"  # tokenizer_bench runs every tokenizer it finds
  for ((r = 1; r <= rounds; ++r)); do
    "$bench" "$one" "$out/corpus.txt" | grep "\"tokenizer\": \"$name\"" |
      sed "s/^{/{\"impl\": \"lathe\", \"round\": $r, /" >>"$results"
    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false node bench/tokenizers_node/bench.js "$name" \
      "$toks/$name/tokenizer.json" "$out/corpus.txt" | sed "s/^{/{\"round\": $r, /" >>"$results"
    echo "  $name round $r done" >&2
  done
done
echo "load after: $(uptime | sed 's/.*load average/load average/')" >&2

python3 - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
ok = True
print(f"{'tokenizer':9} {'lathe load':>10} {'HF load':>8} {'ratio':>6} | {'lathe enc':>9} {'lathe ids':>9} "
      f"{'HF enc':>7} {'HF wall':>7} {'enc x':>6} {'ids x':>6} | ids")
for name in ("qwen3", "llama3", "gemma3", "llama2"):
    L = [r for r in rows if r["tokenizer"] == name and r["impl"] == "lathe"]
    H = [r for r in rows if r["tokenizer"] == name and r["impl"] != "lathe"]
    ll, hl = med([r["load_ms"] for r in L]), med([r["load_ms"] for r in H])
    le, li = med([r["encode_paragraphs_mb_s"] for r in L]), med([r["encode_ids_paragraphs_mb_s"] for r in L])
    he, hw = med([r["encode_paragraphs_mb_s"] for r in H]), med([r["encode_paragraphs_wall_mb_s"] for r in H])
    hashes = {(r["ids_tokens"], r["ids_hash"]) for r in L} | {(r["paragraph_tokens"], r["ids_hash"]) for r in H}
    same = len(hashes) == 1 and all(r["paragraph_tokens"] == r["ids_tokens"] for r in L)
    ok &= same
    n, h = sorted(hashes)[0]
    print(f"{name:9} {ll:8.1f}ms {hl:6.1f}ms {hl / ll:5.2f}x | {le:7.2f}MB/s {li:7.2f}MB/s {he:5.2f}MB/s {hw:5.2f}MB/s "
          f"{le / he:5.2f}x {li / he:5.2f}x | {'identical' if same else 'DIFFERENT ' + str(sorted(hashes))} ({n} ids, {h})")
print("(load ratio = HF / lathe: > 1 means lathe loads faster; enc x / ids x = lathe encode / encode_ids MB/s over HF "
      "encodeBatch MB/s; CPU-time based, medians of", len(rows) // 8, "rounds)")
sys.exit(0 if ok else 1)
EOF
