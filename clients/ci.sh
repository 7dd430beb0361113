#!/usr/bin/env bash
# CI for the Python and TypeScript clients, after `cargo build --bin keyfire`:
#
#   1. install what is missing: the pinned generator, pytest, the build tools and the Python
#      client itself, editable (clients/python/requirements-dev.txt; pip --user, then
#      --break-system-packages where the system Python refuses), and `npm ci` in
#      clients/typescript; then build the TS client;
#   2. the drift check (clients/check.sh): the committed openapi.json and generated code are
#      what the node's document generates, and every client version is the server's;
#   3. each client's tests against a real node they start (redis-server + target/debug/keyfire,
#      or KEYFIRE_BIN);
#   4. the packages as a user gets them: the Python sdist and wheel (`python -m build`, with
#      hatchling) pass `twine check --strict` and the wheel imports; the TS tarball (`npm pack`)
#      installs into a new project (its dependencies from the registry, or npm's cache when it
#      has them), imports and type-checks there.
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
# The client, editable: the tests import the sources they run beside. Built by the pinned
# hatchling just installed (no build isolation), so a warm machine needs no index.
if ! python3 -c "import keyfire_client, sys; sys.exit(not keyfire_client.__file__.startswith('$clients/python/src/'))" 2>/dev/null; then
  pip_install --no-deps --no-build-isolation -e "$clients/python"
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

step "packages: python -m build, twine check; npm pack, installed into a new project"
pkg="$(mktemp -d "${TMPDIR:-/tmp}/keyfire-packages.XXXXXX")"
trap 'rm -rf "$pkg"' EXIT
# Each package ships the repository's license texts, as copies of its own.
for dir in "$clients/python" "$ts"; do
  for f in LICENSE-MIT LICENSE-APACHE; do
    if ! cmp -s "$root/$f" "$dir/$f"; then
      echo "error: ${dir#"$root"/}/$f is not a copy of $f (cp $f ${dir#"$root"/}/)" >&2
      exit 1
    fi
  done
done
# The sdist, then the wheel built from it (so the sdist is complete), as a registry takes them.
python3 -m build --no-isolation --outdir "$pkg/dist" "$clients/python" >"$pkg/build.log" 2>&1 \
  || { cat "$pkg/build.log" >&2; echo "error: python -m build failed" >&2; exit 1; }
python3 -m twine check --strict "$pkg"/dist/*
# The wheel alone (its dependencies are the ones installed above) imports, with its generated
# code and type marker.
python3 -m pip install --quiet --no-deps --target "$pkg/site" "$pkg"/dist/*.whl
PYTHONPATH="$pkg/site" python3 -c '
import sys
from pathlib import Path

import keyfire_client
from keyfire_client._generated.client import AuthenticatedClient  # noqa: F401

here = Path(keyfire_client.__file__).parent
assert here.parent == Path(sys.argv[1]), f"imported {here}, not the wheel'"'"'s"
assert (here / "py.typed").is_file(), "py.typed is missing from the wheel"
print("wheel: keyfire_client", keyfire_client.__version__, "imports from the installed wheel")
' "$pkg/site"
# The tarball, installed into a project of its own as `npm install keyfire-client-*.tgz` does
# for a user: openapi-fetch and standardwebhooks come from the registry (or npm's cache).
(cd "$ts" && npm pack --silent --pack-destination "$pkg" >/dev/null)
tgz=("$pkg"/keyfire-client-*.tgz)
mkdir "$pkg/app"
(
  cd "$pkg/app"
  echo '{"name": "app", "version": "1.0.0", "private": true, "type": "module"}' >package.json
  npm install --silent --no-audit --no-fund --prefer-offline "${tgz[0]}"
  node --input-type=module -e '
    import { Keyfire, KeyfireError, WebhookVerifier } from "@keyfire/client";
    for (const [name, v] of Object.entries({ Keyfire, KeyfireError, WebhookVerifier })) {
      if (typeof v !== "function") throw new Error(`${name} is not exported`);
    }
    console.log("tarball: @keyfire/client imports in a new project");'
  # Its types resolve from the installed package (exports, .d.ts, the dependencies' types; Node's
  # own, which standardwebhooks' types name, from the client's dev dependencies).
  cat >use.ts <<'TS'
import { Keyfire, type JobSpec } from "@keyfire/client";
const spec: JobSpec = { id: "j", every: "1m", handler: "log" };
export const kf: Keyfire = new Keyfire({ baseUrl: "http://127.0.0.1:8080" });
export const id: string = spec.id;
TS
  "$ts/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
    --target es2022 --types node --typeRoots "$ts/node_modules/@types" use.ts
  echo "tarball: its types check in a new project"
)

step "ok"
