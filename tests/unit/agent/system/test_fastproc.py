"""The /proc fast paths of agent.system.fastproc against the strict procfs/nodeinfo parsers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.system.fastproc import (
    meminfo_values,
    node_meminfo_usage,
    proc_meminfo_usage,
    proc_stat_busy,
    read_proc_stat_busy,
)
from agent.system.nodeinfo import numa_memory_usage_bytes, parse_node_meminfo
from agent.system.procfs import meminfo_usage_bytes, parse_meminfo, parse_proc_stat

ticks = st.lists(st.integers(0, 2**40), min_size=4, max_size=10)


@st.composite
def proc_stats(draw: st.DrawFn) -> str:
    cpus = draw(st.lists(st.integers(0, 63), unique=True, max_size=6))
    lines = [f"cpu  {' '.join(map(str, draw(ticks)))}"]
    lines += [f"cpu{c} {' '.join(map(str, draw(ticks)))}" for c in cpus]
    lines += ["intr 1 2 3 4", "ctxt 42", "btime 1", "procs_running 1"]
    order = draw(st.permutations(lines))
    return "\n".join(order) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=200, deadline=None)
@given(text=proc_stats())
def test_proc_stat_busy_equals_strict(text: str) -> None:
    strict = parse_proc_stat(text)
    assert proc_stat_busy(text.encode()) == (
        strict.total.busy,
        {c: t.busy for c, t in strict.per_cpu.items()},
    )


@pytest.mark.parametrize(
    "text",
    [
        "cpu 1 2 3\n",  # too few counters
        "cpu 1 2 3 4\ncpu 1 2 3 4\n",  # duplicate aggregate line
        "cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n",  # duplicate cpu
        "cpu 1 2 3 -4\n",  # negative
        "cpu 1 2 x 4\n",
        "cpu 1 2 3 4\ncpux 1 2 3 4\n",
        "intr 1\n",  # no aggregate line
    ],
)
def test_proc_stat_bad_inputs_raise_the_strict_error(tmp_path: Path, text: str) -> None:
    assert proc_stat_busy(text.encode()) is None
    path = tmp_path / "stat"
    path.write_text(text)
    with pytest.raises(ValueError) as strict:
        parse_proc_stat(text, str(path))
    with pytest.raises(ValueError) as fast:
        read_proc_stat_busy(str(path))
    assert str(fast.value) == str(strict.value)


MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Active(file)", "Inactive(file)")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_meminfo_equals_strict(data: st.DataObject) -> None:
    keys = data.draw(st.permutations((*MEMINFO_KEYS, "SReclaimable", "HugePages_Total")))
    values = {k: data.draw(st.integers(0, 2**40)) for k in keys}
    text = "".join(
        f"{k}:{' ' * data.draw(st.integers(1, 8))}{v}{'' if k.startswith('Huge') else ' kB'}\n"
        for k, v in values.items()
    )
    strict = parse_meminfo(text)
    wanted = [k.encode() for k in keys]
    assert meminfo_values(text.encode(), wanted) == [strict[k] for k in keys]
    node = "".join(f"Node 1 {line}\n" for line in text.splitlines())
    got = meminfo_values(node.encode(), [b"MemTotal", b"MemFree"], b"Node 1 ")
    assert got == [parse_node_meminfo(node, "n")[k] for k in ("MemTotal", "MemFree")]


def test_meminfo_readers_and_errors(tmp_path: Path) -> None:
    proc = tmp_path / "meminfo"
    proc.write_text("MemTotal: 100 kB\nMemFree: 10 kB\nMemAvailable: 40 kB\n")
    assert proc_meminfo_usage(str(proc)) == meminfo_usage_bytes(parse_meminfo(proc.read_text())) == 60 * 1024
    node = tmp_path / "node0"
    node.write_text(
        "Node 0 MemTotal: 100 kB\nNode 0 MemFree: 10 kB\nNode 0 Active(file): 5 kB\n"
        "Node 0 Inactive(file): 5 kB\nNode 0 SReclaimable: 1 kB\n"
    )
    expected = numa_memory_usage_bytes(parse_node_meminfo(node.read_text(), "n"))
    assert node_meminfo_usage(str(node), 0) == expected == 79 * 1024
    proc.write_text("MemTotal: 100 kB\nMemFree: 10 kB\n")
    with pytest.raises(ValueError, match="missing MemAvailable"):
        proc_meminfo_usage(str(proc))
    proc.write_text("MemTotal: 100 MB\nMemAvailable: 10 kB\n")
    with pytest.raises(ValueError, match="unknown unit"):
        proc_meminfo_usage(str(proc))
