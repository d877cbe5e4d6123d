#!/usr/bin/env bash
# Static checks of the deployment files that can run without a cloud account.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tf="$here/terraform"

# The formatter check never skips. terraform fmt runs when terraform is installed; the same
# check with hclwrite (the formatter terraform fmt is built on, needing only Go) runs always.
if command -v terraform >/dev/null 2>&1; then
  TF_CLI_CONFIG_FILE=/dev/null terraform fmt -check -recursive "$tf"
  echo "terraform fmt -check: ok"
else
  echo "terraform not installed: the hclwrite check below stands in for terraform fmt -check"
fi
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd "$here/hclfmt" && go build -o "$bin/hclfmt" .)
# A check that cannot fail proves nothing: it must reject a misformatted sample.
if "$bin/hclfmt" "$here/hclfmt/testdata" >/dev/null; then
  echo "hclfmt accepted the misformatted sample in $here/hclfmt/testdata" >&2
  exit 1
fi
"$bin/hclfmt" "$tf"
echo "hclwrite format check: ok"

if command -v systemd-analyze >/dev/null 2>&1; then
  systemd-analyze verify "$here/systemd/stormwatch-agent.service" 2>&1 | grep -v "stormwatch-agent: No such file\|Failed to prepare\|not executable" || true
fi
echo "deploy checks: ok"
