"""The DeviceShare plugin in a Framework over a snapshot (docs/rules/scheduler-deviceshare.md#wiring):
a pod that wants no device is skipped everywhere, an invalid request fails PreFilter, Filter looks only
at nodes with a Device object, Score prefers the emptier node (LeastAllocated), Reserve/PreBind write the
device-allocated annotation, and assigned-pod and Device events keep the cache right (an assumed pod seen
bound counts once)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from apis.device import ANNOTATION_DEVICE_ALLOCATED
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.deviceshare.plugin import DeviceShare

Obj = dict[str, Any]
CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"
HALF = '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi","koordinator.sh/gpu-memory-ratio":"50"}}]}'  # noqa: E501


def node(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}  # fmt: skip


def device(*minors: int, health: bool = True) -> Obj:
    gpus = [{"type": "gpu", "minor": m, "health": health,
             "resources": {CORE: "100", MEM: "16Gi", RATIO: "100"}} for m in minors]  # fmt: skip
    return {"metadata": {"name": "x"}, "spec": {"devices": gpus}}


def pod(
    name: str, requests: dict[str, str], *, node_name: str = "", annotations: dict[str, str] | None = None
) -> Obj:
    p: Obj = {
        "metadata": {
            "namespace": "default",
            "name": name,
            "uid": f"uid-{name}",
            "annotations": annotations or {},
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
    }
    if node_name:
        p["spec"]["nodeName"] = node_name
    return p


def setup(plugin: DeviceShare | None = None) -> tuple[DeviceShare, Framework, Snapshot]:
    """n1: two empty GPUs; n2: no Device object; n3: one GPU."""
    plugin = plugin or DeviceShare()
    plugin.on_device("n1", device(0, 1))
    plugin.on_device("n3", device(0))
    return plugin, Framework([plugin]), Snapshot.build([node("n1"), node("n2"), node("n3")])


def test_a_pod_that_wants_no_device_is_skipped() -> None:
    plugin, _, snap = setup()
    st = CycleState(0.0)
    p = pod("cpu-only", {"cpu": "1"})
    assert plugin.pre_filter(st, p, snap).code == Code.SKIP
    assert plugin.filter_all(st, p, snap).passed.all()
    assert plugin.score_all(st, p, snap, np.arange(snap.n)).tolist() == [0, 0, 0]
    assert plugin.reserve(st, p, "n1").is_success() and plugin.cache.pod("default/cpu-only") is None
    assert plugin.pre_bind(st, p, "n1").is_success()
    assert ANNOTATION_DEVICE_ALLOCATED not in p["metadata"]["annotations"]


def test_an_invalid_request_fails_prefilter_unresolvable() -> None:
    _, fw, snap = setup()
    result = fw.schedule(CycleState(0.0), pod("p", {"koordinator.sh/gpu": "150"}), snap)
    assert result.node is None
    assert "3 invalid resource unit koordinator.sh/gpu: 150" in result.status.message()
    assert {s.code for s in result.diagnosis.values()} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_reserve_and_prebind_write_the_annotation_and_score_prefers_the_empty_node() -> None:
    plugin, fw, snap = setup()
    plugin.on_pod_add(
        pod("old", {CORE: "50", RATIO: "50"}, node_name="n3", annotations={ANNOTATION_DEVICE_ALLOCATED: HALF})
    )
    st = CycleState(0.0)
    p = pod("p", {"koordinator.sh/gpu": "50"})
    result = fw.schedule(st, p, snap)
    # n1: ratio (200-50)*100/200 = 75, memory 100 -> 87; n2 (no Device) 0; n3: ratio 0, memory 50 -> 25
    assert result.node == "n1"
    assert plugin.score_all(st, p, snap, np.arange(snap.n)).tolist() == [87, 0, 25]
    assert fw.reserve(st, p, "n1").is_success()
    assert fw.pre_bind(st, p, "n1").is_success()
    assert p["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED] == HALF
    assert plugin.assumed == {"default/p": "n1"}


def test_normalize_scores_is_kube_default() -> None:
    plugin, _, _ = setup()
    scores = np.array([87, 25, 0], np.int64)
    plugin.normalize_scores(CycleState(0.0), pod("p", {}), scores)
    assert scores.tolist() == [100, 28, 0]  # 25*100//87 = 28


def test_filter_uses_assigned_pods_and_passes_a_node_without_device() -> None:
    plugin, _, snap = setup()
    plugin.on_pod_add(
        pod("old", {CORE: "50", RATIO: "50"}, node_name="n3", annotations={ANNOTATION_DEVICE_ALLOCATED: HALF})
    )
    st = CycleState(0.0)
    whole = pod("w", {"nvidia.com/gpu": "1"})
    assert plugin.pre_filter(st, whole, snap).is_success()
    res = plugin.filter_all(st, whole, snap)
    assert res.passed.tolist() == [True, True, False]  # n2 has no Device: passes (quirk)
    assert res.status_of(2).code == Code.UNSCHEDULABLE and res.status_of(2).reasons == (
        "Insufficient gpu devices",
    )
    # Reserve on the Device-less node allocates nothing and PreBind writes nothing
    assert plugin.reserve(st, whole, "n2").is_success()
    plugin.pre_bind(st, whole, "n2")
    assert ANNOTATION_DEVICE_ALLOCATED not in whole["metadata"]["annotations"]
    # the pod leaves: n3 fits again; a terminated pod counts as gone too
    plugin.on_pod_delete(pod("old", {}, node_name="n3"))
    assert plugin.filter_all(CycleState(0.0), whole, snap).passed.all()


def test_an_rdma_pod_on_gpu_only_nodes_is_unresolvable() -> None:
    plugin, _, snap = setup()
    st = CycleState(0.0)
    p = pod("r", {"koordinator.sh/rdma": "50"})
    plugin.pre_filter(st, p, snap)
    res = plugin.filter_all(st, p, snap)
    assert res.status_of(0).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert res.status_of(0).reasons == ("Insufficient rdma devices",) and res.passed[1]


def test_an_assumed_pod_seen_bound_counts_once_and_unreserve_frees() -> None:
    plugin, fw, snap = setup()
    st = CycleState(0.0)
    p = pod("p", {"koordinator.sh/gpu": "50"})
    fw.schedule(st, p, snap)
    assert fw.reserve(st, p, "n3").is_success()
    fw.pre_bind(st, p, "n3")
    assert plugin.cache.used("n3") == {"gpu": {0: {CORE: 50, RATIO: 50, MEM: 8589934592}}}
    bound = json.loads(json.dumps(p))
    bound["spec"]["nodeName"] = "n3"
    plugin.on_pod_add(bound)
    plugin.on_pod_update(bound, bound)
    assert plugin.cache.used("n3") == {"gpu": {0: {CORE: 50, RATIO: 50, MEM: 8589934592}}}
    assert plugin.assumed == {}
    # a second half fits, a third does not
    q = pod("q", {"koordinator.sh/gpu": "50"})
    st2 = CycleState(0.0)
    plugin.pre_filter(st2, q, snap)
    assert plugin.reserve(st2, q, "n3").is_success()
    st3 = CycleState(0.0)
    r = pod("r", {"koordinator.sh/gpu": "50"})
    plugin.pre_filter(st3, r, snap)
    assert plugin.reserve(st3, r, "n3").reasons == ("Insufficient gpu devices",)
    plugin.unreserve(st2, q, "n3")
    assert plugin.reserve(st3, r, "n3").is_success()


def test_an_assumed_pod_reported_without_annotation_keeps_its_allocation() -> None:
    plugin, fw, snap = setup()
    st = CycleState(0.0)
    p = pod("p", {"nvidia.com/gpu": "1"})
    fw.schedule(st, p, snap)
    fw.reserve(st, p, "n3")
    early = pod("p", {"nvidia.com/gpu": "1"}, node_name="n3")
    plugin.on_pod_add(early)
    assert plugin.cache.used("n3")["gpu"][0][CORE] == 100


def test_device_events() -> None:
    plugin, _, snap = setup()
    st = CycleState(0.0)
    p = pod("p", {"nvidia.com/gpu": "2"})
    plugin.pre_filter(st, p, snap)
    assert plugin.filter_all(st, p, snap).passed.tolist() == [True, True, False]
    plugin.on_device("n3", None)  # deleted: its GPUs stay known, unhealthy (upstream's invalidate)
    assert plugin.filter_all(st, p, snap).status_of(2).reasons == ("Insufficient gpu devices",)
    plugin.on_device("n3", {"spec": {"devices": [{"minor": "x"}]}})  # does not decode: ignored
    assert not plugin.cache.has_device_object("n3")
    plugin.on_device("n3", device(0, 1))  # back, with two cards
    assert plugin.filter_all(st, p, snap).passed.all()
    plugin.on_device("n1", device(0, 1, health=False))  # unhealthy: no capacity
    assert plugin.filter_all(st, p, snap).status_of(0).reasons == ("Insufficient gpu devices",)


def test_unsupported_models_reject_shared_gpu_requests() -> None:
    plugin = DeviceShare.from_args({"gpuShareUnsupportedModels": [{"vendor": "huawei", "model": "310P"}]})
    plugin.on_device("n1", device(0))
    labels = {"node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": "310P"}
    snap = Snapshot.build([node("n1", labels), node("n2", labels), node("n3")])
    st = CycleState(0.0)
    shared = pod("s", {"koordinator.sh/gpu": "50"})
    plugin.pre_filter(st, shared, snap)
    res = plugin.filter_all(st, shared, snap)
    assert res.passed.tolist() == [False, False, True]
    assert res.status_of(1).reasons == ('model "310P" of vendor "huawei" does not support GPU Share',)
    whole = pod("w", {"nvidia.com/gpu": "1"})
    st2 = CycleState(0.0)
    plugin.pre_filter(st2, whole, snap)
    assert plugin.filter_all(st2, whole, snap).passed.all()


def test_most_allocated_args_pack() -> None:
    plugin, fw, snap = setup(DeviceShare.from_args({"scoringStrategy": {"type": "MostAllocated"}}))
    plugin.on_pod_add(pod("old", {}, node_name="n3", annotations={ANNOTATION_DEVICE_ALLOCATED: HALF}))
    st = CycleState(0.0)
    p = pod("p", {"koordinator.sh/gpu": "50"})
    # n1: ratio 50*100/200 = 25, memory 0 -> 12; n3: ratio 100, memory 50 -> 75
    assert fw.schedule(st, p, snap).node == "n3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"scoringStrategy": {"type": "Spread"}}, r"scoringStrategy\.type='Spread'"),
        ({"scoringStrategy": {"resources": "all"}}, r"scoringStrategy\.resources='all'"),
        ({"scoringStrategy": {"resources": [{"weight": 1}]}}, r"scoringStrategy\.resources\[0\]\.name=None"),
        ({"scoringStrategy": {"resources": [{"name": "x", "weight": 101}]}}, r"resources\[0\]\.weight=101"),
        ({"gpuShareUnsupportedModels": [{"vendor": "v"}]}, r"gpuShareUnsupportedModels\[0\]"),
    ],
)
def test_from_args_names_the_field(args: Obj, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DeviceShare.from_args(args)


def test_preemption_sees_a_victims_devices_freed() -> None:
    """docs/rules/scheduler-deviceshare.md#preemption: removing a victim from a one-node copy makes its
    devices preemptible there; putting it back takes them away again."""
    from scheduler.framework.nominated import add_pod, filters_on_node, pre_filter_state, remove_pod
    from scheduler.framework.snapshot import PodInfo

    plugin = DeviceShare()
    plugin.on_device("n1", device(0))
    victim = pod("v", {"nvidia.com/gpu": "1"}, node_name="n1", annotations={ANNOTATION_DEVICE_ALLOCATED: (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory-ratio":"100"}}]}'
    )})  # fmt: skip
    plugin.on_pod_add(victim)
    snap = Snapshot.build([node("n1")], [victim])
    fw = Framework([plugin])
    p = pod("p", {"koordinator.sh/gpu": "50"})
    state = pre_filter_state(fw, p, snap, 0.0)
    assert isinstance(state, CycleState)
    info = snap.infos[0].copy()
    assert filters_on_node(fw, state, p, info, ()).reasons == ("Insufficient gpu devices",)
    remove_pod(fw, state, p, PodInfo.of(victim), info)
    assert filters_on_node(fw, state, p, info, ()).is_success()
    add_pod(fw, state, p, PodInfo.of(victim), info)
    assert filters_on_node(fw, state, p, info, ()).reasons == ("Insufficient gpu devices",)
    # put back: nothing is preemptible any more
    assert plugin.filter_all(state, p, snap).status_of(0).reasons == ("Insufficient gpu devices",)


def test_prebind_fills_the_device_id_and_fails_when_the_device_is_gone() -> None:
    plugin = DeviceShare()
    dev = device(0, 1)
    dev["spec"]["devices"][1]["id"] = "GPU-b"
    dev["spec"]["devices"].append({"type": "rdma", "minor": 1, "id": "RDMA-1", "health": True})
    plugin.on_device("n1", dev)
    snap = Snapshot.build([node("n1")])
    fw = Framework([plugin])
    plugin.on_pod_add(pod("old", {}, node_name="n1", annotations={ANNOTATION_DEVICE_ALLOCATED: HALF}))
    st = CycleState(0.0)
    p = pod("p", {"nvidia.com/gpu": "1"})
    assert fw.schedule(st, p, snap).node == "n1"
    assert fw.reserve(st, p, "n1").is_success()
    assert fw.pre_bind(st, p, "n1").is_success()
    # minor 1 (minor 0 is half used); its id, not the rdma device's of the same minor
    assert p["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED] == (
        '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"16Gi",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-b"}]}'
    )
    q = pod("q", {"koordinator.sh/gpu": "50"})  # the other half of minor 0
    st2 = CycleState(0.0)
    plugin.pre_filter(st2, q, snap)
    assert plugin.reserve(st2, q, "n1").is_success()
    plugin.on_device("n1", None)
    status = plugin.pre_bind(st2, q, "n1")
    assert status.code == Code.ERROR and status.reasons == ('device "n1" not found',)


def test_a_pod_with_devices_makes_its_device_less_node_known() -> None:
    """Upstream creates the node's entry for a pod's allocations: from then on the node without a Device
    rejects device pods as having none (UnschedulableAndUnresolvable), no longer passing."""
    plugin, _, snap = setup()
    p = pod("p", {"koordinator.sh/gpu": "50"})
    st = CycleState(0.0)
    plugin.pre_filter(st, p, snap)
    assert plugin.filter_all(st, p, snap).passed[1]
    plugin.on_pod_add(pod("old", {}, node_name="n2", annotations={ANNOTATION_DEVICE_ALLOCATED: HALF}))
    res = plugin.filter_all(st, p, snap)
    assert res.status_of(1).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert res.status_of(1).reasons == ("Insufficient gpu devices",)
    # a bad annotation on an update changes nothing (logged)
    plugin.on_pod_update({}, pod("old", {}, node_name="n2", annotations={ANNOTATION_DEVICE_ALLOCATED: "{"}))
    assert plugin.cache.pod("default/old") is not None
