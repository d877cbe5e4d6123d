"""Advisors on an org's measurements: reads the samples (raw or merged sketches, through
services/analytics) and the org's effective prices, calls the pure models, and says which
data is missing instead of guessing. No FastAPI here; errors carry the input field."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Hashable
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
from sqlalchemy import delete, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import PricingOverride
from stormwatch.services.advisors import catalog, equations, placement, rankings, timeouts
from stormwatch.services.analytics.coverage import data_start
from stormwatch.services.analytics.filters import Filters, Fleet, load_fleet
from stormwatch.services.analytics.grouped import load_grouped
from stormwatch.services.analytics.stats import Distribution

MS = 1000.0  # µs per ms
# Quantile levels of each pair's RTT distribution the simulator samples from.
PLACEMENT_LEVELS = 64


class AdvisorInputError(ValueError):
    """Input the data contradicts (an unknown region or target): a 422 naming `field`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def insufficient(missing: list[str], **extra: Any) -> dict[str, Any]:
    return {"status": "insufficient_data", "missing": missing, **extra}


# --- pricing catalog ---------------------------------------------------------------------


async def known_regions(session: AsyncSession, org_id: uuid.UUID) -> dict[str, set[str]]:
    """Provider → regions an org may price: the shipped ones, its agents' and its targets'."""
    out = {p: set(r) for p, r in catalog.known_regions().items()}
    rows = (await session.execute(text(
        "SELECT provider, region FROM agents WHERE org_id = :o AND provider <> '' "
        "UNION SELECT provider, region FROM storage_targets WHERE org_id = :o"),
        {"o": org_id})).all()
    for provider, region in rows:
        out.setdefault(catalog.TARGET_PROVIDER.get(provider, provider), set()).add(region)
    return out


async def effective_catalog(session: AsyncSession, org_id: uuid.UUID) -> list[dict[str, Any]]:
    """Every figure in effect for the org: its own where set, else the shipped one."""
    shipped = catalog.shipped_index()
    rows: dict[tuple[str, str, str], dict[str, Any]] = {
        k: {"provider": f.provider, "region": f.region, "item": f.item,
            "price_usd": f.price_usd, "effective_date": f.effective_date, "source": f.source,
            "origin": "shipped", "shipped_price_usd": f.price_usd}
        for k, f in shipped.items()}
    for o in (await session.execute(select(PricingOverride).where(
            PricingOverride.org_id == org_id))).scalars():
        key = (o.provider, o.region, o.item)
        base = shipped.get(key)
        rows[key] = {"provider": o.provider, "region": o.region, "item": o.item,
                     "price_usd": o.price_usd, "effective_date": o.effective_date,
                     "source": o.source, "origin": "org",
                     "shipped_price_usd": base.price_usd if base else None}
    return [rows[k] for k in sorted(rows)]


async def prices(session: AsyncSession, org_id: uuid.UUID, provider: str, region: str
                 ) -> dict[str, dict[str, Any]]:
    return {r["item"]: r for r in await effective_catalog(session, org_id)
            if r["provider"] == provider and r["region"] == region}


async def set_price(session: AsyncSession, org_id: uuid.UUID, provider: str, region: str,
                    item: str, price_usd: float, source: str,
                    effective_date: date | None) -> None:
    regions = await known_regions(session, org_id)
    if provider not in regions:
        raise AdvisorInputError("provider", f"unknown provider {provider!r}: one of "
                                f"{', '.join(sorted(regions))}")
    if region not in regions[provider]:
        raise AdvisorInputError("region", f"unknown region {region!r} for {provider}: not in "
                                "the catalog, nor an agent's or storage target's region")
    values = {"org_id": org_id, "provider": provider, "region": region, "item": item,
              "price_usd": price_usd, "source": source,
              "effective_date": effective_date or datetime.now(UTC).date(),
              "updated_at": datetime.now(UTC)}
    stmt = insert(PricingOverride).values(**values)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=["org_id", "provider", "region", "item"],
        set_={k: stmt.excluded[k] for k in ("price_usd", "source", "effective_date",
                                             "updated_at")}))
    await session.flush()


async def clear_price(session: AsyncSession, org_id: uuid.UUID, provider: str, region: str,
                      item: str) -> bool:
    res = await session.execute(delete(PricingOverride).where(
        PricingOverride.org_id == org_id, PricingOverride.provider == provider,
        PricingOverride.region == region, PricingOverride.item == item))
    await session.flush()
    return bool(getattr(res, "rowcount", 0))


# --- storage targets ---------------------------------------------------------------------


async def _target(session: AsyncSession, org_id: uuid.UUID, target_id: uuid.UUID
                  ) -> tuple[str, str, str]:
    row = (await session.execute(text(
        "SELECT name, provider, region FROM storage_targets WHERE id = :i AND org_id = :o"),
        {"i": target_id, "o": org_id})).one_or_none()
    if row is None:
        raise AdvisorInputError("target_id", "no such storage target")
    return str(row[0]), catalog.TARGET_PROVIDER.get(row[1], str(row[1])), str(row[2] or "")


def _ms(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else v / MS


def _med(d: Distribution | None) -> float | None:
    return None if d is None or d.count == 0 else d.quantiles([0.5])[0]


def _price(p: dict[str, dict[str, Any]], item: str, provider: str, region: str,
           missing: list[str]) -> float | None:
    fig = p.get(item)
    if fig is None:
        missing.append(f"price {item} for {provider}/{region} (add it in the pricing catalog)")
        return None
    return float(fig["price_usd"])


async def compression(session: AsyncSession, org_id: uuid.UUID, target_id: uuid.UUID,
                      start: datetime, end: datetime, content: str, transfer: str,
                      transfers: float, months_stored: float,
                      cpu_provider: str | None, cpu_region: str | None) -> dict[str, Any]:
    """Eq. (1) per object size from the target's gzip9 and plain samples.

    Measured gzip9 latency = plain latency + t_c − ΔS/B (compression and decompression
    inside the timed PUT/GET, fewer bytes on the wire), so t_c = Δlatency + ΔS/B with 1/B
    the slope of plain latency over size (s per byte), per op. t_c of an object is its PUT's
    plus its GET's. The link bandwidth below which compression lowers latency is ΔS/t_c.
    """
    name, provider, region = await _target(session, org_id, target_id)
    f = Filters(start=start, end=end, extra={"target_id": [target_id], "op": ["put", "get"],
                                             "variant": ["plain", "gzip9"],
                                             "content": [content]})
    g = await load_grouped(session, org_id, "storage", f, lambda k: (k[3], k[2], int(k[5])))
    stored: dict[int, float] = dict((await session.execute(text(
        "SELECT size_bytes, avg(stored_bytes)::float8 FROM storage_samples WHERE org_id = :o "
        "AND target_id = :t AND variant = 'gzip9' AND content = :c AND status = 0 "
        "AND stored_bytes IS NOT NULL AND time >= :s AND time < :e GROUP BY size_bytes"),
        {"o": org_id, "t": target_id, "c": content, "s": start, "e": end})).all())
    missing: list[str] = []
    plain_sizes = sorted({k[2] for k in g.groups if k[0] == "plain"})
    gz_sizes = sorted({k[2] for k in g.groups if k[0] == "gzip9"})
    if not plain_sizes:
        missing.append(f"plain PUT/GET samples of {content} objects on target {name}")
    if not gz_sizes:
        missing.append(f"gzip9 samples of {content} objects on target {name} (enable the "
                       "gzip9 variant)")
    elif not stored:
        missing.append(f"raw gzip9 samples with stored_bytes on target {name} in the range "
                       "(raw samples are kept for the retention window)")
    p_store = await prices(session, org_id, provider, region)
    cpu_p, cpu_r = cpu_provider or provider, cpu_region or region
    p_cpu = await prices(session, org_id, cpu_p, cpu_r)
    egress_item = ("egress_internet_per_gb" if transfer == "internet"
                   else "egress_inter_region_per_gb")
    c_b = _price(p_store, egress_item, provider, region, missing)
    c_s = _price(p_store, "storage_per_gb_month", provider, region, missing)
    c_cpu = _price(p_cpu, "cpu_per_hour", cpu_p, cpu_r, missing)
    # Seconds per byte of the plain transfers, per op: the slope of median latency on size.
    per_byte: dict[str, float | None] = {}
    for op in ("put", "get"):
        pts = [(s, _med(g.groups.get(("plain", op, s)))) for s in plain_sizes]
        xs = np.array([s for s, v in pts if v is not None], dtype=float)
        ys = np.array([v for s, v in pts if v is not None], dtype=float) / 1e6
        slope = float(np.polyfit(xs, ys, 1)[0]) if xs.size >= 2 else None
        per_byte[op] = slope if slope is not None and slope > 0 else None
    rows = []
    for size in sorted(set(plain_sizes) & set(gz_sizes)):
        meds = {(v, op): _med(g.groups.get((v, op, size)))
                for v in ("plain", "gzip9") for op in ("put", "get")}
        sb = stored.get(size)
        row: dict[str, Any] = {
            "size_bytes": size, "stored_bytes": sb,
            "plain_put_ms": _ms(meds["plain", "put"]), "plain_get_ms": _ms(meds["plain", "get"]),
            "gzip_put_ms": _ms(meds["gzip9", "put"]), "gzip_get_ms": _ms(meds["gzip9", "get"]),
            "samples": sum(g.groups[k].moments.count for k in g.groups if k[2] == size),
        }
        if sb is None or any(v is None for v in meds.values()):
            row.update(t_c_s=None, delta_bytes=None, break_even_bps=None, terms=None)
            rows.append(row)
            continue
        delta = max(size - sb, 0.0)
        t_c = 0.0
        for op in ("put", "get"):
            d_lat = (meds["gzip9", op] - meds["plain", op]) / 1e6  # type: ignore[operator]
            t_c += d_lat + delta * (per_byte[op] or 0.0)
        # Below zero the gzip9 runs were faster than the bandwidth model explains (noise, or
        # a link slower than the plain runs suggested): no CPU time is visible, none is billed.
        row["t_c_clamped"] = t_c < 0
        t_c = max(t_c, 0.0)
        row.update(t_c_s=t_c, delta_bytes=delta,
                   break_even_bps=equations.break_even_bandwidth_bps(t_c, delta),
                   link_bps_measured={op: (8.0 / v if v else None) for op, v in per_byte.items()})
        if None not in (c_b, c_s, c_cpu):
            terms = equations.compression_pays(t_c, c_cpu, delta, c_b, c_s,  # type: ignore[arg-type]
                                               transfers, months_stored)
            row["terms"] = terms.as_dict()
        else:
            row["terms"] = None
        if math.isinf(row["break_even_bps"] or 0.0):
            row["break_even_bps"] = None
        rows.append(row)
    base = {"target": {"id": str(target_id), "name": name, "provider": provider,
                       "region": region},
            "content": content, "transfer": transfer, "transfers": transfers,
            "months_stored": months_stored, "source": g.source.as_dict(),
            "prices": {"c_b_item": egress_item, "c_b_per_gb": c_b, "c_s_per_gb_month": c_s,
                       "c_cpu_per_hour": c_cpu, "cpu_provider": cpu_p, "cpu_region": cpu_r},
            "sizes": rows,
            "bandwidth_basis": {op: v is not None for op, v in per_byte.items()}}
    if missing:
        return insufficient(missing, **base)
    return {"status": "ok", **base}


async def replication(session: AsyncSession, org_id: uuid.UUID, target_id: uuid.UUID,
                      start: datetime, end: datetime, gets_per_month: float,
                      value_per_ms: float) -> dict[str, Any]:
    """Eq. (2) per object size from the target's replicated variant: std dev and p90 of the
    first of k parallel GETs for k = 1..F (seed 000 Figs. 9, 10); ΔV̄ = σ(k=1) − σ(k=F)."""
    name, provider, region = await _target(session, org_id, target_id)
    f = Filters(start=start, end=end, extra={"target_id": [target_id], "op": ["get_first"],
                                             "variant": ["replicated"]})
    g = await load_grouped(session, org_id, "storage", f, lambda k: (int(k[5]), int(k[6])))
    missing: list[str] = []
    if not g.groups:
        missing.append(f"replicated-variant GET samples (get_first) on target {name} "
                       "(enable the replication variant)")
    p = await prices(session, org_id, provider, region)
    c_s = _price(p, "storage_per_gb_month", provider, region, missing)
    c_get = _price(p, "get_per_1k", provider, region, missing)
    out = []
    for size in sorted({k[0] for k in g.groups}):
        by_k = []
        for k in sorted(c for s, c in g.groups if s == size):
            d = g.groups[(size, k)]
            by_k.append({"copies": k, "count": d.count, "std_ms": _ms(d.moments.std),
                         "p90_ms": _ms(d.quantiles([0.9])[0]), "mean_ms": _ms(d.moments.mean),
                         "failures": d.moments.failures})
        row: dict[str, Any] = {"size_bytes": size, "by_copies": by_k, "terms": None,
                               "copies": max(b["copies"] for b in by_k)}
        one = next((b for b in by_k if b["copies"] == 1), None)
        top = by_k[-1]
        if one is None or top["copies"] < 2 or one["std_ms"] is None or top["std_ms"] is None:
            row["note"] = "needs first-of-1 and first-of-F (F ≥ 2) samples with a std dev"
        elif c_s is not None and c_get is not None:
            dv = one["std_ms"] - top["std_ms"]
            row["delta_v_ms"] = dv
            row["terms"] = equations.replication_pays(
                gets_per_month, value_per_ms, dv, top["copies"], size, c_s, c_get).as_dict()
        out.append(row)
    base = {"target": {"id": str(target_id), "name": name, "provider": provider,
                       "region": region},
            "gets_per_month": gets_per_month, "value_per_ms": value_per_ms,
            "prices": {"c_s_per_gb_month": c_s, "get_per_1k": c_get},
            "source": g.source.as_dict(), "sizes": out}
    if missing:
        return insufficient(missing, **base)
    return {"status": "ok", **base}


# --- placement ---------------------------------------------------------------------------


async def placement_model(session: AsyncSession, org_id: uuid.UUID, regions: list[str],
                          uploader: str, downloader: str, start: datetime, end: datetime
                          ) -> tuple[placement.LinkModel | None, list[str], dict[str, Any]]:
    """The region × region RTT distributions (quantile tables) and TCP throughput the
    simulator samples. Pairs inside a region come from two agents there, or, with one agent,
    from its self-loop (said in `notes`)."""
    fleet = await check_regions(session, org_id, regions)
    f = Filters(start=start, end=end, regions=regions)

    def key(k: tuple[Any, ...]) -> Hashable:
        a, b = fleet.agents.get(k[0]), fleet.agents.get(k[1])
        if a is None or b is None:
            return None
        return (a.region, b.region, k[0] == k[1])

    g = await load_grouped(session, org_id, "mesh", f, key, fleet)
    tp = await load_grouped(session, org_id, "throughput", Filters(
        start=start, end=end, regions=regions, extra={"proto": ["tcp"]}),
        lambda k: key(k) if k[0] != k[1] else None, fleet)
    k = len(regions)
    levels = (np.arange(PLACEMENT_LEVELS) + 0.5) / PLACEMENT_LEVELS
    q = np.full((k, k, PLACEMENT_LEVELS), np.nan)
    thr = np.full((k, k), np.nan)
    missing: list[str] = []
    notes: list[str] = []
    rtt_mean = np.full((k, k), np.nan)
    counts = np.zeros((k, k), dtype=np.int64)
    needed_rows = {regions.index(uploader), regions.index(downloader)}
    for i, a in enumerate(regions):
        for j, b in enumerate(regions):
            d = g.groups.get((a, b, False))
            if (d is None or d.count == 0) and a == b:
                d = g.groups.get((a, b, True))
                if d is not None and d.count:
                    notes.append(f"{a}→{a}: one agent in the region, its self-loop stands for "
                                 "the round trip inside the region")
            if d is None or d.count == 0:
                if i in needed_rows:
                    missing.append(f"mesh RTT samples {a} → {b}")
                continue
            qs = d.quantiles(list(levels))
            q[i, j] = [np.nan if v is None else v / MS for v in qs]
            rtt_mean[i, j] = (d.moments.mean or np.nan) / MS
            counts[i, j] = d.count
            t = tp.groups.get((a, b, False))
            if t is not None and t.count:
                med = t.quantiles([0.5])[0]
                if med:
                    thr[i, j] = med * 8.0  # bytes/s → bits/s
    info = {"rtt_mean_ms": [[None if not math.isfinite(x) else float(x) for x in row]
                            for row in rtt_mean],
            "samples": counts.tolist(),
            "throughput_bps": [[None if not math.isfinite(x) else float(x) for x in row]
                               for row in thr],
            "notes": notes, "source": g.source.as_dict()}
    if missing:
        return None, missing, info
    return placement.LinkModel(list(regions), q, thr), [], info


# --- timeouts ----------------------------------------------------------------------------


def _hour_groups(g_windows: dict[Any, Distribution]) -> dict[int, Distribution]:
    by: dict[int, list[Distribution]] = {}
    for (_, w), d in g_windows.items():
        by.setdefault(datetime.fromtimestamp(w, UTC).hour, []).append(d)
    return {h: timeouts.merge(ds) for h, ds in by.items()}


async def timeout(session: AsyncSession, org_id: uuid.UUID, scope: str, start: datetime,
                  end: datetime, msg_rate_per_s: float, false_per_hour: float,
                  src: uuid.UUID | None, dst: uuid.UUID | None, agents: list[uuid.UUID] | None,
                  topology_class: str | None, group_name: str | None,
                  payload_bytes: int | None) -> dict[str, Any]:
    p = timeouts.target_probability(msg_rate_per_s, false_per_hour)
    fleet = await load_fleet(session, org_id)
    for field, ids in (("src", [src] if src else []), ("dst", [dst] if dst else []),
                       ("agents", agents or [])):
        for a in ids:
            if a not in fleet.agents:
                raise AdvisorInputError(field, f"unknown agent {a}")
    kind = "quorum" if scope == "quorum" else "mesh"
    extra: dict[str, list[Any]] = {}
    what: str
    group: Callable[[tuple[Any, ...]], Hashable]
    if scope == "pair":
        if src is None or dst is None:
            raise AdvisorInputError("src" if src is None else "dst",
                                    "a pair needs src and dst")
        f = Filters(start=start, end=end, src=[src], dst=[dst],
                    payload_bytes=[payload_bytes] if payload_bytes else None)
        what = f"{fleet.agents[src].name} → {fleet.agents[dst].name}"
        group = lambda k: "all"  # noqa: E731
    elif scope == "group":
        if not agents or len(agents) < 2:
            raise AdvisorInputError("agents", "a group needs at least two agents")
        f = Filters(start=start, end=end, agents=agents,
                    payload_bytes=[payload_bytes] if payload_bytes else None)
        what = "every link among " + ", ".join(fleet.agents[a].name for a in agents)
        group = lambda k: "all" if k[0] != k[1] else None  # noqa: E731
    elif scope == "topology_class":
        if not topology_class:
            raise AdvisorInputError("topology_class", "choose a topology class")
        f = Filters(start=start, end=end, topology_class=[topology_class],
                    payload_bytes=[payload_bytes] if payload_bytes else None)
        what = f"every {topology_class} link"
        group = lambda k: "all"  # noqa: E731
    else:
        if not group_name:
            raise AdvisorInputError("group_name", "a quorum needs its group name")
        extra["group_name"] = [group_name]
        f = Filters(start=start, end=end, src=[src] if src else None, extra=extra)
        what = f"quorum latency of group {group_name}" + (
            f" at {fleet.agents[src].name}" if src else "")
        group = lambda k: "all"  # noqa: E731
    g = await load_grouped(session, org_id, kind, f, group, fleet)
    d = g.groups.get("all")
    if d is None or d.moments.samples == 0:
        return insufficient([f"{'quorum' if kind == 'quorum' else 'mesh'} samples of {what} "
                             "in the range"], scope=scope, what=what,
                            source=g.source.as_dict(), target_probability=p)
    main = timeouts.timeout_for(d, p)
    best = main["best_probability"]
    if best is not None:
        # The best the data supports, said both ways: at the asked message rate, the false
        # timeouts per hour; at the asked false timeouts, the message rate.
        main["best_false_timeouts_per_hour"] = best * msg_rate_per_s * 3600
        main["best_msg_rate_per_s"] = false_per_hour / 3600 / best
        main["best_timeout_ms"] = _ms(main["best_timeout_us"])
    if main["samples_needed"] is not None and main["samples_needed"] > main["samples"]:
        first = await data_start(session, org_id, kind, start)
        span_s = (min(end, datetime.now(UTC)) - max(start, first or start)).total_seconds()
        if span_s > 0:
            main["time_needed_s"] = main["samples_needed"] / (main["samples"] / span_s)
    gw = await load_grouped(session, org_id, kind, f, group, fleet, window_s=3600)
    hours = timeouts.by_hour(_hour_groups(gw.groups), p)
    for r in [main, *hours]:
        r["timeout_ms"] = _ms(r.get("timeout_us"))
    return {"status": "ok", "scope": scope, "what": what, "msg_rate_per_s": msg_rate_per_s,
            "false_timeouts_per_hour": false_per_hour, "source": g.source.as_dict(),
            "hourly_source": gw.source.as_dict(), **main,
            "p50_ms": _ms(d.quantiles([0.5])[0]), "p99_ms": _ms(d.quantiles([0.99])[0]),
            "max_ms": _ms(d.moments.maximum if d.count else None), "by_hour": hours}


# --- rankings ----------------------------------------------------------------------------


def size_label(n: int) -> str:
    """An object size as people write it: binary units for powers of 1024, else SI."""
    for unit, b in (("MiB", 1 << 20), ("KiB", 1 << 10), ("MB", 10**6), ("kB", 10**3)):
        if n >= b and n % b == 0:
            return f"{n // b} {unit}"
    return f"{n} B"


async def ranking(session: AsyncSession, org_id: uuid.UUID, kind: str, level: str, stat: str,
                  start: datetime, end: datetime, op: str | None, size_bytes: int | None,
                  variant: str | None, proto: str | None) -> dict[str, Any]:
    rankings.parse_stat(stat)
    fleet: Fleet = await load_fleet(session, org_id)
    extra: dict[str, list[Any]] = {}
    if kind == "storage":
        if op is None:
            raise AdvisorInputError("op", "storage rankings need an op (put, get, ...)")
        extra["op"] = [op]
        extra["variant"] = [variant or "plain"]
        if size_bytes is not None:
            extra["size_bytes"] = [size_bytes]
        targets = {r[0]: (catalog.TARGET_PROVIDER.get(r[1], r[1]), r[2], r[3])
                   for r in (await session.execute(text(
                       "SELECT id, provider, region, name FROM storage_targets WHERE "
                       "org_id = :o"), {"o": org_id})).all()}

        def key(k: tuple[Any, ...]) -> Hashable:
            t = targets.get(k[1])
            if t is None:
                return None
            label = {"provider": t[0], "region": f"{t[0]}/{t[1]}", "pair": t[2],
                     "region_pair": f"{t[0]}/{t[1]}"}[level]
            # Latency grows with object size: a row never mixes sizes (seed 000 ranks per size).
            return label if size_bytes is not None else f"{label}, {size_label(int(k[5]))}"
    else:
        if kind == "throughput" and proto:
            extra["proto"] = [proto]

        def key(k: tuple[Any, ...]) -> Hashable:
            a, b = fleet.agents.get(k[0]), fleet.agents.get(k[1])
            if a is None or b is None or k[0] == k[1]:
                return None  # self-loops measure the host, not the network
            if level == "provider":
                return a.provider if a.provider == b.provider else None
            if level == "region":
                return f"{a.provider}/{a.region}" if (a.provider, a.region) == (
                    b.provider, b.region) else None
            if level == "region_pair":
                return f"{a.provider}/{a.region} → {b.provider}/{b.region}"
            return f"{a.name} → {b.name}"
    f = Filters(start=start, end=end, extra=extra)
    g = await load_grouped(session, org_id, kind, f, key, fleet)
    descending = kind == "throughput" and stat != "loss_rate"
    rows = rankings.rank({str(k): d for k, d in g.groups.items()}, stat, descending)
    unit = "bytes_per_s" if kind == "throughput" else "ms"
    if unit == "ms" and stat != "loss_rate":
        for r in rows:
            for c in ("value", "ci_low", "ci_high"):
                r[c] = _ms(r[c])
    if not rows:
        return insufficient([f"{kind} samples in the range"], kind=kind, level=level,
                            stat=stat, source=g.source.as_dict(), rows=[])
    return {"status": "ok", "kind": kind, "level": level, "stat": stat, "unit": unit,
            "order": "descending" if descending else "ascending",
            "source": g.source.as_dict(), "rows": rows}


# --- placement answers (API inline, or the worker) ----------------------------------------

# trials × blocks × 2 up to which the API simulates inline (≈ 0.1 s); larger runs go to the
# worker (bench/advisors: 6 regions × 10 000 trials × 160 blocks ≈ 0.6 s).
INLINE_CELLS = 1_000_000


def placement_cells(inputs: dict[str, Any]) -> int:
    blocks = -(-int(inputs["file_bytes"]) // int(inputs["block_bytes"]))
    return int(inputs["trials"]) * blocks * 2


async def check_regions(session: AsyncSession, org_id: uuid.UUID, regions: list[str]) -> Fleet:
    """The org's fleet, once every region has an agent in it."""
    fleet = await load_fleet(session, org_id)
    in_fleet = {a.region for a in fleet.agents.values()}
    for i, r in enumerate(regions):
        if r not in in_fleet:
            raise AdvisorInputError("regions", f"unknown region {r!r} (index {i}): no agent "
                                    "of the org is in it")
    return fleet


async def placement_answer(session: AsyncSession, org_id: uuid.UUID, inputs: dict[str, Any]
                           ) -> dict[str, Any]:
    """{"status", "missing", "result", "data"} for JSON `inputs` (PlacementIn, dumped)."""
    start = datetime.fromisoformat(inputs["start"])
    end = datetime.fromisoformat(inputs["end"])
    model, missing, data = await placement_model(
        session, org_id, inputs["regions"], inputs["uploader"], inputs["downloader"], start, end)
    data["source"] = {k: (v.isoformat() if isinstance(v, datetime) else v)
                      for k, v in data["source"].items()}
    if model is None:
        return {"status": "insufficient_data", "missing": missing, "result": None, "data": data}
    result = placement.simulate(model, inputs["uploader"], inputs["downloader"],
                                int(inputs["block_bytes"]), int(inputs["file_bytes"]),
                                int(inputs["trials"]), int(inputs["seed"]),
                                concurrency=int(inputs.get("concurrency")
                                                or placement.DEFAULT_CONCURRENCY))
    return {"status": "ok", "missing": [], "result": result, "data": data}
