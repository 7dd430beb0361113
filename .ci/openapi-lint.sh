#!/usr/bin/env bash
# Lint keyfire's OpenAPI document with Redocly CLI (pinned, its `recommended` rules): errors
# fail, warnings are printed. Usage: .ci/openapi-lint.sh path/to/openapi.json (the document as
# a node serves it at /v1/openapi.json; .ci/schemathesis.sh fetches one and calls this).
# The warnings that stay, and why, are in docs/api.md ("Contract tests").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REDOCLY_VERSION=2.77.0
doc=${1:?usage: .ci/openapi-lint.sh path/to/openapi.json}
doc=$(cd "$(dirname "$doc")" && pwd)/$(basename "$doc")

command -v npm >/dev/null || { echo "error: npm (Node.js) is needed for Redocly CLI" >&2; exit 1; }
# Installed under target/ (ignored by git), once per version.
tools=target/openapi-lint/redocly-$REDOCLY_VERSION
if [ ! -x "$tools/node_modules/.bin/redocly" ]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --silent "@redocly/cli@$REDOCLY_VERSION"
fi

echo "--- redocly lint (recommended rules) $doc"
# Redocly asks about telemetry and update checks on a terminal; neither is wanted here.
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
  "$tools/node_modules/.bin/redocly" lint --extends=recommended --format=stylish "$doc"
