"""Every channel kind, declared once: its config model (what the API takes), the config fields
kept encrypted (never returned), a secret the server issues itself, where it sends (for the
egress check), and how a stored channel becomes a sender. The channel API, its schemas'
checks and the outbox all read this table; adding a kind is one entry here and its module."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl, BaseModel, EmailStr, SecretStr

from stormwatch.notifications.alertmanager import AlertmanagerChannel
from stormwatch.notifications.base import Channel
from stormwatch.notifications.discord import DiscordChannel
from stormwatch.notifications.email import EmailChannel, EmailConfig
from stormwatch.notifications.opsgenie import OpsgenieChannel
from stormwatch.notifications.pagerduty import PagerDutyChannel
from stormwatch.notifications.slack import SlackChannel
from stormwatch.notifications.teams import TeamsChannel
from stormwatch.notifications.webhook import WebhookChannel, new_signing_secret
from stormwatch.schemas.notifications import (
    AlertmanagerConfigIn,
    DiscordConfigIn,
    EmailConfigIn,
    OpsgenieConfigIn,
    PagerDutyConfigIn,
    SlackConfigIn,
    TeamsConfigIn,
    WebhookConfigIn,
)

Config = Mapping[str, Any]
Secrets = Mapping[str, str]


@dataclass(frozen=True)
class Destination:
    """Where a kind sends, named by the config field a refusal points at."""

    field: str
    url: str | None = None
    host: str | None = None
    port: int | None = None


@dataclass(frozen=True)
class ChannelKind:
    name: str
    title: str  # how a form names it
    config_model: type[BaseModel]
    # Config fields stored encrypted: None in an update keeps the stored value, "" removes it.
    secret_fields: tuple[str, ...]
    build: Callable[[Config, Secrets], Channel]
    destination: Callable[[Any], Destination]
    # A secret the server makes at creation (and rotates on request), shown once.
    issued_secret: tuple[str, Callable[[], str]] | None = None
    # The public config's flags for the secrets (default: has_<name> for each).
    hints: Callable[[Secrets], dict[str, object]] | None = field(default=None)

    @property
    def all_secret_names(self) -> tuple[str, ...]:
        issued = (self.issued_secret[0],) if self.issued_secret else ()
        return (*self.secret_fields, *issued)

    def public_hints(self, secrets: Secrets) -> dict[str, object]:
        if self.hints is not None:
            return self.hints(secrets)
        return {f"has_{name}": name in secrets for name in self.all_secret_names}


def _ca(config: Config) -> str | None:
    return config.get("ca_cert_pem") or None


def _build_email(config: Config, secrets: Secrets) -> Channel:
    return EmailChannel(EmailConfig(
        host=config["host"], port=int(config["port"]), security=config["security"],
        from_address=config["from_address"], to_addresses=tuple(config["to_addresses"]),
        username=config.get("username") or None, password=secrets.get("password"),
        ca_cert_pem=_ca(config)))


def _url_hints(secrets: Secrets) -> dict[str, object]:
    parts = urlsplit(secrets.get("url", ""))
    # The path is the credential; the host says which service it is.
    return {"url_hint": f"{parts.scheme}://{parts.netloc}/…" if parts.netloc else ""}


def _url(cfg: Any) -> Destination:
    return Destination("url", url=str(cfg.url))


CHANNEL_KINDS: dict[str, ChannelKind] = {k.name: k for k in (
    ChannelKind(
        "email", "Email", EmailConfigIn, secret_fields=("password",), build=_build_email,
        destination=lambda cfg: Destination("host", host=cfg.host.strip("[]"), port=cfg.port)),
    ChannelKind(
        "slack", "Slack", SlackConfigIn, secret_fields=("url",),
        build=lambda config, secrets: SlackChannel(secrets["url"], ca_cert_pem=_ca(config)),
        destination=_url, hints=_url_hints),
    ChannelKind(
        "webhook", "Webhook", WebhookConfigIn, secret_fields=(),
        build=lambda config, secrets: WebhookChannel(config["url"], secrets["signing_secret"],
                                                     ca_cert_pem=_ca(config)),
        destination=_url, issued_secret=("signing_secret", new_signing_secret)),
    ChannelKind(
        "pagerduty", "PagerDuty", PagerDutyConfigIn, secret_fields=("routing_key",),
        build=lambda config, secrets: PagerDutyChannel(
            secrets["routing_key"], config["events_url"], config.get("severity_map"),
            ca_cert_pem=_ca(config)),
        destination=lambda cfg: Destination("events_url", url=str(cfg.events_url))),
    ChannelKind(
        "opsgenie", "Opsgenie", OpsgenieConfigIn, secret_fields=("api_key",),
        build=lambda config, secrets: OpsgenieChannel(
            secrets["api_key"], config["api_url"], config.get("priority_map"),
            tuple(config.get("tags") or ()), ca_cert_pem=_ca(config)),
        destination=lambda cfg: Destination("api_url", url=str(cfg.api_url))),
    ChannelKind(
        "discord", "Discord", DiscordConfigIn, secret_fields=("url",),
        build=lambda config, secrets: DiscordChannel(secrets["url"], ca_cert_pem=_ca(config)),
        destination=_url, hints=_url_hints),
    ChannelKind(
        "teams", "Microsoft Teams", TeamsConfigIn, secret_fields=("url",),
        build=lambda config, secrets: TeamsChannel(secrets["url"], ca_cert_pem=_ca(config)),
        destination=_url, hints=_url_hints),
    ChannelKind(
        "alertmanager", "Prometheus Alertmanager", AlertmanagerConfigIn,
        secret_fields=("password", "bearer_token"),
        build=lambda config, secrets: AlertmanagerChannel(
            config["url"], config.get("username") or None, secrets.get("password"),
            secrets.get("bearer_token"), ca_cert_pem=_ca(config)),
        destination=_url),
)}

SECRET_NAMES: tuple[str, ...] = tuple(dict.fromkeys(
    n for k in CHANNEL_KINDS.values() for n in k.all_secret_names))


def kind(name: str) -> ChannelKind:
    got = CHANNEL_KINDS.get(name)
    if got is None:
        raise ValueError(f"unknown channel kind {name!r}")
    return got


# Settings a form leaves to the API (maps, PEM bundles): their defaults serve most channels.
_API_ONLY = ("ca_cert_pem", "severity_map", "priority_map")


def _input(annotation: Any) -> tuple[str, list[str]]:
    """A form input for a config field's type, and its choices for a select."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _input(args[0])
    if typing.get_origin(annotation) is Literal:
        return "select", [str(a) for a in args]
    if typing.get_origin(annotation) is list:
        return "list", []
    if annotation is SecretStr:
        return "password", []
    if annotation is AnyHttpUrl:
        return "url", []
    if annotation is int:
        return "number", []
    if annotation is EmailStr:
        return "email", []
    return "text", []


def form_fields(k: ChannelKind) -> list[dict[str, Any]]:
    """The config fields a form offers for a kind, in the model's order."""
    out = []
    for name, f in k.config_model.model_fields.items():
        if name in _API_ONLY:
            continue
        input_type, choices = _input(f.annotation)
        default = None if f.is_required() or f.default_factory else f.default
        out.append({"name": name, "label": f.title or name.replace("_", " ").capitalize(),
                    "input": input_type, "required": f.is_required(), "choices": choices,
                    "secret": name in k.secret_fields,
                    "default": None if default is None or isinstance(default, list | dict)
                    else str(default)})
    return out


def kind_of_config(cfg: BaseModel) -> ChannelKind:
    for k in CHANNEL_KINDS.values():
        if isinstance(cfg, k.config_model):
            return k
    raise ValueError(f"not a channel config: {type(cfg).__name__}")
