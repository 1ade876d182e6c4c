"""The cluster's PodDisruptionBudgets as the scheduler's informer keeps them, for DefaultPreemption
(docs/rules/scheduler-preemption.md#pdb).
Imports: the standard library, apis.kubeobjects.
"""

from __future__ import annotations

import threading

from apis.kubeobjects import KubeObject

__all__ = ["PDBStore"]


class PDBStore:
    """The cluster's PodDisruptionBudgets (policy/v1beta1, what a 1.20 API server serves), as JSON
    objects by namespace/name, for DefaultPreemption (docs/rules/scheduler-preemption.md#pdb)."""

    def __init__(self) -> None:
        self._by_key: dict[str, KubeObject] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(obj: KubeObject) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def upsert(self, *objs: KubeObject) -> None:
        with self._lock:
            self._by_key[self._key(objs[-1])] = objs[-1]

    def delete(self, obj: KubeObject) -> None:
        with self._lock:
            self._by_key.pop(self._key(obj), None)

    def list(self) -> list[KubeObject]:
        with self._lock:
            return list(self._by_key.values())
