"""The bytes fast parsers of agent.system.fastread against the strict converters: equal on random valid
files (any key order, extra keys, several layouts in turn), and the strict converter's exact errors on bad
files; with the C parsers answering first (``accel``) and with the Python ones alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import (
    anon_reader,
    convert_fast,
    fast_parser,
    plain_ascii,
    reader,
    throttle_reader,
)

V1, V2 = CgroupVersion.V1, CgroupVersion.V2

MEM_FIELDS = ("inactive_file", "active_file", "inactive_anon", "active_anon", "unevictable")
MEM_KEYS = {
    V1: ("total_cache", "total_rss", *("total_" + k for k in MEM_FIELDS)),
    V2: ("file", "anon", *MEM_FIELDS),
}
CPU_KEYS = {
    V1: ("nr_periods", "nr_throttled", "throttled_time"),
    V2: ("nr_periods", "nr_throttled", "throttled_usec"),
}
EXTRA = (
    "cache",
    "rss",
    "pgfault",
    "pgmajfault",
    "shmem",
    "kernel",
    "sock",
    "usage_usec",
    "user_usec",
    "nr_bursts",
)

values = st.integers(0, 2**63 - 1)
versions = st.sampled_from([V1, V2])


@st.composite
def kv_files(draw: st.DrawFn, needed: tuple[str, ...]) -> str:
    """``key value`` lines: the needed keys and some extra ones, unique, shuffled."""
    extra = draw(st.lists(st.sampled_from([k for k in EXTRA if k not in needed]), unique=True, max_size=6))
    keys = draw(st.permutations([*needed, *extra]))
    body = "".join(f"{k} {draw(values)}\n" for k in keys)
    return body if draw(st.booleans()) else body.rstrip("\n")


def _write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


@settings(max_examples=150, deadline=None)
@given(version=versions, data=st.data())
def test_memory_stat_fast_equals_strict(version: CgroupVersion, data: st.DataObject) -> None:
    accel = data.draw(st.booleans())
    parse = fast_parser(cg.MEMORY_STAT, version, accel)
    anon = anon_reader(version, accel)
    assert parse is not None
    for _ in range(3):  # several layouts through the same parser: each is learned afresh
        text = data.draw(kv_files(MEM_KEYS[version]))
        strict = cg.convert_cgroup(cg.MEMORY_STAT, version, text, "memory.stat")
        assert parse(text.encode()) == strict
        assert convert_fast(cg.MEMORY_STAT, version, text, "memory.stat") == strict
        assert _anon_of(anon, text) == strict.usage_anon


def _anon_of(read: Any, text: str) -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return int(read(_write(Path(tmp), "memory.stat", text)))


@settings(max_examples=150, deadline=None)
@given(version=versions, data=st.data())
def test_cpu_stat_fast_equals_strict(version: CgroupVersion, data: st.DataObject) -> None:
    needed = CPU_KEYS[version] + (("usage_usec",) if version is V2 else ())
    text = data.draw(kv_files(needed))
    strict = cg.convert_cgroup(cg.CPU_STAT, version, text, "cpu.stat")
    assert convert_fast(cg.CPU_STAT, version, text, "cpu.stat") == strict
    for accel in (True, False):
        parse = fast_parser(cg.CPU_STAT, version, accel)
        assert parse is not None and parse(text.encode()) == strict
    if version is V2:
        assert convert_fast(cg.CPU_USAGE, V2, text, "cpu.stat") == cg.convert_cgroup(
            cg.CPU_USAGE, V2, text, "x"
        )


@settings(max_examples=100, deadline=None)
@given(value=values, blank=st.sampled_from(["", "\n", " \n", "\t"]))
def test_cpuacct_usage_fast_equals_strict(value: int, blank: str) -> None:
    text = f"{blank}{value}{blank}"
    assert (
        convert_fast(cg.CPU_USAGE, V1, text, "u") == cg.convert_cgroup(cg.CPU_USAGE, V1, text, "u") == value
    )


numa_values = st.integers(0, 2**40)


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.integers(0, 7), unique=True, min_size=1, max_size=4), data=st.data())
def test_numa_stat_fast_equals_strict(nodes: list[int], data: st.DataObject) -> None:
    def fields() -> str:
        return " ".join(f"N{n}={data.draw(numa_values)}" for n in nodes)

    total, file = data.draw(numa_values), data.draw(numa_values)
    v1 = f"total={total} {fields()}\nfile={file} {fields()}\nanon=1 {fields()}\n"
    lines = [f"anon {fields()}", f"file {fields()}", f"kernel_stack {fields()}", f"shmem {fields()}"]
    v2 = "\n".join(data.draw(st.permutations(lines))) + "\n"
    for version, text in ((V1, v1), (V2, v2)):
        for accel in (True, False):
            parse = fast_parser(cg.MEMORY_NUMA_STAT, version, accel)
            assert parse is not None
            strict = cg.convert_cgroup(cg.MEMORY_NUMA_STAT, version, text, "numa_stat")
            assert parse(text.encode()) == strict


@pytest.mark.parametrize("accel", [True, False])
def test_numa_stat_odd_inputs_left_to_strict(accel: bool) -> None:
    parse = fast_parser(cg.MEMORY_NUMA_STAT, V1, accel)
    assert parse is not None
    # a node twice (strict keeps the last), a line break str.splitlines sees and bytes does not
    for text in ("total=3 N0=1 N0=2\n", "total=1 N0=1\rN1=5\n", "total=1 N0=x\n", "file=1 N0=1\n"):
        assert parse(text.encode()) is None
    assert cg.parse_numa_stat("total=1 N0=1\rN1=5\n", "x", V1) == {0: 1}
    assert plain_ascii(b"a b\n") and not plain_ascii(b"a\x1cb") and not plain_ascii("é".encode())


@pytest.mark.parametrize("accel", [True, False])
@pytest.mark.parametrize("version", [V1, V2])
def test_readers_raise_the_strict_errors(tmp_path: Path, version: CgroupVersion, accel: bool) -> None:
    keys = MEM_KEYS[version]
    good = "".join(f"{k} {i}\n" for i, k in enumerate(keys))
    missing = _write(tmp_path, "m1", good.replace(keys[-1], "other"))
    bad_int = _write(tmp_path, "m2", good.replace(f"{keys[4]} 4", f"{keys[4]} 4x"))
    for path in (missing, bad_int):
        text = Path(path).read_text()
        with pytest.raises(ValueError) as strict:
            cg.convert_cgroup(cg.MEMORY_STAT, version, text, path)
        for read in (reader(cg.MEMORY_STAT, version, accel), anon_reader(version, accel)):
            with pytest.raises(ValueError) as fast:
                read(path)
            assert str(fast.value) == str(strict.value)
    stat = _write(tmp_path, "c", "nr_periods 1\nnr_throttled x\nthrottled_time 3\nthrottled_usec 3\n")
    with pytest.raises(ValueError, match="not an integer"):
        throttle_reader(version, accel)(stat)
    with pytest.raises(OSError):
        reader(cg.MEMORY_STAT, version)(str(tmp_path / "gone"))


def test_reader_fast_and_relearned_layouts(tmp_path: Path) -> None:
    read = throttle_reader(V1)
    a = _write(tmp_path, "a", "nr_periods 10\nnr_throttled 3\nthrottled_time 99\n")
    b = _write(tmp_path, "b", "nr_bursts 0\nnr_periods 11\nburst_time 0\nnr_throttled 4\nthrottled_time 1\n")
    assert [read(a), read(b), read(a)] == [(10, 3), (11, 4), (10, 3)]
    usage = reader(cg.CPU_USAGE, V1)
    assert usage(_write(tmp_path, "u", "12345\n")) == 12345
    with pytest.raises(ValueError, match="negative"):
        usage(_write(tmp_path, "n", "-3\n"))


def test_cpuset_memo_returns_fresh_lists(tmp_path: Path) -> None:
    read = reader(cg.CPUSET_CPUS, V1)
    path = _write(tmp_path, "cpuset.cpus", "0-3,8\n")
    first = read(path)
    first.append(99)
    assert read(path) == [0, 1, 2, 3, 8]
    with pytest.raises(ValueError, match="bad cpuset"):
        read(_write(tmp_path, "bad", "0-x\n"))
