"""Every view of the default profile follows nodes joining, leaving and changing in place
(docs/scheduler-scale.md#node-list): after random churn through `Snapshot.apply_nodes`, the default
framework's PreFilter/Filter/PreScore/Score results for random pods on the incrementally maintained
snapshot equal those of a fresh framework on a snapshot built from scratch over the same rows. Views
with `resize` and views rebuilt instead (the fallback) are both covered: whichever a view has."""

from __future__ import annotations

import json
import random
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.kubeobjects import Node, Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.registry import Handle, build_framework, default_profile

NOW = 1_800_000_000.0
ZONES = ["z0", "z1", "z2"]
APPS = ["web", "db", "batch"]
IMAGES = ["nginx:1", "redis:7", "busybox"]
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}


def make_node(rng: random.Random, name: str) -> Node:
    spec: dict[str, Any] = {}
    if rng.random() < 0.3:
        effect = rng.choice(["NoSchedule", "PreferNoSchedule", "NoExecute"])
        spec["taints"] = [{"key": "dedicated", "value": rng.choice(["a", "b"]), "effect": effect}]
    if rng.random() < 0.1:
        spec["unschedulable"] = True
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"zone": rng.choice(ZONES), "kubernetes.io/hostname": name, "tier": rng.choice("ab")},
    }
    if rng.random() < 0.2:
        avoid = {"preferAvoidPods": [{"podSignature": {"podController": RS}}]}
        meta["annotations"] = {"scheduler.alpha.kubernetes.io/preferAvoidPods": json.dumps(avoid)}
    images = [
        {"names": [img], "sizeBytes": rng.choice([10, 300, 900]) * 1024 * 1024}
        for img in IMAGES
        if rng.random() < 0.4
    ]
    cpu = rng.choice(["2", "4", "8"])
    return cast(
        Node,
        {
            "metadata": meta,
            "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}, "images": images},
        },
    )


def make_pod(rng: random.Random, name: str, on: str | None = None) -> Pod:
    app = rng.choice(APPS)
    container: dict[str, Any] = {
        "name": "c",
        "image": rng.choice(IMAGES),
        "resources": {"requests": {"cpu": rng.choice(["100m", "500m", "1", "3"]), "memory": "1Gi"}},
    }
    if rng.random() < 0.3:
        container["ports"] = [{"containerPort": 80, "hostPort": rng.choice([80, 8080])}]
    spec: dict[str, Any] = {"containers": [container], "schedulerName": "koord-scheduler"}
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": name, "labels": {"app": app}}
    if on is not None:
        spec["nodeName"] = on
    else:
        if rng.random() < 0.3:
            spec["nodeSelector"] = {"tier": rng.choice("ab")}
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        term = {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}, "topologyKey": "zone"}
        affinity: dict[str, Any] = {}
        if rng.random() < 0.3:
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        if rng.random() < 0.3:
            affinity["podAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
            }
        if rng.random() < 0.3:
            pref = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [rng.choice(ZONES)]}]}
            affinity["nodeAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "preference": pref}]
            }
        if affinity:
            spec["affinity"] = affinity
        if rng.random() < 0.3:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": rng.choice(["zone", "kubernetes.io/hostname"]),
                    "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        if rng.random() < 0.3:
            meta["ownerReferences"] = [RS]
    return cast(Pod, {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})


def make_info(rng: random.Random, name: str, generation: int) -> NodeInfo:
    info = NodeInfo.of(make_node(rng, name), generation)
    for k in range(rng.randint(0, 3)):
        info.add_pod(PodInfo.of(make_pod(rng, f"{name}-b{generation}-{k}", name)), generation)
    return info


def framework() -> Framework:
    return build_framework(default_profile(), Handle(clock=lambda: NOW))


def outcome(fw: Framework, pod: Pod, snap: Snapshot) -> tuple[Any, ...]:
    """What the profile decides for `pod` on every node, by node name (rows may differ in order)."""
    state = CycleState(NOW)
    st = fw._pre_filter(state, pod, snap)
    if not st.is_success():
        return ("prefilter", st)
    feasible, rejections = fw.filter_all(state, pod, snap)
    rejected: dict[str, Status] = rejections.as_dict()
    if len(feasible) == 0:
        return ("rejected", rejected)
    st = fw._pre_score(state, pod, snap, feasible)
    if not st.is_success():
        return ("prescore", rejected, st)
    scores = fw.score_all(state, pod, snap, feasible)
    return ("scored", rejected, {snap.names[int(i)]: int(s) for i, s in zip(feasible, scores, strict=True)})


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_default_profile_views_follow_in_place_churn(seed: int) -> None:
    rng = random.Random(seed)
    snap = Snapshot([make_info(rng, f"n{i:02d}", 1) for i in range(rng.randint(1, 12))], seed=seed)
    fw = framework()
    pods = [make_pod(rng, f"p{k}") for k in range(6)]
    for p in pods:  # every view the profile uses is registered now and must follow from here
        outcome(fw, p, snap)
    registered = len(snap._views)
    serial = 12
    for step in range(6):
        gen = step + 2
        removed = rng.sample(snap.names, rng.randint(0, min(3, snap.n)))
        added = []
        for _ in range(rng.randint(0, 3)):
            added.append(make_info(rng, f"n{serial:02d}", gen))
            serial += 1
        changed = []
        for name in rng.sample(snap.names, min(2, snap.n)):
            if name in removed:
                continue
            info = snap.infos[snap.index[name]].copy()
            if rng.random() < 0.5:
                info.set_node(make_node(rng, name), gen)
            info.add_pod(PodInfo.of(make_pod(rng, f"{name}-c{gen}", name)), gen)
            changed.append(info)
        snap.apply_nodes(added, removed, changed)
        fresh = Snapshot(list(snap.infos), snap.resources)
        assert fresh.names == snap.names
        for p in [*rng.sample(pods, 3), make_pod(rng, f"q{step}")]:
            assert outcome(fw, p, snap) == outcome(framework(), p, fresh), (step, p["metadata"]["name"])
    assert len(snap._views) >= registered > 5
