"""`python -m stormwatch.cli create-admin` against the test database, as compose runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "first password, long enough"


def cli(services, *args: str, password: str | None = PASSWORD, stdin: str | None = None,
        **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("ADMIN_ORG", "ADMIN_EMAIL", "ADMIN_PASSWORD")}
    environ.update(DATABASE_URL=services.database_url, PYTHONPATH=str(REPO / "backend"), **env)
    if password is not None:
        environ["ADMIN_PASSWORD"] = password
    return subprocess.run([sys.executable, "-m", "stormwatch.cli", "create-admin", *args],
                          env=environ, input=stdin, capture_output=True, text=True, timeout=60,
                          cwd=REPO)


def login(api, email: str, password: str):
    return api.post("/api/v1/auth/login", json={"email": email, "password": password})


def unique_email() -> str:
    return f"ops-{uuid.uuid4().hex[:8]}@example.test"


def rows(db, email: str, slug: str) -> tuple[int, int]:
    with db.connect() as c:
        users = c.execute(text("SELECT count(*) FROM users WHERE email = :e"), {"e": email})
        orgs = c.execute(text("SELECT count(*) FROM orgs WHERE slug = :s"), {"s": slug})
        return users.scalar(), orgs.scalar()


def test_create_admin_creates_an_org_and_an_admin_who_can_log_in(api, services):
    email, org = unique_email(), f"Acme {uuid.uuid4().hex[:6]}"
    r = cli(services, "--org", org, "--email", email)
    assert r.returncode == 0, r.stderr
    assert "created admin" in r.stdout and PASSWORD not in r.stdout + r.stderr
    me = login(api, email, PASSWORD)
    assert me.status_code == 200, me.text
    assert me.json()["org_name"] == org


def test_running_create_admin_again_changes_nothing(api, db, services):
    email, org = unique_email(), f"Idem {uuid.uuid4().hex[:6]}"
    slug = org.lower().replace(" ", "-")
    assert cli(services, "--org", org, "--email", email).returncode == 0
    # Compose runs it on every start, maybe with another (or no) password in the env.
    again = cli(services, "--org", org, "--email", email, password="a different password")
    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stdout
    without = cli(services, "--org", org, "--email", email, password=None)
    assert without.returncode == 0, without.stderr
    assert rows(db, email, slug) == (1, 1)
    assert login(api, email, PASSWORD).status_code == 200
    assert login(api, email, "a different password").status_code == 401


def test_org_and_email_come_from_the_environment_as_in_compose(api, services):
    email, org = unique_email(), f"Env {uuid.uuid4().hex[:6]}"
    r = cli(services, ADMIN_ORG=org, ADMIN_EMAIL=email)
    assert r.returncode == 0, r.stderr
    assert login(api, email, PASSWORD).json()["org_name"] == org


def test_a_second_admin_joins_the_existing_org(api, services):
    org = f"Shared {uuid.uuid4().hex[:6]}"
    first, second = unique_email(), unique_email()
    assert cli(services, "--org", org, "--email", first).returncode == 0
    r = cli(services, "--org", org, "--email", second)
    assert r.returncode == 0 and "existing org" in r.stdout
    a, b = login(api, first, PASSWORD).json(), login(api, second, PASSWORD).json()
    assert a["org_id"] == b["org_id"]


def test_reset_password_reads_the_new_one_from_stdin(api, services):
    email, org = unique_email(), f"Reset {uuid.uuid4().hex[:6]}"
    assert cli(services, "--org", org, "--email", email).returncode == 0
    r = cli(services, "--org", org, "--email", email, "--password-stdin", "--reset-password",
            password=None, stdin="the new password here\n")
    assert r.returncode == 0, r.stderr
    assert "password reset" in r.stdout
    assert login(api, email, "the new password here").status_code == 200
    assert login(api, email, PASSWORD).status_code == 401


@pytest.mark.parametrize(
    ("args", "password", "complaint"),
    [
        ([], PASSWORD, "ADMIN_ORG"),
        (["--org", "No Mail"], PASSWORD, "ADMIN_EMAIL"),
        (["--org", "No Password", "--email", "x@example.test"], None, "ADMIN_PASSWORD"),
        (["--org", "Short", "--email", "y@example.test"], "short", "at least 12"),
        (["--org", "Bad Mail", "--email", "not-an-email"], PASSWORD, "not an email"),
    ],
    ids=["no-org", "no-email", "no-password", "short-password", "bad-email"],
)
def test_create_admin_refuses_incomplete_input_naming_the_problem_and_creates_nothing(
        db, services, args, password, complaint):
    r = cli(services, *args, password=password)
    assert r.returncode == 2
    assert complaint in r.stderr
    assert "Traceback" not in r.stderr
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM orgs WHERE slug IN "
                              "('no-mail', 'no-password', 'short', 'bad-mail')")).scalar() == 0


def test_an_email_of_another_org_is_refused(api, services):
    email = unique_email()
    assert cli(services, "--org", f"Owner {uuid.uuid4().hex[:6]}", "--email", email
               ).returncode == 0
    r = cli(services, "--org", f"Thief {uuid.uuid4().hex[:6]}", "--email", email,
            "--reset-password", password="taking it over now")
    assert r.returncode == 2 and "another org" in r.stderr
    assert login(api, email, PASSWORD).status_code == 200
