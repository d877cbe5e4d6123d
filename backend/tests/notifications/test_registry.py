"""The channel registry is the one list of kinds: the API's create union, the public kind,
the table's constraint and the stored secrets all agree with it."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import TypeAdapter

from stormwatch.models import NotificationChannel
from stormwatch.notifications.email import EmailChannel
from stormwatch.notifications.pagerduty import PagerDutyChannel
from stormwatch.notifications.registry import CHANNEL_KINDS, SECRET_NAMES, kind
from stormwatch.notifications.slack import SlackChannel
from stormwatch.notifications.webhook import WebhookChannel
from stormwatch.schemas.notifications import ChannelCreate, ChannelPublic
from stormwatch.services import audit
from stormwatch.services.vocabularies import vocabularies


def test_every_kind_is_offered_by_the_api_and_allowed_by_the_table() -> None:
    union = typing.get_args(typing.get_args(ChannelCreate)[0])
    create_kinds = {typing.get_args(m.model_fields["kind"].annotation)[0]: m for m in union}
    assert set(create_kinds) == set(CHANNEL_KINDS)
    for name, model in create_kinds.items():
        assert model.model_fields["config"].annotation is CHANNEL_KINDS[name].config_model
    assert set(typing.get_args(ChannelPublic.model_fields["kind"].annotation)) == set(
        CHANNEL_KINDS)
    table: Any = NotificationChannel.__table__
    [check] = [c for c in table.constraints
               if c.name == "ck_notification_channels_kind"]
    assert str(check.sqltext) == "kind IN ({})".format(
        ", ".join(f"'{k}'" for k in CHANNEL_KINDS))


def test_secret_fields_are_fields_of_their_config_model() -> None:
    for k in CHANNEL_KINDS.values():
        assert set(k.secret_fields) <= set(k.config_model.model_fields), k.name
    assert set(SECRET_NAMES) == {"password", "url", "signing_secret", "routing_key",
                                 "api_key", "bearer_token"}
    # The audit log masks each of them wherever a channel's change is recorded.
    assert set(SECRET_NAMES) <= audit.SECRET_FIELDS


def test_each_kind_builds_its_sender_from_a_stored_config() -> None:
    email = TypeAdapter(ChannelCreate).validate_python({
        "name": "m", "kind": "email", "config": {
            "host": "127.0.0.1", "from_address": "a@sw.example", "to_addresses": ["b@sw.example"]}})
    sender = kind("email").build(email.config.model_dump(mode="json"), {"password": "pw"})
    assert isinstance(sender, EmailChannel)
    assert sender.cfg.port == 587 and sender.cfg.password == "pw"
    slack = kind("slack").build({}, {"url": "http://127.0.0.1:9/hook"})
    assert isinstance(slack, SlackChannel)
    issued = kind("webhook").issued_secret
    assert issued is not None and issued[0] == "signing_secret"
    hook = kind("webhook").build({"url": "http://127.0.0.1:9/hook"}, {issued[0]: issued[1]()})
    assert isinstance(hook, WebhookChannel)
    assert kind("slack").public_hints({"url": "https://hooks.slack.com/services/T/B/x"}) == {
        "url_hint": "https://hooks.slack.com/…"}
    assert kind("email").public_hints({}) == {"has_password": False}
    assert kind("webhook").public_hints({"signing_secret": "s"}) == {"has_signing_secret": True}
    pd = kind("pagerduty").build({"events_url": "http://127.0.0.1:9/v2/enqueue"},
                                 {"routing_key": "k"})
    assert isinstance(pd, PagerDutyChannel) and pd.routing_key == "k"
    assert pd.severities == {"critical": "critical", "warning": "warning", "info": "info"}


def test_the_form_fields_of_each_kind_make_a_config_the_api_accepts() -> None:
    """What GET /vocabularies offers a form: filling the required fields as their inputs say
    gives a valid channel, and every field offered is a field of the config."""
    sample = {"text": "smtp.example.com", "url": "https://hooks.example.com/x",
              "password": "s3cret", "number": "2525", "email": "a@example.com"}
    offered = vocabularies()["channel_kinds"]
    assert [k["name"] for k in offered] == list(CHANNEL_KINDS)
    for k in offered:
        model = CHANNEL_KINDS[k["name"]].config_model
        config: dict[str, Any] = {}
        for f in k["fields"]:
            assert f["name"] in model.model_fields
            assert f["secret"] == (f["name"] in CHANNEL_KINDS[k["name"]].secret_fields)
            if f["input"] == "select":
                assert f["default"] in f["choices"]
            if f["required"]:
                config[f["name"]] = (["b@example.com"] if f["input"] == "list"
                                     else sample[f["input"]])
        made = TypeAdapter(ChannelCreate).validate_python(
            {"name": "c", "kind": k["name"], "config": config})
        assert made.kind == k["name"]
    email = {f["name"]: f for f in offered[0]["fields"]}
    assert email["security"]["choices"] == ["starttls", "tls", "none"]
    assert email["to_addresses"]["input"] == "list" and email["password"]["secret"]
