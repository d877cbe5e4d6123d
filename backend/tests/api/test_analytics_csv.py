"""The CSV export over HTTP: columns named with their units, and a file named by what it holds
(the pair and the UTC range), not the same name for every export."""

from __future__ import annotations

import csv
import io

import httpx
import numpy as np

from tests.api.test_analytics_filters import AGENTS, Mesh, mesh  # noqa: F401


def _csv(client: httpx.Client, mesh: Mesh, **params: str) -> httpx.Response:  # noqa: F811
    r = client.get("/api/v1/analytics/mesh/series.csv", headers=mesh.headers, params={
        "start": mesh.start.isoformat(), "end": mesh.end.isoformat(), "window_s": "60",
        "percentiles": "50,99.99", "resolution": "raw", "payload_bytes": "1024", **params})
    assert r.status_code == 200, r.text
    return r


def test_csv_columns_carry_their_units(client: httpx.Client, mesh: Mesh) -> None:  # noqa: F811
    r = _csv(client, mesh, src=mesh.agents["a1"].agent_id, dst=mesh.agents["a4"].agent_id)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert list(rows[0]) == ["group", "start", "samples", "count", "loss_rate", "mean_us",
                             "std_us", "min_us", "max_us", "p50_us", "p99_99_us",
                             "p50_beyond", "p99_99_beyond"]
    # The µs columns hold the samples' values in µs.
    first = mesh.samples[("a1", "a4", 1024)][:60]
    assert float(rows[0]["p50_us"]) == float(np.quantile(first, 0.5, method="lower"))
    assert float(rows[0]["max_us"]) == float(first.max())


def test_the_csv_file_is_named_by_pair_and_utc_range(
        client: httpx.Client, mesh: Mesh) -> None:  # noqa: F811
    stamp = f"{mesh.start:%Y%m%dT%H%MZ}-{mesh.end:%Y%m%dT%H%MZ}"
    a1, a4 = mesh.agents["a1"].agent_id, mesh.agents["a4"].agent_id
    r = _csv(client, mesh, src=a1, dst=a4)
    assert r.headers["content-disposition"] == (
        f'attachment; filename="stormwatch-mesh-filt-a1-to-filt-a4-{stamp}.csv"')
    # A region's agents (as a region cell's pair page asks) are named by the region.
    us_east = ",".join(mesh.agents[n].agent_id for n in AGENTS if AGENTS[n][1] == "us-east-1")
    r = _csv(client, mesh, src=us_east, dst=a4)
    assert r.headers["content-disposition"] == (
        f'attachment; filename="stormwatch-mesh-us-east-1-to-filt-a4-{stamp}.csv"')
    # Two of a zone's agents are that zone; agents of no one place are counted.
    zone_a = ",".join(mesh.agents[n].agent_id for n in ("a1", "a2"))
    mixed = ",".join(mesh.agents[n].agent_id for n in ("a1", "a4"))
    r = _csv(client, mesh, src=zone_a, dst=mixed)
    assert r.headers["content-disposition"] == (
        f'attachment; filename="stormwatch-mesh-aws_us-east-1_us-east-1a-to-2-agents-{stamp}.csv"')
    r = _csv(client, mesh)
    assert r.headers["content-disposition"] == (
        f'attachment; filename="stormwatch-mesh-all-to-all-{stamp}.csv"')
