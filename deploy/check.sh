#!/usr/bin/env bash
# Checks the deployment files in deploy/ offline:
#  1. every manifest under deploy/kubernetes against the Kubernetes JSON schemas that
#     kubernetes-validate bundles (strict: an unknown field fails), for the oldest and the
#     newest Kubernetes release the pinned version knows;
#  2. each kustomization renders (`kubectl kustomize`, when kubectl is on PATH) and its
#     output validates the same way;
#  3. deploy/check.py: the files agree with each other and with keyfire (grace period above
#     the drain, probes on the port api.listen names, the Secret's keys, the image's uid, the
#     try-out Redis's copy of redis.conf, docker-compose.yml's stop grace periods), and a
#     node built from this checkout boots on the ConfigMap's settings against a redis-server
#     of its own, answers the probes and stops on SIGTERM.
# Needs python3 (installs kubernetes-validate with pip when missing), cargo and redis-server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kv_version=1.37.0
# The oldest and newest Kubernetes releases whose schemas kubernetes-validate 1.37.0 bundles.
k8s_versions=(-k 1.25.0 -k 1.37.0)

if ! python3 -c "import sys, kubernetes_validate.version as v; sys.exit(v.__version__ != '$kv_version')" \
  >/dev/null 2>&1; then
  python3 -m pip install --quiet --user "kubernetes-validate==$kv_version" \
    || python3 -m pip install --quiet --user --break-system-packages "kubernetes-validate==$kv_version"
fi

# kubernetes-validate only warns (and exits 0) on a kind it has no schema for, such as a
# misspelt apiVersion; --quiet leaves only warnings and errors, so any output fails.
validate() {
  local out
  if ! out=$(python3 -m kubernetes_validate --strict --quiet "${k8s_versions[@]}" "$@" 2>&1) || [ -n "$out" ]; then
    echo "$out" >&2
    echo "error: kubernetes-validate refused the manifests above" >&2
    exit 1
  fi
}

echo "--- kubernetes-validate $kv_version --strict ${k8s_versions[*]}"
mapfile -t manifests < <(find deploy/kubernetes -name '*.yaml' ! -name kustomization.yaml | sort)
validate "${manifests[@]}"
printf 'ok  %s\n' "${manifests[@]}"

echo "--- kubectl kustomize"
if command -v kubectl >/dev/null 2>&1; then
  for dir in deploy/kubernetes deploy/kubernetes/redis; do
    rendered=$(mktemp)
    kubectl kustomize "$dir" >"$rendered"
    validate "$rendered"
    echo "ok  $dir renders ($(grep -c '^kind:' "$rendered") resources) and validates"
    rm -f "$rendered"
  done
else
  echo "skipped: kubectl is not on PATH (deploy/check.py still checks what each kustomization lists)"
fi

echo "--- deploy/check.py"
cargo build --quiet --bin keyfire
python3 deploy/check.py --keyfire "${CARGO_TARGET_DIR:-target}/debug/keyfire"
