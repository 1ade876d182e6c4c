"""VolumeBinding as kube-scheduler v1.20.2: PreFilter's claim sorting and reasons, Filter's bound-PV
affinity, PV matching and provisioning checks, Reserve's assumptions, PreBind's API calls and wait,
Unreserve's revert, and the args."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.volumes import PV, PVC, VolumeObjects
from scheduler.plugins.volume.binderapi import InMemoryVolumeBinderAPI
from scheduler.plugins.volume.binding import VolumeBinding
from tests.oracles.volumes import VolumeBindingOracle
from tests.unit.scheduler.plugins._support import make_node
from tests.unit.scheduler.plugins._volume_support import add_all, claim, pv, pvc, storage_class, vpod

Obj = dict[str, Any]
NAME = "VolumeBinding"
BIND = "node(s) didn't find available persistent volumes to bind"
AFFINITY = "node(s) had volume node affinity conflict"
NOPV = "pvc(s) bound to non-existent pv(s)"
OK = Status.success()


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, NAME)


def local_pv(name: str, node: str, size: str = "10Gi", sc: str = "local", **extra: Any) -> Obj:
    affinity = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
            ]
        }
    }
    p = pv(
        name,
        storageClassName=sc,
        capacity={"storage": size},
        accessModes=["ReadWriteOnce"],
        nodeAffinity=affinity,
        **extra,
    )
    p["status"] = {"phase": "Available"}
    return p


def bound_claim(name: str, volume: str) -> Obj:
    c = pvc(name, volume=volume, sc="local")
    c["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return c


def wait_claim(name: str, size: str = "5Gi", sc: str = "local", **extra: Any) -> Obj:
    return pvc(name, sc=sc, resources={"requests": {"storage": size}}, accessModes=["ReadWriteOnce"], **extra)


NODES = [
    make_node(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}", "zone": "a" if i < 2 else "b"})
    for i in range(3)
]


def cluster() -> VolumeObjects:
    s = VolumeObjects()
    add_all(
        s,
        scs=[
            storage_class("local", provisioner="kubernetes.io/no-provisioner", mode="WaitForFirstConsumer"),
            storage_class(
                "zonal",
                provisioner="csi.example.com",
                mode="WaitForFirstConsumer",
                allowedTopologies=[{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}],
            ),
            storage_class("imm", provisioner="csi.example.com"),
            storage_class("nomode", mode=None),
        ],
        pvs=[
            local_pv("pv-n0-big", "n0", "100Gi"),
            local_pv("pv-n0-small", "n0", "8Gi"),
            local_pv("pv-n1", "n1", "1Gi"),
            local_pv("pv-bound-n2", "n2", claimRef={"name": "bound", "namespace": "ns"}),
        ],
        pvcs=[
            bound_claim("bound", "pv-bound-n2"),
            bound_claim("dangling", "gone"),
            wait_claim("w"),
            wait_claim("w-zonal", sc="zonal"),
            wait_claim("immediate", sc="imm"),
            wait_claim("bad-mode", sc="nomode"),
        ],
    )
    return s


def run(plugin: VolumeBinding, pod: Obj, snap: Snapshot) -> tuple[Status, list[Status], CycleState]:
    state = CycleState(0.0)
    pre = plugin.pre_filter(state, pod, snap)
    if not pre.is_success():
        return pre, [], state
    res = plugin.filter_all(state, pod, snap)
    got = [res.status_of(i) for i in range(snap.n)]
    oracle = VolumeBindingOracle(plugin.volumes)
    ostate = CycleState(0.0)
    assert oracle.pre_filter(ostate, pod, snap) == pre
    assert [oracle.filter(ostate, pod, snap, i) for i in range(snap.n)] == got
    return pre, got, state


def test_pre_filter_reasons() -> None:
    plugin, snap = VolumeBinding(cluster()), Snapshot.build(NODES)
    assert run(plugin, vpod(volumes=[claim("missing")]), snap)[0] == unresolvable(
        'persistentvolumeclaim "missing" not found'
    )
    assert run(plugin, vpod(volumes=[claim("immediate")]), snap)[0] == unresolvable(
        "pod has unbound immediate PersistentVolumeClaims"
    )
    assert run(plugin, vpod(volumes=[claim("bad-mode")]), snap)[0] == Status.error(
        'VolumeBindingMode not set for StorageClass "nomode"', NAME
    )
    s = cluster()
    deleting = wait_claim("del")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    s.on_add(PVC, deleting)
    assert run(VolumeBinding(s), vpod(volumes=[claim("del")]), snap)[0] == unresolvable(
        'persistentvolumeclaim "del" is being deleted'
    )
    pre, got, _ = run(plugin, vpod(volumes=[{"name": "e", "emptyDir": {}}]), snap)
    assert pre == OK and got == [OK] * 3


def test_filter_bound_and_matching() -> None:
    plugin, snap = VolumeBinding(cluster()), Snapshot.build(NODES)
    assert run(plugin, vpod(volumes=[claim("bound")]), snap)[1] == [unresolvable(AFFINITY)] * 2 + [OK]
    assert run(plugin, vpod(volumes=[claim("dangling")]), snap)[1] == [unresolvable(NOPV)] * 3
    # n0 has PVs that fit 5Gi; n1's PV is too small; no-provisioner cannot provision
    _, got, state = run(plugin, vpod(volumes=[claim("w")]), snap)
    assert got == [OK, unresolvable(BIND), unresolvable(BIND)]
    chosen = plugin.chosen_volumes(state, "n0")
    assert chosen is not None and plugin.chosen_volumes(state, "n1") is None
    assert [p["metadata"]["name"] for p, _ in chosen.static_bindings] == [
        "pv-n0-small"
    ]  # the smallest that fits
    assert run(plugin, vpod(volumes=[claim("w-zonal")]), snap)[1] == [unresolvable(BIND)] * 2 + [OK]
    both = run(plugin, vpod(volumes=[claim("bound"), claim("w")]), snap)[1]
    assert both == [unresolvable(AFFINITY), unresolvable(AFFINITY, BIND), unresolvable(BIND)]


def test_selected_node_and_access_modes() -> None:
    s = cluster()
    picked = wait_claim("picked", sc="zonal")
    picked["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n2"}
    rwx = wait_claim("rwx")
    rwx["spec"]["accessModes"] = ["ReadWriteMany"]
    add_all(s, pvcs=[picked, rwx])
    plugin, snap = VolumeBinding(s), Snapshot.build(NODES)
    assert run(plugin, vpod(volumes=[claim("picked")]), snap)[1] == [unresolvable(BIND)] * 2 + [OK]
    assert run(plugin, vpod(volumes=[claim("rwx")]), snap)[1] == [unresolvable(BIND)] * 3


def test_reserve_assumes_and_unreserve_reverts() -> None:
    s = cluster()
    plugin, snap = VolumeBinding(s), Snapshot.build(NODES)
    pod = vpod(volumes=[claim("w")])
    _, _, state = run(plugin, pod, snap)
    assert plugin.reserve(state, pod, "n0") == OK
    assumed = s.pv("pv-n0-small")
    assert assumed is not None and assumed["spec"]["claimRef"]["name"] == "w"
    assert assumed["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    # another pod's claim of the same size no longer gets that PV
    s.on_add(PVC, wait_claim("w2"))
    _, _, state2 = run(plugin, vpod("q", volumes=[claim("w2")]), snap)
    other = plugin.chosen_volumes(state2, "n0")
    assert other is not None
    assert [p["metadata"]["name"] for p, _ in other.static_bindings] == ["pv-n0-big"]
    plugin.unreserve(state, pod, "n0")
    assert s.pv("pv-n0-small") is not None and "claimRef" not in s.pv("pv-n0-small")["spec"]  # type: ignore[index]


def test_pre_bind_static_binding_with_claim_completion() -> None:
    s = cluster()
    api = InMemoryVolumeBinderAPI(s.pvs(), [s.pvc("ns", "w")])  # type: ignore[list-item]
    plugin = VolumeBinding(s, api, poll_interval=0.001, bind_timeout=1.0, complete_claims=True)
    pod = vpod(volumes=[claim("w")])
    _, _, state = run(plugin, pod, Snapshot.build(NODES))
    assert plugin.reserve(state, pod, "n0") == OK
    assert plugin.pre_bind(state, pod, "n0") == OK
    assert api.pvs["pv-n0-small"]["spec"]["claimRef"]["name"] == "w"
    bound = api.pvcs["ns/w"]
    assert bound["spec"]["volumeName"] == "pv-n0-small"
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"


def test_pre_bind_provisioning_sets_selected_node_then_times_out() -> None:
    s = cluster()
    api = InMemoryVolumeBinderAPI([], [s.pvc("ns", "w-zonal")])  # type: ignore[list-item]
    plugin = VolumeBinding(s, api, poll_interval=0.001, bind_timeout=0.01)
    pod = vpod(volumes=[claim("w-zonal")])
    _, _, state = run(plugin, pod, Snapshot.build(NODES))
    assert plugin.reserve(state, pod, "n2") == OK
    assert s.pvc("ns", "w-zonal")["metadata"]["annotations"] == {"volume.kubernetes.io/selected-node": "n2"}  # type: ignore[index]
    st = plugin.pre_bind(state, pod, "n2")
    assert st == Status.error("binding volumes: timed out waiting for the condition", NAME)
    assert api.pvcs["ns/w-zonal"]["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n2"


def test_pre_bind_conflict_reverts_unwritten_assumptions() -> None:
    s = cluster()
    stale = dict(s.pv("pv-n0-small") or {})
    stale["metadata"] = {**stale["metadata"], "resourceVersion": "9"}
    api = InMemoryVolumeBinderAPI([stale], [])
    plugin = VolumeBinding(s, api, poll_interval=0.001, bind_timeout=0.01)
    pod = vpod(volumes=[claim("w")])
    _, _, state = run(plugin, pod, Snapshot.build(NODES))
    assert plugin.reserve(state, pod, "n0") == OK
    st = plugin.pre_bind(state, pod, "n0")
    assert st.code == Code.ERROR and "the object has been modified" in st.message()
    assert not s.is_assumed(PV, "pv-n0-small")


def test_all_bound_pod_skips_pre_bind() -> None:
    plugin = VolumeBinding(cluster())
    pod = vpod(volumes=[claim("bound")])
    _, got, state = run(plugin, pod, Snapshot.build(NODES))
    assert got == [unresolvable(AFFINITY)] * 2 + [OK]
    assert plugin.reserve(state, pod, "n2") == OK and plugin.pre_bind(state, pod, "n2") == OK


def test_args() -> None:
    assert VolumeBinding.from_args({}, VolumeObjects()).settings.bind_timeout == 600
    assert VolumeBinding.from_args({"bindTimeoutSeconds": 5}, VolumeObjects()).settings.bind_timeout == 5
    with pytest.raises(
        ValueError, match="bindTimeoutSeconds=0: invalid BindTimeoutSeconds, must be positive integer"
    ):
        VolumeBinding.from_args({"bindTimeoutSeconds": 0}, VolumeObjects())
    with pytest.raises(ValueError, match="bindTimeoutSeconds='x'"):
        VolumeBinding.from_args({"bindTimeoutSeconds": "x"}, VolumeObjects())
