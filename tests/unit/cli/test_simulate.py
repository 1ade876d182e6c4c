"""`koord simulate` plumbing: errors name the field and value; several files give one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koord.simulate import main


def test_unknown_kind_and_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_kind = tmp_path / "k.json"
    bad_kind.write_text('{"kind": "Teleport"}')
    assert main([str(bad_kind)]) == 2
    err = capsys.readouterr().err
    assert "kind='Teleport'" in err and "LoadAwareScheduling" in err

    not_json = tmp_path / "x.json"
    not_json.write_text("{nope")
    not_obj = tmp_path / "l.json"
    not_obj.write_text("[1]")
    missing = tmp_path / "missing.json"
    assert main([str(not_json), str(not_obj), str(missing)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [ln["file"] for ln in lines] == [str(not_json), str(not_obj), str(missing)]
    assert "invalid JSON" in lines[0]["error"]
    assert "expected a JSON object" in lines[1]["error"]
    assert "No such file" in lines[2]["error"]
    assert all("result" not in ln for ln in lines)
