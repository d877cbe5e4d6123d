"""Email over SMTP (aiosmtplib): STARTTLS, implicit TLS or plain, optional AUTH; one message
with a plain-text and an HTML part, over a connection the egress policy opened. The SMTP
reply decides permanent (5xx) or transient (4xx, network)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

import aiosmtplib

from stormwatch.core import egress
from stormwatch.notifications.base import Message, PermanentError, TransientError
from stormwatch.notifications.render import html_body, plain_text


@dataclass(frozen=True)
class EmailConfig:
    host: str
    port: int
    security: str  # "starttls" | "tls" | "none"
    from_address: str
    to_addresses: tuple[str, ...]
    username: str | None = None
    password: str | None = None
    ca_cert_pem: str | None = None  # a private CA for self-hosted relays
    timeout_s: float = 20.0


def build_email(cfg: EmailConfig, message: Message, idempotency_key: str) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = message.title
    msg["From"] = cfg.from_address
    msg["To"] = ", ".join(cfg.to_addresses)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    # The same Message-ID on every attempt of one delivery: mail stores and clients that
    # collapse duplicates by Message-ID hide a resend after a crash.
    domain = cfg.from_address.rpartition("@")[2] or "stormwatch.invalid"
    msg["Message-ID"] = make_msgid(idstring=idempotency_key, domain=domain)
    msg["X-Stormwatch-Delivery"] = idempotency_key
    msg.set_content(plain_text(message))
    msg.add_alternative(html_body(message), subtype="html")
    return msg


def _reply(exc: aiosmtplib.SMTPResponseException) -> str:
    return f"{exc.code} {exc.message}".strip()


def _tls_context(cfg: EmailConfig) -> ssl.SSLContext:
    if cfg.ca_cert_pem:
        return ssl.create_default_context(cadata=cfg.ca_cert_pem)
    return ssl.create_default_context()


def build_text_email(cfg: EmailConfig, subject: str, text: str) -> EmailMessage:
    """A plain-text message of the server itself (an invitation, a reset link)."""
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = cfg.from_address
    msg["To"] = ", ".join(cfg.to_addresses)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    domain = cfg.from_address.rpartition("@")[2] or "stormwatch.invalid"
    msg["Message-ID"] = make_msgid(domain=domain)
    msg.set_content(text)
    return msg


class EmailChannel:
    def __init__(self, cfg: EmailConfig) -> None:
        self.cfg = cfg

    async def send(self, message: Message, idempotency_key: str) -> str:
        return await self.deliver(build_email(self.cfg, message, idempotency_key))

    async def deliver(self, email: EmailMessage) -> str:
        """Sends a built message through the egress policy; the reply or a typed error."""
        cfg = self.cfg
        host = cfg.host.strip("[]")
        try:
            sock = await egress.open_tcp(host, cfg.port, cfg.timeout_s)
        except egress.EgressRefused as exc:
            raise PermanentError(exc.detail) from exc
        except egress.EgressUnresolved as exc:
            raise TransientError(exc.detail) from exc
        except OSError as exc:
            raise TransientError(f"cannot connect to {cfg.host}:{cfg.port}: {exc}") from exc
        try:
            # The socket is connected to the address the policy checked; the host name stays
            # the TLS name (SNI and certificate check).
            _, reply = await aiosmtplib.send(
                email, hostname=host, sock=sock,
                username=cfg.username or None, password=cfg.password or None,
                use_tls=cfg.security == "tls", start_tls=cfg.security == "starttls",
                tls_context=_tls_context(cfg) if cfg.security != "none" else None,
                timeout=cfg.timeout_s)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            replies = "; ".join(f"{r.recipient}: {_reply(r)}" for r in exc.recipients)
            if all(r.code >= 500 for r in exc.recipients):
                raise PermanentError(f"all recipients refused: {replies}") from exc
            raise TransientError(f"recipients refused: {replies}") from exc
        except aiosmtplib.SMTPResponseException as exc:
            if exc.code >= 500:
                raise PermanentError(_reply(exc)) from exc
            raise TransientError(_reply(exc)) from exc
        except aiosmtplib.SMTPNotSupported as exc:
            raise PermanentError(f"SMTP server does not support it: {exc}") from exc
        except ssl.SSLCertVerificationError as exc:
            raise PermanentError(f"TLS certificate rejected: {exc.verify_message}") from exc
        except aiosmtplib.SMTPConnectError as exc:
            cause = exc.__cause__
            if isinstance(cause, ssl.SSLCertVerificationError):
                raise PermanentError(
                    f"TLS certificate rejected: {cause.verify_message}") from exc
            raise TransientError(f"cannot connect to {cfg.host}:{cfg.port}: {exc}") from exc
        except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError, OSError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        except aiosmtplib.SMTPException as exc:
            # No reply code: a capability mismatch (no AUTH, no STARTTLS), fixed by config.
            raise PermanentError(str(exc)) from exc
        finally:
            sock.close()
        return f"SMTP {reply}".strip()
