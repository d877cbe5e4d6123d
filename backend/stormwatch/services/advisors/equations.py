"""Seed 000's two cost tests, with every term returned so the UI can show them.

Units: time in seconds, sizes in GB (10^9 bytes, as providers bill), prices in USD.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

GB = 1e9


@dataclass(frozen=True)
class CompressionTerms:
    """Equation (1): t_c·C_CPU < ΔS·(C_b + C_s), for one object."""

    t_c_s: float  # CPU time to compress and decompress the object once
    c_cpu_per_s: float  # USD per CPU-second
    delta_s_gb: float  # size reduction
    c_b_per_gb: float  # transfer cost per GB, times the transfers the object makes
    c_s_per_gb: float  # storage cost per GB over the months it is kept
    lhs_usd: float
    rhs_usd: float
    pays: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compression_pays(t_c_s: float, cpu_per_hour: float, delta_bytes: float,
                     transfer_per_gb: float, storage_per_gb_month: float,
                     transfers: float = 1.0, months_stored: float = 1.0) -> CompressionTerms:
    """Seed 000 eq. (1). C_b is the transfer price times how often the object crosses a
    billed link; C_s the storage price times the months it is kept (the seed leaves both
    per object, unspecified in time)."""
    if t_c_s < 0 or delta_bytes < 0:
        raise ValueError("t_c and ΔS must be non-negative")
    c_cpu = cpu_per_hour / 3600.0
    ds = delta_bytes / GB
    c_b = transfer_per_gb * transfers
    c_s = storage_per_gb_month * months_stored
    lhs = t_c_s * c_cpu
    rhs = ds * (c_b + c_s)
    return CompressionTerms(t_c_s, c_cpu, ds, c_b, c_s, lhs, rhs, lhs < rhs)


def break_even_bandwidth_bps(t_c_s: float, delta_bytes: float) -> float | None:
    """Link bandwidth (bits/s) below which compression lowers latency: a transfer of S bytes
    takes S/B, a compressed one t_c + (S − ΔS)/B, so it pays when B < ΔS / t_c."""
    if delta_bytes <= 0:
        return None
    if t_c_s <= 0:
        return float("inf")
    return 8.0 * delta_bytes / t_c_s


@dataclass(frozen=True)
class ReplicationTerms:
    """Equation (2): N_G·C_V·ΔV̄ > F·S̄·(C_s + C_G), per month."""

    n_g: float  # GETs per month
    c_v_per_ms: float  # value of one ms less std dev, per GET (the user's figure)
    delta_v_ms: float  # std dev of one copy minus std dev of the first of F
    f: int  # copies
    s_gb: float  # mean object size
    c_s_per_gb: float  # storage per GB-month
    c_g_per_gb: float  # the month's GET request charges of one copy, per GB of object
    lhs_usd: float
    rhs_usd: float
    pays: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def replication_pays(n_gets: float, value_per_ms: float, delta_v_ms: float, copies: int,
                     mean_size_bytes: float, storage_per_gb_month: float,
                     get_per_1k: float) -> ReplicationTerms:
    """Seed 000 eq. (2). The seed's C_G multiplies the size like C_s; GET requests are billed
    per request, so C_G here is a copy's monthly request charge (N_G · price per GET) per GB
    of object, which keeps the equation's form and makes S̄·C_G the request bill."""
    if copies < 1:
        raise ValueError("copies must be at least 1")
    if n_gets < 0 or value_per_ms < 0 or mean_size_bytes <= 0:
        raise ValueError("N_G and C_V must be non-negative and S̄ positive")
    s = mean_size_bytes / GB
    c_g = n_gets * get_per_1k / 1000.0 / s
    lhs = n_gets * value_per_ms * delta_v_ms
    rhs = copies * s * (storage_per_gb_month + c_g)
    return ReplicationTerms(n_gets, value_per_ms, delta_v_ms, copies, s, storage_per_gb_month,
                            c_g, lhs, rhs, lhs > rhs)
