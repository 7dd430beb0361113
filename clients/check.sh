#!/usr/bin/env bash
# Drift check: regenerate the clients into a temp dir from a node built from this tree, and
# fail (showing the diff) when the committed clients/openapi.json or generated code differ,
# or when a client's version is not the server's. Fix with clients/generate.sh and commit.
set -euo pipefail

clients="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fresh="$(mktemp -d "${TMPDIR:-/tmp}/keyfire-check.XXXXXX")"
trap 'rm -rf "$fresh"' EXIT

"$clients/generate.sh" --out "$fresh" >/dev/null

status=0
compare() {
  local committed="$clients/$1" generated="$fresh/$1"
  if [ ! -e "$committed" ]; then
    echo "drift: clients/$1 is missing"
    status=1
  elif ! diff -ru --exclude=__pycache__ "$committed" "$generated"; then
    echo "drift: clients/$1 differs from what the node's document generates (diff above: - committed, + generated)"
    status=1
  fi
}
compare openapi.json
compare python/src/keyfire_client/_generated
compare typescript/src/generated/schema.ts

python3 "$clients/versions.py" --check || status=1

if [ "$status" -ne 0 ]; then
  echo "fix: clients/generate.sh, then commit clients/" >&2
  exit 1
fi
echo "clients: generated code matches the node's OpenAPI document"
