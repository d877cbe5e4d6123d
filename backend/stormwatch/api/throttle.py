"""Who the client is (its address, whether it used TLS) and the 429 that ends a run of
failed credentials."""

from __future__ import annotations

import ipaddress
from typing import Literal

from fastapi import HTTPException, Request, status

from stormwatch.core.config import Settings
from stormwatch.core.redis import get_redis
from stormwatch.observability.api import AUTH_FAILURES, AUTH_THROTTLED
from stormwatch.services import ratelimit
from stormwatch.services.ratelimit import FailurePolicy

Surface = Literal["login", "token", "enrollment"]


def client_address(request: Request, settings: Settings) -> str:
    """The socket peer, unless it is a trusted proxy: then the right-most address of
    X-Forwarded-For that is not one (left of it, the client may have written anything)."""
    peer = request.client.host if request.client else "unknown"
    trusted = settings.trusted_proxy_networks
    if not trusted or not _is_in(peer, trusted):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",")
            if h.strip()]
    for hop in reversed(hops):
        if not _is_in(hop, trusted):
            return hop
    return hops[0] if hops else peer


def came_over_tls(request: Request, settings: Settings) -> bool:
    """TLS to this server, or to a trusted proxy that says so in X-Forwarded-Proto (its
    right-most value: the one the nearest proxy wrote, not what the client put before it)."""
    if request.url.scheme == "https":
        return True
    peer = request.client.host if request.client else "unknown"
    if not _is_in(peer, settings.trusted_proxy_networks):
        return False
    protos = [p.strip().lower() for p in
              ",".join(request.headers.getlist("x-forwarded-proto")).split(",") if p.strip()]
    return bool(protos) and protos[-1] == "https"


def _is_in(address: str, networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def login_account_policy(settings: Settings) -> FailurePolicy:
    return FailurePolicy(settings.login_account_free_failures,
                         settings.login_account_lock_after, settings.login_backoff_base_s,
                         settings.login_lock_s)


def login_address_policy(settings: Settings) -> FailurePolicy:
    return FailurePolicy(settings.login_address_free_failures,
                         settings.login_address_lock_after, settings.login_backoff_base_s,
                         settings.login_lock_s)


def token_address_policy(settings: Settings) -> FailurePolicy:
    return FailurePolicy(settings.token_address_free_failures,
                         settings.token_address_lock_after, settings.token_backoff_base_s,
                         settings.token_lock_s)


def login_account_key(email: str) -> str:
    return ratelimit.failure_key("login-account", email.strip().lower())


def address_key(surface: Surface, address: str) -> str:
    # Logins and tokens keep separate counts: an agent fleet behind one NAT with a stale
    # token must not lock people out of the UI from there.
    return ratelimit.failure_key("login-address" if surface == "login" else "token-address",
                                 address)


async def refuse_if_blocked(surface: Surface, keys: list[str]) -> None:
    redis = get_redis()
    waits = [w for w in [await ratelimit.blocked_for(redis, k) for k in keys] if w is not None]
    if waits:
        AUTH_THROTTLED.labels(surface).inc()
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                            "too many failed attempts: retry after Retry-After seconds",
                            {"Retry-After": str(max(waits))})


async def count_failure(surface: Surface, keyed: list[tuple[str, FailurePolicy]]) -> None:
    AUTH_FAILURES.labels(surface).inc()
    redis = get_redis()
    for key, policy in keyed:
        await ratelimit.record_failure(redis, key, policy)
