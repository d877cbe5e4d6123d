"""Channels, silences, maintenance windows and the delivery log over the REST API.
Secrets (SMTP password, webhook URLs that carry a token, signing secrets, routing and API keys)
go in, never out."""

from __future__ import annotations

import ipaddress
import re
import ssl
import uuid
from datetime import datetime
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrulestr
from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


def _check_host(value: str) -> str:
    value = value.strip()
    try:
        ipaddress.ip_address(value.strip("[]"))
        return value
    except ValueError:
        pass
    if not _HOSTNAME.match(value):
        raise ValueError(f"not a hostname or IP address: {value!r}")
    return value


def _check_pem(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    if not value.isascii():
        raise ValueError("not a PEM CA certificate: PEM is ASCII text")
    try:
        ssl.create_default_context(cadata=value)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"not a PEM CA certificate: {exc}") from exc
    return value


def _check_url(value: AnyHttpUrl) -> AnyHttpUrl:
    if not value.host:
        raise ValueError("URL has no host")
    return value


CaPem = Annotated[str | None, Field(default=None, max_length=64_000,
                                    description="PEM CA bundle to trust (private CAs)")]


class EmailConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(title="SMTP host", max_length=253, description="SMTP server hostname or IP")
    port: int = Field(default=587, ge=1, le=65535)
    security: Literal["starttls", "tls", "none"] = Field(
        default="starttls", description="STARTTLS upgrade, implicit TLS (465), or none")
    username: str | None = Field(default=None, max_length=320)
    password: SecretStr | None = Field(default=None, max_length=1000,
                                       description="write-only")
    from_address: EmailStr = Field(title="From")
    to_addresses: list[EmailStr] = Field(title="To (comma-separated)", min_length=1,
                                         max_length=50)
    ca_cert_pem: CaPem = None

    _host = field_validator("host")(_check_host)
    _pem = field_validator("ca_cert_pem")(_check_pem)

    @model_validator(mode="after")
    def _auth_pair(self) -> EmailConfigIn:
        if self.password is not None and self.password.get_secret_value() and not self.username:
            raise ValueError("username is required when a password is given")
        return self


class SlackConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(title="Slack webhook URL",
                            description="incoming webhook URL (write-only: it is the secret)")
    ca_cert_pem: CaPem = None

    _url = field_validator("url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)


class WebhookConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(title="Webhook URL")
    ca_cert_pem: CaPem = None

    _url = field_validator("url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)


class PagerDutyConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    routing_key: SecretStr = Field(title="Routing key", min_length=1, max_length=200,
                                   description="the integration key of an Events API v2 "
                                               "integration (write-only)")
    events_url: AnyHttpUrl = Field(title="Events API URL", default=AnyHttpUrl("https://events.pagerduty.com/v2/enqueue"),
                                   description="the Events API v2 enqueue URL")
    severity_map: dict[Literal["critical", "warning", "info"],
                       Literal["critical", "error", "warning", "info"]] = Field(
        default_factory=dict, description="a rule's severity -> PagerDuty's; unlisted ones "
                                          "keep their own name")
    ca_cert_pem: CaPem = None

    _url = field_validator("events_url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)


class OpsgenieConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key: SecretStr = Field(title="API key", min_length=1, max_length=200,
                               description="an API integration's key (write-only)")
    api_url: AnyHttpUrl = Field(title="API URL", default=AnyHttpUrl("https://api.opsgenie.com"),
                                description="https://api.opsgenie.com, or "
                                            "https://api.eu.opsgenie.com for EU accounts")
    priority_map: dict[Literal["critical", "warning", "info"],
                       Literal["P1", "P2", "P3", "P4", "P5"]] = Field(
        default_factory=dict, description="a rule's severity -> Opsgenie's priority "
                                          "(default critical P1, warning P3, info P5)")
    # No control characters: PostgreSQL refuses NUL, and tags are shown and matched as text.
    tags: list[Annotated[str, Field(min_length=1, max_length=50,
                                    pattern=r"^[^\x00-\x1f\x7f-\x9f]+$")]] = Field(
        title="Tags (comma-separated)", default_factory=list, max_length=20,
        description="added to every alert")
    ca_cert_pem: CaPem = None

    _url = field_validator("api_url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)


class DiscordConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(title="Discord webhook URL", description="the channel's webhook URL, "
                                        "https://discord.com/api/webhooks/<id>/<token> "
                                        "(write-only: it carries the token)")
    ca_cert_pem: CaPem = None

    _url = field_validator("url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)


class TeamsConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(title="Workflows webhook URL",
                            description="the Workflows webhook URL of a \"Post to a channel "
                                        "when a webhook request is received\" flow "
                                        "(write-only: it carries the signature)")
    ca_cert_pem: CaPem = None

    _url = field_validator("url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)


class AlertmanagerConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(title="Alertmanager URL",
                            description="Alertmanager's base URL (alerts go to "
                                        "<url>/api/v2/alerts), e.g. http://alertmanager:9093")
    username: str | None = Field(default=None, max_length=200, description="basic auth")
    password: SecretStr | None = Field(default=None, max_length=1000,
                                       description="basic auth (write-only)")
    bearer_token: SecretStr | None = Field(title="Bearer token", default=None, max_length=4000,
                                           description="instead of basic auth (write-only)")
    ca_cert_pem: CaPem = None

    _url = field_validator("url")(_check_url)
    _pem = field_validator("ca_cert_pem")(_check_pem)

    @model_validator(mode="after")
    def _one_auth(self) -> AlertmanagerConfigIn:
        def given(v: SecretStr | None) -> bool:
            return v is not None and bool(v.get_secret_value())

        if given(self.password) and not self.username:
            raise ValueError("username is required when a password is given")
        if given(self.bearer_token) and self.username:
            raise ValueError("give basic auth (username, password) or bearer_token, not both")
        return self


class _ChannelBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    enabled: bool = True


class EmailChannelCreate(_ChannelBase):
    kind: Literal["email"]
    config: EmailConfigIn


class SlackChannelCreate(_ChannelBase):
    kind: Literal["slack"]
    config: SlackConfigIn


class WebhookChannelCreate(_ChannelBase):
    kind: Literal["webhook"]
    config: WebhookConfigIn


class PagerDutyChannelCreate(_ChannelBase):
    kind: Literal["pagerduty"]
    config: PagerDutyConfigIn


class OpsgenieChannelCreate(_ChannelBase):
    kind: Literal["opsgenie"]
    config: OpsgenieConfigIn


class DiscordChannelCreate(_ChannelBase):
    kind: Literal["discord"]
    config: DiscordConfigIn


class TeamsChannelCreate(_ChannelBase):
    kind: Literal["teams"]
    config: TeamsConfigIn


class AlertmanagerChannelCreate(_ChannelBase):
    kind: Literal["alertmanager"]
    config: AlertmanagerConfigIn


ChannelCreate = Annotated[EmailChannelCreate | SlackChannelCreate | WebhookChannelCreate
                          | PagerDutyChannelCreate | OpsgenieChannelCreate
                          | DiscordChannelCreate | TeamsChannelCreate
                          | AlertmanagerChannelCreate, Field(discriminator="kind")]


class ChannelUpdate(BaseModel):
    """Fields given replace the stored ones; config keys given are merged into the stored
    config (a password, URL or CA left out keeps the stored one)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    enabled: bool | None = None
    config: dict[str, object] | None = None
    rotate_signing_secret: bool = Field(default=False,
                                        description="webhooks: issue a new signing secret")


class ChannelPublic(BaseModel):
    id: uuid.UUID
    name: str
    kind: Literal["email", "slack", "webhook", "pagerduty", "opsgenie", "discord", "teams",
                  "alertmanager"]
    enabled: bool
    config: dict[str, object] = Field(description="non-secret settings; secrets as has_* flags")
    created_at: datetime
    updated_at: datetime


class ChannelCreated(ChannelPublic):
    signing_secret: str | None = Field(
        default=None, description="webhooks: the whsec_ signing secret, shown only now")


class ChannelTestResult(BaseModel):
    ok: bool
    permanent: bool | None = Field(default=None,
                                   description="on failure: would retrying help")
    detail: str = Field(description="the server's own reply: SMTP code and text, or HTTP "
                                    "status and the service's short error code "
                                    "(`HTTP 403: invalid_token`); never the reply's body")


class Matcher(BaseModel):
    """A label matcher. Rules carry their labels plus `alertname` (the rule's name),
    `severity` and `rule_id`."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(min_length=1, max_length=100)
    op: Literal["=", "!=", "=~", "!~"] = "="
    value: str = Field(max_length=500)

    @model_validator(mode="after")
    def _regex(self) -> Matcher:
        if self.op in ("=~", "!~"):
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from exc
        return self


class SilenceCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule_ids: list[uuid.UUID] = Field(default_factory=list, max_length=100)
    matchers: list[Matcher] = Field(default_factory=list, max_length=20)
    starts_at: datetime | None = Field(default=None, description="default: now")
    ends_at: datetime
    comment: str = Field(min_length=1, max_length=2000, description="why")

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("give a timezone (e.g. a trailing Z for UTC)")
        return v

    @model_validator(mode="after")
    def _something(self) -> SilenceCreate:
        if not self.rule_ids and not self.matchers:
            raise ValueError("a silence needs rule_ids or matchers (it would mute everything)")
        if self.starts_at is not None and self.ends_at <= self.starts_at:
            raise ValueError("ends_at must be after starts_at")
        return self


class SilencePublic(BaseModel):
    id: uuid.UUID
    rule_ids: list[uuid.UUID]
    matchers: list[Matcher]
    starts_at: datetime
    ends_at: datetime
    comment: str
    created_by: str
    created_at: datetime
    state: Literal["pending", "active", "expired"]


def _check_tz(v: str) -> str:
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown IANA timezone {v!r}") from exc
    return v


def _check_rrule(v: str | None) -> str | None:
    if v is None or not v.strip():
        return None
    v = v.strip()
    if v.upper().startswith("RRULE:"):
        v = v[6:]
    if "DTSTART" in v.upper() or "\n" in v:
        raise ValueError("give only the RRULE part; the start is starts_at")
    try:
        rrulestr(v, dtstart=datetime(2026, 1, 1))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not an RFC 5545 RRULE: {exc}") from exc
    if re.search(r"FREQ=(SECONDLY|MINUTELY)", v.upper()):
        raise ValueError("FREQ must be HOURLY or coarser")
    return v


class MaintenanceWindowCreate(BaseModel):
    """One-off: starts_at and ends_at (or duration_s). Recurring: starts_at (the first
    occurrence), rrule and duration_s; occurrences keep their local wall-clock time in
    `timezone` across DST changes. Naive times are read in `timezone`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    timezone: str = Field(default="UTC", max_length=64)
    starts_at: datetime
    ends_at: datetime | None = None
    duration_s: int | None = Field(default=None, ge=60, le=31 * 86400)
    rrule: str | None = Field(default=None, max_length=500,
                              examples=["FREQ=WEEKLY;BYDAY=SU"])
    rule_ids: list[uuid.UUID] = Field(default_factory=list, max_length=100)
    matchers: list[Matcher] = Field(default_factory=list, max_length=20)
    comment: str = Field(default="", max_length=2000)

    _tz = field_validator("timezone")(_check_tz)
    _rr = field_validator("rrule")(_check_rrule)

    @model_validator(mode="after")
    def _shape(self) -> MaintenanceWindowCreate:
        if not self.rule_ids and not self.matchers:
            raise ValueError("a maintenance window needs rule_ids or matchers")
        if self.rrule and self.duration_s is None:
            raise ValueError("a recurring window needs duration_s")
        if self.ends_at is not None and self.duration_s is not None:
            raise ValueError("give ends_at or duration_s, not both")
        if not self.rrule and self.ends_at is None and self.duration_s is None:
            raise ValueError("a one-off window needs ends_at or duration_s")
        if self.rrule and self.ends_at is not None:
            raise ValueError("a recurring window takes duration_s, not ends_at")
        return self


class MaintenanceWindowUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    timezone: str | None = Field(default=None, max_length=64)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    duration_s: int | None = Field(default=None, ge=60, le=31 * 86400)
    rrule: str | None = Field(default=None, max_length=500,
                              description="empty string makes the window one-off")
    rule_ids: list[uuid.UUID] | None = None
    matchers: list[Matcher] | None = None
    comment: str | None = Field(default=None, max_length=2000)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        return None if v is None else _check_tz(v)

    @field_validator("rrule")
    @classmethod
    def _rr(cls, v: str | None) -> str | None:
        if v is None:
            return None
        return _check_rrule(v) or ""


class MaintenanceWindowPublic(BaseModel):
    id: uuid.UUID
    name: str
    timezone: str
    starts_at: datetime
    ends_at: datetime | None = Field(description="one-off windows: their end")
    duration_s: int
    rrule: str | None
    rule_ids: list[uuid.UUID]
    matchers: list[Matcher]
    comment: str
    created_by: str
    created_at: datetime
    active_now: bool
    next_start: datetime | None = Field(description="the next occurrence's start, UTC")


class DeliveryPublic(BaseModel):
    id: uuid.UUID
    notification_id: uuid.UUID
    notification_kind: Literal["firing", "resolved", "reminder"]
    channel_id: uuid.UUID
    channel_name: str
    channel_kind: str
    rule_id: uuid.UUID
    rule_name: str
    alert_ids: list[uuid.UUID]
    state: Literal["pending", "sending", "sent", "failed"]
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    response: str | None
    sent_at: datetime | None
    created_at: datetime
