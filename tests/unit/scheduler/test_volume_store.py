"""VolumeObjects: lookups by kind, and the assumed versions' lifetime (kube's AssumeCache)."""

from __future__ import annotations

import pytest

from scheduler.framework.volumes import CSI_NODE, PV, PVC, STORAGE_CLASS, VolumeObjects, pvc_class
from tests.unit.scheduler.plugins._volume_support import csi_node, pv, pvc, storage_class


def test_lookups() -> None:
    s = VolumeObjects()
    s.on_add(PV, pv("a", storageClassName="fast"))
    s.on_add(PV, pv("b", storageClassName="slow"))
    s.on_add(PVC, pvc("c", ns="x"))
    s.on_add(STORAGE_CLASS, storage_class("fast"))
    s.on_add(CSI_NODE, csi_node("n", {"d": 1}))
    assert s.pvc("x", "c") is not None and s.pvc("y", "c") is None
    assert s.pv("a") is not None and s.storage_class("fast") is not None and s.csi_node("n") is not None
    assert [p["metadata"]["name"] for p in s.pvs_of_class("fast")] == ["a"]
    s.on_delete(PV, pv("a"))
    assert s.pv("a") is None and s.pvs_of_class("fast") == []
    with pytest.raises(ValueError, match="kind='Pod'"):
        s.on_add("Pod", {})


def test_assumed_until_informer_catches_up_or_restore() -> None:
    s = VolumeObjects()
    s.on_add(PV, pv("a", rv="5"))
    bound = pv("a", rv="5", claimRef={"name": "c", "namespace": "ns"})
    s.assume(PV, bound)
    assert s.pv("a") is bound and s.is_assumed(PV, "a")
    assert s.api_object(PV, "a") is not bound
    s.on_update(PV, pv("a", rv="5"), pv("a", rv="4"))  # older than the assumption: ignored
    assert s.pv("a") is bound
    newer = pv("a", rv="6")
    s.on_update(PV, bound, newer)  # the informer caught up
    assert s.pv("a") is newer and not s.is_assumed(PV, "a")
    s.assume(PV, bound | {"metadata": {"name": "a", "resourceVersion": "6"}})
    s.restore(PV, "a")
    assert s.pv("a") is newer
    with pytest.raises(ValueError, match="out of sync"):
        s.assume(PV, pv("a", rv="3"))
    with pytest.raises(ValueError, match="not found"):
        s.assume(PVC, pvc("nope"))
    with pytest.raises(ValueError, match="only"):
        s.assume(STORAGE_CLASS, storage_class("x"))


def test_pvc_class_beta_annotation_wins() -> None:
    c = pvc("c", sc="spec")
    assert pvc_class(c) == "spec"
    c["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "beta"}
    assert pvc_class(c) == "beta"


def test_versions_grow_per_kind() -> None:
    s = VolumeObjects()
    before = dict(s.kind_versions)
    s.on_add(PV, pv("a"))
    s.on_update(PV, pv("a"), pv("a", rv="2"))
    s.assume(PV, pv("a", rv="2", claimRef={"name": "c"}))
    s.restore(PV, "a")
    s.on_delete(PV, pv("a"))
    assert s.kind_versions[PV] == before[PV] + 5
    assert s.kind_versions[PVC] == before[PVC] and s.version == 5
    s.on_add(CSI_NODE, csi_node("n", {}))
    assert s.kind_versions[CSI_NODE] == before[CSI_NODE] + 1
    assert list(s.objects(CSI_NODE)) == ["n"]
