#!/usr/bin/env bash
# Contract tests: Schemathesis (a third-party OpenAPI fuzzer) against a real node.
#
# Starts a redis-server (the shipped redis.conf, no persistence, a temp dir, a free port) and
# `target/debug/keyfire serve` with a bearer token on another free port, then runs Schemathesis
# against the node's own /v1/openapi.json: every check (`checks.enabled = true` in
# .ci/schemathesis.toml, the file's form of `--checks all`), positive and negative data, all four
# phases (examples, coverage, fuzzing, stateful), a fixed seed and a bounded number of examples
# per operation, after linting that document (.ci/openapi-lint.sh). Exits non-zero on any
# Schemathesis failure or lint error.
#
# Knobs (environment): SCHEMATHESIS_SEED, or SCHEMATHESIS_SEEDS (several, such as "1 2 3", run
# one after another against the same node), SCHEMATHESIS_MAX_EXAMPLES, SCHEMATHESIS_WORKERS,
# KEEP=1 (keep the temp dir with the logs and reports). What is excluded and why is in
# docs/api.md, "Contract tests"; the per-operation settings are in .ci/schemathesis.toml.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SCHEMATHESIS_VERSION=4.32.5
seeds=${SCHEMATHESIS_SEEDS:-${SCHEMATHESIS_SEED:-20260127}}
max_examples=${SCHEMATHESIS_MAX_EXAMPLES:-200}
workers=${SCHEMATHESIS_WORKERS:-2}
started=$(date +%s)

# Schemathesis, pinned, as .ci/run installs standardwebhooks.
if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 is needed for Schemathesis" >&2
  exit 1
fi
st_bin() { python3 -c 'import site, os; print(os.path.join(site.USER_BASE, "bin", "schemathesis"))'; }
if [ "$("$(st_bin)" --version 2>/dev/null || true)" != "schemathesis, version $SCHEMATHESIS_VERSION" ]; then
  python3 -m pip install --quiet --user "schemathesis==$SCHEMATHESIS_VERSION" \
    || python3 -m pip install --quiet --user --break-system-packages "schemathesis==$SCHEMATHESIS_VERSION"
fi
st=$(st_bin)
# A virtualenv's python installs into the environment, not the user base.
[ -x "$st" ] || st=$(command -v schemathesis)
"$st" --version

for tool in redis-server redis-cli curl; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not on PATH" >&2; exit 1; }
done

echo "--- cargo build --bin keyfire"
cargo build --bin keyfire

work=$(mktemp -d "${TMPDIR:-/tmp}/keyfire-contract.XXXXXX")
redis_pid=
node_pid=
cleanup() {
  local rc=$?
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "--- keyfire log (last 40 lines)"
    tail -n 40 "$work/keyfire.log" 2>/dev/null || true
    echo "--- redis log (last 20 lines)"
    tail -n 20 "$work/redis.log" 2>/dev/null || true
  fi
  if [ "${KEEP:-}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "logs and reports kept in $work"
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Redis: the shipped configuration (a copy in the temp dir: never started from the checkout's
# file, which the build embeds), without persistence, in the temp dir.
redis_port=$(free_port)
cp redis.conf "$work/redis.conf"
redis-server "$work/redis.conf" --port "$redis_port" --bind 127.0.0.1 --dir "$work" \
  --save "" --appendonly no --daemonize no --logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 100); do
  if [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ]; then break; fi
  kill -0 "$redis_pid" 2>/dev/null || { echo "error: redis-server exited" >&2; exit 1; }
  sleep 0.1
done
# The server that answers must be the one started here, not another on a reused port.
answering=$(redis-cli -p "$redis_port" info server | tr -d '\r' | sed -n 's/^process_id://p')
if [ "$answering" != "$redis_pid" ]; then
  echo "error: the Redis on port $redis_port is pid '$answering', not the one started ($redis_pid)" >&2
  exit 1
fi

# The node, with a token on a free port.
api_port=$(free_port)
token=contract-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
base="http://127.0.0.1:$api_port"
KEYFIRE__REDIS__URL="redis://127.0.0.1:$redis_port/0" \
  KEYFIRE__API__LISTEN="127.0.0.1:$api_port" \
  KEYFIRE__API__TOKEN="$token" \
  target/debug/keyfire serve >"$work/keyfire.log" 2>&1 &
node_pid=$!
for _ in $(seq 300); do
  if curl -fsS "$base/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$node_pid" 2>/dev/null || { echo "error: keyfire serve exited" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "$base/readyz" >/dev/null
curl -fsS "$base/v1/openapi.json" -o "$work/openapi.json"

# The document the node serves, linted (0 errors) before it is fuzzed; both run either way.
lint_rc=0
bash .ci/openapi-lint.sh "$work/openapi.json" || lint_rc=$?

# --request-timeout: a pop may long-poll for as long as its `wait` asks, up to 60 s (the
# server's bound), past Schemathesis's default of 10 s.
st_rc=0
for seed in $seeds; do
  echo "--- schemathesis run (seed $seed, at most $max_examples examples per operation)"
  rc=0
  "$st" --config-file .ci/schemathesis.toml run "$base/v1/openapi.json" \
    --header "Authorization: Bearer $token" \
    --seed "$seed" \
    --mode all \
    --phases examples,coverage,fuzzing,stateful \
    --max-examples "$max_examples" \
    --request-timeout 75 \
    --workers "$workers" \
    --generation-database none \
    --exclude-deprecated \
    --report junit,ndjson --report-dir "$work/report/seed-$seed" \
    --no-color || rc=$?
  echo "--- seed $seed: schemathesis exit code $rc"
  if [ "$rc" -ne 0 ]; then st_rc=$rc; fi
done

# What the node refused of the schema-valid requests (passed, as the rules no schema can state;
# anything else there is a rule the document could state): the 40 largest groups.
echo "--- schema-valid requests the node refused (.ci/schemathesis_refusals.py)"
python3 .ci/schemathesis_refusals.py "$work"/report/seed-*/ndjson-*.ndjson || true

echo "--- schemathesis exit code $st_rc, lint exit code $lint_rc, $(($(date +%s) - started))s since the start"
if [ "$st_rc" -ne 0 ]; then
  exit "$st_rc"
fi
if [ "$lint_rc" -ne 0 ]; then
  exit "$lint_rc"
fi
