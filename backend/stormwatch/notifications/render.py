"""The render stage: a message from a rule and its alerts' evidence, and its plain text and
HTML renderings, shared by the channels."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import orjson

from stormwatch.notifications.base import AlertItem, Message, MessageKind
from stormwatch.services.alerts.evidence import Evidence

if TYPE_CHECKING:
    from stormwatch.services.alerts.definition import Rule


def fmt_value(value: float | None, unit: str) -> str:
    """Readable units: microseconds of 1 ms and more as ms, rates (unit "ratio") as %,
    stretch (unit "x") as a multiple, counts bare."""
    if value is None:
        return "n/a"
    if unit == "us" and abs(value) >= 1000:
        value, unit = value / 1000, "ms"
    elif unit == "ratio":
        value, unit = value * 100, "%"
    text = f"{value:.4g}" if abs(value) < 1e6 else f"{value:.6g}"
    if unit in ("%", "x"):  # a stretch of 2.5 reads "2.5×"
        return f"{text}{'×' if unit == 'x' else '%'}"
    return f"{text} {unit}".strip() if unit != "count" else text


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def condition_text(condition: Mapping[str, Any] | None, statistic: str, metric: str,
                   window_s: int, unit: str) -> str:
    """A rule's condition as a reader says it, values in the statistic's unit."""
    c = dict(condition or {})
    kind = c.get("type", "")
    head = f"{statistic} of {metric} over {window_s} s windows"
    if kind in ("above", "below") and _num(c.get("value")) is not None:
        return f"{head} {kind} {fmt_value(_num(c['value']), unit)}"
    if kind == "baseline":
        base = {"prev_24h": "the previous 24 h", "week_ago": "the same hour a week earlier"}
        return (f"{head} above {c.get('k')} x its baseline over "
                f"{base.get(str(c.get('baseline')), 'the previous 24 h')}")
    if kind == "level_shift":
        return (f"{head}: a level shift ({c.get('direction', 'up')}) of at least "
                f"{fmt_value(_num(c.get('min_step')), unit)}")
    return head if not c else f"{head}: {orjson.dumps(c).decode()}"


def link(base_url: str, path: str | None) -> str | None:
    """A path of the UI as an absolute link, for readers outside it."""
    if not path:
        return None
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def _flat(extra: Mapping[str, Any]) -> dict[str, str]:
    """One series' labels, flat: src/dst/agent objects become src_agent, src_region..."""
    out: dict[str, str] = {}
    for key, v in extra.items():
        if isinstance(v, Mapping):
            name_key, head = ("agent", "") if key == "agent" else (f"{key}_agent", f"{key}_")
            out[name_key] = str(v.get("name") or "")
            for part in ("region", "zone", "provider"):
                out[f"{head}{part}"] = str(v.get(part) or "")
        elif isinstance(v, str | int | float) and not isinstance(v, bool):
            out[key] = str(v)
    return {k: v for k, v in out.items() if v}


def series_labels(ev: Evidence) -> dict[str, str]:
    """The labels of the alert's series, or those all of an N-of-M group's series share."""
    found = [_flat(s.model_extra or {}) for s in ev.series]
    if not found:
        return {}
    return {k: v for k, v in found[0].items() if all(f.get(k) == v for f in found[1:])}


def alert_item(alert: Mapping[str, Any], ev: Evidence, base_url: str) -> AlertItem:
    """One alert of a message: its row's times and state, its evidence's series and values."""
    return AlertItem(
        alert_id=str(alert["id"]), series=ev.title or str(alert["group_key"]),
        state="resolved" if alert["state"] == "resolved" else "firing",
        started_at=alert["started_at"], resolved_at=alert["resolved_at"], value=ev.value,
        threshold=ev.threshold, baseline=ev.baseline, unit=ev.unit,
        link=link(base_url, ev.dashboard_path), labels=series_labels(ev))


def message(rule: Rule, kind: str, items: Sequence[AlertItem], now: datetime,
            base_url: str) -> Message:
    """One notification of a rule: one alert's own view, or the rule's alerts for many."""
    single_link = items[0].link if len(items) == 1 else None
    return Message(
        kind=cast(MessageKind, kind), org_id=str(rule.org_id), rule_id=str(rule.id),
        rule_name=rule.name, severity=rule.severity, description=rule.description,
        condition=condition_text(rule.condition, rule.statistic, rule.metric, rule.window_s,
                                 rule.unit),
        labels=rule.labels, created_at=now, alerts=tuple(items),
        link=single_link or link(base_url, f"/alerts?rule_id={rule.id}"))


def versus(item: AlertItem) -> str:
    """"value 912 ms vs threshold 50 ms" (or vs baseline), what the reader checks first."""
    parts = [f"value {fmt_value(item.value, item.unit)}"]
    if item.threshold is not None:
        parts.append(f"threshold {fmt_value(item.threshold, item.unit)}")
    if item.baseline is not None:
        parts.append(f"baseline {fmt_value(item.baseline, item.unit)}")
    return " vs ".join(parts)


def when(item: AlertItem) -> str:
    start = item.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if item.resolved_at is None:
        return f"since {start}"
    return f"{start} to {item.resolved_at.strftime('%Y-%m-%d %H:%M:%S UTC')}"


def plain_text(message: Message) -> str:
    lines = [message.title, ""]
    if message.description:
        lines += [message.description, ""]
    if message.condition:
        lines.append(f"Condition: {message.condition}")
    for item in message.alerts:
        lines.append(f"- {item.series}: {versus(item)}, {when(item)}")
        if item.link:
            lines.append(f"  {item.link}")
    if message.link:
        lines += ["", f"Open in Stormwatch: {message.link}"]
    return "\n".join(lines) + "\n"


def html_body(message: Message) -> str:
    e = html.escape

    def view(item: AlertItem) -> str:
        return f'<a href="{e(item.link)}">view</a>' if item.link else ""

    rows = "".join(
        f"<tr><td>{e(i.series)}</td><td>{e(versus(i))}</td><td>{e(when(i))}</td>"
        f"<td>{view(i)}</td></tr>" for i in message.alerts)
    desc = f"<p>{e(message.description)}</p>" if message.description else ""
    cond = f"<p>Condition: {e(message.condition)}</p>" if message.condition else ""
    link = (f'<p><a href="{e(message.link)}">Open in Stormwatch</a></p>'
            if message.link else "")
    return (f"<html><body><h2>{e(message.title)}</h2>{desc}{cond}"
            "<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\">"
            "<tr><th>Series</th><th>Value</th><th>When</th><th></th></tr>"
            f"{rows}</table>{link}</body></html>")
