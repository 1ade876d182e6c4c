"""VolumeRestrictions, VolumeZone, NodeVolumeLimits and the in-tree limits against kube-scheduler
v1.20.2's rules and reason strings (each case also checked against tests/oracles/volumes.py)."""

from __future__ import annotations

import hashlib

import pytest

from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.volumes import CSI_NODE, PV, PVC, VolumeObjects
from scheduler.plugins.volume.limits import NodeVolumeLimits, csi_attach_limit_key
from scheduler.plugins.volume.limits_intree import AzureDiskLimits, CinderLimits, EBSLimits, GCEPDLimits
from scheduler.plugins.volume.restrictions import VolumeRestrictions
from scheduler.plugins.volume.zone import VolumeZone, label_zones_to_set
from tests.unit.scheduler.plugins._support import make_node
from tests.unit.scheduler.plugins._volume_support import (
    add_all,
    claim,
    csi_node,
    pv,
    pvc,
    statuses,
    storage_class,
    vpod,
)

DISK = Status(Code.UNSCHEDULABLE, ("node(s) had no available disk",), "VolumeRestrictions")
ZONE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had no available volume zone",), "VolumeZone")


def _max(plugin: str) -> Status:
    return Status(Code.UNSCHEDULABLE, ("node(s) exceed max volume count",), plugin)


# --- VolumeRestrictions -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("new", "existing", "conflict"),
    [
        ({"gcePersistentDisk": {"pdName": "a"}}, {"gcePersistentDisk": {"pdName": "a"}}, True),
        ({"gcePersistentDisk": {"pdName": "a"}}, {"gcePersistentDisk": {"pdName": "b"}}, False),
        (
            {"gcePersistentDisk": {"pdName": "a", "readOnly": True}},
            {"gcePersistentDisk": {"pdName": "a", "readOnly": True}},
            False,
        ),
        (
            {"gcePersistentDisk": {"pdName": "a", "readOnly": True}},
            {"gcePersistentDisk": {"pdName": "a"}},
            True,
        ),
        (
            {"awsElasticBlockStore": {"volumeID": "x", "readOnly": True}},
            {"awsElasticBlockStore": {"volumeID": "x", "readOnly": True}},
            True,
        ),
        ({"awsElasticBlockStore": {"volumeID": "x"}}, {"awsElasticBlockStore": {"volumeID": "y"}}, False),
        ({"iscsi": {"iqn": "q"}}, {"iscsi": {"iqn": "q"}}, True),
        ({"iscsi": {"iqn": "q", "readOnly": True}}, {"iscsi": {"iqn": "q", "readOnly": True}}, False),
        (
            {"rbd": {"monitors": ["a", "b"], "pool": "p", "image": "i"}},
            {"rbd": {"monitors": ["b", "c"], "pool": "p", "image": "i"}},
            True,
        ),
        (
            {"rbd": {"monitors": ["a"], "pool": "p", "image": "i"}},
            {"rbd": {"monitors": ["c"], "pool": "p", "image": "i"}},
            False,
        ),
        (
            {"rbd": {"monitors": ["a"], "pool": "p", "image": "i"}},
            {"rbd": {"monitors": ["a"], "pool": "q", "image": "i"}},
            False,
        ),
        (
            {"rbd": {"monitors": ["a"], "pool": "p", "image": "i", "readOnly": True}},
            {"rbd": {"monitors": ["a"], "pool": "p", "image": "i", "readOnly": True}},
            False,
        ),
        ({"gcePersistentDisk": {"pdName": "a"}}, {"awsElasticBlockStore": {"volumeID": "a"}}, False),
    ],
)
def test_volume_restrictions(new: dict[str, object], existing: dict[str, object], conflict: bool) -> None:
    snap = Snapshot.build(
        [make_node("n0"), make_node("n1")], [vpod("e", node="n0", volumes=[{"name": "v", **existing}])]
    )
    got = statuses(VolumeRestrictions(), vpod(volumes=[{"name": "v", **new}]), snap)
    assert got == [DISK if conflict else Status.success(), Status.success()]


def test_volume_restrictions_without_disks_passes_everything() -> None:
    snap = Snapshot.build([make_node("n0")], [vpod("e", node="n0", volumes=[{"name": "v", "emptyDir": {}}])])
    assert statuses(VolumeRestrictions(), vpod(volumes=[{"name": "v", "emptyDir": {}}]), snap) == [
        Status.success()
    ]


# --- VolumeZone ---------------------------------------------------------------------------------------
Z = "topology.kubernetes.io/zone"
BZ = "failure-domain.beta.kubernetes.io/zone"
R = "topology.kubernetes.io/region"


def _zone_store() -> VolumeObjects:
    s = VolumeObjects()
    add_all(
        s,
        pvs=[
            pv("pv-a", labels={Z: "a"}),
            pv("pv-ab", labels={BZ: "a__b"}),
            pv("pv-bad", labels={Z: "a__"}),
            pv("pv-region", labels={R: "r1"}),
            pv("pv-none", labels={"other": "x"}),
        ],
        pvcs=[
            pvc("c-a", volume="pv-a"),
            pvc("c-ab", volume="pv-ab"),
            pvc("c-bad", volume="pv-bad"),
            pvc("c-region", volume="pv-region"),
            pvc("c-none", volume="pv-none"),
            pvc("c-missing-pv", volume="gone"),
            pvc("c-wait", sc="wait"),
            pvc("c-imm", sc="imm"),
            pvc("c-nosc"),
            pvc("c-unknown-sc", sc="nope"),
            pvc("c-nomode", sc="nomode"),
        ],
        scs=[
            storage_class("wait", mode="WaitForFirstConsumer"),
            storage_class("imm"),
            storage_class("nomode", mode=None),
        ],
    )
    return s


NODES = [
    make_node("n-a", labels={Z: "a"}),
    make_node("n-b", labels={Z: "b", BZ: "b"}),
    make_node("n-none"),
    make_node("n-r1", labels={R: "r1"}),
]


def _zone(claims: list[str]) -> list[Status]:
    snap = Snapshot.build(NODES)
    return statuses(VolumeZone(_zone_store()), vpod(volumes=[claim(c) for c in claims]), snap)


def err(msg: str, plugin: str = "VolumeZone") -> Status:
    return Status(Code.ERROR, (msg,), plugin)


OK = Status.success()


def test_volume_zone_matches_pv_labels() -> None:
    assert _zone(["c-a"]) == [OK, ZONE, OK, ZONE]  # n-r1 has a zone-kind label but not this one: ""
    assert _zone(["c-ab"]) == [ZONE, OK, OK, ZONE]  # n-a lacks the beta label: "" is not in {a, b}
    assert _zone(["c-region"]) == [ZONE, ZONE, OK, OK]
    assert _zone(["c-bad", "c-none"]) == [OK, OK, OK, OK]  # unparsable labels are ignored


def test_volume_zone_unbound_claims_and_errors() -> None:
    assert _zone(["c-wait"]) == [OK] * 4
    assert _zone(["c-imm"]) == [
        err("PersistentVolume had no name"),
        err("PersistentVolume had no name"),
        OK,
        err("PersistentVolume had no name"),
    ]
    assert _zone(["c-nosc"])[0] == err("PersistentVolumeClaim had no pv name and storageClass name")
    assert _zone(["c-unknown-sc"])[0] == err(
        'StorageClass "nope" claimed by PersistentVolumeClaim "c-unknown-sc" not found'
    )
    assert _zone(["c-nomode"])[0] == err('VolumeBindingMode not set for StorageClass "nomode"')
    assert _zone(["c-missing-pv"])[0] == err('persistentvolume "gone" not found')
    assert _zone(["nothere"])[0] == err('persistentvolumeclaim "nothere" not found')
    # volumes resolve in order: a conflict before the error wins on the nodes it rejects
    assert _zone(["c-a", "nothere"]) == [err('persistentvolumeclaim "nothere" not found'), ZONE, OK, ZONE]
    empty = vpod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": ""}}])
    assert statuses(VolumeZone(_zone_store()), empty, Snapshot.build(NODES))[0] == err(
        "PersistentVolumeClaim had no name"
    )


def test_label_zones_to_set() -> None:
    assert label_zones_to_set("a__ b") == frozenset({"a", "b"})
    assert label_zones_to_set("a____b") is None
    assert label_zones_to_set("") is None


# --- NodeVolumeLimits (CSI) --------------------------------------------------------------------------
def _csi_store() -> VolumeObjects:
    s = VolumeObjects()
    add_all(
        s,
        pvs=[pv(f"pv{i}", csi={"driver": "ebs.csi", "volumeHandle": f"h{i}"}) for i in range(4)]
        + [pv("intree", awsElasticBlockStore={"volumeID": "x"})],
        pvcs=[pvc(f"c{i}", volume=f"pv{i}") for i in range(4)]
        + [
            pvc("dyn", sc="csi-sc"),
            pvc("dyn2", sc="csi-sc"),
            pvc("mig", sc="ebs-intree"),
            pvc("c-intree", volume="intree"),
        ],
        scs=[
            storage_class("csi-sc", provisioner="ebs.csi"),
            storage_class("ebs-intree", provisioner="kubernetes.io/aws-ebs"),
        ],
        csis=[csi_node("n-2", {"ebs.csi": 2}), csi_node("n-nolimit", {"ebs.csi": None})],
    )
    return s


def test_csi_limits_count_unique_volumes() -> None:
    nodes = [
        make_node("n-2"),
        make_node("n-nolimit"),
        make_node("n-alloc", allocatable={"cpu": "1", csi_attach_limit_key("ebs.csi"): "1"}),
    ]
    pods = [vpod("e1", node="n-2", volumes=[claim("c0")]), vpod("e2", node="n-2", volumes=[claim("c1")])]
    snap = Snapshot.build(nodes, pods)
    plugin = NodeVolumeLimits(_csi_store())
    mx = _max("NodeVolumeLimits")
    assert statuses(plugin, vpod(volumes=[claim("c2")]), snap) == [mx, OK, OK]
    assert statuses(plugin, vpod(volumes=[claim("c0")]), snap) == [OK, OK, OK]  # already attached there
    assert statuses(plugin, vpod(volumes=[claim("c2"), claim("c3")]), snap) == [mx, mx, OK]
    assert statuses(plugin, vpod(volumes=[claim("dyn"), claim("dyn2")]), snap) == [mx, mx, OK]
    # in-tree PVs and migratable in-tree provisioners do not count (CSI migration off)
    assert statuses(plugin, vpod(volumes=[claim("mig"), claim("c-intree"), claim("c2")]), snap) == [
        mx,
        OK,
        OK,
    ]
    assert statuses(plugin, vpod(volumes=[claim("unknown")]), snap) == [OK, OK, OK]
    no_name = vpod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": ""}}])
    assert (
        statuses(plugin, no_name, snap) == [err("PersistentVolumeClaim had no name", "NodeVolumeLimits")] * 3
    )


def test_csi_attach_limit_key() -> None:
    assert csi_attach_limit_key("ebs.csi.aws.com") == "attachable-volumes-csi-ebs.csi.aws.com"
    long = "d" * 40  # 23 + 40 >= 63: the first 23 characters and 16 hex digits of the sha1
    want = "attachable-volumes-csi-" + "d" * 23 + hashlib.sha1(long.encode()).hexdigest()[:16]
    assert csi_attach_limit_key(long) == want
    assert csi_attach_limit_key("d" * 39) == "attachable-volumes-csi-" + "d" * 39  # 62 characters


# --- in-tree limits -----------------------------------------------------------------------------------
def _ebs(n: int, prefix: str = "v") -> list[dict[str, object]]:
    return [{"name": f"{prefix}{i}", "awsElasticBlockStore": {"volumeID": f"{prefix}{i}"}} for i in range(n)]


def test_ebs_default_limits_by_instance_type() -> None:
    nodes = [
        make_node("m5", labels={"node.kubernetes.io/instance-type": "m5.large"}),
        make_node("t3", labels={"beta.kubernetes.io/instance-type": "xt3y"}),
        make_node("other", labels={"node.kubernetes.io/instance-type": "m4.large"}),
        make_node("alloc", allocatable={"cpu": "1", "attachable-volumes-aws-ebs": "3"}),
    ]
    snap = Snapshot.build(nodes, [vpod("e", node="other", volumes=_ebs(30, "e"))])
    plugin = EBSLimits(VolumeObjects())
    mx = _max("EBSLimits")
    # rows in name order: alloc (allocatable 3), m5 (nitro: 25), other (39, 30 attached), t3 (nitro: 25)
    assert statuses(plugin, vpod(volumes=_ebs(25)), snap) == [mx, OK, mx, OK]
    assert statuses(plugin, vpod(volumes=_ebs(26)), snap) == [mx, mx, mx, mx]
    assert statuses(plugin, vpod(volumes=_ebs(10)), snap) == [mx, OK, mx, OK]
    assert statuses(plugin, vpod(volumes=_ebs(10, "e")), snap) == [
        mx,
        OK,
        OK,
        OK,
    ]  # attached ones are not new


@pytest.mark.parametrize(
    ("plugin_type", "source", "limit"),
    [
        (GCEPDLimits, {"gcePersistentDisk": {"pdName": "d"}}, 16),
        (AzureDiskLimits, {"azureDisk": {"diskName": "d"}}, 16),
        (CinderLimits, {"cinder": {"volumeID": "d"}}, 256),
    ],
)
def test_in_tree_default_limits(
    plugin_type: type[GCEPDLimits], source: dict[str, dict[str, str]], limit: int
) -> None:
    kind, [(field, value)] = next(iter(source.items()))[0], list(next(iter(source.values())).items())
    vols = [{"name": f"v{i}", kind: {field: f"{value}{i}"}} for i in range(limit + 1)]
    snap = Snapshot.build([make_node("n")])
    plugin = plugin_type(VolumeObjects())
    assert statuses(plugin, vpod(volumes=vols[:limit]), snap) == [OK]
    assert statuses(plugin, vpod(volumes=vols), snap) == [_max(plugin.name)]


def test_in_tree_claims_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    s = VolumeObjects()
    add_all(
        s,
        pvs=[
            pv("pv-ebs", awsElasticBlockStore={"volumeID": "shared"}),
            pv("pv-gce", gcePersistentDisk={"pdName": "g"}),
        ],
        pvcs=[
            pvc("c-ebs", volume="pv-ebs"),
            pvc("c-gce", volume="pv-gce"),
            pvc("c-dyn", sc="ebs"),
            pvc("c-lost", volume="gone", sc="ebs"),
        ],
        scs=[storage_class("ebs", provisioner="kubernetes.io/aws-ebs")],
    )
    monkeypatch.setenv("KUBE_MAX_PD_VOLS", "2")
    plugin = EBSLimits(s)
    snap = Snapshot.build(
        [make_node("n")],
        [vpod("e", node="n", volumes=[{"name": "x", "awsElasticBlockStore": {"volumeID": "shared"}}])],
    )
    # the claim's PV is the same EBS volume as the inline one: counted once
    assert statuses(plugin, vpod(volumes=[claim("c-ebs"), claim("c-gce")]), snap) == [OK]
    assert statuses(plugin, vpod(volumes=[claim("c-dyn"), claim("c-lost")]), snap) == [_max("EBSLimits")]
    assert statuses(plugin, vpod(volumes=[claim("c-dyn")]), snap) == [OK]
    monkeypatch.setenv("KUBE_MAX_PD_VOLS", "-1")
    assert EBSLimits(s).env_limit == -1


def test_limits_follow_store_changes_between_cycles() -> None:
    """What the plugins keep per row is re-read when PVs, claims or CSINodes change."""
    s = _csi_store()
    snap = Snapshot.build([make_node("n-2")], [vpod("e1", node="n-2", volumes=[claim("c0"), claim("c1")])])
    plugin, pod = NodeVolumeLimits(s), vpod(volumes=[claim("c2")])
    assert statuses(plugin, pod, snap) == [_max("NodeVolumeLimits")]
    s.on_update(PV, pv("pv0"), pv("pv0", rv="2", csi={"driver": "other.csi", "volumeHandle": "h0"}))
    assert statuses(plugin, pod, snap) == [OK]  # one attached volume of the driver left
    s.on_update(CSI_NODE, csi_node("n-2", {}), csi_node("n-2", {"ebs.csi": 1}))
    assert statuses(plugin, pod, snap) == [_max("NodeVolumeLimits")]
    ebs = EBSLimits(s)
    s.on_add(PV, pv("pv-e", awsElasticBlockStore={"volumeID": "e"}))
    snap2 = Snapshot.build(
        [make_node("n", allocatable={"attachable-volumes-aws-ebs": "1"})],
        [vpod("e", node="n", volumes=[claim("c-intree")])],
    )
    new = vpod(volumes=[{"name": "x", "awsElasticBlockStore": {"volumeID": "y"}}])
    assert statuses(ebs, new, snap2) == [_max("EBSLimits")]
    s.on_update(PVC, pvc("c-intree"), pvc("c-intree", rv="2", volume="pv-e"))
    assert statuses(ebs, new, snap2) == [_max("EBSLimits")]
    s.on_delete(PVC, pvc("c-intree"))
    assert statuses(ebs, new, snap2) == [OK]
