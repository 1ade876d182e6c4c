"""Builders for the volume plugin tests: PVs, PVCs, StorageClasses, CSINodes, pods with volumes, and
the check that a production volume filter equals its oracle (tests/oracles/volumes.py) on every row."""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterAllPlugin
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.volumes import CSI_NODE, PV, PVC, STORAGE_CLASS, VolumeObjects
from tests.oracles.volumes import volume_oracle_for

Obj = dict[str, Any]


def pv(name: str, *, labels: dict[str, str] | None = None, rv: str = "1", **spec: Any) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}, "resourceVersion": rv}, "spec": spec}


def pvc(
    name: str, *, ns: str = "ns", volume: str = "", sc: str | None = None, rv: str = "1", **spec: Any
) -> Obj:
    s: Obj = dict(spec)
    if volume:
        s["volumeName"] = volume
    if sc is not None:
        s["storageClassName"] = sc
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, "spec": s}


def storage_class(
    name: str, provisioner: str = "csi.example.com", mode: str | None = "Immediate", **rest: Any
) -> Obj:
    sc: Obj = {"metadata": {"name": name}, "provisioner": provisioner, **rest}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    return sc


def csi_node(name: str, drivers: dict[str, int | None]) -> Obj:
    ds = [
        {"name": d, "nodeID": name, **({"allocatable": {"count": c}} if c is not None else {})}
        for d, c in drivers.items()
    ]
    return {"metadata": {"name": name}, "spec": {"drivers": ds}}


def claim(name: str) -> Obj:
    return {"name": f"v-{name}", "persistentVolumeClaim": {"claimName": name}}


def vpod(
    name: str = "p", *, node: str | None = None, volumes: list[Obj] | None = None, ns: str = "ns"
) -> Obj:
    spec: Obj = {"containers": [{"name": "c"}], "volumes": volumes or []}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def store(*objs: tuple[str, Obj]) -> VolumeObjects:
    s = VolumeObjects()
    for kind, o in objs:
        s.on_add(kind, o)
    return s


def add_all(s: VolumeObjects, **objs: list[Obj]) -> None:
    """Adds objects by kind: pvs=, pvcs=, scs=, csis=."""
    kinds = {"pvs": PV, "pvcs": PVC, "scs": STORAGE_CLASS, "csis": CSI_NODE}
    for arg, items in objs.items():
        for o in items:
            s.on_add(kinds[arg], o)


def statuses(plugin: FilterAllPlugin, pod: Obj, snap: Snapshot) -> list[Status]:
    """filter_all's status of every row, after checking it equals the oracle's."""
    res = plugin.filter_all(CycleState(0.0), pod, snap)
    got = [res.status_of(i) for i in range(snap.n)]
    oracle = volume_oracle_for(plugin)
    assert got == [oracle.filter(CycleState(0.0), pod, snap, i) for i in range(snap.n)]
    return got
