"""Guessing passwords, API keys and tokens: failures slow down, then lock with a 429 and
Retry-After, per account and per client address (127.x.y.z source addresses stand in for
clients), without telling known accounts from unknown ones."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.conftest import ApiServer, Services

LOGIN = "/api/v1/auth/login"
# Long enough that a loaded machine checks a lock before it ends; one test waits it out.
LOCK_S = 10


@pytest.fixture(scope="module")
def server(services: Services) -> Iterator[ApiServer]:
    s = ApiServer(services, {
        "LOGIN_ACCOUNT_FREE_FAILURES": "5", "LOGIN_ACCOUNT_LOCK_AFTER": "10",
        "LOGIN_BACKOFF_BASE_S": "0.05", "LOGIN_LOCK_S": str(LOCK_S),
        "LOGIN_ADDRESS_FREE_FAILURES": "20", "LOGIN_ADDRESS_LOCK_AFTER": "30",
        "TOKEN_ADDRESS_FREE_FAILURES": "5", "TOKEN_ADDRESS_LOCK_AFTER": "10",
        "TOKEN_BACKOFF_BASE_S": "0.05", "TOKEN_LOCK_S": str(LOCK_S)})
    s.start()
    yield s
    s.stop()


def client_from(server: ApiServer, address: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, timeout=30,
                        transport=httpx.HTTPTransport(local_address=address))


def guess(c: httpx.Client, email: str, password: str = "wrong") -> httpx.Response:
    return c.post(LOGIN, json={"email": email, "password": password})


def shape(r: httpx.Response) -> tuple[int, str, bool]:
    return r.status_code, r.json()["detail"], "retry-after" in r.headers


def wait_until_open(c: httpx.Client, email: str, password: str) -> httpx.Response:
    """Retries as Retry-After says until the answer is no longer a 429."""
    deadline = time.monotonic() + 120
    while True:
        r = guess(c, email, password)
        if r.status_code != 429 or time.monotonic() > deadline:
            return r
        time.sleep(min(float(r.headers["retry-after"]), 1.0))


def lock_out(c: httpx.Client, email: str) -> None:
    """Guesses as a patient attacker would (waiting out each backoff, which does not count)
    until the account is locked: a 429 whose Retry-After is the lock's, not a backoff's."""
    keep_guessing(lambda: guess(c, email), email)


def keep_guessing(attempt: Callable[[], httpx.Response], what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        r = attempt()
        if r.status_code == 429:
            wait = int(r.headers["retry-after"])
            if wait >= LOCK_S // 2:
                return
            time.sleep(min(wait, 1.0))
    raise AssertionError(f"{what} never locked")


def fifty_guesses(clients: list[httpx.Client], email: str) -> list[httpx.Response]:
    return [guess(clients[i % len(clients)], email) for i in range(50)]


def assert_throttled(answers: list[httpx.Response]) -> None:
    codes = [r.status_code for r in answers]
    assert set(codes) <= {401, 429}, codes
    assert codes[:5] == [401] * 5, codes  # the free failures
    assert codes.count(401) <= 10, codes  # the rest waited or hit the lock
    for r in answers:
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1


@pytest.mark.parametrize("spread", ["one_address", "many_addresses"])
def test_fifty_wrong_logins_lock_the_account_and_a_right_one_waits(server, make_org, spread):
    org = make_org()
    addresses = ["127.0.0.1"] if spread == "one_address" else [
        f"127.0.{n // 200 + 1}.{n % 200 + 2}" for n in range(50)]
    clients = [client_from(server, a) for a in addresses]
    try:
        answers = fifty_guesses(clients, org.email)
        assert_throttled(answers)
        # Past 10 failures the lock holds: the right password is refused like a wrong one.
        # Guessing on until it does: under load, some of the fifty came after a backoff had
        # run out, and a right password then, before the lock, rightly logs in.
        lock_out(clients[0], org.email)
        wrong, right = guess(clients[0], org.email), guess(clients[0], org.email, org.password)
        assert (wrong.status_code, right.status_code) == (429, 429), right.text
        assert shape(right) == shape(wrong)
        assert right.cookies.get("sw_session") is None
        # Once the lock runs out the right password works and clears the count.
        r = wait_until_open(clients[0], org.email, org.password)
        assert r.status_code == 200, r.text
        assert guess(clients[0], org.email).status_code == 401
        assert guess(clients[0], org.email, org.password).status_code == 200
    finally:
        for c in clients:
            c.close()


def test_an_unknown_account_answers_like_a_known_one(server, make_org):
    org = make_org()
    ghost = f"nobody-{time.time_ns()}@example.test"
    with client_from(server, "127.0.3.1") as a, client_from(server, "127.0.3.2") as b:
        known = [shape(guess(a, org.email)) for _ in range(12)]
        unknown = [shape(guess(b, ghost)) for _ in range(12)]
    assert [s[0] for s in known][:5] == [401] * 5
    assert 429 in [s[0] for s in known]
    # The same kinds of answer: statuses, messages, Retry-After present or not.
    assert set(known) == set(unknown)
    assert [s[0] for s in unknown][:5] == [401] * 5
    assert 429 in [s[0] for s in unknown]


def test_one_address_guessing_many_accounts_is_locked_out_alone(server, make_org):
    org = make_org()
    with client_from(server, "127.0.4.1") as attacker, client_from(server, "127.0.4.2") as other:
        codes = [guess(attacker, f"victim{i}-{time.time_ns()}@example.test").status_code
                 for i in range(50)]
        assert codes[:20] == [401] * 20, codes  # one failure per account, the address counts
        assert codes.count(429) >= 20, codes
        # Quick 429s are backoffs, which a loaded machine may outlast (the right password
        # then got a 200); once the address is locked, even the right password waits.
        keep_guessing(lambda: guess(attacker, f"victim-{time.time_ns()}@example.test"),
                      "the attacker's address")
        blocked = guess(attacker, org.email, org.password)
        assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) >= 1
        assert guess(other, org.email, org.password).status_code == 200


def test_an_admin_lifts_a_lock_in_their_org_only(server, make_org):
    victim, other = make_org(), make_org()
    with server.client() as admin_b, client_from(server, "127.0.5.1") as c:
        lock_out(c, victim.email)
        assert guess(c, victim.email, victim.password).status_code == 429
        with server.client(headers={"Authorization": f"Bearer {victim.api_key}"}) as admin_a:
            users = admin_a.get("/api/v1/users").json()
            user_id = next(u["id"] for u in users if u["email"] == victim.email)
        # Another org's admin cannot see or lift it.
        admin_b.headers["Authorization"] = f"Bearer {other.api_key}"
        r = admin_b.delete(f"/api/v1/users/{user_id}/login-lock")
        assert r.status_code == 404, r.text
        assert guess(c, victim.email, victim.password).status_code == 429
        with server.client(headers={"Authorization": f"Bearer {victim.api_key}"}) as admin_a:
            assert admin_a.delete(f"/api/v1/users/{user_id}/login-lock").status_code == 204
        assert guess(c, victim.email, victim.password).status_code == 200


def test_guessing_api_keys_and_enrollment_tokens_gets_429s(server, make_org):
    org = make_org()
    enroll_body = {"enrollment_token": "swe_" + "x" * 40, "name": "guess",
                   "agent_version": "t", "mesh_address": "127.0.0.1:1"}
    with client_from(server, "127.0.6.1") as key_guesser, \
            client_from(server, "127.0.6.2") as token_guesser, \
            client_from(server, "127.0.6.3") as honest:
        codes = [key_guesser.get("/api/v1/agent/config", headers={
            "Authorization": f"Bearer swk_{i:040d}"}).status_code for i in range(30)]
        assert codes[:5] == [401] * 5 and 429 in codes, codes
        # Quick 429s are backoffs, which a loaded machine may outlast; once the address is
        # locked, even a valid key from it waits.
        keep_guessing(lambda: key_guesser.get("/api/v1/agent/config", headers={
            "Authorization": f"Bearer swk_{0:040d}"}), "the key guesser's address")
        r = key_guesser.get("/api/v1/agents", headers={"Authorization": f"Bearer {org.api_key}"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        codes = [token_guesser.post("/api/v1/agents/enroll", json=enroll_body).status_code
                 for _ in range(30)]
        assert codes[:5] == [401] * 5 and 429 in codes, codes
        # Valid credentials from elsewhere are untouched.
        r = honest.get("/api/v1/agents", headers={"Authorization": f"Bearer {org.api_key}"})
        assert r.status_code == 200, r.text
        r = honest.post("/api/v1/agents/enroll",
                        json={**enroll_body, "enrollment_token": org.enrollment_token})
        assert r.status_code == 201, r.text
