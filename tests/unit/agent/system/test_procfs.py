"""Tests of the pure /proc parsers and their thin readers."""

from __future__ import annotations

import pytest

from agent.system import procfs
from agent.system.procfs import CpuTicks, PressureLine
from tests.fixtures.hosttree import HostTree

STAT = """cpu  100 5 50 1000 20 3 2 7 0 0
cpu0 60 5 30 500 10 2 1 4 0 0
cpu1 40 0 20 500 10 1 1 3 0 0
intr 1 2 3
ctxt 42
"""


def test_proc_stat_aggregate_and_per_cpu() -> None:
    stat = procfs.parse_proc_stat(STAT)
    assert stat.total == CpuTicks(100, 5, 50, 1000, 20, 3, 2, 7)
    assert stat.total.busy == 100 + 5 + 50 + 3 + 2
    assert sorted(stat.per_cpu) == [0, 1]
    assert stat.per_cpu[0].busy == 60 + 5 + 30 + 2 + 1
    assert stat.per_cpu[1].steal == 3


def test_proc_stat_short_line_pads_zero() -> None:
    stat = procfs.parse_proc_stat("cpu 1 2 3 4\n")
    assert stat.total == CpuTicks(1, 2, 3, 4, 0, 0, 0, 0)
    assert stat.per_cpu == {}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("intr 1\n", "no aggregate 'cpu' line"),
        ("cpu 1 2 3\n", "line 1: expected at least 4"),
        ("cpu 1 2 x 4\n", "line 1: non-integer"),
        ("cpu 1 2 -3 4\n", "line 1: negative"),
        ("cpu 1 2 3 4\ncpu 1 2 3 4\n", "line 2: duplicate aggregate"),
        ("cpu 1 2 3 4\ncpuX 1 2 3 4\n", "line 2: bad cpu line key"),
        ("cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n", "line 3: duplicate line for cpu 0"),
    ],
)
def test_proc_stat_errors_name_file_and_line(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        procfs.parse_proc_stat(text, "/x/proc/stat")
    assert str(err.value).startswith("/x/proc/stat")


MEMINFO = """MemTotal:       16000000 kB
MemFree:         4000000 kB
MemAvailable:   10000000 kB
HugePages_Total:       0
"""


def test_meminfo_in_bytes_and_usage() -> None:
    info = procfs.parse_meminfo(MEMINFO)
    assert info["MemTotal"] == 16000000 * 1024
    assert info["HugePages_Total"] == 0
    assert procfs.meminfo_usage_bytes(info) == 6000000 * 1024
    assert procfs.meminfo_usage_with_page_cache_bytes(info) == 12000000 * 1024


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("MemTotal 5 kB\n", "line 1: expected 'Key: value"),
        ("MemTotal:\n", "line 1: expected"),
        ("MemTotal: x kB\n", "line 1: non-integer"),
        ("MemTotal: 5 MB\n", "line 1: unknown unit"),
        (": 5 kB\n", "line 1: expected"),
    ],
)
def test_meminfo_errors(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        procfs.parse_meminfo(text, "/proc/meminfo")


def test_meminfo_usage_missing_key() -> None:
    with pytest.raises(ValueError, match="missing MemAvailable"):
        procfs.meminfo_usage_bytes({"MemTotal": 1})
    with pytest.raises(ValueError, match="missing MemFree"):
        procfs.meminfo_usage_with_page_cache_bytes({"MemTotal": 1})


PSI = """some avg10=1.50 avg60=0.75 avg300=0.10 total=123456
full avg10=0.50 avg60=0.25 avg300=0.00 total=654
"""


def test_pressure_some_and_full() -> None:
    psi = procfs.parse_pressure(PSI)
    assert psi.some == PressureLine(1.5, 0.75, 0.1, 123456)
    assert psi.full == PressureLine(0.5, 0.25, 0.0, 654)


def test_pressure_some_only() -> None:
    psi = procfs.parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert psi.full is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no 'some' line"),
        ("full avg10=0 avg60=0 avg300=0 total=0\n", "no 'some' line"),
        ("half avg10=0 avg60=0 avg300=0 total=0\n", "line 1: expected 'some' or 'full'"),
        ("some avg10=0 avg60=0 avg300=0\n", "line 1: expected avg10"),
        ("some avg10=0 avg10=0 avg300=0 total=0\n", "line 1: bad field"),
        ("some avg10 avg60=0 avg300=0 total=0\n", "line 1: bad field"),
        ("some avg10=x avg60=0 avg300=0 total=0\n", "line 1: non-numeric"),
        (PSI + PSI, "line 3: duplicate 'some'"),
    ],
)
def test_pressure_errors(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        procfs.parse_pressure(text, "cpu.pressure")


def test_readers_on_host_tree(host: HostTree) -> None:
    host.write_proc_stat([10, 0, 5, 100, 0, 1, 1, 0], [[5, 0, 2, 50, 0, 1, 0, 0], [5, 0, 3, 50, 0, 0, 1, 0]])
    host.write_meminfo({"MemTotal": 1000, "MemFree": 200, "MemAvailable": 600})
    host.write_proc("pressure/memory", PSI)
    stat = procfs.read_proc_stat(host.paths.proc)
    assert stat.total.busy == 17
    assert {c: t.busy for c, t in stat.per_cpu.items()} == {0: 8, 1: 9}
    assert procfs.meminfo_usage_bytes(procfs.read_meminfo(host.paths.proc)) == 400 * 1024
    assert procfs.read_pressure(host.paths.proc, "memory").some.avg10 == 1.5


def test_reader_error_names_path(host: HostTree) -> None:
    host.write_proc("meminfo", "garbage\n")
    with pytest.raises(ValueError, match=r"proc/meminfo: line 1"):
        procfs.read_meminfo(host.paths.proc)
