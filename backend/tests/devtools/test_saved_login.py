"""`make run` prints a login that opens the demo org: a saved one whose password was changed
since (in the UI) or whose org is gone is replaced, not printed stale."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import Engine, text

from stormwatch.core.security import hash_password
from stormwatch.devtools.bootstrap import ensure_demo_org, saved_login_works
from tests.conftest import Services


def test_a_changed_password_or_a_missing_org_is_no_longer_a_working_login(
        services: Services, db: Engine) -> None:
    email = f"demo-{uuid.uuid4().hex[:8]}@stormwatch.local"
    saved = asyncio.run(ensure_demo_org(services.database_url, f"Demo {email}", email)).as_dict()
    assert asyncio.run(saved_login_works(services.database_url, saved))
    with db.begin() as c:
        c.execute(text("UPDATE users SET password_hash = :h WHERE email = :e"),
                  {"h": hash_password("changed in the UI since"), "e": email})
    assert not asyncio.run(saved_login_works(services.database_url, saved))
    again = asyncio.run(ensure_demo_org(services.database_url, f"Demo {email}", email)).as_dict()
    assert again["org_id"] == saved["org_id"] and again["password"] != saved["password"]
    assert asyncio.run(saved_login_works(services.database_url, again))
    assert not asyncio.run(saved_login_works(services.database_url,
                                             {**again, "org_id": str(uuid.uuid4())}))
