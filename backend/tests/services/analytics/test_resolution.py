"""Which source answers an analysis: raw samples or which rollup level, for the ranges,
windows and selections the UI and the API's users ask for; and that 5-minute rows of a
series are read through their covering index."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from stormwatch.services.analytics.filters import KIND_SPECS, Filters, QueryError
from stormwatch.services.analytics.rollup_reads import MINUTE_INDEX_SKETCH_MAX, packed_rollups_sql
from stormwatch.services.analytics.source import choose_source

NOW = datetime(2026, 11, 23, 12, 34, 56, tzinfo=UTC)
PAIRS = 576  # the bench's 24-agent fleet


def _source(span: timedelta, window_s: int | None = None, series: int = 1,
            resolution: str = "auto", complete_from: dict[int, datetime] | None = None
            ) -> str:
    f = Filters(start=NOW - span, end=NOW, resolution=resolution)  # type: ignore[arg-type]
    return choose_source(f, series <= 8, window_s, series, None, complete_from).resolution


@pytest.mark.parametrize("window_s", [300, 600, 900, 1800, 2700])
def test_a_pair_s_week_in_windows_of_five_minute_multiples_reads_five_minute_rows(
        window_s: int) -> None:
    assert _source(timedelta(days=7), window_s) == "5m"


@pytest.mark.parametrize(("window_s", "level"), [
    (60, "1m"), (120, "1m"), (240, "1m"), (420, "1m"),  # not multiples of 300 s
    (3600, "1h"), (7200, "1h"), (86400, "1d"),  # coarser levels divide them
])
def test_other_windows_keep_the_level_that_divides_them(window_s: int, level: str) -> None:
    assert _source(timedelta(days=7), window_s) == level


def test_windows_of_a_short_range_of_few_series_stay_raw() -> None:
    assert _source(timedelta(hours=2), 900) == "raw"


@pytest.mark.parametrize(("span", "series", "level"), [
    (timedelta(hours=24), 1, "1m"),  # 5-minute edges would move 0.35% of the range
    (timedelta(hours=3), PAIRS, "5m"),  # the fleet's 3 h: 103 680 minute rows, 20 736
    (timedelta(hours=24), PAIRS, "1h"),  # the fleet's day: 165 888 five-minute rows
    (timedelta(days=365), PAIRS, "1d"),
])
def test_without_windows_the_row_budget_picks_the_finest_level_that_fits(
        span: timedelta, series: int, level: str) -> None:
    assert _source(span, None, series) == level


@pytest.mark.parametrize(("span", "level"), [
    (timedelta(days=7), "5m"),  # 10 080 minute rows fit the budget; 2016 give the same answer
    (timedelta(days=60), "1h"),  # an hour is 0.07% of the range
    (timedelta(days=1000), "1d"),
])
def test_without_windows_a_coarser_level_is_taken_while_its_edges_stay_within_a_thousandth(
        span: timedelta, level: str) -> None:
    assert _source(span, None, 1) == level


def test_a_fleet_day_in_minute_windows_steps_down_from_hours_to_minutes() -> None:
    assert _source(timedelta(hours=24), 60, PAIRS) == "1m"
    assert _source(timedelta(hours=24), 600, PAIRS) == "5m"


def test_five_minute_answers_cover_whole_five_minute_buckets() -> None:
    f = Filters(start=NOW - timedelta(days=7), end=NOW)
    src = choose_source(f, True, 900, 1)
    assert src.resolution == "5m" and src.bucket_s == 300
    assert src.start == datetime(2026, 11, 16, 12, 30, tzinfo=UTC)
    assert src.end == datetime(2026, 11, 23, 12, 35, tzinfo=UTC)


def test_an_explicit_five_minute_resolution_needs_windows_it_divides() -> None:
    assert _source(timedelta(hours=1), 600, resolution="5m") == "5m"
    with pytest.raises(QueryError) as err:
        _source(timedelta(hours=1), 120, resolution="5m")
    assert err.value.param == "window_s" and "multiple of 300 s" in str(err.value)


def test_a_level_still_filling_its_history_is_skipped_for_ranges_before_its_mark() -> None:
    filling = {300: NOW - timedelta(hours=6)}
    # Ranges that start before the mark read the levels around it (the same samples).
    assert _source(timedelta(days=7), 900, complete_from=filling) == "1m"
    assert _source(timedelta(hours=24), 600, PAIRS, complete_from=filling) == "1m"
    assert _source(timedelta(hours=24), None, PAIRS, complete_from=filling) == "1h"
    # Ranges inside the filled part read the new level.
    assert _source(timedelta(hours=6), 900, complete_from=filling) == "5m"
    assert _source(timedelta(hours=3), None, PAIRS, complete_from=filling) == "5m"


def test_five_minute_rows_of_a_series_are_read_through_its_covering_index(db: Engine) -> None:
    with db.connect() as c:
        defs = dict(c.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE "
            "'ix_%_rollups_5m_%'")).all())
        assert set(defs) == {f"ix_{t}_5m_{k}" for t in ("mesh_rollups", "quorum_rollups")
                             for k in ("series", "large")}
        for name, definition in defs.items():
            assert "(bucket_s = 300)" in definition, (name, definition)
            assert f"{MINUTE_INDEX_SKETCH_MAX})" in definition, (name, definition)
        sql = packed_rollups_sql(KIND_SPECS["mesh"], "rtt_us",
                                 ["src_agent_id = ANY(:srcs)", "dst_agent_id = ANY(:dsts)"],
                                 300)
        sql = sql.replace(":org", "CAST(:org AS uuid)")
        # Whether the index can serve the query, not what a near-empty table costs.
        c.execute(text("SET LOCAL enable_seqscan = off"))
        c.execute(text("SET LOCAL enable_bitmapscan = off"))
        plan = "\n".join(c.execute(text("EXPLAIN " + sql), {
            "org": str(uuid.uuid4()), "s": NOW - timedelta(days=7), "e": NOW,
            "srcs": [uuid.uuid4()], "dsts": [uuid.uuid4()]}).scalars())
    assert "Index Only Scan using ix_mesh_rollups_5m_series" in plan, plan
    assert "ix_mesh_rollups_5m_large" in plan, plan


def test_the_database_accepts_five_minute_rows_and_no_other_new_level(db: Engine) -> None:
    org = uuid.uuid4()
    with db.connect() as c:
        defs = c.execute(text(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conname LIKE '%_rollups_bucket_s_check'")).all()
    assert {t for t, _ in defs} == {"mesh_rollups", "quorum_rollups", "storage_rollups",
                                   "throughput_rollups"}
    for _, definition in defs:
        for level in ("60", "300", "3600", "86400"):
            assert level in definition
    with db.connect() as c, pytest.raises(IntegrityError,
                                          match="throughput_rollups_bucket_s_check"):
        c.execute(text(
            "INSERT INTO throughput_rollups (org_id, bucket_s, bucket_start, src_agent_id, "
            "dst_agent_id, proto, direction, sample_count, failure_count, bytes_per_s_count, "
            "bytes_per_s_sum, bytes_per_s_sum_sq, bytes_per_s_sketch) VALUES (:o, 600, now(), "
            ":o, :o, 'tcp', 'forward', 1, 0, 1, 1, 1, '\\x'::bytea)"), {"o": org})


# --- the raw tail of a rollup answer ---------------------------------------------------

def _tail(span: timedelta, rolled_until: datetime | None, resolution: str = "1m"
          ) -> tuple[datetime, datetime] | None:
    from stormwatch.services.analytics.source import Source, raw_tail

    f = Filters(start=NOW - span, end=NOW)
    return raw_tail(Source(resolution, f.start, f.end), f, rolled_until)  # type: ignore[arg-type]


def test_the_minutes_after_the_last_rolled_one_come_raw() -> None:
    rolled = NOW - timedelta(minutes=2, seconds=56)
    assert _tail(timedelta(hours=1), rolled) == (rolled, NOW)


def test_before_any_rollup_the_newest_quarter_hour_of_a_range_comes_raw() -> None:
    assert _tail(timedelta(hours=1), None) == (NOW - timedelta(minutes=15), NOW)
    # A short range is raw from its start.
    assert _tail(timedelta(minutes=20), None, "1m") == (NOW - timedelta(minutes=15), NOW)


def test_a_rollup_far_behind_leaves_a_gap_rather_than_reading_hours_raw() -> None:
    assert _tail(timedelta(days=1), NOW - timedelta(hours=5)) == (
        NOW - timedelta(minutes=15), NOW)


def test_rollups_covering_the_range_or_a_raw_answer_need_no_tail() -> None:
    assert _tail(timedelta(hours=1), NOW) is None
    assert _tail(timedelta(hours=1), NOW + timedelta(minutes=1)) is None
    assert _tail(timedelta(minutes=10), None, "raw") is None


def test_the_tail_never_starts_before_the_range() -> None:
    assert _tail(timedelta(minutes=5), NOW - timedelta(hours=2)) == (
        NOW - timedelta(minutes=5), NOW)
