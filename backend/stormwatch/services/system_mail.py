"""Mail the server sends on its own behalf (invitations, password resets) through the
operator's SMTP settings, by the same email module and egress policy as email alerts."""

from __future__ import annotations

import logging

from stormwatch.core.config import Settings
from stormwatch.notifications.base import DeliveryError
from stormwatch.notifications.email import EmailChannel, EmailConfig, build_text_email

log = logging.getLogger(__name__)


def configured(settings: Settings) -> bool:
    return bool(settings.smtp_host)


async def send(settings: Settings, to: str, subject: str, text: str) -> str | None:
    """Sends one plain-text message; None when it went, else why not (never raises)."""
    if not settings.smtp_host:
        return "no SMTP server is configured (SMTP_HOST)"
    cfg = EmailConfig(host=settings.smtp_host, port=settings.smtp_port,
                      security=settings.smtp_security, from_address=settings.smtp_from,
                      to_addresses=(to,), username=settings.smtp_user,
                      password=settings.smtp_password)
    try:
        await EmailChannel(cfg).deliver(build_text_email(cfg, subject, text))
    except DeliveryError as exc:
        log.warning("system mail to %s not sent: %s", to, exc.detail)
        return exc.detail
    return None
