"""Security headers on every response: content policy, framing, sniffing, referrer, HSTS."""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stormwatch.api.throttle import came_over_tls
from stormwatch.core.config import Settings


def content_policy(script_src: tuple[str, ...] = ()) -> str:
    return "; ".join([
        "default-src 'self'",
        " ".join(["script-src 'self'", *script_src]),
        # No style attribute or <style> comes from markup: React and Recharts style through
        # element.style (CSSOM), which CSP does not govern, so no 'unsafe-inline' is needed.
        "style-src 'self'",
        # Swagger UI's icons are data: SVGs in its style sheet.
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


APP_POLICY = content_policy()
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def policy_for_inline_scripts(html: str) -> str:
    """The app's policy plus the hash of each inline script of `html`: exactly those run."""
    hashes = tuple("'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()
                   + "'" for s in _INLINE_SCRIPT.findall(html))
    return content_policy(hashes)


class SecurityHeaders:
    """ASGI middleware; a header a route set itself (the docs' policy) is kept."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.fixed = [("content-security-policy", APP_POLICY),
                      ("x-content-type-options", "nosniff"),
                      ("x-frame-options", "DENY"),
                      ("referrer-policy", "no-referrer"),
                      ("cross-origin-opener-policy", "same-origin")]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hsts = (f"max-age={self.settings.hsts_max_age_s}"
                if self.settings.hsts_max_age_s and came_over_tls(Request(scope), self.settings)
                else None)

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in self.fixed:
                    headers.setdefault(name, value)
                if hsts:
                    headers.setdefault("strict-transport-security", hsts)
            await send(message)

        await self.app(scope, receive, send_secured)
