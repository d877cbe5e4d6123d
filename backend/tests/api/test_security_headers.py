"""Security headers on every response the API sends: JSON, errors, 404s, the UI and /docs
(whose inline script is allowed by its hash alone), and HSTS only over TLS."""

from __future__ import annotations

import base64
import hashlib
import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ApiServer, Services


def directives(csp: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def assert_secured(r: httpx.Response) -> dict[str, list[str]]:
    where = f"{r.request.method} {r.request.url.path} -> {r.status_code}"
    assert r.headers.get("x-content-type-options") == "nosniff", where
    assert r.headers.get("referrer-policy") == "no-referrer", where
    assert r.headers.get("x-frame-options") == "DENY", where
    assert len(r.headers.get_list("content-security-policy")) == 1, where
    csp = directives(r.headers["content-security-policy"])
    assert csp.get("frame-ancestors") == ["'none'"], (where, csp)
    assert csp.get("object-src") == ["'none'"], (where, csp)
    for name in ("default-src", "script-src", "style-src"):
        assert name in csp and "'unsafe-inline'" not in csp[name], (where, csp)
        assert "'unsafe-eval'" not in csp[name], (where, csp)
    return csp


def test_every_kind_of_response_carries_the_security_headers(api, make_org):
    org = make_org()
    key = {"Authorization": f"Bearer {org.api_key}"}
    answers = [
        api.get("/api/v1/agents", headers=key),                        # JSON
        api.get("/api/v1/auth/me"),                                    # 401
        api.get("/api/v1/agents", headers=key, params={"nope": "1"}),  # 422
        api.post("/api/v1/auth/login", content=b"\xff",
                 headers={"Content-Type": "application/json"}),               # 422 body
        api.get("/api/v1/no-such-route"),                              # 404 under the API
        api.delete("/api/v1/auth/me"),                                 # 405
        api.get("/overview"),                                          # the UI's routes
        api.get("/"),
        api.get("/docs-assets/swagger-ui.css"),                        # static files
        api.get("/docs-assets/no-such-file.js"),                       # their 404
        api.get("/api/v1/openapi.json"),
    ]
    assert [r.status_code for r in answers] == [200, 401, 422, 422, 404, 405, 200, 200, 200,
                                                404, 200]
    for r in answers:
        csp = assert_secured(r)
        assert csp["script-src"] == ["'self'"], (r.request.url.path, csp)
        assert "strict-transport-security" not in r.headers, r.request.url.path


def test_the_docs_page_allows_exactly_its_own_inline_script(api):
    r = api.get("/docs")
    assert r.status_code == 200
    csp = assert_secured(r)
    inline = re.findall(r"<script>(.*?)</script>", r.text, re.S)
    assert inline, r.text
    want = {"'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
            for s in inline}
    assert set(csp["script-src"]) == {"'self'", *want}, csp
    # The app's own policy is untouched by the docs' exception.
    assert directives(api.get("/overview").headers["content-security-policy"])[
        "script-src"] == ["'self'"]


@pytest.fixture(scope="module")
def proxied(services: Services) -> Iterator[ApiServer]:
    # 127.0.0.3 stands for the reverse proxy; uvicorn's own forwarded-header trust stays at
    # its default (127.0.0.1), so only the API's TRUSTED_PROXIES can make 127.0.0.3 count.
    server = ApiServer(services, {"TRUSTED_PROXIES": "127.0.0.3/32"})
    server.start()
    yield server
    server.stop()


def client_from(server: ApiServer, address: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, timeout=30,
                        transport=httpx.HTTPTransport(local_address=address))


def test_hsts_only_when_a_trusted_proxy_says_the_client_used_tls(proxied):
    https = {"X-Forwarded-Proto": "https"}
    with client_from(proxied, "127.0.0.3") as proxy, client_from(proxied, "127.0.0.2") as other:
        r = proxy.get("/api/v1/auth/me", headers=https)
        assert r.status_code == 401
        assert r.headers.get("strict-transport-security") == "max-age=31536000", r.headers
        assert proxy.get("/overview", headers=https).headers.get(
            "strict-transport-security") == "max-age=31536000"
        # The value the nearest proxy wrote counts, not one the client put before it.
        r = proxy.get("/overview", headers={"X-Forwarded-Proto": "https, http"})
        assert "strict-transport-security" not in r.headers
        assert "strict-transport-security" not in proxy.get("/overview").headers
        # Anyone else claiming TLS over plain HTTP is not believed.
        r = other.get("/overview", headers=https)
        assert r.status_code == 200 and "strict-transport-security" not in r.headers


@pytest.fixture(scope="module")
def tls(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[ApiServer, Path]]:
    d = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    server = ApiServer(services, args=["--ssl-certfile", str(d / "cert.pem"),
                                       "--ssl-keyfile", str(d / "key.pem")], scheme="https")
    server.start()
    yield server, d / "cert.pem"
    server.stop()


def test_hsts_on_every_response_served_over_tls(tls, api):
    server, cert = tls
    with httpx.Client(base_url=server.base_url, timeout=30,
                      verify=ssl.create_default_context(cafile=str(cert))) as c:
        for r in (c.get("/overview"), c.get("/api/v1/auth/me"), c.get("/api/v1/nope")):
            assert_secured(r)
            assert r.headers.get("strict-transport-security") == "max-age=31536000", (
                r.request.url.path, r.headers)
    assert "strict-transport-security" not in api.get("/overview").headers


def test_nginx_sends_the_same_headers_as_the_api() -> None:
    from stormwatch.api.security_headers import APP_POLICY

    conf = (Path(__file__).resolve().parents[3] / "frontend" / "nginx.conf").read_text()
    sent = dict(re.findall(r'^\s*add_header (\S+) "([^"]*)" always;', conf, re.M))
    assert sent == {"Content-Security-Policy": APP_POLICY, "X-Content-Type-Options": "nosniff",
                    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
                    "Cross-Origin-Opener-Policy": "same-origin"}, sent


def app_with_a_fault() -> object:
    """The API plus one route that fails unexpectedly (uvicorn --factory target)."""
    from stormwatch.main import create_app

    app = create_app()

    @app.get("/api/v1/test-fault")
    async def fault() -> None:
        raise RuntimeError("an unexpected fault")

    # Ahead of the UI's catch-all route, which would answer 404.
    app.router.routes.insert(0, app.router.routes.pop())
    return app


class FaultyApiServer(ApiServer):
    def start(self) -> None:
        from stormwatch.devtools.services import wait_for_port

        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "--factory",
                 "tests.api.test_security_headers:app_with_a_fault", "--host", "127.0.0.1",
                 "--port", str(self.port), "--log-level", "critical"],
                env=self.env, cwd=Path(__file__).resolve().parents[2], stdout=logf,
                stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(self.port, 60, self.proc)


def test_an_unexpected_500_carries_the_headers_too(services: Services) -> None:
    server = FaultyApiServer(services)
    server.start()
    try:
        with server.client() as c:
            r = c.get("/api/v1/test-fault")
            assert r.status_code == 500, r.text
            assert_secured(r)
    finally:
        server.stop()
