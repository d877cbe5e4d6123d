"""Validation and bulk storage of columnar sample batches (docs/api.md, "Ingest").

Validation is vectorised with numpy so a 20k-sample batch costs a few milliseconds; rows
then go through binary COPY in the caller's transaction, so a batch is stored whole or not
at all.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson

from stormwatch.models import samples as models_samples
from stormwatch.models import throughput as models_throughput

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

STORAGE_OPS = set(models_samples.STORAGE_OPS)
STORAGE_VARIANTS = set(models_samples.STORAGE_VARIANTS)
STORAGE_CONTENT = {"binary", "text"}
ERROR_CLASSES = {"timeout", "auth", "not_found", "throttled", "server_error", "network"}
PROTOS = set(models_throughput.PROTOS)
DIRECTIONS = {"send", "receive"}
SECTIONS = ("mesh", "quorum", "storage", "throughput")
# Every column a section may hold (docs/api.md); anything else is refused, never ignored.
COLUMNS = {
    "mesh": frozenset({"peers", "time_us", "peer_idx", "round", "payload_bytes", "rtt_us",
                       "status"}),
    "quorum": frozenset({"groups", "time_us", "group_idx", "round", "k", "n", "latency_us",
                         "status"}),
    "storage": frozenset({"targets", "time_us", "target_idx", "op", "variant", "content",
                          "size_bytes", "stored_bytes", "copies", "concurrency", "attempt",
                          "latency_us", "ttfb_us", "rtt_us", "bytes_per_s", "status",
                          "error_class"}),
    "throughput": frozenset({"peers", "time_us", "peer_idx", "proto", "experiment_id",
                             "direction", "bytes_per_s", "loss_ratio", "jitter_us"}),
}
TOP_LEVEL = frozenset({"batch_id", "agent_id", *SECTIONS})
# C0 and C1 controls, DEL and lone UTF-16 surrogates: PostgreSQL text refuses NUL and
# surrogates, and none of them belongs in a name shown in the UI.
BAD_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
DOUBLE_MAX = 1.7976931348623157e308
_INT_TYPES: frozenset[type] = frozenset({int})
_NUMBER_TYPES: frozenset[type] = frozenset({int, float})
_NONE = type(None)
# Columns are validated as float64: integers beyond 2**53 would silently lose precision.
MAX_EXACT_INT = 2**53 - 1


class BatchError(Exception):
    """An invalid batch; `loc` names the failing field like FastAPI's 422 detail does."""

    def __init__(self, loc: Sequence[str | int], msg: str, kind: str = "value_error") -> None:
        super().__init__(msg)
        self.loc = ["body", *loc]
        self.msg = msg
        self.kind = kind

    def detail(self) -> list[dict[str, Any]]:
        return [{"loc": self.loc, "msg": self.msg, "type": self.kind}]


class NonFinite:
    """A NaN or Infinity token, kept as itself so validation names the field that held it."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return self.token


def decode_json(body: bytes) -> Any:
    """Parses a batch body; raises BatchError on JSON that cannot be parsed at all, on a key
    given twice in one object, and on a non-finite number or a string holding a lone
    surrogate anywhere, at its path."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        error: Exception = exc
    else:
        if _may_repeat_a_key(body, decoded):
            _refuse_repeated_keys(body)
        return decoded
    # orjson stops at NaN, Infinity, numbers overflowing a double and lone surrogates; the
    # stdlib parser takes them, so only refused bodies pay for a second, slower parse, which
    # finds where the offending value sits.
    try:
        decoded = json.loads(body, parse_constant=NonFinite)
    except (ValueError, RecursionError) as exc:
        if b"NaN" in body or b"Infinity" in body:
            error = exc  # orjson stopped at the constant; the stdlib points at the real fault
        raise BatchError([], f"not valid JSON: {error}", "json_invalid") from None
    _refuse_non_finite(decoded, [])
    raise BatchError([], f"not valid JSON: {error}", "json_invalid")


def _may_repeat_a_key(body: bytes, decoded: Any) -> bool:
    """Whether some object of the body may hold a key twice, which orjson (keeping the last)
    does not say.

    Every member of an object has one colon outside strings, and orjson writes colons in
    strings as they are: re-encoding what was kept gives exactly the body's colons when no
    key was dropped, and fewer when one was (with its value). A colon escaped as \\u003a is
    one in the re-encoding but not in the body and could hide a drop, so such rare bodies
    are suspect too. The encode and the byte scans run at C speed (about 2 ms for a
    20k-sample, 750 kB batch here, half of orjson's own parse of it); only a suspect body
    pays for the stdlib parse that names the key."""
    if body.count(b":") != orjson.dumps(decoded).count(b":"):
        return True
    return b"\\u003a" in body or b"\\u003A" in body


def _refuse_repeated_keys(body: bytes) -> None:
    """Raises a BatchError at the first key given twice in one object, with its path."""

    def pairs(items: list[tuple[str, Any]]) -> _Object:
        obj = _Object(items)
        if len(obj) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    obj.repeated = key
                    break
                seen.add(key)
        return obj

    try:
        decoded = json.loads(body, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return  # the body parsed once already; a parser disagreement is not this check's
    loc = _repeat_path(decoded, [])
    if loc is not None:
        raise BatchError(loc, f"key {loc[-1]!r} is given twice in one object; each key must "
                         "appear once", "duplicate_key")


class _Object(dict[str, Any]):
    repeated: str | None = None


def _repeat_path(value: Any, loc: list[str | int]) -> list[str | int] | None:
    if isinstance(value, _Object):
        if value.repeated is not None:
            return [*loc, value.repeated]
        for k, v in value.items():
            found = _repeat_path(v, [*loc, k])
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, dict | list):
                found = _repeat_path(v, [*loc, i])
                if found is not None:
                    return found
    return None


def _refuse_non_finite(value: Any, loc: list[str | int]) -> None:
    """Raises at the first NaN/Infinity, number beyond a double or lone surrogate in value."""
    if isinstance(value, NonFinite):
        raise BatchError(loc, f"must be a finite number, not {value.token}", "finite_number")
    if (type(value) is float and not np.isfinite(value)) or (
            type(value) is int and abs(value) > DOUBLE_MAX):
        raise BatchError(loc, "must be a finite number, not one overflowing a double",
                         "finite_number")
    if isinstance(value, str):
        _refuse_surrogates(value, loc)
    elif isinstance(value, dict):
        for k, v in value.items():
            _refuse_surrogates(k, [*loc, k])
            _refuse_non_finite(v, [*loc, k])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _refuse_non_finite(v, [*loc, i])


def _refuse_surrogates(text: str, loc: list[str | int]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BatchError(loc, "must be valid Unicode text, not a lone UTF-16 surrogate",
                         "string_unicode") from None


@dataclass
class Limits:
    now_us: int
    min_time_us: int
    max_time_us: int
    max_rtt_us: int


def make_limits(now: datetime, retention_days: int, max_future_s: int, max_rtt_us: int) -> Limits:
    now_us = int((now - EPOCH) / timedelta(microseconds=1))
    return Limits(
        now_us=now_us,
        min_time_us=now_us - retention_days * 86_400_000_000,
        max_time_us=now_us + max_future_s * 1_000_000,
        max_rtt_us=max_rtt_us,
    )


@dataclass
class ParsedBatch:
    batch_id: uuid.UUID
    agent_id: uuid.UUID
    # Column arrays per section, validated; ids still as strings until resolved.
    mesh: dict[str, Any] | None = None
    quorum: dict[str, Any] | None = None
    storage: dict[str, Any] | None = None
    throughput: dict[str, Any] | None = None
    referenced_agents: set[uuid.UUID] = field(default_factory=set)
    referenced_targets: set[uuid.UUID] = field(default_factory=set)

    def count(self, section: str) -> int:
        data = getattr(self, section)
        return 0 if data is None else int(data["n"])

    @property
    def days(self) -> set[int]:
        """UTC day numbers touched, so the caller can make sure partitions exist."""
        out: set[int] = set()
        for section in SECTIONS:
            data = getattr(self, section)
            if data is not None and data["n"]:
                t = data["time_us"]
                out.update(np.unique(t // 86_400_000_000).tolist())
        return out


def _uuid(value: Any, loc: Sequence[str | int]) -> uuid.UUID:
    if not isinstance(value, str):
        raise BatchError(loc, "must be a UUID string", "uuid_type")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise BatchError(loc, "must be a UUID string", "uuid_parsing") from None


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _json_type(v: Any) -> str:
    return {bool: "a boolean", str: "a string", list: "an array", dict: "an object",
            float: "a number"}.get(type(v), type(v).__name__)


class _Section:
    def __init__(self, name: str, body: Any) -> None:
        if not isinstance(body, dict):
            raise BatchError([name], "must be an object of equal-length arrays", "dict_type")
        unknown = set(body) - COLUMNS[name]
        if unknown:
            raise BatchError([name, sorted(unknown)[0]], "unknown field", "extra_forbidden")
        self.name = name
        self.body = body
        self.n: int | None = None

    def _list(self, col: str, required: bool = True) -> list[Any] | None:
        value = self.body.get(col)
        if value is None:
            if required:
                raise BatchError([self.name, col], "field required", "missing")
            return None
        if not isinstance(value, list):
            raise BatchError([self.name, col], "must be an array", "list_type")
        if self.n is None:
            self.n = len(value)
        elif len(value) != self.n:
            raise BatchError(
                [self.name, col],
                f"has {len(value)} elements but the section has {self.n} samples",
                "length_mismatch",
            )
        return value

    def numbers(
        self,
        col: str,
        *,
        integer: bool = True,
        nullable: bool = False,
        lo: float | None = None,
        hi: float | None = None,
        required: bool = True,
    ) -> np.ndarray | None:
        values = self._list(col, required=required)
        if values is None:
            return None
        # One JSON type per column: numpy would turn "300", true or 1.5 into numbers, so the
        # element types are checked first (a C-level pass, cheaper than the conversion).
        allowed = _INT_TYPES if integer else _NUMBER_TYPES
        types = set(map(type, values))
        if not types <= allowed and not (nullable and types <= allowed | {_NONE}):
            self._bad_type(col, values, allowed, nullable, integer)
        try:
            arr = np.asarray(values, dtype=np.float64)
        except OverflowError:
            for i, v in enumerate(values):
                if v is not None and abs(v) > DOUBLE_MAX:
                    raise BatchError([self.name, col, i], "must be a finite number, not one "
                                     "overflowing a double", "finite_number") from None
            raise
        if arr.ndim != 1:
            raise BatchError([self.name, col], "must be a flat array of numbers")
        nulls = np.isnan(arr)  # JSON has no NaN, so NaN here means null
        if not nullable and nulls.any():
            raise BatchError([self.name, col, _first_bad(nulls)], "must not be null")
        valid = ~nulls
        if np.isinf(arr).any():
            raise BatchError([self.name, col, _first_bad(np.isinf(arr))],
                             "must be a finite number, not one overflowing a double",
                             "finite_number")
        if integer:
            frac = valid & (arr != np.floor(np.where(valid, arr, 0)))
            if frac.any():
                raise BatchError([self.name, col, _first_bad(frac)], "must be an integer")
        if lo is not None:
            bad = valid & (arr < lo)
            if bad.any():
                raise BatchError([self.name, col, _first_bad(bad)], f"must be >= {lo:g}")
        if hi is not None:
            bad = valid & (arr > hi)
            if bad.any():
                raise BatchError([self.name, col, _first_bad(bad)], f"must be <= {hi:g}")
        return arr

    def _bad_type(self, col: str, values: list[Any], allowed: frozenset[type], nullable: bool,
                  integer: bool) -> None:
        """Raises at the first element whose JSON type the column does not take."""
        for i, v in enumerate(values):
            if type(v) in allowed:
                continue
            loc: list[str | int] = [self.name, col, i]
            if v is None:
                if nullable:
                    continue
                raise BatchError(loc, "must not be null", "missing")
            if isinstance(v, NonFinite):
                raise BatchError(loc, f"must be a finite number, not {v.token}", "finite_number")
            if integer and type(v) is float:
                raise BatchError(loc, "must be an integer, not a number with a fraction or "
                                 "an exponent", "int_type")
            what = "an integer" if integer else "a number"
            raise BatchError(loc, f"must be {what}, not {_json_type(v)}",
                             "int_type" if integer else "number_type")
        raise AssertionError("no element of a bad type")  # pragma: no cover

    def strings(self, col: str, allowed: set[str] | None = None, nullable: bool = False,
                max_len: int = 100) -> list[Any]:
        values = self._list(col)
        assert values is not None
        for i, v in enumerate(values):
            if v is None:
                if nullable:
                    continue
                raise BatchError([self.name, col, i], "must not be null")
            if not isinstance(v, str):
                raise BatchError([self.name, col, i], "must be a string", "string_type")
            if allowed is not None and v not in allowed:
                raise BatchError([self.name, col, i],
                                 f"must be one of {sorted(allowed)}", "enum")
            if len(v) > max_len:
                raise BatchError([self.name, col, i], f"longer than {max_len} characters")
        return values

    def dictionary(self, col: str, max_len: int = 10_000) -> list[Any]:
        value = self.body.get(col)
        if value is None:
            raise BatchError([self.name, col], "field required", "missing")
        if not isinstance(value, list) or len(value) > max_len:
            raise BatchError([self.name, col], f"must be an array of at most {max_len} entries")
        return value

    def index(self, col: str, size: int, dict_name: str) -> np.ndarray:
        arr = self.numbers(col, lo=0)
        assert arr is not None
        bad = arr >= size
        if bad.any():
            raise BatchError([self.name, col, _first_bad(bad)],
                             f"points past the end of {dict_name} ({size} entries)")
        return arr.astype(np.int64)

    def times(self, limits: Limits) -> np.ndarray:
        arr = self.numbers("time_us", lo=0)
        assert arr is not None
        t = arr.astype(np.int64)
        old = t < limits.min_time_us
        if old.any():
            raise BatchError([self.name, "time_us", _first_bad(old)],
                             "is older than the raw retention window")
        future = t > limits.max_time_us
        if future.any():
            raise BatchError([self.name, "time_us", _first_bad(future)],
                             "is too far in the future (clock skew over the allowed limit)")
        return t

    def statuses(self, codes: dict[int, str] = models_samples.SAMPLE_STATUSES) -> np.ndarray:
        arr = self.numbers("status", lo=0, hi=max(codes))
        assert arr is not None
        return arr.astype(np.int16)

    def latency(self, col: str, status: np.ndarray, limits: Limits) -> np.ndarray:
        """A latency column: present for status 0, null otherwise."""
        arr = self.numbers(col, nullable=True, lo=0, hi=limits.max_rtt_us)
        assert arr is not None
        nulls = np.isnan(arr)
        missing = (status == 0) & nulls
        if missing.any():
            raise BatchError([self.name, col, _first_bad(missing)],
                             "must be a number when status is 0 (ok)")
        extra = (status != 0) & ~nulls
        if extra.any():
            raise BatchError([self.name, col, _first_bad(extra)],
                             "must be null when status is not 0 (ok)")
        return arr


def _refuse_repeats(section: str, key: np.ndarray, rnd: np.ndarray, key_col: str) -> None:
    """A (peer or group, round) pair may appear once in a batch: the agent records one sample
    per round and destination, so a repeat is a fault, and keeping either copy would be a
    guess at which one is true."""
    if len(rnd) < 2:
        return
    order = np.lexsort((key, rnd))
    same = (np.diff(rnd[order]) == 0) & (np.diff(key[order]) == 0)
    if same.any():
        # The later of each repeated pair in the sender's order; report the first of those.
        later = np.maximum(order[:-1][same], order[1:][same])
        i = int(later.min())
        raise BatchError([section, "round", i],
                         f"repeats the sample of {key_col} {int(key[i])} in round "
                         f"{int(rnd[i])} sent earlier in this batch", "duplicate_sample")


def _ids(values: list[Any], loc: list[str | int]) -> list[uuid.UUID]:
    return [_uuid(v, [*loc, i]) for i, v in enumerate(values)]


def parse_batch(body: Any, limits: Limits) -> ParsedBatch:
    """Validates a decoded JSON batch; raises BatchError naming the first failing field."""
    if not isinstance(body, dict):
        raise BatchError([], "the batch must be a JSON object", "dict_type")
    unknown = set(body) - TOP_LEVEL
    if unknown:
        raise BatchError([sorted(unknown)[0]], "unknown field", "extra_forbidden")
    for key in ("batch_id", "agent_id"):
        if key not in body:
            raise BatchError([key], "field required", "missing")
    batch = ParsedBatch(batch_id=_uuid(body["batch_id"], ["batch_id"]),
                        agent_id=_uuid(body["agent_id"], ["agent_id"]))

    if body.get("mesh") is not None:
        s = _Section("mesh", body["mesh"])
        peers = _ids(s.dictionary("peers"), ["mesh", "peers"])
        t = s.times(limits)
        idx = s.index("peer_idx", len(peers), "mesh.peers")
        rnd = s.numbers("round", lo=0, hi=MAX_EXACT_INT)
        assert rnd is not None
        _refuse_repeats("mesh", idx, rnd, "peer_idx")
        payload = s.numbers("payload_bytes", lo=0, hi=64 * 1024 * 1024)
        status = s.statuses(models_samples.MESH_STATUSES)
        rtt = s.latency("rtt_us", status, limits)
        batch.mesh = {"n": s.n or 0, "time_us": t, "peers": peers, "peer_idx": idx,
                      "round": rnd, "payload_bytes": payload, "rtt_us": rtt, "status": status}
        batch.referenced_agents.update(peers)

    if body.get("quorum") is not None:
        s = _Section("quorum", body["quorum"])
        groups = s.dictionary("groups", max_len=1000)
        for i, g in enumerate(groups):
            if not isinstance(g, str) or not 0 < len(g) <= 100:
                raise BatchError(["quorum", "groups", i], "must be a name of 1-100 characters")
            bad_char = BAD_TEXT.search(g)
            if bad_char:
                raise BatchError(["quorum", "groups", i],
                                 f"must not hold control characters or lone surrogates "
                                 f"(U+{ord(bad_char.group()):04X} at {bad_char.start()})",
                                 "string_pattern_mismatch")
        t = s.times(limits)
        gidx = s.index("group_idx", len(groups), "quorum.groups")
        rnd = s.numbers("round", lo=0, hi=MAX_EXACT_INT)
        assert rnd is not None
        _refuse_repeats("quorum", gidx, rnd, "group_idx")
        k = s.numbers("k", lo=1, hi=10_000)
        n = s.numbers("n", lo=1, hi=10_000)
        assert k is not None and n is not None
        bad = k > n
        if bad.any():
            raise BatchError(["quorum", "k", _first_bad(bad)], "must not exceed n")
        status = s.statuses()
        lat = s.latency("latency_us", status, limits)
        batch.quorum = {"n": s.n or 0, "time_us": t, "groups": groups, "group_idx": gidx,
                        "round": rnd, "k": k, "n_members": n, "latency_us": lat,
                        "status": status}

    if body.get("storage") is not None:
        s = _Section("storage", body["storage"])
        targets = _ids(s.dictionary("targets", max_len=1000), ["storage", "targets"])
        t = s.times(limits)
        tidx = s.index("target_idx", len(targets), "storage.targets")
        op = s.strings("op", STORAGE_OPS)
        variant = s.strings("variant", STORAGE_VARIANTS)
        content = s.strings("content", STORAGE_CONTENT)
        size = s.numbers("size_bytes", lo=0, hi=10 * 1024**3)
        stored = s.numbers("stored_bytes", nullable=True, lo=0, hi=10 * 1024**3)
        copies = s.numbers("copies", lo=1, hi=1000)
        conc = s.numbers("concurrency", lo=1, hi=10_000)
        attempt = s.numbers("attempt", lo=1, hi=10)
        status = s.statuses()
        lat = s.latency("latency_us", status, limits)
        ttfb = s.numbers("ttfb_us", nullable=True, lo=0, hi=limits.max_rtt_us)
        endpoint_rtt = s.numbers("rtt_us", nullable=True, lo=0, hi=limits.max_rtt_us)
        bps = s.numbers("bytes_per_s", integer=False, nullable=True, lo=0, hi=1e13)
        err = s.strings("error_class", ERROR_CLASSES, nullable=True)
        for i, (st, e) in enumerate(zip(status.tolist(), err, strict=True)):
            if (st == 0) != (e is None):
                raise BatchError(["storage", "error_class", i],
                                 "must be null exactly when status is 0 (ok)")
        batch.storage = {"n": s.n or 0, "time_us": t, "targets": targets, "target_idx": tidx,
                         "op": op, "variant": variant, "content": content, "size_bytes": size,
                         "stored_bytes": stored, "copies": copies, "concurrency": conc,
                         "attempt": attempt, "latency_us": lat, "ttfb_us": ttfb,
                         "rtt_us": endpoint_rtt, "bytes_per_s": bps, "status": status,
                         "error_class": err}
        batch.referenced_targets.update(targets)

    if body.get("throughput") is not None:
        s = _Section("throughput", body["throughput"])
        peers = _ids(s.dictionary("peers"), ["throughput", "peers"])
        t = s.times(limits)
        idx = s.index("peer_idx", len(peers), "throughput.peers")
        proto = s.strings("proto", PROTOS)
        exp = s.strings("experiment_id")
        exp_ids = _ids(exp, ["throughput", "experiment_id"])
        direction = s.strings("direction", DIRECTIONS)
        bps = s.numbers("bytes_per_s", integer=False, lo=0, hi=1e13)
        loss = s.numbers("loss_ratio", integer=False, nullable=True, lo=0, hi=1)
        jitter = s.numbers("jitter_us", nullable=True, lo=0, hi=limits.max_rtt_us)
        batch.throughput = {"n": s.n or 0, "time_us": t, "peers": peers, "peer_idx": idx,
                            "proto": proto, "experiment_id": exp_ids, "direction": direction,
                            "bytes_per_s": bps, "loss_ratio": loss, "jitter_us": jitter}
        batch.referenced_agents.update(peers)
    return batch
