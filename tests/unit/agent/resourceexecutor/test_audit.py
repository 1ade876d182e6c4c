"""AuditLog: JSON lines, flushed per line, size-based rotation, thread safety."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agent.resourceexecutor import AuditLog


def test_lines_are_flushed_json(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a" / "audit.log")
    log.write({"file": "/x", "old": "1", "new": "2"})
    assert json.loads((tmp_path / "a" / "audit.log").read_text()) == {"file": "/x", "old": "1", "new": "2"}
    log.close()


def test_rotation_keeps_n_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    with AuditLog(path, max_bytes=100, backups=2) as log:
        for i in range(20):
            log.write({"i": i, "pad": "x" * 20})
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.log", "audit.log.1", "audit.log.2"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size <= 100
    last = [json.loads(line)["i"] for line in path.read_text().splitlines()]
    assert last[-1] == 19
    older = [json.loads(line)["i"] for line in (tmp_path / "audit.log.1").read_text().splitlines()]
    assert older[-1] == last[0] - 1


def test_reopen_appends_and_counts_existing_size(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text("x" * 95 + "\n")
    with AuditLog(path, max_bytes=100, backups=1) as log:
        log.write({"i": 1})
    assert (tmp_path / "audit.log.1").read_text() == "x" * 95 + "\n"
    assert json.loads(path.read_text()) == {"i": 1}


def test_thread_safe(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path, max_bytes=1 << 20)

    def work(t: int) -> None:
        for i in range(200):
            log.write({"t": t, "i": i})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 1600
