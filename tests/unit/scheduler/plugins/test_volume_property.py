"""Property test: every volume filter equals its oracle (tests/oracles/volumes.py) on generated
clusters — nodes with zone labels and volume limits, pods with inline disks and claims, and a store
of PVs, PVCs, StorageClasses and CSINodes — before and after pods are added to the snapshot."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.framework.volumes import VolumeObjects
from scheduler.plugins.volume.limits import NodeVolumeLimits, csi_attach_limit_key
from scheduler.plugins.volume.limits_intree import AzureDiskLimits, CinderLimits, EBSLimits, GCEPDLimits
from scheduler.plugins.volume.restrictions import VolumeRestrictions
from scheduler.plugins.volume.zone import VolumeZone
from tests.unit.scheduler.plugins._support import add_pods, make_node
from tests.unit.scheduler.plugins._volume_support import (
    add_all,
    csi_node,
    pv,
    pvc,
    statuses,
    storage_class,
    vpod,
)

Obj = dict[str, Any]
ZONE_KEYS = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
]
ZONE_VALUES = ["a", "b", "a__b", "a__", ""]
IDS = ["d0", "d1", "d2"]

inline = st.one_of(
    st.builds(
        lambda i, ro: {"gcePersistentDisk": {"pdName": i, "readOnly": ro}},
        st.sampled_from(IDS),
        st.booleans(),
    ),
    st.builds(lambda i: {"awsElasticBlockStore": {"volumeID": i}}, st.sampled_from(IDS)),
    st.builds(lambda i, ro: {"iscsi": {"iqn": i, "readOnly": ro}}, st.sampled_from(IDS), st.booleans()),
    st.builds(
        lambda m, i, ro: {"rbd": {"monitors": m, "pool": "p", "image": i, "readOnly": ro}},
        st.lists(st.sampled_from(["m1", "m2", "m3"]), max_size=2),
        st.sampled_from(IDS),
        st.booleans(),
    ),
    st.builds(lambda i: {"azureDisk": {"diskName": i}}, st.sampled_from(IDS)),
    st.builds(lambda i: {"cinder": {"volumeID": i}}, st.sampled_from(IDS)),
    st.builds(
        lambda c: {"persistentVolumeClaim": {"claimName": c}},
        st.sampled_from(["c0", "c1", "c2", "c3", "c4", "c5", "missing"]),
    ),
    st.just({"persistentVolumeClaim": {"claimName": ""}}),
    st.just({"emptyDir": {}}),
)
volume_lists = st.lists(inline, max_size=4).map(lambda vs: [{"name": f"v{i}", **v} for i, v in enumerate(vs)])

pv_sources = st.sampled_from(
    [
        {"csi": {"driver": "drv", "volumeHandle": "h0"}},
        {"csi": {"driver": "drv", "volumeHandle": "h1"}},
        {"csi": {"driver": "other", "volumeHandle": "h0"}},
        {"awsElasticBlockStore": {"volumeID": "d0"}},
        {"gcePersistentDisk": {"pdName": "d1"}},
        {"cinder": {"volumeID": "d2"}},
    ]
)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[VolumeObjects, list[Obj], list[Obj], list[Obj]]:
    s = VolumeObjects()
    pvs = [
        pv(
            f"pv{i}",
            labels=draw(
                st.dictionaries(st.sampled_from(ZONE_KEYS), st.sampled_from(ZONE_VALUES), max_size=2)
            ),
            **draw(pv_sources),
        )
        for i in range(4)
    ]
    pvcs = [
        pvc(
            f"c{i}",
            volume=draw(st.sampled_from(["", "pv0", "pv1", "pv2", "pv3", "gone"])),
            sc=draw(st.sampled_from([None, "wait", "imm", "intree", "nomode", "nope"])),
        )
        for i in range(6)
    ]
    scs = [
        storage_class("wait", provisioner="drv", mode="WaitForFirstConsumer"),
        storage_class("imm", provisioner="other"),
        storage_class(
            "intree", provisioner=draw(st.sampled_from(["kubernetes.io/aws-ebs", "kubernetes.io/gce-pd"]))
        ),
        storage_class("nomode", provisioner="drv", mode=None),
    ]
    n = draw(st.integers(1, 5))
    nodes, csis = [], []
    for i in range(n):
        alloc = {"cpu": "4"}
        for key in draw(
            st.lists(
                st.sampled_from(
                    ["attachable-volumes-aws-ebs", "attachable-volumes-gce-pd", csi_attach_limit_key("drv")]
                ),
                max_size=2,
            )
        ):
            alloc[key] = str(draw(st.integers(0, 3)))
        nodes.append(
            make_node(
                f"n{i}",
                labels=draw(
                    st.dictionaries(st.sampled_from(ZONE_KEYS), st.sampled_from(["a", "b"]), max_size=2)
                ),
                allocatable=alloc,
            )
        )
        if draw(st.booleans()):
            csis.append(csi_node(f"n{i}", {"drv": draw(st.sampled_from([None, 0, 1, 2])), "other": 1}))
    add_all(s, pvs=pvs, pvcs=pvcs, scs=scs, csis=csis)
    pods = [
        vpod(f"e{j}", node=f"n{draw(st.integers(0, n - 1))}", volumes=draw(volume_lists))
        for j in range(draw(st.integers(0, 5)))
    ]
    return s, nodes, pods, [vpod(f"late{j}", node="n0", volumes=draw(volume_lists)) for j in range(2)]


@settings(max_examples=150, deadline=None)
@given(clusters(), volume_lists)
def test_volume_filters_match_oracles(
    cluster: tuple[VolumeObjects, list[Obj], list[Obj], list[Obj]], vols: list[Obj]
) -> None:
    s, nodes, pods, late = cluster
    snap = Snapshot.build(nodes, pods)
    plugins = [
        VolumeRestrictions(),
        VolumeZone(s),
        NodeVolumeLimits(s),
        EBSLimits(s),
        GCEPDLimits(s),
        AzureDiskLimits(s),
        CinderLimits(s),
    ]
    pod = vpod(volumes=vols)
    for plugin in plugins:
        statuses(plugin, pod, snap)
    add_pods(snap, late, 1)  # the views follow the snapshot's rows
    for plugin in plugins:
        statuses(plugin, pod, snap)
