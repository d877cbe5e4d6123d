"""Housekeeping of sign-in state: the worker's purge drops expired sessions, abandoned
single sign-ons and mailed links a month past their expiry, and keeps everything else."""

from __future__ import annotations

import uuid

from sqlalchemy import text


def test_the_purge_drops_stale_sign_in_state_and_keeps_live_state(on_test_db, db, make_org):
    from stormwatch.worker.tasks.maintenance import purge_expired_sessions

    org = make_org()
    ids = {name: uuid.uuid4() for name in ("old_link", "recent_link", "live_link")}
    states = {name: uuid.uuid4().hex for name in ("stale_login", "live_login")}
    with db.begin() as c:
        for name, ago in (("old_link", "31 days"), ("recent_link", "1 day"),
                          ("live_link", "-1 day")):
            c.execute(text(
                "INSERT INTO account_links (id, purpose, token_hash, org_id, email, role, "
                "expires_at) VALUES (:i, 'invite', :h, :o, :e, 'viewer', now() - CAST(:ago "
                "AS interval))"), {"i": ids[name], "h": uuid.uuid4().hex, "o": org.org_id,
                                  "e": f"{name}@example.test", "ago": ago})
        for name, ago in (("stale_login", "1 minute"), ("live_login", "-5 minutes")):
            c.execute(text(
                "INSERT INTO oidc_logins (state_hash, org_id, code_verifier, nonce, expires_at)"
                " VALUES (:s, :o, 'v', 'n', now() - CAST(:ago AS interval))"),
                {"s": states[name], "o": org.org_id, "ago": ago})
    assert purge_expired_sessions() >= 2
    with db.connect() as c:
        links = set(c.execute(text("SELECT id FROM account_links WHERE org_id = :o"),
                              {"o": org.org_id}).scalars())
        logins = set(c.execute(text("SELECT state_hash FROM oidc_logins WHERE org_id = :o"),
                               {"o": org.org_id}).scalars())
    assert links == {ids["recent_link"], ids["live_link"]}
    assert logins == {states["live_login"]}
