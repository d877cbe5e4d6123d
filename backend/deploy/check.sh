#!/usr/bin/env bash
# Static checks of the Helm chart (backend/deploy/helm/stormwatch) and the agents' Kubernetes
# manifests (agents/deploy/kubernetes): helm lint, helm template with the bundled and the
# external database, the rendered objects against what docs/kubernetes.md promises, and a
# render that must fail without a secret key. No cluster is needed (none runs here).
set -euo pipefail
cd "$(dirname "$0")/../.."
chart=backend/deploy/helm/stormwatch
helm="${HELM:-$(scripts/helm.sh)}"
py=.venv/bin/python
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

secrets=(--set secrets.secretKey=check-secret-key-0123456789abcdef0123
         --set secrets.postgresPassword=check-password)
"$helm" lint --strict "$chart" "${secrets[@]}"
"$helm" template sw "$chart" "${secrets[@]}" >"$out/bundled.yaml"
"$py" backend/deploy/check_manifests.py chart "$out/bundled.yaml" sw-stormwatch bundled
"$helm" template sw "$chart" --set existingSecret=stormwatch-credentials \
  --set postgresql.bundled=false --set redis.bundled=false --set ingress.enabled=true \
  --set ingress.tlsSecretName=stormwatch-tls >"$out/external.yaml"
"$py" backend/deploy/check_manifests.py chart "$out/external.yaml" sw-stormwatch external
if grep -q "kind: Secret" "$out/external.yaml"; then
  echo "with existingSecret the chart still renders a Secret" >&2; exit 1
fi
# No secret key, no install: the render fails and says which value is missing.
if "$helm" template sw "$chart" --set secrets.postgresPassword=x >"$out/none.yaml" 2>"$out/err"; then
  echo "helm template rendered without a secret key" >&2; exit 1
fi
grep -q "secrets.secretKey is required" "$out/err" || { cat "$out/err" >&2; exit 1; }
if "$helm" template sw "$chart" --set secrets.secretKey=short --set secrets.postgresPassword=x \
    >/dev/null 2>"$out/err"; then
  echo "helm template took a 5-character secret key" >&2; exit 1
fi
echo "helm template refuses a missing or short secret key: ok"
# The web image's nginx.conf is a template: exactly its two upstreams are filled in.
n=$(STORMWATCH_API_UPSTREAM=sw-stormwatch-api:8000 envsubst '${STORMWATCH_API_UPSTREAM}' \
      <frontend/nginx.conf | grep -c 'proxy_pass http://sw-stormwatch-api:8000;')
[ "$n" = 2 ] || { echo "frontend/nginx.conf: $n upstreams filled in, not 2" >&2; exit 1; }
"$py" backend/deploy/check_manifests.py agents agents/deploy/kubernetes
"$py" backend/deploy/check_manifests.py self-test "$out/bundled.yaml" sw-stormwatch \
  agents/deploy/kubernetes
echo "kubernetes checks: ok"
