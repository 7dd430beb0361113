#!/usr/bin/env bash
# Checks the monitoring files in deploy/:
#  1. promtool check rules: deploy/prometheus/keyfire-alerts.yml is valid;
#  2. promtool test rules: each alert fires on its test data and stays quiet just short of it
#     (deploy/prometheus/keyfire-alerts.test.yml);
#  3. deploy/grafana/check.py: every PromQL expression of the Grafana dashboard and of the
#     alert rules names only metrics keyfire exports, scraped from a node of this checkout
#     booted against a redis-server of its own.
# Needs promtool (installed with apt-get when missing: Debian's `prometheus` package ships
# it), python3 with PyYAML, cargo and redis-server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if ! command -v promtool >/dev/null 2>&1; then
  echo "--- installing promtool (Debian's prometheus package, without its recommends)"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package starts a Prometheus server where systemd runs; the check needs only promtool.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
promtool --version 2>&1 | head -1

echo "--- promtool check rules"
promtool check rules deploy/prometheus/keyfire-alerts.yml

echo "--- promtool test rules"
(cd deploy/prometheus && promtool test rules keyfire-alerts.test.yml)

echo "--- deploy/grafana/check.py"
cargo build --quiet --bin keyfire
python3 deploy/grafana/check.py --keyfire "${CARGO_TARGET_DIR:-target}/debug/keyfire"
