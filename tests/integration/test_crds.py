"""The NodeMetric and NodeSLO CRDs on the real API server: established, cluster-scoped, status
through the status subresource, full objects read back equal (nothing pruned), watched, and bad
objects refused by the schema; for the NodeSLO, upstream's bounds (table-driven from the schema),
the networkQOS defaults the server fills and the page-cache switches' boolean or legacy 0/1 form."""

from __future__ import annotations

import copy
import itertools
import json
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


# --- NodeSLO validation: upstream's bounds, networkQOS defaults, legacy page-cache switches ------------
FieldPath = tuple[str | int, ...]


def _bounded_fields(schema: dict[str, Any], path: FieldPath = ()) -> list[tuple[FieldPath, dict[str, Any]]]:
    """Every node of the NodeSLO spec schema with a ``minimum`` or ``maximum`` (array items: index 0)."""
    out: list[tuple[FieldPath, dict[str, Any]]] = []
    if "minimum" in schema or "maximum" in schema:
        out.append((path, schema))
    for name, sub in (schema.get("properties") or {}).items():
        out += _bounded_fields(sub, (*path, name))
    if "items" in schema:
        out += _bounded_fields(schema["items"], (*path, 0))
    return out


def _put(root: dict[str, Any], path: FieldPath, value: Any) -> None:
    target: Any = root
    for key, nxt in itertools.pairwise(path):
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(key, int):
            while len(target) <= key:
                target.append(empty)
            target = target[key]
        else:
            target = target.setdefault(key, empty)
    target[path[-1]] = value


def _field(path: FieldPath) -> str:
    """The field as the 1.20 API server names it in a schema error (array indexes left out)."""
    return "spec" + "".join(f".{p}" for p in path if not isinstance(p, int))


def _nodeslo(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}",
        "kind": "NodeSLO",
        "metadata": {"name": name},
        "spec": spec,
    }


def _refused_fields(kube: Any, spec: dict[str, Any]) -> set[str]:
    """Create a NodeSLO that must be refused; the field paths the API server names."""
    api = client.CustomObjectsApi(kube)
    name = f"node-{uuid.uuid4().hex[:8]}"
    try:
        api.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, _nodeslo(name, spec))
    except ApiException as e:
        assert e.status == 422, e.body
        status = json.loads(e.body)
        return {cause["field"] for cause in status["details"]["causes"]}
    api.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, name)
    raise AssertionError(f"NodeSLO accepted: {spec}")


def _bounds_table() -> list[tuple[FieldPath, dict[str, Any]]]:
    from apis.crds import node_slo_spec_schema

    table = _bounded_fields(node_slo_spec_schema())
    assert len(table) > 60  # every QoS class repeats the memory/resctrl/blkio bounds
    return table


@pytest.mark.parametrize("side", ["minimum", "maximum"])
def test_out_of_range_values_are_refused_naming_each_field(kube: Any, side: str) -> None:
    step = -1 if side == "minimum" else 1
    table = [(path, node[side] + step) for path, node in _bounds_table() if side in node]
    spec: dict[str, Any] = {}
    for path, value in table:
        _put(spec, path, value)
    refused = _refused_fields(kube, spec)
    assert refused == {_field(path) for path, _ in table}


@pytest.mark.parametrize("side", ["minimum", "maximum"])
def test_values_on_the_bounds_are_accepted(kube: Any, side: str) -> None:
    from apis.nodeslo import NodeSLOSpec

    spec: dict[str, Any] = {}
    for path, node in _bounds_table():
        _put(spec, path, node.get(side, node.get("minimum")))
    got = _roundtrip_nodeslo(kube, spec)
    assert got["spec"] == spec
    NodeSLOSpec.from_dict(got["spec"])  # the koordlet can read it


def test_one_out_of_range_field_is_refused_alone(kube: Any) -> None:
    spec: dict[str, Any] = {"resourceQOSStrategy": {"beClass": {"memoryQOS": {"wmarkRatio": 90}}}}
    _put(spec, ("cpuBurstStrategy", "cpuBurstPercent"), 10001)
    assert _refused_fields(kube, spec) == {"spec.cpuBurstStrategy.cpuBurstPercent"}


def test_network_qos_defaults_are_filled_by_the_server(kube: Any) -> None:
    spec = {
        "resourceQOSStrategy": {
            "lsClass": {"networkQOS": {"enable": True}},
            "beClass": {"networkQOS": {"ingressLimit": "50M", "egressRequest": 10}},
            "systemClass": {"cpuQOS": {"enable": False}},
        }
    }
    got = _roundtrip_nodeslo(kube, spec)["spec"]["resourceQOSStrategy"]
    assert got["lsClass"]["networkQOS"] == {
        "enable": True,
        "ingressRequest": 0,
        "ingressLimit": 100,
        "egressRequest": 0,
        "egressLimit": 100,
    }
    assert got["beClass"]["networkQOS"] == {
        "ingressRequest": 0,
        "ingressLimit": "50M",
        "egressRequest": 10,
        "egressLimit": 100,
    }
    assert got["systemClass"] == {"cpuQOS": {"enable": False}}  # no networkQOS object: nothing filled


def test_page_cache_switches_accept_booleans_and_the_legacy_integers(kube: Any) -> None:
    from apis.nodeslo import NodeSLOSpec

    spec = {
        "resourceQOSStrategy": {
            "lsClass": {"memoryQOS": {"pageCacheEnable": 1, "pageCacheReclaimSync": 0}},
            "beClass": {"memoryQOS": {"pageCacheEnable": True, "pageCacheReclaimSync": False}},
        }
    }
    got = _roundtrip_nodeslo(kube, spec)
    assert got["spec"] == spec  # stored as written: the legacy integers are not rewritten by the server
    memory = NodeSLOSpec.from_dict(got["spec"]).to_dict()["resourceQOSStrategy"]
    assert memory["lsClass"]["memoryQOS"] == {"pageCacheEnable": True, "pageCacheReclaimSync": False}
    assert memory["beClass"]["memoryQOS"] == {"pageCacheEnable": True, "pageCacheReclaimSync": False}


@pytest.mark.parametrize("value", [2, -1, "true", {"on": True}, [1]])
def test_page_cache_switches_refuse_other_values(kube: Any, value: Any) -> None:
    spec = {"resourceQOSStrategy": {"lsClass": {"memoryQOS": {"pageCacheEnable": value}}}}
    field = "spec.resourceQOSStrategy.lsClass.memoryQOS.pageCacheEnable"
    assert _refused_fields(kube, spec) == {field}


def test_nodeslo_rendered_from_a_legacy_configmap_is_accepted(kube: Any) -> None:
    """A resource-qos-config with the integer page-cache switches renders booleans the server takes."""
    from apis.sloconfig import node_slo_spec, parse_slo_controller_config

    data = {
        "resource-qos-config": '{"clusterStrategy": {"beClass": {"memoryQOS": {"enable": true,'
        ' "pageCacheEnable": 1, "pageCacheReclaimSync": 0, "pageCacheLimitPercent": 80}}}}',
    }
    cfg, errors = parse_slo_controller_config(data, None)
    assert errors == []
    spec = node_slo_spec(cfg, {}, {}).to_dict()
    memory = spec["resourceQOSStrategy"]["beClass"]["memoryQOS"]
    assert (memory["pageCacheEnable"], memory["pageCacheReclaimSync"]) == (True, False)
    got = _roundtrip_nodeslo(kube, spec)
    assert got["spec"] == spec


def test_enum_fields_still_refuse_unknown_values(kube: Any) -> None:
    spec = {
        "resourceQOSStrategy": {"policies": {"cpuPolicy": "fifo"}},
        "resourceUsedThresholdWithBE": {"cpuSuppressPolicy": "none"},
    }
    assert _refused_fields(kube, spec) == {
        "spec.resourceQOSStrategy.policies.cpuPolicy",
        "spec.resourceUsedThresholdWithBE.cpuSuppressPolicy",
    }
