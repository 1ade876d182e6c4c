"""The C parsers of agent.system._cgparse against the strict parsers of agent.system.cgroupparse: on any bytes
(odd blanks, signs, underscores, long numbers, duplicate keys, non-ASCII, bad lines) the C answer is None
or exactly the strict one, and on the kernel's own layouts it answers (so the accelerator is really in
use). Also the argument checks and the metric cache's window sum."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.system import cgroupparse
from agent.system.accel import ACCELERATED
from agent.system.cgroupparse import NUMA_STAT_PAGE

if not ACCELERATED and os.environ.get("KOORD_PURE_PYTHON", "") in ("", "0"):
    pytest.fail(
        "agent.system._cgparse is not built: `pip install -e .` compiles it (needs gcc and the Python "
        "headers); set KOORD_PURE_PYTHON=1 to run on the strict parsers alone",
        pytrace=False,
    )
pytestmark = pytest.mark.skipif(not ACCELERATED, reason="KOORD_PURE_PYTHON=1: C parsers off")

from agent.system import _cgparse  # noqa: E402

KEYS = ("nr_periods", "nr_throttled", "throttled_time", "total_rss")
TOKENS = [*KEYS, "pgfault", "N0", "anon", "file", "total"]
NUMBERS = ["0", "7", "-3", "+4", "1_000", "0012", "x1", "", "-", "1" * 18, "1" * 19, "9" * 25, "٣"]
BLANKS = [" ", "  ", "\t", " \t"]
ODD = ["\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x00", "é", "\x7f", "\x85"]


def _strict(parse: Any, data: bytes) -> Any:
    """The strict parser's value, or None where it raises (invalid UTF-8 included)."""
    try:
        return parse(data.decode(), "f")
    except ValueError:
        return None


def _strict_pick(data: bytes, keys: tuple[str, ...]) -> list[int] | None:
    picked: list[int] | None = _strict(lambda text, name: cgroupparse._pick(text, name, keys), data)
    return picked


@st.composite
def kv_bytes(draw: st.DrawFn) -> bytes:
    """Mostly ``key value`` lines, with every kind of irregularity mixed in."""
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        key = draw(st.sampled_from(TOKENS))
        parts = [key, draw(st.sampled_from(BLANKS)), draw(st.sampled_from(NUMBERS))]
        if draw(st.integers(0, 5)) == 0:
            parts.insert(draw(st.integers(0, 3)), draw(st.sampled_from(ODD + BLANKS + ["extra", "="])))
        lines.append("".join(parts))
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n", " "]))
    return text.encode()


@settings(max_examples=500, deadline=None)
@given(
    datas=st.lists(st.one_of(st.none(), kv_bytes()), max_size=6),
    keys=st.lists(st.sampled_from(KEYS), min_size=2, max_size=4, unique=True),
    total=st.booleans(),
    scale=st.sampled_from([1, 1000]),
)
def test_kv_batch_is_none_or_the_strict_answer(
    datas: list[bytes | None], keys: list[str], total: bool, scale: int
) -> None:
    got, misses = _cgparse.kv_batch(datas, tuple(k.encode() for k in keys), 0, 2, total, scale)
    for data, value in zip(datas, got, strict=True):
        if data is None or value is None:
            continue
        strict = _strict_pick(data, tuple(keys))
        assert strict is not None and min(strict[:2]) >= 0
        assert value == (sum(strict[:2]) * scale if total else tuple(strict[:2]))
    assert misses == sum(1 for d, g in zip(datas, got, strict=True) if d is not None and g is None)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 10**18 - 1), min_size=4, max_size=4),
    order=st.permutations(KEYS),
    extra=st.lists(
        st.tuples(st.sampled_from(["pgfault", "hierarchical_memory_limit"]), st.integers(0, 2**64))
    ),
)
def test_kv_batch_answers_the_kernel_layout(
    values: list[int], order: list[str], extra: list[tuple[str, int]]
) -> None:
    lines = [f"{k} {v}" for k, v in zip(order, values, strict=True)] + [f"{k} {v}" for k, v in extra]
    data = ("\n".join(lines) + "\n").encode()  # (a value the caller does not need may be of any length)
    (got,), misses = _cgparse.kv_batch([data], tuple(k.encode() for k in KEYS), 0, 4, False, 1)
    assert misses == 0 and got == tuple(values[order.index(k)] for k in KEYS)
    assert list(got) == _strict_pick(data, KEYS)
    (total,), _ = _cgparse.kv_batch([data], tuple(k.encode() for k in KEYS), 1, 3, True, 7)
    assert total == (7 * sum(got[1:3]) if 7 * sum(got[1:3]) < 2**63 else None)  # (int64 overflow: no answer)


@st.composite
def numa_bytes(draw: st.DrawFn) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        head = draw(
            st.sampled_from(["total=5", "anon", "file", "shmem", "anon=3", "file=1", "N0=1", " total=1"])
        )
        fields = [head]
        for _ in range(draw(st.integers(0, 4))):
            node = draw(st.sampled_from(["0", "1", "3", "-1", "x", "", "300", "+1"]))
            key = draw(st.sampled_from(["N", "N", "M", ""]))
            fields.append(f"{key}{node}={draw(st.sampled_from(NUMBERS))}")
            if draw(st.integers(0, 6)) == 0:
                fields.append(draw(st.sampled_from([*ODD, "noeq"])))
        lines.append(draw(st.sampled_from(BLANKS)).join(fields))
    return ("\n".join(lines) + draw(st.sampled_from(["", "\n"]))).encode()


@settings(max_examples=500, deadline=None)
@given(data=numa_bytes())
def test_numa_is_none_or_the_strict_answer(data: bytes) -> None:
    v1 = _cgparse.numa_v1(data)
    assert v1 is None or v1 == _strict(cgroupparse.numa_stat_v1, data)
    v2 = _cgparse.numa_v2(data, NUMA_STAT_PAGE)
    assert v2 is None or v2 == _strict(cgroupparse.numa_stat_v2, data)


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(st.integers(0, 7), unique=True, min_size=1, max_size=4), data=st.data())
def test_numa_answers_the_kernel_layout(nodes: list[int], data: st.DataObject) -> None:
    def fields() -> str:
        return " ".join(f"N{n}={data.draw(st.integers(0, 2**40))}" for n in nodes)

    v1 = f"total=9 {fields()}\nfile=1 {fields()}\n".encode()
    v2 = f"anon {fields()}\nfile {fields()}\nshmem {fields()}\n".encode()
    assert _cgparse.numa_v1(v1) == _strict(cgroupparse.numa_stat_v1, v1) is not None
    assert _cgparse.numa_v2(v2, NUMA_STAT_PAGE) == _strict(cgroupparse.numa_stat_v2, v2) is not None


@settings(max_examples=300, deadline=None)
@given(
    datas=st.lists(
        st.one_of(
            st.none(),
            st.builds(
                lambda n, pre, post: f"{pre}{n}{post}".encode(),
                st.sampled_from(NUMBERS),
                *[st.sampled_from(["", " ", "\n", "\t", "\r", "\x0b", " \n "])] * 2,
            ),
        ),
        max_size=6,
    )
)
def test_uint_batch_is_none_or_the_strict_answer(datas: list[bytes | None]) -> None:
    got, misses = _cgparse.uint_batch(datas)
    for data, value in zip(datas, got, strict=True):
        if data is None:
            assert value is None
        elif value is not None:
            assert value == _strict(cgroupparse.int_value, data) and value >= 0
    assert _cgparse.uint_batch([b"12\n", b" 7 ", None, b"-1\n"]) == ([12, 7, None, None], 1)
    assert misses == sum(1 for d, v in zip(datas, got, strict=True) if d is not None and v is None)


def test_bad_arguments_raise() -> None:
    with pytest.raises(TypeError):
        _cgparse.kv_batch([b"a 1\n"], ("a",), 0, 1, False, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _cgparse.kv_batch((b"a 1\n",), (b"a",), 0, 1, False, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kv_batch"):
        _cgparse.kv_batch([b"a 1\n"], (b"a",), 0, 2, False, 1)
    with pytest.raises(ValueError, match="kv_batch"):
        _cgparse.kv_batch([b"a 1\n"], (), 0, 0, False, 1)
    with pytest.raises(TypeError):
        _cgparse.uint_batch((b"1",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="div"):
        _cgparse.numa_v2(b"anon N0=1\nfile N0=1\n", 0)
    odd: list[Any] = [b"", "a 1\n"]  # empty, and not bytes: no answer
    assert _cgparse.kv_batch(odd, (b"a",), 0, 1, False, 1) == ([None, None], 2)


def test_window_sum_checks_its_rows() -> None:
    import numpy as np

    ts = np.array([1, 2, 3, 10], dtype=np.int32)
    vals = np.array([0.5, -0.0, 2.0, 4.0])
    assert _cgparse.window_sum(ts, vals, 4, 0, 2, 3) == (2.0, 2)  # -0.0 then 2.0
    assert _cgparse.window_sum(ts.astype(np.int64), vals, 4, 0, 0, 100) == (6.5, 4)
    assert _cgparse.window_sum(ts, vals, 3, 0, 4, 9) == (0.0, 0)
    for bad in (
        (ts, vals[:3], 3, 0, 0, 1),  # rows of different lengths
        (ts.astype(np.float64), vals, 4, 0, 0, 1),  # float timestamps
        (ts, vals, 5, 0, 0, 1),  # more points than room
        (ts, vals, 4, 4, 0, 1),  # head past the points
    ):
        with pytest.raises(ValueError, match="window_sum"):
            _cgparse.window_sum(*bad)
