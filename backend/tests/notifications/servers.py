"""Real local servers for channel tests: an SMTP server (aiosmtpd) with STARTTLS or implicit
TLS and AUTH on a certificate from a throwaway CA, and an HTTP receiver that records
requests, answers scripted statuses, can hold a request, and verifies Standard Webhooks
signatures when given the secret."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks import Webhook

from stormwatch.devtools.services import free_port


def wait_until(what: str, timeout_s: float, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Tls:
    ca_pem: str
    cert_file: str
    key_file: str

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def make_tls(dns_name: str = "localhost", with_ip: bool = True) -> Tls:
    """A CA and a server certificate signed by it, for `dns_name` (and 127.0.0.1)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Stormwatch test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)] + (
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] if with_ip else [])),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    d = Path(tempfile.mkdtemp(prefix="sw-tls-"))
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return Tls(ca_pem=ca.public_bytes(serialization.Encoding.PEM).decode(),
               cert_file=str(d / "cert.pem"), key_file=str(d / "key.pem"))


@dataclass
class SmtpSink:
    """What the SMTP server accepted, and how to make it refuse."""

    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    reject_data: str | None = None  # e.g. "550 5.7.1 relaying denied"

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        if self.reject_data:
            return self.reject_data
        assert isinstance(envelope.content, bytes)
        msg = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(msg, EmailMessage)
        self.messages.append(msg)
        self.envelopes.append((str(envelope.mail_from), list(envelope.rcpt_tos)))
        return "250 2.0.0 Ok: queued as TEST123"


class SmtpServer:
    def __init__(self, tls: Tls | None, mode: str = "starttls",
                 users: dict[str, str] | None = None) -> None:
        self.sink = SmtpSink()
        self.port = free_port()
        users = users or {}

        def authenticator(server: Any, session: Session, envelope: Envelope, mechanism: str,
                          auth_data: Any) -> AuthResult:
            if isinstance(auth_data, LoginPassword) and users.get(
                    auth_data.login.decode()) == auth_data.password.decode():
                return AuthResult(success=True)
            return AuthResult(success=False, handled=False)

        kwargs: dict[str, Any] = {"hostname": "127.0.0.1", "port": self.port,
                                  "server_hostname": "localhost"}
        if users:
            kwargs.update(authenticator=authenticator, auth_required=True,
                          auth_require_tls=mode == "starttls")
        if mode == "starttls" and tls is not None:
            kwargs.update(tls_context=tls.server_context(), require_starttls=True)
        if mode == "tls" and tls is not None:
            kwargs.update(ssl_context=tls.server_context())
        self.controller = Controller(self.sink, **kwargs)

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class HttpReceiver:
    """Records POSTs; answers `script` statuses in turn (then `default`), may hold requests
    until released, and with `secret` verifies the Standard Webhooks signature (401 if bad)
    and deduplicates on webhook-id as the spec tells receivers to."""

    def __init__(self, secret: str | None = None, tls: Tls | None = None,
                 bind: str = "127.0.0.1") -> None:
        self.requests: list[Received] = []
        self.accepted: dict[str, Any] = {}  # webhook-id -> verified payload (deduplicated)
        self.duplicates = 0
        self.bad_signatures = 0
        self.script: list[tuple[int, str | bytes]] = []
        self.default: tuple[int, str | bytes] = (200, "ok")
        self.location: str | None = None  # answered as a Location header (redirects)
        self.reply_headers: dict[str, str] = {}  # e.g. Retry-After with a scripted 429
        # A service's own handling of a request the script lets through: (status, body).
        self.handle: Callable[[Received], tuple[int, str | bytes]] | None = None
        self.hold = threading.Event()
        self.hold.set()
        self.arrived = threading.Event()
        self.secret = secret
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.arrived.set()
                outer.hold.wait(120)
                status, text = outer._answer(Received(self.path, dict(self.headers), body))
                data = text if isinstance(text, bytes) else text.encode()
                self.send_response(status)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(data)))
                if outer.location:
                    self.send_header("location", outer.location)
                for name, value in outer.reply_headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((bind, free_port()), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.server_context().wrap_socket(self.server.socket,
                                                                  server_side=True)
        scheme = "https" if tls else "http"
        self.port = self.server.server_address[1]
        self.url = f"{scheme}://{bind}:{self.port}/hook"

    def _answer(self, req: Received) -> tuple[int, str | bytes]:
        with self.lock:
            self.requests.append(req)
            if self.secret is not None:
                try:
                    payload = Webhook(self.secret).verify(req.body, req.headers)
                except Exception as exc:  # the library's verification error
                    self.bad_signatures += 1
                    return 401, f"bad signature: {exc}"
            status, text = self.script.pop(0) if self.script else self.default
            if self.handle is not None and 200 <= status < 300:
                status, text = self.handle(req)
            if self.secret is not None and 200 <= status < 300:
                # Processed only when answered 2xx; a known webhook-id is a duplicate.
                wid = {k.lower(): v for k, v in req.headers.items()}["webhook-id"]
                if wid in self.accepted:
                    self.duplicates += 1
                else:
                    self.accepted[wid] = payload
            return status, text

    def __enter__(self) -> HttpReceiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()
