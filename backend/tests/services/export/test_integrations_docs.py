"""docs/integrations.md and the Grafana dashboard in docs/grafana/: the dashboard queries
only what the Prometheus export serves (its metric names, the labels of the region level,
variables it defines), and the scrape jobs and PromQL of both pass Prometheus's own
checker."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stormwatch.core.config import REPO_ROOT
from stormwatch.services.export.prometheus import EXPORT_KINDS, KINDS, label_names

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "stormwatch-latency.json"
INTEGRATIONS = REPO_ROOT / "docs" / "integrations.md"
PROMTOOL = shutil.which("promtool")
NO_PROMTOOL = "no promtool (scripts/bootstrap.sh test installs Debian's prometheus)"
# Labels Prometheus adds to every scraped series, and the histogram's bucket label.
SCRAPE_LABELS = {"job", "instance", "le"}


def exported_names() -> set[str]:
    names = set()
    for kind in EXPORT_KINDS.values():
        names |= {kind.metric + s for s in ("_bucket", "_count", "_sum")}
        if kind.failures:
            names.add(kind.failures + "_total")
    return names


def region_labels() -> set[str]:
    return {n for k in KINDS for n in label_names(k, "region")} | SCRAPE_LABELS


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    for panel in board["panels"]:
        for t in panel["targets"]:
            yield f"panel {panel['title']!r} {t['refId']}", t["expr"]
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            yield f"variable {v['name']}", v["query"]["query"]


def test_every_query_uses_exported_metrics_and_region_level_labels() -> None:
    board = load()
    names, labels = exported_names(), region_labels()
    variables = {v["name"] for v in board["templating"]["list"]}
    assert board["panels"] and {p["type"] for p in board["panels"]} == {"heatmap", "timeseries"}
    for where, expr in queries(board):
        used = set(re.findall(r"\bstormwatch_[a-z_]+", expr))
        assert used, (where, expr)
        assert used <= names, (where, used - names)
        matched = set(re.findall(r"([a-z_]+)\s*=~?\s*\"", expr))
        grouped = {n.strip() for g in re.findall(r"by \(([^)]*)\)", expr) for n in g.split(",")}
        listed = set(re.findall(r"label_values\([^,]*,\s*([a-z_]+)\)", expr))
        assert matched | grouped | listed <= labels, (where, (matched | grouped | listed) - labels)
        refs = set(re.findall(r"\$(\w+)", expr)) - {"__rate_interval"}
        assert refs <= variables, (where, refs - variables)
    for panel in board["panels"]:
        for t in panel["targets"]:
            legend = set(re.findall(r"\{\{(\w+)\}\}", t["legendFormat"]))
            assert legend <= labels, (panel["title"], legend)


def test_the_dashboard_imports_with_a_prometheus_data_source_input() -> None:
    board = load()
    assert [i["pluginId"] for i in board["__inputs"]] == ["prometheus"]
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in panel["targets"])
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for must in ("region pairs", "p50 and p99", "loss"):
        assert must in titles


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
def test_every_query_is_promql_that_promtool_accepts(tmp_path: Path) -> None:
    rules = []
    for i, (_, expr) in enumerate(q for q in queries(load()) if q[0].startswith("panel")):
        concrete = expr.replace("$__rate_interval", "5m")
        concrete = re.sub(r"\$(\w+)", r"\1-value", concrete)
        rules.append({"record": f"stormwatch:dashboard_query:{i}", "expr": concrete})
    path = tmp_path / "rules.yml"
    # JSON is YAML: promtool reads it as a rule file.
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = promtool("check", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(rules)} rules found" in out.stdout


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
def test_the_documented_scrape_jobs_and_queries_pass_promtool(tmp_path: Path) -> None:
    text = INTEGRATIONS.read_text()
    # The Prometheus section's YAML blocks (later sections hold other tools' configuration).
    prometheus = text.split("\n## Prometheus\n", 1)[1].split("\n## ", 1)[0]
    jobs = re.findall(r"```yaml\n(.*?)```", prometheus, re.S)
    assert len(jobs) == 2 and jobs[0].startswith("scrape_configs:")
    key = tmp_path / "stormwatch.key"
    key.write_text("swk_example\n")
    config = tmp_path / "prometheus.yml"
    config.write_text("".join(jobs).replace("/etc/prometheus/stormwatch.key", str(key)))
    out = promtool("check", "config", str(config))
    assert out.returncode == 0, out.stdout + out.stderr
    exprs = [" ".join(q.split()) for q in re.findall(r"```promql\n(.*?)```", text, re.S)]
    assert len(exprs) >= 5
    names = exported_names() | {"stormwatch_mesh_rtt_seconds"}  # native: no suffix
    for expr in exprs:
        assert set(re.findall(r"\bstormwatch_[a-z_]+", expr)) <= names, expr
    rules = [{"record": f"stormwatch:docs_query:{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "docs", "rules": rules}]}))
    out = promtool("check", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
