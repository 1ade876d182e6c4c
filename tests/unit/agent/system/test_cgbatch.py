"""agent.system.cgbatch: the batch reads return each file's bytes (None when unreadable), and a
BatchDecoder gives exactly what the single fast reader gives for each file (None where it raises), with
the C batch parsers and with the Python ones alone, on good, odd and bad files of both cgroup versions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.system import cgroup as cg
from agent.system.cgbatch import BatchDecoder, read_files, read_pairs
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import CPUSTAT_KEYS, MEMSTAT_KEYS, anon_reader, reader, throttle_reader

V1, V2 = CgroupVersion.V1, CgroupVersion.V2


def _single(kind: str, version: CgroupVersion):  # type: ignore[no-untyped-def]
    if kind == "usage":
        return reader(cg.CPU_USAGE, version)
    return anon_reader(version) if kind == "anon" else throttle_reader(version)


@st.composite
def files(draw: st.DrawFn, kind: str, version: CgroupVersion) -> str | None:
    """A file's text (None: the file is missing): mostly the kernel's layout, sometimes broken."""
    if draw(st.integers(0, 9)) == 0:
        return None
    number = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([-5, "x", "1_0", "+3"]))
    if kind == "usage" and version is V1:
        return f"{draw(number)}{draw(st.sampled_from(['', chr(10), ' ']))}"
    keys = {
        "usage": ("usage_usec", "user_usec", "system_usec"),
        "anon": MEMSTAT_KEYS[version],
        "throttle": CPUSTAT_KEYS[version],
    }[kind]
    lines = [
        f"{k} {draw(number) if draw(st.integers(0, 7)) == 0 else draw(st.integers(0, 10**15))}" for k in keys
    ]
    if draw(st.integers(0, 8)) == 0:
        lines.pop(draw(st.integers(0, len(lines) - 1)))  # a key missing
    if draw(st.integers(0, 8)) == 0:
        lines.append("odd\tline  here")
    return "\n".join(draw(st.permutations(lines))) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["usage", "anon", "throttle"]),
    version=st.sampled_from([V1, V2]),
    accel=st.booleans(),
    data=st.data(),
)
def test_batch_decoder_equals_the_single_reader(
    tmp_path: Path, kind: str, version: CgroupVersion, accel: bool, data: st.DataObject
) -> None:
    texts = data.draw(st.lists(files(kind, version), max_size=6))
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"{kind}-{version.value}-{i}"
        path.unlink(missing_ok=True)
        if text is not None:
            path.write_text(text)
        paths.append(str(path))
    single = _single(kind, version)
    want = []
    for path in paths:
        try:
            want.append(single(path))
        except (OSError, ValueError):
            want.append(None)
    got = BatchDecoder(kind, version, accel)(read_files(paths), paths)
    assert got == want


def test_read_files_and_pairs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"1\n")
    b.write_bytes(b"x" * 70000)  # longer than one read
    missing = str(tmp_path / "gone")
    assert read_files([str(a), missing, str(b)]) == [b"1\n", None, b"x" * 70000]
    ticks = iter(range(10, 20))
    walls, first, second = read_pairs([str(a), missing], [missing, str(a)], lambda: next(ticks))
    assert (walls, first, second) == ([10, 11], [b"1\n", None], [None, b"1\n"])
    with pytest.raises(ValueError, match="unknown kind"):
        BatchDecoder("nope", V1)
