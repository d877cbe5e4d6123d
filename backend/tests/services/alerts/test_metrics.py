"""The one definition of a statistic's unit."""

from __future__ import annotations

from stormwatch.services.alerts.metrics import METRICS, statistic_unit


def test_rates_are_ratios_whatever_the_metric_measures() -> None:
    assert statistic_unit("mesh_rtt", "loss_rate") == "ratio"
    assert statistic_unit(METRICS["storage_latency"], "failure_rate") == "ratio"
    assert statistic_unit("quorum_latency", "failure_rate") == "ratio"


def test_other_statistics_take_the_metric_unit() -> None:
    assert statistic_unit("mesh_rtt", "p99.99") == "us"
    assert statistic_unit("throughput", "mean") == "bytes/s"
    assert statistic_unit("agent_silence", "silence_s") == "s"
    assert statistic_unit("no_such_metric", "p99") == ""
