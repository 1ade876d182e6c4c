"""The koordlet's in-memory KV store for non-series data (docs/rules/koordlet.md#metric-cache):
``node_cpu_info``, ``node_numa_info``, ``node_local_storage_info`` and the like. Thread-safe; values are
stored and returned as given (treat them as immutable). Imports: standard library only.
"""

from __future__ import annotations

import threading
from typing import Any, Final

__all__ = ["NODE_CPU_INFO", "NODE_NUMA_INFO", "KVStore"]

NODE_CPU_INFO: Final = "node_cpu_info"
NODE_NUMA_INFO: Final = "node_numa_info"


class KVStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._data[key] = value

    def get(self, key: str) -> Any | None:
        with self._lock:
            return self._data.get(key)

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)
