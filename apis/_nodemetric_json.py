"""Table-driven JSON (de)serialisation for the NodeMetric dataclasses in apis/nodemetric.py.

A ``Model`` subclass lists its JSON fields in ``_FIELDS`` (Go field order) with the Go ``omitempty``
behaviour of each: ALWAYS (a Go struct, never dropped), OMITEMPTY (dropped when empty or zero) or
OPTIONAL (a Go pointer: dropped when None, None when absent). Decoders take the raw JSON value and
its path and raise NodeMetricError naming both. Also RFC 3339 time and Go duration codecs.
Imports: the standard library and apis.duration. Pure, no I/O.
"""

from __future__ import annotations

import copy
import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self, TypeVar

from apis.duration import Duration, DurationError

JSON = dict[str, Any]
T = TypeVar("T")
E = TypeVar("E", bound=enum.StrEnum)


class NodeMetricError(ValueError):
    """Invalid NodeMetric input; ``path`` is the JSON path (e.g. ``status.podsMetric[1].qos``)."""

    def __init__(self, path: str, reason: str, value: object) -> None:
        super().__init__(f"{path or '<root>'}: {reason} (got {value!r})")
        self.path = path
        self.value = value


INT64_RANGE: Final = (-(1 << 63), (1 << 63) - 1)
INT32_RANGE: Final = (-(1 << 31), (1 << 31) - 1)
_RFC3339: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))", re.ASCII
)


# --- decoding helpers: each takes the raw JSON value and its path --------------------------------
def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def obj(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise NodeMetricError(path, "expected an object", v)
    return v


def string(v: object, path: str) -> str:
    if not isinstance(v, str):
        raise NodeMetricError(path, "expected a string", v)
    return v


def parse_int(v: object, path: str, bounds: tuple[int, int] = INT64_RANGE) -> int:
    """A JSON integer within bounds (Go rejects floats and strings for int fields)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise NodeMetricError(path, "expected an integer", v)
    if not bounds[0] <= v <= bounds[1]:
        raise NodeMetricError(path, f"out of range [{bounds[0]}, {bounds[1]}]", v)
    return v


def enum_decoder(cls: type[E]) -> Callable[[object, str], E]:
    def dec(v: object, path: str) -> E:
        try:
            return cls(string(v, path))
        except ValueError:
            raise NodeMetricError(path, f"must be one of {[m.value for m in cls]}", v) from None

    return dec


def parse_duration(v: object, path: str) -> Duration:
    """A Go duration string (``"5m"``, ``"5m0s"``, ``"1h30m"``)."""
    try:
        return Duration.parse(string(v, path))
    except DurationError as e:
        raise NodeMetricError(path, f"invalid duration: {e}", v) from None


def json_object(v: object, path: str) -> JSON:
    return copy.deepcopy(dict(obj(v, path)))


def list_of(item: Callable[[object, str], T]) -> Callable[[object, str], list[T]]:
    def dec(v: object, path: str) -> list[T]:
        if not isinstance(v, list):
            raise NodeMetricError(path, "expected an array", v)
        return [item(x, f"{path}[{i}]") for i, x in enumerate(v)]

    return dec


def parse_time(v: object, path: str = "updateTime") -> datetime:
    """An RFC 3339 time as an aware UTC datetime (fractions beyond microseconds are truncated)."""
    m = _RFC3339.fullmatch(v) if isinstance(v, str) else None
    if m is None:
        raise NodeMetricError(path, "expected an RFC 3339 time such as 2026-11-22T02:16:47Z", v)
    y, mo, d, h, mi, s = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    try:
        t = datetime(y, mo, d, h, mi, s, micro, tzinfo=UTC)
        if m.group(8):
            offset = timedelta(hours=int(m.group(9)), minutes=int(m.group(10)))
            t = t - offset if m.group(8) == "+" else t + offset
    except (ValueError, OverflowError) as e:
        raise NodeMetricError(path, f"invalid time: {e}", v) from None
    return t


def format_time(t: datetime) -> str:
    """Go's ``metav1.Time`` JSON: UTC, RFC 3339, whole seconds (``2026-11-22T02:16:47Z``)."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"updateTime must be timezone-aware, got naive {t!r}")
    u = t.astimezone(UTC)  # strftime's %Y does not zero-pad years below 1000
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z"


# --- the JSON field table ------------------------------------------------------------------------
ALWAYS, OMITEMPTY, OPTIONAL = "always", "omitempty", "optional"


@dataclass(frozen=True, slots=True)
class Field:
    """One JSON field: ALWAYS written (Go struct), OMITEMPTY (omitted when empty/zero) or OPTIONAL
    (a Go pointer: omitted when None, and None when absent on input)."""

    attr: str
    key: str
    dec: Callable[[Any, str], Any]
    enc: Callable[[Any], Any] = lambda v: v
    mode: str = OMITEMPTY


class Model:
    """to_dict/from_dict driven by the subclass's ``_FIELDS`` table (in Go's field order)."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[Field, ...]]

    if TYPE_CHECKING:

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def to_dict(self) -> JSON:
        out: JSON = {}
        for f in self._FIELDS:
            v = getattr(self, f.attr)
            if (f.mode == OMITEMPTY and not v) or (f.mode == OPTIONAL and v is None):
                continue
            out[f.key] = f.enc(v)
        return out

    @classmethod
    def from_dict(cls, v: object, path: str = "") -> Self:
        d = obj(v, path)
        kwargs: dict[str, Any] = {}
        for f in cls._FIELDS:
            raw = d.get(f.key)
            if raw is not None:
                kwargs[f.attr] = f.dec(raw, join(path, f.key))
            elif f.mode == OPTIONAL:
                kwargs[f.attr] = None
        return cls(**kwargs)


def to_dict_of(v: Model) -> JSON:
    return v.to_dict()


def struct(attr: str, key: str, cls: type[Model], mode: str = ALWAYS) -> Field:
    return Field(attr, key, cls.from_dict, to_dict_of, mode)


def items(attr: str, key: str, cls: type[Model]) -> Field:
    return Field(attr, key, list_of(cls.from_dict), lambda xs: [x.to_dict() for x in xs])


def str_field(attr: str, key: str) -> Field:
    return Field(attr, key, string)


def enum_field(attr: str, key: str, cls: type[enum.StrEnum], mode: str = OMITEMPTY) -> Field:
    return Field(attr, key, enum_decoder(cls), str, mode)


def int_field(attr: str, key: str, bounds: tuple[int, int], mode: str) -> Field:
    return Field(attr, key, lambda v, p: parse_int(v, p, bounds), mode=mode)


def constant(expected: str) -> Callable[[object, str], str]:
    def dec(v: object, path: str) -> str:
        if string(v, path) != expected:
            raise NodeMetricError(path, f"expected {expected!r}", v)
        return expected

    return dec
