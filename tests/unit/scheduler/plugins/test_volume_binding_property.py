"""Property test: VolumeBinding's PreFilter and Filter equal the oracle's (tests/oracles/volumes.py) on
generated PVs (node affinity, capacity, modes, claim references, phases), claims and nodes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.volumes import VolumeObjects
from scheduler.plugins.volume.binding import VolumeBinding
from tests.oracles.volumes import VolumeBindingOracle
from tests.unit.scheduler.plugins._support import make_node
from tests.unit.scheduler.plugins._volume_support import add_all, claim, pv, pvc, storage_class, vpod

Obj = dict[str, Any]
SIZES = ["1Gi", "5Gi", "10Gi", "5120Mi"]
EXPRS = [
    {"key": "zone", "operator": "In", "values": ["a"]},
    {"key": "zone", "operator": "NotIn", "values": ["a"]},
    {"key": "rack", "operator": "Exists"},
    {"key": "n", "operator": "Gt", "values": ["1"]},
    {"key": "zone", "operator": "Bogus"},
    {"key": "metadata.name", "operator": "In", "values": ["n0"]},
    {"key": "h", "operator": "In", "values": ["n0"]},
    {"key": "h", "operator": "In", "values": ["n1", "n2"]},
]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[VolumeObjects, list[Obj], Obj]:
    s = VolumeObjects()
    pvs = []
    for i in range(draw(st.integers(0, 5))):
        extra: Obj = {"capacity": {"storage": draw(st.sampled_from(SIZES))}}
        extra["accessModes"] = draw(
            st.sampled_from([["ReadWriteOnce"], ["ReadWriteMany"], ["ReadWriteOnce", "ReadOnlyMany"]])
        )
        if draw(st.booleans()):
            terms = draw(
                st.lists(
                    st.lists(st.sampled_from(EXPRS), max_size=2).map(lambda es: {"matchExpressions": es}),
                    max_size=2,
                )
            )
            extra["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
        if draw(st.booleans()):
            extra["claimRef"] = {"name": draw(st.sampled_from(["c0", "c1", "other"])), "namespace": "ns"}
        if draw(st.booleans()):
            extra["volumeMode"] = "Block"
        p = pv(f"pv{i}", storageClassName=draw(st.sampled_from(["local", "dyn", "zonal"])), **extra)
        p["status"] = {"phase": draw(st.sampled_from(["Available", "Bound", "Released"]))}
        pvs.append(p)
    claims = []
    for i in range(3):
        c = pvc(
            f"c{i}",
            sc=draw(st.sampled_from(["local", "dyn", "zonal", None, "gone"])),
            volume=draw(st.sampled_from(["", "", "pv0", "pv1", "nope"])),
            resources={"requests": {"storage": draw(st.sampled_from(SIZES))}},
            accessModes=["ReadWriteOnce"],
        )
        ann = {}
        if draw(st.booleans()):
            ann["pv.kubernetes.io/bind-completed"] = "yes"
        if draw(st.booleans()):
            ann["volume.kubernetes.io/selected-node"] = draw(st.sampled_from(["n0", "n1"]))
        if draw(st.booleans()):
            c["spec"]["selector"] = draw(
                st.sampled_from(
                    [{"matchLabels": {"k": "v"}}, {}, {"matchExpressions": [{"key": "k", "operator": "Bad"}]}]
                )
            )
        c["metadata"]["annotations"] = ann
        claims.append(c)
    scs = [
        storage_class("local", provisioner="kubernetes.io/no-provisioner", mode="WaitForFirstConsumer"),
        storage_class("dyn", provisioner="csi", mode="WaitForFirstConsumer"),
        storage_class(
            "zonal",
            provisioner="csi",
            mode="WaitForFirstConsumer",
            allowedTopologies=draw(
                st.sampled_from([[], [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}], [{}]])
            ),
        ),
    ]
    add_all(s, pvs=pvs, pvcs=claims, scs=scs)
    nodes = [
        make_node(
            f"n{i}",
            labels=draw(
                st.dictionaries(
                    st.sampled_from(["zone", "rack", "n"]), st.sampled_from(["a", "b", "2", "0"]), max_size=3
                )
            ),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    pod = vpod(
        volumes=[
            claim(c) for c in draw(st.lists(st.sampled_from(["c0", "c1", "c2"]), max_size=3, unique=True))
        ]
    )
    return s, nodes, pod


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_volume_binding_matches_oracle(scenario: tuple[VolumeObjects, list[Obj], Obj]) -> None:
    s, nodes, pod = scenario
    snap = Snapshot.build(nodes)
    plugin, oracle = VolumeBinding(s), VolumeBindingOracle(s)
    state, ostate = CycleState(0.0), CycleState(0.0)
    pre = plugin.pre_filter(state, pod, snap)
    assert pre == oracle.pre_filter(ostate, pod, snap)
    if not pre.is_success():
        return
    res = plugin.filter_all(state, pod, snap)
    assert [res.status_of(i) for i in range(snap.n)] == [
        oracle.filter(ostate, pod, snap, i) for i in range(snap.n)
    ]
