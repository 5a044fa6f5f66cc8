#!/usr/bin/env bash
# Installs the official `openai` npm package that the end-to-end test of `lathe serve` drives
# (tests/e2e/openai_client_test.cc runs tests/e2e/openai_client/e2e.mjs), at the exact version pinned in
# tests/e2e/openai_client/package.json and package-lock.json, into tests/e2e/openai_client/node_modules
# (git-ignored), from the npm registry as configured on the machine.
# Usage: tools/setup_openai_client.sh
# Idempotent: when node_modules already holds the pinned version, nothing is fetched.
set -euo pipefail

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/openai_client" && pwd)"
die() { echo "setup_openai_client: $*" >&2; exit 1; }

command -v node >/dev/null || die "node not found (make setup installs nodejs and npm)"
command -v npm >/dev/null || die "npm not found (make setup installs nodejs and npm)"
want=$(node -p "require(process.argv[1]).dependencies.openai" "$DIR/package.json")
have=$(node -p "require(process.argv[1]).version" "$DIR/node_modules/openai/package.json" 2>/dev/null || true)
if [[ "$have" == "$want" ]]; then
  echo "setup_openai_client: openai $want up to date"
  exit 0
fi
echo "setup_openai_client: npm ci (openai $want) in $DIR"
# ci: exactly the lock file's versions and integrity hashes; no install scripts run (the package has none).
(cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci failed in $DIR"
have=$(node -p "require(process.argv[1]).version" "$DIR/node_modules/openai/package.json" 2>/dev/null || true)
[[ "$have" == "$want" ]] || die "after npm ci, node_modules holds openai '$have', not $want"
echo "setup_openai_client: openai $want ok -> $DIR/node_modules"
