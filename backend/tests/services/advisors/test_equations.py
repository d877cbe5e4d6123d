"""Seed 000's equations (1) and (2) against figures worked out by hand."""

import math

import pytest

from stormwatch.services.advisors.equations import (
    break_even_bandwidth_bps,
    compression_pays,
    replication_pays,
)


def test_compression_pays_when_the_saved_bytes_cost_more_than_the_cpu_time() -> None:
    # 0.5 s at $0.072/h = $0.00001; 0.25 GB saved × ($0.09 + $0.023) = $0.02825.
    t = compression_pays(t_c_s=0.5, cpu_per_hour=0.072, delta_bytes=250_000_000,
                         transfer_per_gb=0.09, storage_per_gb_month=0.023)
    assert t.c_cpu_per_s == pytest.approx(0.00002)
    assert t.lhs_usd == pytest.approx(0.00001)
    assert t.delta_s_gb == pytest.approx(0.25)
    assert t.rhs_usd == pytest.approx(0.02825)
    assert t.pays is True


def test_compression_does_not_pay_when_few_bytes_are_saved() -> None:
    # 100 B saved: 1e-7 GB × $0.113 = $1.13e-8 against the same $0.00001 of CPU.
    t = compression_pays(t_c_s=0.5, cpu_per_hour=0.072, delta_bytes=100,
                         transfer_per_gb=0.09, storage_per_gb_month=0.023)
    assert t.rhs_usd == pytest.approx(1.13e-8)
    assert t.pays is False


def test_compression_counts_every_transfer_and_every_month_stored() -> None:
    # 1 GB saved, moved 3 times at $0.02 and kept 12 months at $0.023: 0.06 + 0.276.
    t = compression_pays(t_c_s=3600 * 10, cpu_per_hour=0.05, delta_bytes=1e9,
                         transfer_per_gb=0.02, storage_per_gb_month=0.023, transfers=3,
                         months_stored=12)
    assert t.rhs_usd == pytest.approx(0.336)
    assert t.lhs_usd == pytest.approx(0.5)
    assert t.pays is False


def test_compression_lowers_latency_only_below_the_break_even_bandwidth() -> None:
    # 250 kB saved for 0.5 s of CPU: pays below 8 × 250 000 / 0.5 = 4 Mbit/s.
    assert break_even_bandwidth_bps(0.5, 250_000) == pytest.approx(4e6)
    assert break_even_bandwidth_bps(0.5, 0) is None
    assert math.isinf(break_even_bandwidth_bps(0.0, 10) or 0.0)


def test_replication_pays_when_the_valued_variability_drop_beats_storage_and_gets() -> None:
    # N_G = 1e6 GETs × $1e-6 per ms × 20 ms = $20; C_G = 1e6 × $0.0004/1000 / 0.1 GB = $4/GB;
    # F·S̄·(C_s + C_G) = 3 × 0.1 × (0.023 + 4) = $1.2069.
    t = replication_pays(n_gets=1e6, value_per_ms=1e-6, delta_v_ms=20, copies=3,
                         mean_size_bytes=1e8, storage_per_gb_month=0.023, get_per_1k=0.0004)
    assert t.lhs_usd == pytest.approx(20.0)
    assert t.c_g_per_gb == pytest.approx(4.0)
    assert t.rhs_usd == pytest.approx(1.2069)
    assert t.pays is True


def test_replication_does_not_pay_when_variability_is_worth_little() -> None:
    t = replication_pays(n_gets=1e6, value_per_ms=1e-8, delta_v_ms=20, copies=3,
                         mean_size_bytes=1e8, storage_per_gb_month=0.023, get_per_1k=0.0004)
    assert t.lhs_usd == pytest.approx(0.2)
    assert t.pays is False


def test_replication_never_pays_when_copies_make_variability_worse() -> None:
    t = replication_pays(n_gets=1e6, value_per_ms=1.0, delta_v_ms=-5, copies=2,
                         mean_size_bytes=1e6, storage_per_gb_month=0.02, get_per_1k=0.0004)
    assert t.lhs_usd < 0
    assert t.pays is False
