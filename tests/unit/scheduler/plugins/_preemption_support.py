"""Builders for the DefaultPreemption tests: kube's test objects (priorities, resource sizes, start
times) and a profile of NodeResourcesFit (+ NodePorts) with the preemption plugin attached."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.defaultpreemption import DefaultPreemption
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.noderesources import NodeResourcesFit

Obj = dict[str, Any]

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
NOW = 1_000_000.0


def epoch(seconds: int) -> str:
    return f"1970-01-01T00:00:{seconds:02d}Z"


def node(name: str, alloc: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {"allocatable": {**(alloc or VERY_LARGE), "pods": "32"}},
    }


def pod(
    name: str,
    *,
    node: str | None = None,
    priority: int | None = None,
    req: dict[str, str] | None = None,
    start: int | None = None,
    labels: dict[str, str] | None = None,
    nominated: str | None = None,
    namespace: str = "default",
    **spec: Any,
) -> Obj:
    s: Obj = {"containers": [{"name": "c", "resources": {"requests": dict(req)}} if req else {"name": "c"}]}
    s.update(spec)
    if node is not None:
        s["nodeName"] = node
    if priority is not None:
        s["priority"] = priority
    status: Obj = {}
    if start is not None:
        status["startTime"] = epoch(start)
    if nominated is not None:
        status["nominatedNodeName"] = nominated
    meta: Obj = {"name": name, "namespace": namespace, "uid": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": s, "status": status}


def pdb(selector: Obj | None, allowed: int, disrupted: Sequence[str] = (), namespace: str = "default") -> Obj:
    spec: Obj = {} if selector is None else {"selector": selector}
    status: Obj = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = {name: "2020-01-01T00:00:00Z" for name in disrupted}
    return {"metadata": {"name": "pdb", "namespace": namespace}, "spec": spec, "status": status}


class Offsets(random.Random):
    """An rng whose `randrange` answers the given offsets in turn (kube's tests seed Go's rand)."""

    def __init__(self, *offsets: int) -> None:
        super().__init__(0)
        self.offsets = list(offsets)

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return self.offsets.pop(0)


def profile(
    args: Obj | None = None,
    *,
    rng: random.Random | None = None,
    pdbs: Sequence[Obj] = (),
    nominated: NominatedPods | None = None,
    extra: Sequence[Any] = (),
) -> tuple[Framework, DefaultPreemption]:
    dp = DefaultPreemption.from_args(
        args, rng=rng or Offsets(0, 0, 0, 0), pdbs=lambda: list(pdbs), nominated=nominated
    )
    fw = Framework([NodeResourcesFit(), NodePorts(), *extra, dp])
    dp.attach(fw)
    return fw, dp


def cycle(fw: Framework, p: Obj, snapshot: Snapshot) -> CycleState:
    """A cycle state with the profile's PreFilter run (kube's tests do the same)."""
    state = CycleState(NOW)
    for pre in fw.pre_filters:
        assert pre.pre_filter(state, p, snapshot).is_success()
    return state
