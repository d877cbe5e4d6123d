"""The Alertmanager channel against Debian's prometheus-alertmanager (0.25), started here on
loopback: a Stormwatch alert delivered by the outbox appears in Alertmanager's API with its
labels, a repost extends it, and its resolution ends it there; a test send shows up too."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from stormwatch.core.config import REPO_ROOT, Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.devtools.services import free_port
from stormwatch.notifications.alertmanager import AlertmanagerChannel, label_name
from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.services.notify.repost import repost
from tests.notifications.conftest import Org, add_rule, fire, resolve
from tests.notifications.servers import HttpReceiver, wait_until
from tests.notifications.test_dispatch import run_dispatch
from tests.notifications.test_email import message

BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
needs_alertmanager = pytest.mark.skipif(
    BINARY is None, reason="no prometheus-alertmanager (scripts/bootstrap.sh test installs it)")

CONFIG = """\
route:
  receiver: "null"
  group_by: [alertname]
receivers:
  - name: "null"
"""


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    assert BINARY is not None
    (tmp_path / "alertmanager.yml").write_text(CONFIG)
    port = free_port()
    log = (tmp_path / "alertmanager.log").open("w")
    proc = subprocess.Popen(
        [BINARY, f"--config.file={tmp_path / 'alertmanager.yml'}",
         f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--cluster.listen-address="], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "alertmanager.log").read_text()
        try:
            return httpx.get(f"{url}/-/ready", timeout=2, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until("Alertmanager to be ready", 60, ready)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


def listed(url: str, **labels: str) -> list[dict[str, Any]]:
    """Alertmanager's active alerts matching the labels (ended ones are not listed)."""
    matchers = [f'{k}="{v}"' for k, v in labels.items()]
    r = httpx.get(f"{url}/api/v2/alerts", params=[("filter", m) for m in matchers],
                  timeout=10, trust_env=False)
    r.raise_for_status()
    found: list[dict[str, Any]] = r.json()
    return found


def evidence() -> dict[str, Any]:
    def agent(name: str, region: str) -> dict[str, str]:
        return {"id": str(uuid.uuid4()), "name": name, "region": region, "zone": "a",
                "provider": "aws"}

    return {"v": 1, "metric": "mesh_rtt", "statistic": "p99", "unit": "ms",
            "value": 912.0, "threshold": 50.0, "dashboard_path": "/pair?src=1&dst=2",
            "series": [{"key": "k", "name": "eu-1 → us-1", "value": 912.0, "threshold": 50.0,
                        "src": agent("eu-1", "eu-west-1"), "dst": agent("us-1", "us-east-1"),
                        "topology_class": "cross_region"}]}


@needs_alertmanager
def test_an_alert_appears_in_alertmanager_with_its_labels_and_resolves_there(
        settings: Settings, org: Org, db: Engine, alertmanager: str) -> None:
    ch = org.post("/channels", {"name": "am", "kind": "alertmanager",
                                "config": {"url": alertmanager}})
    rule = add_rule(db, org.id, [uuid.UUID(ch["id"])], name="p99 high",
                    labels={"team": "net", "tier-1": "yes"})
    alert = fire(db, org.id, rule, "eu-1 → us-1", ev_doc=evidence())
    assert run_dispatch().get("sent") == 1

    wait_until("the alert in Alertmanager", 30,
               lambda: len(listed(alertmanager, stormwatch_alert_id=str(alert))) == 1)
    [got] = listed(alertmanager, stormwatch_alert_id=str(alert))
    assert got["labels"] == {
        "alertname": "p99 high", "severity": "critical", "stormwatch_rule_id": str(rule),
        "stormwatch_alert_id": str(alert), "series": "eu-1 → us-1", "team": "net",
        label_name("tier-1"): "yes", "src_agent": "eu-1", "src_region": "eu-west-1",
        "src_zone": "a", "src_provider": "aws", "dst_agent": "us-1",
        "dst_region": "us-east-1", "dst_zone": "a", "dst_provider": "aws",
        "topology_class": "cross_region"}
    assert got["annotations"]["summary"] == "p99 high: eu-1 → us-1"
    assert got["annotations"]["value"] == "value 912 ms vs threshold 50 ms"
    assert got["generatorURL"] == "https://sw.example/pair?src=1&dst=2"
    assert got["status"]["state"] == "active"
    ends = datetime.fromisoformat(got["endsAt"].replace("Z", "+00:00"))
    assert ends > datetime.now(UTC)

    # The repost keeps it firing: a later endsAt for the same alert, still one alert.
    def extended() -> bool:
        assert repost(get_sync_engine()).get("sent", 0) >= 1
        [again] = listed(alertmanager, stormwatch_alert_id=str(alert))
        return datetime.fromisoformat(again["endsAt"].replace("Z", "+00:00")) > ends

    wait_until("a repost to extend the alert", 30, extended)
    assert len(listed(alertmanager, alertname="p99 high")) == 1

    resolve(db, alert)
    assert run_dispatch().get("sent") == 1
    wait_until("the alert to end in Alertmanager", 30,
               lambda: listed(alertmanager, stormwatch_alert_id=str(alert)) == [])
    # Resolved alerts are reposted as resolved for a while: it stays ended.
    assert repost(get_sync_engine()).get("sent", 0) >= 1
    assert listed(alertmanager, stormwatch_alert_id=str(alert)) == []


@needs_alertmanager
def test_a_test_send_posts_an_alert_alertmanager_shows(org: Org, alertmanager: str) -> None:
    ch = org.post("/channels", {"name": "am", "kind": "alertmanager",
                                "config": {"url": alertmanager}})
    assert org.post(f"/channels/{ch['id']}/test", {}) == {
        "ok": True, "permanent": None, "detail": "HTTP 200"}
    wait_until("the test alert in Alertmanager", 30,
               lambda: len(listed(alertmanager, alertname="StormwatchTest")) == 1)
    [got] = listed(alertmanager, alertname="StormwatchTest")
    assert got["labels"]["severity"] == "info"


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(("status", "error"), [
    (400, PermanentError), (401, PermanentError), (404, PermanentError),
    (429, TransientError), (500, TransientError), (503, TransientError)])
def test_the_status_decides_permanent_or_transient(status: int,
                                                   error: type[Exception]) -> None:
    with HttpReceiver() as hook:
        hook.default = (status, '"bad"')
        with pytest.raises(error):
            asyncio.run(AlertmanagerChannel(f"http://127.0.0.1:{hook.port}").send(
                message(), "msg_1"))


@pytest.mark.usefixtures("loopback_allowed")
def test_basic_auth_or_a_bearer_token_goes_in_the_authorization_header() -> None:
    with HttpReceiver() as hook:
        base = f"http://127.0.0.1:{hook.port}/am/"
        asyncio.run(AlertmanagerChannel(base, "sw", "pw").send(message(), "msg_1"))
        asyncio.run(AlertmanagerChannel(base, bearer_token="tok").send(message(), "msg_1"))
    basic, bearer = ({k.lower(): v for k, v in r.headers.items()} for r in hook.requests)
    assert basic["authorization"] == "Basic " + base64.b64encode(b"sw:pw").decode()
    assert bearer["authorization"] == "Bearer tok"
    assert [r.path for r in hook.requests] == ["/am/api/v2/alerts"] * 2
    [posted] = json.loads(hook.requests[0].body)
    assert posted["labels"]["stormwatch_alert_id"] == "a1"
    assert posted["startsAt"] == "2026-11-23T12:00:00Z"


def test_auth_config_errors_name_the_problem(org: Org) -> None:
    r = org.api.post("/api/v1/channels", json={"name": "am", "kind": "alertmanager", "config": {
        "url": "https://am.example.com", "username": "u", "bearer_token": "t"}},
        headers=org.headers)
    assert r.status_code == 422 and "not both" in r.text


AMTOOL = shutil.which("amtool")


@pytest.mark.skipif(AMTOOL is None, reason="no amtool (it comes with prometheus-alertmanager)")
def test_the_documented_alertmanager_config_passes_amtool(tmp_path: Path) -> None:
    assert AMTOOL is not None
    text = (REPO_ROOT / "docs" / "integrations.md").read_text()
    section = text[text.index("### Prometheus Alertmanager"):]
    [config] = re.findall(r"```yml\n(.*?)```", section, re.S)
    path = tmp_path / "alertmanager.yml"
    path.write_text(config)
    out = subprocess.run([AMTOOL, "check-config", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "stormwatch_rule_id" in config
