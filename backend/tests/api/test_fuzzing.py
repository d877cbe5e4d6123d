"""Schemathesis against the running API's own schema, as each kind of caller: every answer is
a documented status with a body matching its schema and content type, never a 5xx."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import enroll

# Bounded and derandomised: the same cases every run, a few minutes in all.
MAX_EXAMPLES = 4
SEED = 20261123
# The coverage phase (every boundary of every schema: ~6 700 cases, over 6 minutes per
# caller on a 2-core machine) runs by hand:
# FUZZ_PHASES=examples,coverage,fuzzing,stateful pytest tests/api/test_fuzzing.py
PHASES = os.environ.get("FUZZ_PHASES", "examples,fuzzing,stateful")
# The checks, and the one exception to them, are in schemathesis.toml beside this file.


def caller_headers(api_server, org, who: str) -> list[str]:
    with api_server.client() as c:
        if who in {"admin", "viewer"}:
            email, password = org.email, org.password
            if who == "viewer":
                email, password = f"fuzz-viewer-{uuid.uuid4().hex[:8]}@example.test", "v" * 16
                admin = c.post("/api/v1/auth/login",
                               json={"email": org.email, "password": org.password})
                r = c.post("/api/v1/users", headers={"X-CSRF-Token": admin.cookies["sw_csrf"]},
                           json={"email": email, "password": password, "role": "viewer"})
                assert r.status_code == 201, r.text
                c.cookies.clear()
            r = c.post("/api/v1/auth/login", json={"email": email, "password": password})
            assert r.status_code == 200, r.text
            return [f"Cookie: sw_session={r.cookies['sw_session']}; sw_csrf={r.cookies['sw_csrf']}",
                    f"X-CSRF-Token: {r.cookies['sw_csrf']}"]
        if who == "api_key":
            return [f"Authorization: Bearer {org.api_key}"]
        agent = enroll(c, org.enrollment_token, "fuzz-agent")
        return [f"Authorization: Bearer {agent.token}"]


@pytest.mark.parametrize("who", ["admin", "viewer", "api_key", "agent"])
def test_fuzzing_every_operation_finds_no_server_error_and_no_undocumented_answer(
        api_server, make_org, services, who):
    org = make_org()
    headers = caller_headers(api_server, org, who)
    report = Path(services.tmp) / f"fuzz-{who}.xml"
    args = [sys.executable, "-m", "schemathesis.cli",
            "--config-file", str(Path(__file__).with_name("schemathesis.toml")), "run",
            f"{api_server.base_url}/api/v1/openapi.json",
            "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED),
            "--phases", PHASES, "--workers", "1", "--suppress-health-check", "all",
            "--request-timeout", "60",
            # Logging out would end the session the rest of the run uses.
            "--exclude-path", "/api/v1/auth/logout",
            # No input to vary, and its 503 while no worker runs is its documented answer.
            "--exclude-path", "/api/v1/health",
            "--report", "junit", "--report-junit-path", str(report)]
    for h in headers:
        args += ["--header", h]
    run = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]
