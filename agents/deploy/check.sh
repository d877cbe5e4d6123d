#!/usr/bin/env bash
# Static checks of the deployment files that can run without a cloud account.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if command -v terraform >/dev/null 2>&1; then
  terraform fmt -check -recursive "$here/terraform"
  echo "terraform fmt: ok"
else
  echo "terraform not installed: skipping terraform fmt -check"
fi
if command -v systemd-analyze >/dev/null 2>&1; then
  systemd-analyze verify "$here/systemd/stormwatch-agent.service" 2>&1 | grep -v "stormwatch-agent: No such file\|Failed to prepare\|not executable" || true
fi
echo "deploy checks: ok"
