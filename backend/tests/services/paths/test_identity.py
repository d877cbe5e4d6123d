"""Path identity: where two traces of a pair part, on the shapes that could fool it (ECMP
siblings, silent hops, traces that stop short) and on random paths (Hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stormwatch.services.paths.identity import (
    Hop,
    Path,
    differing_hops,
    first_difference,
    merge,
)


def hop(ttl: int, *addrs: str, med_us: int = 1000, reached: bool = False) -> Hop:
    if not addrs:
        return Hop(ttl=ttl, sent=3, lost=3)
    return Hop(ttl=ttl, addrs=frozenset(addrs), sent=3, lost=0, rtt_min_us=med_us,
               rtt_med_us=med_us, rtt_max_us=med_us, reached=reached)


def path(*hops: tuple[str, ...] | str, reached: bool = True, step_us: int = 1000) -> Path:
    out = []
    for i, h in enumerate(hops, start=1):
        addrs = (h,) if isinstance(h, str) else h
        if addrs == ("*",):
            addrs = ()
        out.append(hop(i, *addrs, med_us=i * step_us, reached=reached and i == len(hops)))
    return Path(tuple(out), reached)


def test_the_same_hops_are_the_same_path() -> None:
    assert first_difference(path("a", "b", "d"), path("a", "b", "d")) is None


def test_ecmp_siblings_at_one_ttl_are_one_hop() -> None:
    old = path("a", ("b1", "b2"), "d")
    assert first_difference(old, path("a", "b2", "d")) is None
    assert first_difference(old, path("a", ("b2", "b3"), "d")) is None


def test_a_lone_differing_hop_between_shared_ones_is_a_diamond_not_a_change() -> None:
    assert first_difference(path("a", "b1", "c", "d"), path("a", "b2", "c", "d")) is None
    d = first_difference(path("a", "b1", "c", "d"), path("a", "x", "y", "d"))
    assert d is not None and d.ttl == 2


def test_a_silent_hop_matches_any_router() -> None:
    assert first_difference(path("a", "*", "d"), path("a", "b", "d")) is None
    assert first_difference(path("a", "b", "d"), path("a", "*", "d")) is None


def test_a_new_router_is_the_first_difference_with_the_rtt_it_added() -> None:
    old = path("a", "b", "c", "d")
    new = Path((hop(1, "a", med_us=1000), hop(2, "b", med_us=2000), hop(3, "x", med_us=9000),
                hop(4, "y", med_us=10_000), hop(5, "d", med_us=11_000, reached=True)), True)
    d = first_difference(old, new)
    assert d is not None and d.ttl == 3 and d.added_rtt_us == 6000
    assert differing_hops(old, new) == [3, 4, 5]


def test_a_longer_path_to_the_same_destination_differs_where_the_shorter_ended() -> None:
    d = first_difference(path("a", "b", "d"), path("a", "b", "*", "d"))
    # TTL 3: the old path's destination against a silent hop is unknown; TTL 4 exists only in
    # the new one, and both reached the destination.
    assert d is not None and d.ttl == 4


def test_a_trace_that_stopped_short_says_nothing_past_its_end() -> None:
    assert first_difference(path("a", "b", "c", "d"), path("a", "b", reached=False)) is None
    assert first_difference(path("a", "b", reached=False), path("a", "b", "c", "d")) is None


def test_merging_joins_siblings_and_fills_silent_hops() -> None:
    merged = merge(path("a", "*", ("c1",), "d"), path("a", "b", ("c2",), "d"))
    assert [sorted(h.addrs) for h in merged.hops] == [["a"], ["b"], ["c1", "c2"], ["d"]]
    assert merged.reached and merged.hops[-1].reached


# Random paths: routers named by position and variant, some hops silent.
addr = st.sampled_from(["r1", "r2", "r3", "r4"])
hop_addrs = st.one_of(st.just(()), st.frozensets(addr, min_size=1, max_size=3).map(tuple))
# A trace that reached the destination heard it answer at its last hop.
random_path = st.builds(
    lambda hs, reached: path(*[h if h else ("*",) for h in hs], reached=reached and bool(hs[-1])),
    st.lists(hop_addrs, min_size=1, max_size=8), st.booleans())


@given(random_path)
def test_a_path_never_differs_from_itself_or_from_its_merge_with_itself(p: Path) -> None:
    assert first_difference(p, p) is None
    assert first_difference(p, merge(p, p)) is None


@given(random_path, random_path)
def test_difference_is_symmetric_in_where_it_is_found(a: Path, b: Path) -> None:
    da, db = first_difference(a, b), first_difference(b, a)
    assert (da is None) == (db is None)
    if da and db:
        assert da.ttl == db.ttl
        if da.added_rtt_us is not None:
            assert da.added_rtt_us == -db.added_rtt_us  # type: ignore[operator]


@given(random_path, random_path)
def test_a_trace_matching_the_current_path_still_matches_it_after_the_merge(
        a: Path, b: Path) -> None:
    if first_difference(a, b) is None:
        m = merge(a, b)
        assert first_difference(m, b) is None
        # Nothing is forgotten: every address either trace saw at a TTL is in the merge.
        for h in (*a.hops, *b.hops):
            at = m.at(h.ttl)
            assert at is None or h.addrs <= at.addrs or h.reached or at.reached


@given(random_path, random_path)
def test_the_first_difference_is_the_first_of_the_differing_hops(a: Path, b: Path) -> None:
    d = first_difference(a, b)
    diffs = differing_hops(a, b)
    if d is not None:
        assert diffs and diffs[0] <= d.ttl
