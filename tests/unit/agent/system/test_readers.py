"""agent.system.readers against the strict parsers: every decoder, batch decoder and reader gives exactly the
strict parser's value (projected to its kind) on good, odd and bad files of both cgroup versions, and its
exact error where a single reader raises; the C parser, when built, answers the kernel's layouts first.
Also the byte reads (one file, a round, pairs with the clock) and the /proc readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.cgroupparse import CPUSTAT_V1_KEYS, CPUSTAT_V2_KEYS, MEMSTAT_V1_KEYS, MEMSTAT_V2_KEYS
from agent.system.nodeinfo import numa_memory_usage_bytes, parse_node_meminfo
from agent.system.procfs import meminfo_usage_bytes, parse_meminfo, parse_proc_stat
from agent.system.readers import (
    KINDS,
    BatchDecoder,
    decoder,
    node_meminfo_usage,
    proc_meminfo_usage,
    read_bytes,
    read_files,
    read_pairs,
    read_proc_stat_busy,
    read_text,
    reader,
)

V1, V2 = CgroupVersion.V1, CgroupVersion.V2
MEMSTAT = {V1: MEMSTAT_V1_KEYS, V2: MEMSTAT_V2_KEYS}
CPUSTAT = {V1: CPUSTAT_V1_KEYS, V2: CPUSTAT_V2_KEYS}
EXTRA = ("cache", "rss", "pgfault", "shmem", "kernel", "usage_usec", "user_usec", "nr_bursts", "total_swap")


def _strict(kind: str, version: CgroupVersion, text: str, name: str) -> Any:
    """The strict parser's value of a file of ``kind``, projected as the decoders project it."""
    spec, project = KINDS[kind]
    return project(cg.convert_cgroup(spec, version, text, name))


def _strict_or_none(kind: str, version: CgroupVersion, data: bytes | None, name: str) -> Any:
    if data is None:
        return None
    try:
        return _strict(kind, version, data.decode(), name)
    except ValueError:
        return None


number = st.one_of(
    st.integers(0, 2**64 - 1),
    st.integers(0, 10**15),
    st.sampled_from([-5, "x", "1_0", "+3", "0012", "9" * 25, "٣"]),
)


@st.composite
def kv_text(draw: st.DrawFn, needed: tuple[str, ...]) -> str:
    """``key value`` lines: the needed keys and some extra ones, shuffled; sometimes a key missing, a
    value that is not a plain integer, an odd line, an odd blank."""
    extra = draw(st.lists(st.sampled_from([k for k in EXTRA if k not in needed]), unique=True, max_size=5))
    keys = [*needed, *extra]
    if draw(st.integers(0, 8)) == 0:
        keys.pop(draw(st.integers(0, len(keys) - 1)))
    lines = [
        f"{k} {draw(number) if draw(st.integers(0, 7)) == 0 else draw(st.integers(0, 10**15))}" for k in keys
    ]
    if draw(st.integers(0, 8)) == 0:
        lines.append(draw(st.sampled_from(["odd\tline  here", "", "k\t5", "k 1\r", "  k  7  "])))
    body = "\n".join(draw(st.permutations(lines)))
    return body + draw(st.sampled_from(["\n", "", "\n\n"]))


@st.composite
def files(draw: st.DrawFn, kind: str, version: CgroupVersion) -> str | None:
    """A file's text (None: the file is missing): mostly the kernel's layout, sometimes broken."""
    if draw(st.integers(0, 9)) == 0:
        return None
    if kind == "usage" and version is V1:
        blanks = st.sampled_from(["", " ", "\n"])
        return f"{draw(blanks)}{draw(number)}{draw(blanks)}"
    needed = {"usage": ("usage_usec", "user_usec", "system_usec"), "anon": MEMSTAT[version]}.get(
        kind, CPUSTAT[version]
    )
    text: str = draw(kv_text(needed))
    return text


def _write_all(tmp_path: Path, tag: str, texts: list[str | None]) -> list[str]:
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"{tag}-{i}"
        path.unlink(missing_ok=True)
        if text is not None:
            path.write_text(text)
        paths.append(str(path))
    return paths


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["usage", "anon", "throttle"]),
    version=st.sampled_from([V1, V2]),
    data=st.data(),
)
def test_batch_and_single_decoders_give_the_strict_value(
    tmp_path: Path, kind: str, version: CgroupVersion, data: st.DataObject
) -> None:
    texts = data.draw(st.lists(files(kind, version), max_size=6))
    paths = _write_all(tmp_path, f"{kind}-{version.value}", texts)
    datas = read_files(paths)
    want = [_strict_or_none(kind, version, d, p) for d, p in zip(datas, paths, strict=True)]
    assert BatchDecoder(kind, version)(datas, paths) == want
    one = decoder(kind, version)
    for d, p, w in zip(datas, paths, want, strict=True):
        if d is None:
            continue
        if w is None:  # a bad file: the strict parser's own error
            with pytest.raises(ValueError) as strict:
                _strict(kind, version, d.decode(), p)
            with pytest.raises(ValueError) as got:
                one(d, p)
            assert str(got.value) == str(strict.value)
        else:
            assert one(d, p) == w


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from([V1, V2]), data=st.data())
def test_kernel_layouts_in_several_key_orders(version: CgroupVersion, data: st.DataObject) -> None:
    """The same decoder over files of different layouts in turn (any key order, extra keys)."""
    anon, throttle = BatchDecoder("anon", version), BatchDecoder("throttle", version)
    for _ in range(3):
        values = st.integers(0, 2**63 - 1)
        extra = data.draw(st.lists(st.sampled_from(EXTRA), unique=True, max_size=4))
        mem = [*MEMSTAT[version], *(k for k in extra if k not in MEMSTAT[version])]
        mem_text = "".join(f"{k} {data.draw(values)}\n" for k in data.draw(st.permutations(mem)))
        cpu_text = "".join(f"{k} {data.draw(values)}\n" for k in data.draw(st.permutations(CPUSTAT[version])))
        assert anon([mem_text.encode()], ["m"]) == [_strict("anon", version, mem_text, "m")]
        assert throttle([cpu_text.encode()], ["c"]) == [_strict("throttle", version, cpu_text, "c")]


numa_values = st.integers(0, 2**40)


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.integers(0, 7), unique=True, min_size=1, max_size=4), data=st.data())
def test_numa_decoder_gives_the_strict_value(nodes: list[int], data: st.DataObject) -> None:
    def fields() -> str:
        return " ".join(f"N{n}={data.draw(numa_values)}" for n in nodes)

    v1 = f"total={data.draw(numa_values)} {fields()}\nfile=1 {fields()}\nanon=1 {fields()}\n"
    lines = [f"anon {fields()}", f"file {fields()}", f"kernel_stack {fields()}", f"shmem {fields()}"]
    v2 = "\n".join(data.draw(st.permutations(lines))) + "\n"
    for version, text in ((V1, v1), (V2, v2)):
        assert decoder("numa", version)(text.encode(), "n") == _strict("numa", version, text, "n")


@pytest.mark.parametrize(
    ("version", "text"),
    [
        (V1, "total=3 N0=1 N0=2\n"),  # a node twice: the strict parser keeps the last
        (V1, "total=1 N0=1\rN1=5\n"),  # a line break str.splitlines sees and bytes.split does not
        (V1, " total=1 N0=1\n"),  # the strict parser wants "total=" first
        (V1, "total=1 N0=1\nfile=\xe9\n"),
        (V1, "total=1 N0=-1\n"),
        (V2, "anon N0=4097 N1=8191\nfile N0=4095 N1=4096\n"),
        (V2, "anon N0=1 N0=9\nfile N0=1\n"),
        (V2, "anon N+1=4096\nfile N1=4096\n"),
    ],
)
def test_numa_odd_inputs_get_the_strict_outcome(version: CgroupVersion, text: str) -> None:
    assert _outcome(decoder("numa", version), text.encode()) == _outcome(
        lambda data, name: _strict("numa", version, data.decode(), name), text.encode()
    )


def _outcome(decode: Any, data: bytes) -> tuple[str, object]:
    try:
        return "value", decode(data, "n")
    except ValueError as exc:
        return "error", str(exc)


@pytest.mark.parametrize(
    ("version", "text", "match"),
    [(V1, "total=1 N0=x\n", "bad field"), (V1, "file=1 N0=1\n", "total="), (V2, "file N0=1\n", "anon")],
)
def test_numa_errors_are_the_strict_ones(version: CgroupVersion, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decoder("numa", version)(text.encode(), "n")


@pytest.mark.parametrize("version", [V1, V2])
def test_reader_raises_the_strict_errors(tmp_path: Path, version: CgroupVersion) -> None:
    keys = MEMSTAT[version]
    good = "".join(f"{k} {i}\n" for i, k in enumerate(keys))
    for text, match in (
        (good.replace(keys[-1], "other"), f"missing key '{keys[-1]}'"),
        (good.replace(f"{keys[4]} 4", f"{keys[4]} 4x"), "line 5: not an integer"),
    ):
        path = tmp_path / "memory.stat"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            reader(cg.MEMORY_STAT, version)(str(path))
    path.write_text(good)
    assert reader(cg.MEMORY_STAT, version)(str(path)) == cg.convert_cgroup(cg.MEMORY_STAT, version, good, "m")
    with pytest.raises(OSError):
        reader(cg.MEMORY_STAT, version)(str(tmp_path / "gone"))
    usage = tmp_path / "usage"
    usage.write_text("-3\n" if version is V1 else "usage_usec -3\n")
    with pytest.raises(ValueError, match="negative"):
        reader(cg.CPU_USAGE, version)(str(usage))


def test_cpuset_decoder_memo_returns_fresh_lists() -> None:
    decode = decoder("cpuset", V1)
    first = decode(b"0-3,8\n", "cpuset.cpus")
    first.append(99)
    assert decode(b"0-3,8\n", "cpuset.cpus") == [0, 1, 2, 3, 8]
    with pytest.raises(ValueError, match="bad cpuset"):
        decode(b"0-x\n", "bad")
    with pytest.raises(ValueError, match="unknown kind"):
        decoder("nope", V1)
    with pytest.raises(ValueError, match="unknown kind"):
        BatchDecoder("numa", V1)


def test_read_files_pairs_and_text(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"1\n")
    b.write_bytes(b"x" * 200_000)  # longer than one read
    missing = str(tmp_path / "gone")
    assert read_files([str(a), missing, str(b)]) == [b"1\n", None, b"x" * 200_000]
    ticks = iter(range(10, 20))
    walls, first, second = read_pairs([str(a), missing], [missing, str(a)], lambda: next(ticks))
    assert (walls, first, second) == ([10, 11], [b"1\n", None], [None, b"1\n"])
    assert read_text(str(b)) == "x" * 200_000 and read_bytes(str(a)) == b"1\n"
    with pytest.raises(OSError):
        read_text(missing)


# ---------------------------------------------------------------- /proc


@pytest.mark.parametrize(
    "text",
    [
        "cpu  4 0 2 10 1 1 1 0\ncpu0 2 0 1 5 0 1 0 0\ncpu1 2 0 1 5 1 0 1 0\nintr 1 2\nctxt 42\n",
        "cpu 1 2 3 4\n",  # trailing counters missing: 0
        "cpu 1 2 3\n",  # too few counters
        "cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n",  # a cpu twice
        "cpu 1 2 3 -4\n",
        "intr 1\n",  # no aggregate line
    ],
)
def test_proc_stat_busy_is_the_strict_parsers(tmp_path: Path, text: str) -> None:
    path = tmp_path / "stat"
    path.write_text(text)
    try:
        stat = parse_proc_stat(text, str(path))
    except ValueError as strict:
        with pytest.raises(ValueError) as got:
            read_proc_stat_busy(str(path))
        assert str(got.value) == str(strict)
        return
    assert read_proc_stat_busy(str(path)) == (stat.total.busy, {c: t.busy for c, t in stat.per_cpu.items()})


def test_meminfo_readers(tmp_path: Path) -> None:
    proc = tmp_path / "meminfo"
    proc.write_text("MemTotal: 100 kB\nMemFree: 10 kB\nMemAvailable: 40 kB\n")
    assert proc_meminfo_usage(str(proc)) == meminfo_usage_bytes(parse_meminfo(proc.read_text())) == 60 * 1024
    node = tmp_path / "node0"
    node.write_text(
        "Node 0 MemTotal: 100 kB\nNode 0 MemFree: 10 kB\nNode 0 Active(file): 5 kB\n"
        "Node 0 Inactive(file): 5 kB\nNode 0 SReclaimable: 1 kB\n"
    )
    expected = numa_memory_usage_bytes(parse_node_meminfo(node.read_text(), "n"))
    assert node_meminfo_usage(str(node)) == expected == 79 * 1024
    proc.write_text("MemTotal: 100 kB\nMemFree: 10 kB\n")
    with pytest.raises(ValueError, match="missing MemAvailable"):
        proc_meminfo_usage(str(proc))
    proc.write_text("MemTotal: 100 MB\nMemAvailable: 10 kB\n")
    with pytest.raises(ValueError, match="unknown unit"):
        proc_meminfo_usage(str(proc))
