"""`koord simulate` on wrongly typed scenario files (docs/simulate.md#input-errors): every shipped scenario
under tests/scenarios/, each field (and each field another scenario of its kind and operation has) replaced
by values of every other JSON type — null, numbers (huge ones too), strings, lists, objects, booleans and
nested ones — either still evaluates or exits 2 with one line naming the field; never a traceback.

The variants are deduplicated by (kind, operation, field path) and sampled with a fixed seed."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import main

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((ROOT / "tests" / "scenarios").glob("*/*.json"))
NOT_READ = frozenset({"description", "source", "expect"})
EXCLUDED_KINDS = frozenset({"ColocationProfile"})  # its adapter and input checks live with the webhook
WRONG: list[Any] = [
    None,
    0,
    -1,
    1.5,
    10**30,
    1e308,
    "",
    "x",
    "1e9999999",
    [],
    [None],
    [[1]],
    [{}],
    {},
    {"a": None},
    {"a": {"b": [None]}},
    True,
    False,
]
SAMPLE = 2500

Path_ = tuple[str | int, ...]


def _paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            if not (not prefix and key in NOT_READ):
                yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:2]):
            yield from _paths(item, (*prefix, i))


def _pattern(path: Path_) -> tuple[str, ...]:
    return tuple("[]" if isinstance(p, int) else p for p in path)


def _place(scenario: Any, pattern: tuple[str, ...]) -> Path_ | None:
    """``pattern`` (a key another scenario has) laid onto ``scenario`` when its parent object exists."""
    node = scenario
    path: list[str | int] = []
    for step in pattern[:-1]:
        if step == "[]":
            if not isinstance(node, list) or not node:
                return None
            node = node[0]
            path.append(0)
        else:
            if not isinstance(node, dict) or step not in node:
                return None
            node = node[step]
            path.append(step)
    if not isinstance(node, dict):
        return None
    return (*path, pattern[-1])


def _set(scenario: Any, path: Path_, value: Any) -> None:
    node = scenario
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value


def _variants() -> list[tuple[str, Path_, Any]]:
    loaded = [(p, json.loads(p.read_text())) for p in SCENARIOS]
    loaded = [(p, s) for p, s in loaded if s.get("kind") not in EXCLUDED_KINDS]
    known: dict[tuple[Any, Any], set[tuple[str, ...]]] = defaultdict(set)
    for _, s in loaded:
        known[(s.get("kind"), s.get("operation"))].update(
            _pattern(p) for p in _paths(s) if isinstance(p[-1], str)
        )
    seen: set[tuple[Any, Any, tuple[str, ...]]] = set()
    out: list[tuple[str, Path_, Any]] = []
    for file, s in loaded:
        kind_op = (s.get("kind"), s.get("operation"))
        placed = (_place(s, pattern) for pattern in sorted(known[kind_op]))
        for path in [*_paths(s), *(p for p in placed if p is not None)]:
            if (*kind_op, _pattern(path)) in seen:
                continue
            seen.add((*kind_op, _pattern(path)))
            out.extend((str(file), path, value) for value in WRONG)
    random.Random(20240601).shuffle(out)
    return out[:SAMPLE]


def test_there_is_a_scenario_of_every_kind() -> None:
    from koord.simulate import KINDS

    kinds = {json.loads(p.read_text()).get("kind") for p in SCENARIOS}
    assert set(KINDS) - EXCLUDED_KINDS <= kinds


def test_wrongly_typed_fields_never_print_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variants = _variants()
    assert len(variants) == SAMPLE
    target = tmp_path / "scenario.json"
    refused = 0
    for file, path, value in variants:
        scenario = json.loads(Path(file).read_text())
        _set(scenario, path, copy.deepcopy(value))
        target.write_text(json.dumps(scenario))
        case = f"{Path(file).relative_to(ROOT)} {list(path)} = {json.dumps(value)[:40]}"
        code = main([str(target)])  # an exception escaping here is the traceback the CLI would print
        out, err = capsys.readouterr()
        assert code in (0, 2), case
        if code == 0:
            assert err == "" and isinstance(json.loads(out), dict), case
            continue
        refused += 1
        assert out == "" and err.endswith("\n") and err.count("\n") == 1, case
        assert err.startswith("koord simulate: "), case
        names = [p for p in path if isinstance(p, str)]
        assert any(name in err for name in names), f"{case}: the message does not name the field: {err}"
    assert refused > SAMPLE // 4  # most wrong types are refused, not silently accepted


@pytest.mark.parametrize(
    ("file", "path", "value", "field"),
    [
        ("cpuburst/static-cpu-burst-only.json", ("pod", "status"), 5, "pod.status"),
        (
            "loadaware/worked-example.json",
            ("nodes", 0, "metadata", "labels"),
            ["a"],
            "nodes[0].metadata.labels",
        ),
        (
            "batchresource/worked-example-usage.json",
            ("pods", 0, "status", "phase"),
            [],
            "pods[0].status.phase",
        ),
    ],
)
def test_the_real_command_exits_2_with_one_line(
    tmp_path: Path, file: str, path: Path_, value: Any, field: str
) -> None:
    scenario = json.loads((ROOT / "tests" / "scenarios" / file).read_text())
    _set(scenario, path, value)
    target = tmp_path / "s.json"
    target.write_text(json.dumps(scenario))
    done = subprocess.run(
        [sys.executable, "-m", "koord.cli", "simulate", str(target)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"koord simulate: {field}: expected "), done.stderr
