"""Fixtures for the API tests: `server` and `client`, an API of the test module's own (the
analytics modules post and roll up samples of their own orgs), and for the account tests an
API whose system mail goes to a local SMTP server (aiosmtpd) and whose links point back at
itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage

import httpx
import pytest

from tests.conftest import LOOPBACK_ALLOWED, ApiServer, Services
from tests.notifications.servers import SmtpServer, wait_until


@pytest.fixture(scope="module")
def server(services: Services) -> Iterator[ApiServer]:
    s = ApiServer(services)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server: ApiServer) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c

@dataclass
class MailApi:
    server: ApiServer
    smtp: SmtpServer

    def mail_to(self, address: str) -> list[EmailMessage]:
        return [m for m in list(self.smtp.sink.messages)
                if address.lower() in str(m["To"]).lower()]

    def wait_for_mail(self, address: str, count: int = 1) -> EmailMessage:
        wait_until(f"{count} message(s) to {address}", 60,
                   lambda: len(self.mail_to(address)) >= count)
        return self.mail_to(address)[count - 1]

    def link_token(self, msg: EmailMessage, page: str) -> str:
        body = msg.get_body(("plain",))
        assert body is not None
        text = body.get_content()
        m = re.search(re.escape(f"{self.server.base_url}/{page}#token=") + r"(\w+)", text)
        assert m, f"no {page} link to {self.server.base_url} in:\n{text}"
        return m.group(1)


@pytest.fixture(scope="session")
def mail_api(services: Services) -> Iterator[MailApi]:
    with SmtpServer(tls=None, mode="none") as smtp:
        server = ApiServer(services, {"EGRESS_ALLOW": LOOPBACK_ALLOWED, "SMTP_HOST": "127.0.0.1",
                                      "SMTP_PORT": str(smtp.port), "SMTP_SECURITY": "none",
                                      "SMTP_FROM": "stormwatch@example.test"})
        server.env["PUBLIC_URL"] = server.base_url
        server.start()
        try:
            yield MailApi(server, smtp)
        finally:
            server.stop()


@contextmanager
def logged_in(server: ApiServer, email: str, password: str) -> Iterator[httpx.Client]:
    """A client with a session of `email`, sending its CSRF header."""
    with server.client() as c:
        r = c.post("/api/v1/auth/login", json={"email": email, "password": password})
        assert r.status_code == 200, r.text
        c.headers["X-CSRF-Token"] = r.cookies["sw_csrf"]
        yield c
