"""The API calls VolumeBinding's PreBind makes (docs/rules/scheduler-volumes.md#prebind), as a Protocol:
update a PV, update a PVC, read a PVC. `scheduler.plugins.volume.api.KubeVolumeBinderAPI` implements it
over the API server; `InMemoryVolumeBinderAPI` here keeps objects in a dict (tests, simulations) with
the API server's optimistic concurrency on ``metadata.resourceVersion``.
Imports: the standard library, apis.jsonfields.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from apis.jsonfields import as_mapping

Obj = Mapping[str, Any]


class VolumeAPIError(Exception):
    """An API call failed; the message is the API server's."""


class VolumeBinderAPI(Protocol):
    def update_pv(self, pv: Obj) -> Obj:
        """PUT the PV; returns the stored object. Raises VolumeAPIError."""
        ...

    def update_pvc(self, pvc: Obj) -> Obj:
        """PUT the PVC; returns the stored object. Raises VolumeAPIError."""
        ...

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        """The PVC as the API server has it, None when it does not exist. Raises VolumeAPIError."""
        ...


def _meta(obj: Obj) -> Mapping[str, Any]:
    return as_mapping(obj.get("metadata"))


class InMemoryVolumeBinderAPI:
    """A dict of PVs and PVCs; an update with a stale resourceVersion is a conflict, as on the server.
    `on_update(kind, obj)` (optional) sees every stored object, e.g. to feed a VolumeObjects store."""

    def __init__(self, pvs: Sequence[Obj] = (), pvcs: Sequence[Obj] = (), on_update: Any = None) -> None:
        self._lock = threading.Lock()
        self.pvs: dict[str, dict[str, Any]] = {str(_meta(p)["name"]): copy.deepcopy(dict(p)) for p in pvs}
        self.pvcs: dict[str, dict[str, Any]] = {
            f"{_meta(c).get('namespace') or ''}/{_meta(c)['name']}": copy.deepcopy(dict(c)) for c in pvcs
        }
        self.on_update = on_update
        self.calls: list[tuple[str, str]] = []

    def _update(self, store: dict[str, dict[str, Any]], key: str, resource: str, obj: Obj) -> Obj:
        with self._lock:
            self.calls.append((resource, key))
            current = store.get(key)
            name = str(_meta(obj).get("name") or "")
            if current is None:
                raise VolumeAPIError(f'{resource} "{name}" not found')
            if str(_meta(obj).get("resourceVersion") or "") != str(
                _meta(current).get("resourceVersion") or ""
            ):
                raise VolumeAPIError(
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again"
                )
            stored = copy.deepcopy(dict(obj))
            meta = dict(_meta(stored))
            meta["resourceVersion"] = str(int(str(meta.get("resourceVersion") or "0")) + 1)
            stored["metadata"] = meta
            store[key] = stored
        if self.on_update is not None:
            self.on_update(resource, stored)
        return stored

    def update_pv(self, pv: Obj) -> Obj:
        return self._update(self.pvs, str(_meta(pv).get("name") or ""), "persistentvolumes", pv)

    def update_pvc(self, pvc: Obj) -> Obj:
        key = f"{_meta(pvc).get('namespace') or ''}/{_meta(pvc).get('name') or ''}"
        return self._update(self.pvcs, key, "persistentvolumeclaims", pvc)

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            found = self.pvcs.get(f"{namespace}/{name}")
            return copy.deepcopy(found) if found is not None else None
