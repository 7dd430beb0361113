#!/usr/bin/env bash
# CI for the Python and TypeScript clients, after `cargo build --bin keyfire`:
#
#   1. install what is missing: the pinned generator, pytest and the Python client itself
#      (clients/python/requirements-dev.txt; pip --user, then --break-system-packages where the
#      system Python refuses), and `npm ci` in clients/typescript; then build the TS client;
#   2. the drift check (clients/check.sh): the committed openapi.json and generated code are
#      what the node's document generates, and every client version is the server's;
#   3. each client's tests against a real node they start (redis-server + target/debug/keyfire,
#      or KEYFIRE_BIN);
#   4. `npm pack --dry-run`: the TS package packs.
#
# Exits non-zero when any step fails.
set -euo pipefail

clients="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$clients")"
cd "$root"
export KEYFIRE_BIN="${KEYFIRE_BIN:-$root/target/debug/keyfire}"
if [ ! -x "$KEYFIRE_BIN" ]; then
  echo "error: $KEYFIRE_BIN is missing: run \`cargo build --bin keyfire\` first (or set KEYFIRE_BIN)" >&2
  exit 1
fi

started=$(date +%s)
step() { echo "--- clients: $* (+$(($(date +%s) - started))s)"; }

# In a virtualenv pip installs into it; elsewhere into the user's site (the system Python of
# Debian refuses that without --break-system-packages, which touches only ~/.local).
pip_install() {
  if python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    python3 -m pip install --quiet "$@"
  else
    python3 -m pip install --quiet --user "$@" \
      || python3 -m pip install --quiet --user --break-system-packages "$@"
  fi
}

step "python: pinned tools and the client"
# Install only when a pin is not met, so a warm machine needs no index.
if ! python3 - "$clients/python/requirements-dev.txt" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version

missing = []
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, pinned = line.partition("==")
    try:
        if version(name) != pinned:
            missing.append(f"{name} {version(name)} (pinned {pinned})")
    except PackageNotFoundError:
        missing.append(f"{name} (pinned {pinned})")
if missing:
    print("to install: " + ", ".join(missing))
    sys.exit(1)
EOF
then
  pip_install -r "$clients/python/requirements-dev.txt"
fi
# The client, editable: the tests import the sources they run beside.
if ! python3 -c "import keyfire_client, sys; sys.exit(not keyfire_client.__file__.startswith('$clients/python/src/'))" 2>/dev/null; then
  pip_install --no-deps -e "$clients/python"
fi
python3 -c "import keyfire_client; print('keyfire_client', keyfire_client.__version__, 'from', keyfire_client.__file__)"

step "typescript: npm ci and build"
ts="$clients/typescript"
# `npm ls` fails when an installed package is missing or not the pinned version.
if ! (cd "$ts" && npm ls --all >/dev/null 2>&1); then
  (cd "$ts" && npm ci --no-audit --no-fund)
fi
(cd "$ts" && npm run --silent build && npm run --silent typecheck)

step "ruff: the hand-written Python (the generated code is the generator's)"
(cd "$clients/python" && python3 -m ruff check --no-cache . && python3 -m ruff format --no-cache --check .)

step "drift check (clients/check.sh)"
"$clients/check.sh"

step "pytest clients/python/tests"
set +e
python3 -m pytest -q -p no:cacheprovider "$clients/python/tests"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "error: pytest collected no tests from clients/python/tests" >&2
  exit 1
elif [ "$status" -ne 0 ]; then
  echo "error: the Python client's tests failed (pytest exit $status)" >&2
  exit "$status"
fi

step "node --test clients/typescript/test"
(cd "$ts" && node --test --test-concurrency=1 --test-reporter=spec test/*.test.mjs)

step "npm pack --dry-run"
(cd "$ts" && npm pack --dry-run)

step "ok"
