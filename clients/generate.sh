#!/usr/bin/env bash
# Regenerate both clients from the OpenAPI document a real node serves.
#
#   clients/generate.sh              build target/debug/keyfire, start it, and rewrite
#                                    clients/openapi.json, the generated code of both clients,
#                                    and their versions (from Cargo.toml's workspace version)
#   clients/generate.sh --out DIR    write openapi.json and the generated code under DIR
#                                    instead (DIR/python/..., DIR/typescript/...); used by
#                                    clients/check.sh to compare with what is committed
#
# It starts a redis-server (the shipped redis.conf, a free port, a temp dir, no persistence)
# and `keyfire serve` with a token on a free port, fetches /v1/openapi.json, runs
# openapi-python-client and openapi-typescript, and stops both. KEYFIRE_BIN names a built
# binary to use instead of building target/debug/keyfire.
#
# Needs: cargo (unless KEYFIRE_BIN), redis-server, curl, python3 with the pinned generator of
# clients/python/requirements-dev.txt, and `npm ci` done in clients/typescript.
set -euo pipefail

clients="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$clients")"
out="$clients"
if [ "${1:-}" = "--out" ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 [--out DIR]" >&2; exit 2; }
  mkdir -p "$2"
  out="$(cd "$2" && pwd)"
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--out DIR]" >&2
  exit 2
fi

if ! python3 -c "import openapi_python_client" 2>/dev/null; then
  echo "error: openapi-python-client is missing: python3 -m pip install --user -r clients/python/requirements-dev.txt" >&2
  exit 1
fi
openapi_typescript="$clients/typescript/node_modules/.bin/openapi-typescript"
if [ ! -x "$openapi_typescript" ]; then
  echo "error: openapi-typescript is missing: (cd clients/typescript && npm ci)" >&2
  exit 1
fi

bin="${KEYFIRE_BIN:-}"
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --quiet --bin keyfire)
  bin="$root/target/debug/keyfire"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/keyfire-generate.XXXXXX")"
redis_pid=
node_pid=
cleanup() {
  # Only the two processes this script started, by their pids.
  if [ -n "$node_pid" ]; then kill "$node_pid" 2>/dev/null || true; wait "$node_pid" 2>/dev/null || true; fi
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Wait until `$1` (a command) succeeds, up to 30 s; on failure show `$2` (a log file).
wait_for() {
  for _ in $(seq 300); do
    if eval "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "error: timed out waiting for: $1" >&2
  cat "$2" >&2
  exit 1
}

redis_port="$(free_port)"
# A copy in the temp dir: never started from the checkout's file, which the build embeds.
cp "$root/redis.conf" "$work/redis.conf"
redis-server "$work/redis.conf" --port "$redis_port" --bind 127.0.0.1 --dir "$work" \
  --save "" --appendonly no --daemonize no --logfile "$work/redis.log" &
redis_pid=$!
wait_for "redis-cli -p $redis_port ping | grep -q PONG" "$work/redis.log"

api_port="$(free_port)"
token="generate-$RANDOM$RANDOM"
KEYFIRE__REDIS__URL="redis://127.0.0.1:$redis_port/0" \
  KEYFIRE__API__LISTEN="127.0.0.1:$api_port" \
  KEYFIRE__API__TOKEN="$token" \
  "$bin" serve >"$work/node.log" 2>&1 &
node_pid=$!
wait_for "curl -fsS http://127.0.0.1:$api_port/healthz" "$work/node.log"

# The document as served, indented so that a change shows as a readable diff.
curl -fsS "http://127.0.0.1:$api_port/v1/openapi.json" -o "$work/served.json"
python3 - "$work/served.json" "$out/openapi.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(doc, f, indent=2, ensure_ascii=False)
    f.write("\n")
EOF
echo "openapi.json: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["paths"]), "paths,", len(d["components"]["schemas"]), "schemas, version", d["info"]["version"])' "$out/openapi.json")"

# Python: generated in the temp dir (so no pyproject.toml above it changes how ruff formats
# it), then moved into place whole, so removed operations do not linger.
python3 -m openapi_python_client generate --path "$out/openapi.json" --meta none \
  --config "$clients/python/openapi-python-client.yaml" \
  --output-path "$work/python/_generated" --fail-on-warning >"$work/python.log" 2>&1 \
  || { cat "$work/python.log" >&2; echo "error: openapi-python-client failed" >&2; exit 1; }
py_target="$out/python/src/keyfire_client/_generated"
mkdir -p "$(dirname "$py_target")"
rm -rf "$py_target"
find "$work/python/_generated" \( -name __pycache__ -o -name .ruff_cache \) -prune -exec rm -rf {} +
cp -R "$work/python/_generated" "$py_target"
echo "python: $(find "$py_target" -name '*.py' | wc -l) files in ${py_target#"$out"/}"

# TypeScript: the types of every path, operation and schema, for openapi-fetch. An object
# schema that lists no properties (a job's `params`) takes any properties, as JSON Schema
# reads it: `unknown`, not the generator's default `Record<string, never>`.
ts_target="$out/typescript/src/generated/schema.ts"
mkdir -p "$(dirname "$ts_target")"
"$openapi_typescript" "$out/openapi.json" -o "$ts_target" --empty-objects-unknown >"$work/typescript.log" 2>&1 \
  || { cat "$work/typescript.log" >&2; echo "error: openapi-typescript failed" >&2; exit 1; }
echo "typescript: ${ts_target#"$out"/} ($(wc -l <"$ts_target") lines)"

# The clients' versions follow the server's (only when writing the tree itself).
if [ "$out" = "$clients" ]; then
  version="$(python3 "$clients/versions.py" --server)"
  if ! python3 "$clients/versions.py" --check >/dev/null; then
    python3 "$clients/versions.py" --set "$version"
    (cd "$clients/typescript" && npm version "$version" --no-git-tag-version --allow-same-version >/dev/null)
  fi
  echo "versions: $version"
fi
