"""All runtime settings in one place, read from the environment (prefix-free names)."""

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[3]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    database_url: str = "postgresql+asyncpg://stormwatch@127.0.0.1:5432/stormwatch"
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Signs nothing by itself: it derives the key that encrypts stored credentials.
    secret_key: str = Field(default="dev-only-insecure-secret-change-me", min_length=16)
    environment: str = "development"
    log_level: str = "INFO"

    # Off by default: `make run` serves plain http://127.0.0.1, where a Secure cookie would
    # never be sent back. docker-compose.yml (behind TLS) sets COOKIE_SECURE=true.
    cookie_secure: bool = False
    # A session ends after this long without a request, and this long after login however
    # active (the UI's own refreshes count as activity, so the second bounds a wall screen).
    session_idle_timeout_min: int = Field(default=60, ge=1)
    session_absolute_timeout_h: int = Field(default=12, ge=1)
    # Strict-Transport-Security max-age on responses served over TLS; 0 sends none.
    hsts_max_age_s: int = Field(default=365 * 86400, ge=0)

    raw_retention_days: int = 14
    rollup_retention_days: int = 400
    # Audit entries are kept this long, then pruned by the daily retention pass.
    audit_retention_days: int = Field(default=400, ge=1)

    ingest_max_body_bytes: int = 8 * 1024 * 1024
    ingest_max_decompressed_bytes: int = 64 * 1024 * 1024
    ingest_max_future_s: int = 300
    ingest_rate_batches_per_min: int = 600
    ingest_max_rtt_us: int = 600_000_000

    db_unavailable_retry_after_s: int = 5

    # Label sets one Prometheus scrape may hold (each a histogram of ~157 buckets); a larger
    # export is refused with a 422 naming this limit instead of being cut short.
    prometheus_export_max_series: int = Field(default=2000, ge=1)

    # Failed logins per account (email): free ones, then a wait of base * 2^(n - free - 1)
    # seconds after each, then a lock of login_lock_s; failures are forgotten that long after
    # the last one, and a successful login forgets them at once.
    login_account_free_failures: int = Field(default=5, ge=1)
    login_account_lock_after: int = Field(default=10, ge=1)
    login_backoff_base_s: float = Field(default=1.0, gt=0)
    login_lock_s: float = Field(default=900.0, gt=0)
    # Failed logins per client address, across accounts (a success does not reset these).
    login_address_free_failures: int = Field(default=20, ge=1)
    login_address_lock_after: int = Field(default=50, ge=1)
    # Unknown API keys, agent tokens and enrollment tokens per client address.
    token_address_free_failures: int = Field(default=20, ge=1)
    token_address_lock_after: int = Field(default=50, ge=1)
    token_backoff_base_s: float = Field(default=1.0, gt=0)
    token_lock_s: float = Field(default=900.0, gt=0)
    # Peers (IPs or CIDRs, comma-separated) whose X-Forwarded-For names the client; the
    # socket peer is the client for everyone else.
    trusted_proxies: str = ""

    # Where people open the UI; links in notifications are this plus the alert's view path.
    public_base_url: str = Field(default="http://127.0.0.1:8000",
                                 validation_alias=AliasChoices("public_base_url", "public_url"))
    # Outbox retries of transient failures: base * 2^(attempt-1), capped, at most N attempts.
    notify_max_attempts: int = Field(default=6, ge=1, le=50)
    notify_retry_base_s: float = Field(default=10.0, gt=0)
    notify_retry_max_s: float = Field(default=600.0, gt=0)
    # A claimed delivery not marked within this is taken as lost with its worker and resumed.
    notify_lease_s: float = Field(default=120.0, gt=0)

    # The operator's SMTP relay for system mail (invitations, password resets), sent like
    # email alerts; with no SMTP_HOST no such mail is sent (invite links are shown instead).
    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_security: Literal["starttls", "tls", "none"] = "starttls"
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_from: str = Field(default="stormwatch@localhost", pattern=r"^[^@\s]+@[^@\s]+$")
    # How long a link sent by mail stays valid (single use either way).
    invite_ttl_hours: float = Field(default=24 * 7, gt=0)
    reset_ttl_minutes: float = Field(default=60, gt=0)

    # Addresses orgs may make the server connect to although they are not global (loopback,
    # private, link-local): CIDRs or exact host names, comma separated. Empty: none.
    egress_allow: str = ""
    # Networks an agent may advertise as its mesh address although peers on other hosts
    # could not reach it (loopback, link-local), from any client: single-host fleets whose
    # agents reach the API over a non-loopback address. CIDRs, comma separated.
    mesh_address_allow: str = ""

    # GET /metrics on the API wants `Authorization: Bearer <metrics_token>`; unset, it is off.
    metrics_token: str | None = Field(default=None, min_length=16)
    # The worker serves its metrics on its own port, off the API's; 0 takes any free port
    # (the chosen one is shown by /api/v1/health); WORKER_METRICS_ENABLED=false turns it off.
    worker_metrics_enabled: bool = True
    worker_metrics_host: str = "127.0.0.1"
    worker_metrics_port: int = Field(default=9541, ge=0, le=65535)
    frontend_dist: Path = REPO_ROOT / "frontend" / "dist"

    @field_validator("egress_allow")
    @classmethod
    def _egress_allow(cls, v: str) -> str:
        from stormwatch.core.egress import Policy

        Policy.parse(v)  # a typo stops the process at start, not at the first send
        return v

    @field_validator("mesh_address_allow")
    @classmethod
    def _mesh_address_allow(cls, v: str) -> str:
        from stormwatch.services.mesh_address import parse_allow

        parse_allow(v)
        return v

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_parse(cls, value: str) -> str:
        for part in value.split(","):
            if part.strip():
                try:
                    ipaddress.ip_network(part.strip(), strict=False)
                except ValueError as exc:
                    raise ValueError(f"TRUSTED_PROXIES: {part.strip()!r} is not an IP or CIDR"
                                     ) from exc
        return value

    @property
    def trusted_proxy_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        return [ipaddress.ip_network(p.strip(), strict=False)
                for p in self.trusted_proxies.split(",") if p.strip()]

    @property
    def mesh_address_allow_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        from stormwatch.services.mesh_address import parse_allow

        return parse_allow(self.mesh_address_allow)

    @property
    def sync_database_url(self) -> str:
        """psycopg (sync) URL for Celery tasks and migrations."""
        return self.database_url.replace("+asyncpg", "+psycopg")


@lru_cache
def get_settings() -> Settings:
    return Settings()
