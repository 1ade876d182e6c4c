"""The NodeMetric and NodeSLO CRDs on the real API server: established, cluster-scoped, status
through the status subresource, full objects read back equal (nothing pruned), watched, and bad
objects refused by the schema."""

from __future__ import annotations

import copy
import threading
import uuid
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from apis import convert
from apis.constants import NODE_METRIC_PLURAL, NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION

pytestmark = pytest.mark.apiserver


def _full_nodemetric(name: str) -> dict[str, Any]:
    from tests.samples import full_nodemetric_dict

    nm = full_nodemetric_dict()
    nm["metadata"] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    return nm


def test_crds_are_established_cluster_scoped_with_status(kube: Any) -> None:
    ext = client.ApiextensionsV1Api(kube)
    for plural, kind in ((NODE_METRIC_PLURAL, "NodeMetric"), (NODE_SLO_PLURAL, "NodeSLO")):
        crd = ext.read_custom_resource_definition(f"{plural}.{SLO_GROUP}")
        assert crd.spec.scope == "Cluster"
        assert crd.spec.names.kind == kind
        [version] = crd.spec.versions
        assert (version.name, version.served, version.storage) == (SLO_VERSION, True, True)
        assert version.subresources.status is not None
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)


def test_nodemetric_status_through_subresource_reads_back_equal_and_is_watched(kube: Any) -> None:
    api = client.CustomObjectsApi(kube)
    name = f"node-{uuid.uuid4().hex[:8]}"
    full = _full_nodemetric(name)
    body = copy.deepcopy(full)
    body.pop("status")
    created = api.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, body)
    try:
        assert created["spec"] == full["spec"]
        assert "status" not in created or not created["status"]

        events: list[dict[str, Any]] = []
        seen = threading.Event()

        def watch_it() -> None:
            w = watch.Watch()
            for ev in w.stream(
                api.list_cluster_custom_object, SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL,
                field_selector=f"metadata.name={name}",
                resource_version=created["metadata"]["resourceVersion"], timeout_seconds=20,
            ):  # fmt: skip
                events.append(ev)
                if ev["type"] == "MODIFIED" and ev["object"].get("status"):
                    seen.set()
                    w.stop()

        t = threading.Thread(target=watch_it, daemon=True)
        t.start()

        # A status sent through the main resource is ignored (status subresource semantics).
        sneaky = dict(created, status={"updateTime": "2020-01-01T00:00:00Z"})
        after = api.replace_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, sneaky)
        assert not after.get("status")

        patched = api.patch_cluster_custom_object_status(
            SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": full["status"]}
        )
        assert patched["status"] == full["status"]
        got = api.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)
        assert got["status"] == full["status"]
        assert got["spec"] == full["spec"]
        # The stored object is valid input for our types, and they write it back identically.
        nm = convert.nodemetric_from_dict(got)
        assert convert.nodemetric_to_dict(nm)["status"] == full["status"]

        assert seen.wait(20), f"no MODIFIED event with status; saw {[e['type'] for e in events]}"
        modified = [e for e in events if e["type"] == "MODIFIED" and e["object"].get("status")]
        assert modified[-1]["object"]["status"] == full["status"]
    finally:
        api.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("status", "podsMetric", 0, "qos"), "Gold"),
        (("status", "nodeMetric", "nodeUsage", "resources", "cpu"), {"not": "a quantity"}),
        (("status", "nodeMetric", "numaUsages", 0, "numaNodeID"), "zero"),
        (("status", "updateTime"), 12),
    ],
)
def test_schema_refuses_bad_status(kube: Any, path: tuple[Any, ...], value: Any) -> None:
    api = client.CustomObjectsApi(kube)
    name = f"node-{uuid.uuid4().hex[:8]}"
    full = _full_nodemetric(name)
    body = copy.deepcopy(full)
    body.pop("status")
    api.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, body)
    try:
        bad = copy.deepcopy(full["status"])
        target: Any = bad
        for key in path[1:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(ApiException) as e:
            api.patch_cluster_custom_object_status(
                SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": bad}
            )
        assert e.value.status == 422
        assert path[-1] in e.value.body
    finally:
        api.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)


def _roundtrip_nodeslo(kube: Any, spec: dict[str, Any]) -> dict[str, Any]:
    api = client.CustomObjectsApi(kube)
    name = f"node-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}",
        "kind": "NodeSLO",
        "metadata": {"name": name},
        "spec": spec,
    }
    api.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, body)
    try:
        got: dict[str, Any] = api.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, name)
        return got
    finally:
        api.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, name)


def test_fully_populated_nodeslo_reads_back_equal(kube: Any) -> None:
    from apis.nodeslo import NodeSLOSpec
    from tests.unit.apis.test_nodeslo import populated

    spec = populated(NodeSLOSpec).to_dict()
    got = _roundtrip_nodeslo(kube, spec)
    assert got["spec"] == spec  # nothing pruned: the schema declares every field
    assert NodeSLOSpec.from_dict(got["spec"]).to_dict() == spec


def test_rendered_nodeslo_of_the_illustrative_configmap_is_accepted(kube: Any) -> None:
    from apis.sloconfig import node_slo_spec, parse_slo_controller_config

    data = {
        "colocation-config": '{"enable": true, "cpuReclaimThresholdPercent": 70}',
        "resource-threshold-config": '{"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 60,'
        ' "memoryEvictThresholdPercent": 75}, "nodeStrategies": [{"name": "pool-a",'
        ' "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressPolicy": "cfsQuota"}]}',
        "cpu-burst-config": '{"clusterStrategy": {"policy": "auto"}}',
        "resource-qos-config": '{"clusterStrategy": {"beClass": {"resctrlQOS": {"enable": true}}}}',
    }
    cfg, errors = parse_slo_controller_config(data, None)
    assert errors == []
    spec = node_slo_spec(cfg, {"pool": "a"}, {}).to_dict()
    assert spec["resourceUsedThresholdWithBE"]["cpuSuppressPolicy"] == "cfsQuota"
    got = _roundtrip_nodeslo(kube, spec)
    assert got["spec"] == spec
