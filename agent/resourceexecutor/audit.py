"""JSON-lines audit log of every real host-file change made by the resource executor
(docs/rules/koordlet.md#writing-to-the-host).

One JSON object per line, flushed as it is written; size-based rotation (``<path>`` → ``<path>.1`` → … →
``<path>.<backups>``, the oldest dropped). Thread-safe. Imports: standard library only.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

__all__ = ["AuditLog"]


class AuditLog:
    """Append-only JSON-lines file with rotation once it would exceed ``max_bytes`` (keeps ``backups`` old
    files; ``backups=0`` truncates instead). A line longer than ``max_bytes`` is still written whole."""

    def __init__(self, path: Path | str, *, max_bytes: int = 10 * 1024 * 1024, backups: int = 5) -> None:
        if max_bytes <= 0 or backups < 0:
            raise ValueError(
                f"audit log: max_bytes must be > 0 and backups >= 0 (got {max_bytes}, {backups})"
            )
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._size = 0

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one JSON line (keys in insertion order, non-JSON values via ``str``)."""
        line = json.dumps(dict(record), ensure_ascii=False, default=str) + "\n"
        size = len(line.encode())
        with self._lock:
            out = self._open()
            if self._size > 0 and self._size + size > self.max_bytes:
                self._rotate()
                out = self._open()
            out.write(line)
            out.flush()
            self._size += size

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _open(self) -> IO[str]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
            self._size = self._file.tell()
        return self._file

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
            return
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        if self.path.exists():
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
