"""NodeSLO typed spec, Go JSON facts, defaults, koordlet merge and the CRD schema (apis/nodeslo*.py)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.crds import node_slo_crd
from apis.gojson import SPEC_KEY, FieldSpec, StructKind, overlay, validate
from apis.gojson_base import DecodeError
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import (
    BoolKind,
    ExtensionsKind,
    FloatKind,
    IntKind,
    IntOrStrKind,
    QuantityKind,
    StrKind,
)
from apis.nodeslo import (
    BlkIOQOSCfg,
    BlockCfg,
    CPUBurstStrategy,
    CPUQOSCfg,
    HostApplicationSpec,
    IOCfg,
    MemoryQOSCfg,
    NetworkQOSCfg,
    NodeSLOSpec,
    ResctrlQOSCfg,
    ResourceQOS,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)
from apis.nodeslo_defaults import (
    default_cpu_burst_strategy,
    default_node_slo_spec,
    default_resource_qos_strategy,
    default_resource_threshold_strategy,
    default_system_strategy,
    manager_default_resource_qos_strategy,
    merge_node_slo_spec,
    none_resource_qos_strategy,
)
from apis.quantity import Quantity

CRD_PATH = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "slo.koordinator.sh_nodeslos.yaml"
_counter = itertools.count()


# --- a NodeSLOSpec with every field set ---------------------------------------------------------------
def _sample(spec: FieldSpec) -> Any:
    kind = spec.kind
    if spec.enum:
        return spec.enum[next(_counter) % len(spec.enum)]
    if isinstance(kind, BoolKind):
        return True
    if isinstance(kind, IntKind):
        return int(spec.maximum if spec.maximum is not None else (spec.minimum or 0) + 7)
    if isinstance(kind, FloatKind):
        return 1.5
    if isinstance(kind, StrKind):
        return "x"
    if isinstance(kind, QuantityKind):
        return Quantity.parse("100M")
    if isinstance(kind, IntOrStrKind):
        return 50 if next(_counter) % 2 else "50M"
    if isinstance(kind, ListKind):
        return [_sample(FieldSpec("item", kind.elem)), _sample(FieldSpec("item", kind.elem))]
    if isinstance(kind, MapKind):
        return {"key1": _sample(FieldSpec("v", kind.elem))}
    if isinstance(kind, StructKind):
        return populated(kind.cls)
    if isinstance(kind, ExtensionsKind):
        return {"plugin": {"nested": [1, "a", {"b": True}]}}
    raise AssertionError(kind)


def populated(cls: type[Any]) -> Any:
    values = {f.name: _sample(f.metadata[SPEC_KEY]) for f in dataclasses.fields(cls)}
    return cls(**values)


def _all_json_names(cls: type[Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for f in dataclasses.fields(cls):
        spec: FieldSpec = f.metadata[SPEC_KEY]
        path = f"{prefix}.{spec.name}" if prefix else spec.name
        out.add(path)
        kind = spec.kind
        while isinstance(kind, (ListKind, MapKind)):
            kind = kind.elem
        if isinstance(kind, StructKind):
            out |= _all_json_names(kind.cls, path)
    return out


def _dict_paths(value: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            path = f"{prefix}.{k}" if prefix else k
            out.add(path)
            if k not in ("extensions", "schedFeatures"):
                out |= _dict_paths(v, path)
    elif isinstance(value, list):
        for v in value:
            out |= _dict_paths(v, prefix)
    return out


# --- CRD ----------------------------------------------------------------------------------------------
def _load_crd() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(CRD_PATH.read_text()) if d]
    assert len(docs) == 1
    crd: dict[str, Any] = docs[0]
    return crd


def _spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _walk(value: Any, schema: dict[str, Any], path: str) -> None:
    """Assert that ``value`` is declared by ``schema`` with a compatible type (and within its bounds)."""
    if schema.get("x-kubernetes-int-or-string"):
        assert isinstance(value, (int, str)) and not isinstance(value, bool), path
        return
    if "type" not in schema:  # a bool-or-legacy-int switch: any value of its enum, type included
        assert schema["x-kubernetes-preserve-unknown-fields"] is True, path
        assert (type(value), value) in [(type(v), v) for v in schema["enum"]], path
        return
    kind = schema["type"]
    if kind == "object":
        assert isinstance(value, dict), path
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return
        props = schema.get("properties")
        for key, item in value.items():
            if props is not None:
                assert key in props, f"{path}.{key} is not declared in the CRD"
                _walk(item, props[key], f"{path}.{key}")
            else:
                assert "additionalProperties" in schema, f"{path}.{key} is not declared in the CRD"
                _walk(item, schema["additionalProperties"], f"{path}[{key}]")
    elif kind == "array":
        assert isinstance(value, list), path
        for i, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{i}]")
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), path
        bits = {"int64": 63, "int32": 31}[schema["format"]]
        assert -(2**bits) <= value < 2**bits, path
        assert schema.get("minimum", -(2**bits)) <= value <= schema.get("maximum", 2**bits), path
    elif kind == "number":
        assert isinstance(value, (int, float)) and not isinstance(value, bool), path
    elif kind == "string":
        assert isinstance(value, str), path
        assert "enum" not in schema or value in schema["enum"], path
    elif kind == "boolean":
        assert isinstance(value, bool), path
    else:
        raise AssertionError(f"{path}: unknown type {kind}")


def _assert_structural(schema: dict[str, Any], path: str) -> None:
    """Kubernetes 1.20 structural-schema rules used by this CRD."""
    assert "x-kubernetes-validations" not in schema, path
    if "anyOf" in schema:
        assert schema.get("x-kubernetes-int-or-string") is True, path
        assert schema["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        assert "type" not in schema, path
        return
    if schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in schema:
        # the only untyped scalar node: the page-cache switches (boolean or legacy 0/1)
        assert schema == {"x-kubernetes-preserve-unknown-fields": True, "enum": [False, True, 0, 1]}, path
        return
    assert "default" not in schema or "x-kubernetes-int-or-string" in schema, path  # only networkQOS
    assert schema.get("type") in {"object", "array", "integer", "number", "string", "boolean"}, path
    if schema["type"] == "array":
        _assert_structural(schema["items"], f"{path}[]")
    for key, sub in schema.get("properties", {}).items():
        _assert_structural(sub, f"{path}.{key}")
    if "additionalProperties" in schema:
        assert "properties" not in schema, path
        _assert_structural(schema["additionalProperties"], f"{path}[*]")


def test_crd_metadata() -> None:
    crd = _load_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "nodeslos.slo.koordinator.sh"
    spec = crd["spec"]
    assert spec["group"] == "slo.koordinator.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "NodeSLO",
        "listKind": "NodeSLOList",
        "plural": "nodeslos",
        "singular": "nodeslo",
    }
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}
    assert {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"} in version[
        "additionalPrinterColumns"
    ]


def test_crd_file_matches_generated() -> None:
    assert _load_crd() == node_slo_crd()


def test_crd_schema_is_structural_for_k8s_1_20() -> None:
    _assert_structural(_load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "")


def test_crd_declares_every_field_to_dict_can_produce() -> None:
    full = populated(NodeSLOSpec)
    data = full.to_dict()
    assert _dict_paths(data) == _all_json_names(NodeSLOSpec)  # every field really is populated
    _walk(data, _spec_schema(_load_crd()), "spec")


def test_crd_special_types() -> None:
    spec = _spec_schema(_load_crd())["properties"]
    system = spec["systemStrategy"]["properties"]
    assert system["totalNetworkBandwidth"]["x-kubernetes-int-or-string"] is True
    assert spec["extensions"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    threshold = spec["resourceUsedThresholdWithBE"]["properties"]
    assert threshold["evictEnabledPriorityThreshold"] == {"type": "integer", "format": "int32"}
    # enums admit "" (unset), as the manager's validation does
    assert threshold["cpuSuppressPolicy"]["enum"] == ["cpuset", "cfsQuota", ""]
    assert threshold["cpuEvictPolicy"]["enum"] == ["evictByRealLimit", "evictByAllocatable", ""]
    assert spec["cpuBurstStrategy"]["properties"]["policy"]["enum"] == [
        "none",
        "cpuBurstOnly",
        "cfsQuotaBurstOnly",
        "auto",
        "",
    ]
    policies = spec["resourceQOSStrategy"]["properties"]["policies"]["properties"]
    assert policies["cpuPolicy"]["enum"] == ["groupIdentity", "coreSched", ""]
    be = spec["resourceQOSStrategy"]["properties"]["beClass"]["properties"]
    network = be["networkQOS"]["properties"]
    assert network["ingressLimit"]["x-kubernetes-int-or-string"] is True
    assert {k: network[k].get("default") for k in network} == {
        "enable": None,
        "ingressRequest": 0,
        "ingressLimit": 100,
        "egressRequest": 0,
        "egressLimit": 100,
    }
    memory = be["memoryQOS"]["properties"]
    for switch in ("pageCacheEnable", "pageCacheReclaimSync"):
        assert memory[switch] == {"x-kubernetes-preserve-unknown-fields": True, "enum": [False, True, 0, 1]}
    assert memory["pageCacheLimitPercent"] == {
        "type": "integer",
        "format": "int64",
        "maximum": 100,
        "minimum": 0,
    }
    assert memory["minLimitPercent"] == {"type": "integer", "format": "int64", "minimum": 0}
    assert memory["priority"] == {"type": "integer", "format": "int64"}  # webhook rule only
    assert system["schedFeatures"] == {"type": "object", "additionalProperties": {"type": "boolean"}}


# --- serialisation ---------------------------------------------------------------------------------------
def test_round_trip_of_fully_populated_spec() -> None:
    full = populated(NodeSLOSpec)
    assert NodeSLOSpec.from_dict(full.to_dict()) == full
    assert NodeSLOSpec.from_dict(full.to_dict()).to_dict() == full.to_dict()


CANONICAL = {
    "resourceUsedThresholdWithBE": {
        "enable": True,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
        "evictEnabledPriorityThreshold": 5999,
    },
    "resourceQOSStrategy": {
        "policies": {"cpuPolicy": "coreSched", "netQOSPolicy": "tc"},
        "beClass": {
            "cpuQOS": {"enable": False, "groupIdentity": -1, "schedIdle": 1, "coreExpeller": False},
            "memoryQOS": {"enable": True, "wmarkRatio": 95, "pageCacheLimitPercent": 30},
            "blkioQOS": {
                "enable": True,
                "blocks": [{"name": "sda", "type": "device", "ioCfg": {"readIOPS": 100}}],
            },
            "networkQOS": {"enable": True, "ingressRequest": "50M", "egressLimit": 80},
        },
        "cgroupRoot": {"blkioQOS": {"blocks": [{"name": "vg", "type": "volumegroup", "ioCfg": {}}]}},
    },
    "cpuBurstStrategy": {"policy": "auto", "cpuBurstPercent": 1000, "sharePoolThresholdPercent": 50},
    "systemStrategy": {
        "minFreeKbytesFactor": 100,
        "schedFeatures": {"ID_IDLE_AVG": True},
        "totalNetworkBandwidth": "10G",
    },
    "extensions": {"Object": {"myPlugin": {"a": [1, 2]}}},
    "hostApplications": [
        {
            "name": "nginx",
            "priority": "koord-prod",
            "qos": "LS",
            "cgroupPath": {
                "base": "CgroupRoot",
                "parentDir": "host-latency-sensitive",
                "relativePath": "nginx",
            },
            "strategy": {},
        }
    ],
}


def test_canonical_dict_round_trips() -> None:
    assert NodeSLOSpec.from_dict(CANONICAL).to_dict() == CANONICAL


def test_unset_fields_are_none_and_omitted() -> None:
    spec = NodeSLOSpec.from_dict(
        {"resourceUsedThresholdWithBE": {"enable": False, "cpuSuppressThresholdPercent": 0}}
    )
    threshold = spec.resource_used_threshold_with_be
    assert threshold is not None
    assert threshold.enable is False and threshold.cpu_suppress_threshold_percent == 0
    assert threshold.memory_evict_threshold_percent is None
    assert spec.resource_qos_strategy is None and spec.host_applications is None
    assert spec.to_dict() == {
        "resourceUsedThresholdWithBE": {"enable": False, "cpuSuppressThresholdPercent": 0}
    }
    assert NodeSLOSpec().to_dict() == {}
    assert ResourceQOSStrategy().to_dict() == {}
    assert NodeSLOSpec(resource_qos_strategy=ResourceQOSStrategy()).to_dict() == {"resourceQOSStrategy": {}}


def test_total_network_bandwidth_is_always_written() -> None:
    assert SystemStrategy().to_dict() == {"totalNetworkBandwidth": "0"}
    assert SystemStrategy(min_free_kbytes_factor=100).to_dict() == {
        "minFreeKbytesFactor": 100,
        "totalNetworkBandwidth": "0",
    }
    assert SystemStrategy.from_dict({}).total_network_bandwidth == Quantity.parse("0")
    assert SystemStrategy.from_dict({"totalNetworkBandwidth": None}).to_dict() == {
        "totalNetworkBandwidth": "0"
    }
    assert SystemStrategy.from_dict({"totalNetworkBandwidth": 1000}).to_dict() == {
        "totalNetworkBandwidth": "1k"
    }


def test_io_cfg_is_a_value_struct_always_written() -> None:
    assert BlockCfg(name="a").to_dict() == {"name": "a", "ioCfg": {}}
    assert BlkIOQOSCfg.from_dict({"blocks": [{"name": "a"}, None]}).to_dict() == {
        "blocks": [{"name": "a", "ioCfg": {}}, None]
    }


def test_extensions_object_form_and_plain_form() -> None:
    wrapped = NodeSLOSpec.from_dict({"extensions": {"Object": {"p": {"x": 1}}}})
    plain = NodeSLOSpec.from_dict({"extensions": {"p": {"x": 1}}})
    assert wrapped == plain
    assert wrapped.extensions == {"p": {"x": 1}}
    assert plain.to_dict() == {"extensions": {"Object": {"p": {"x": 1}}}}
    assert NodeSLOSpec(extensions={}).to_dict() == {"extensions": {"Object": {}}}
    assert NodeSLOSpec.from_dict({"extensions": {"Object": None}}).extensions == {}


def test_empty_lists_maps_and_value_strings_are_omitted() -> None:
    spec = NodeSLOSpec.from_dict(
        {
            "resourceUsedThresholdWithBE": {"cpuSuppressPolicy": "", "cpuEvictPolicy": ""},
            "systemStrategy": {"schedFeatures": {}},
            "hostApplications": [],
        }
    )
    assert spec.resource_used_threshold_with_be == ResourceThresholdStrategy()
    assert spec.system_strategy == SystemStrategy()
    assert spec.host_applications is None
    assert spec.to_dict() == {
        "resourceUsedThresholdWithBE": {},
        "systemStrategy": {"totalNetworkBandwidth": "0"},
    }


def test_go_decoder_facts() -> None:
    # unknown keys ignored, keys matched case-insensitively, null on a pointer means unset
    spec = NodeSLOSpec.from_dict(
        {"ResourceUsedThresholdWithBE": {"ENABLE": True, "unknown": 1, "cpuSuppressMinPercent": None}, "x": 2}
    )
    assert spec.to_dict() == {"resourceUsedThresholdWithBE": {"enable": True}}
    assert NodeSLOSpec.from_dict(None) == NodeSLOSpec()


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (
            {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 65.0}},
            "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
        ),
        (
            {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": "65"}},
            "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
        ),
        (
            {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": True}},
            "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
        ),
        ({"resourceUsedThresholdWithBE": {"enable": 1}}, "resourceUsedThresholdWithBE.enable"),
        (
            {"resourceUsedThresholdWithBE": {"cpuSuppressPolicy": 1}},
            "resourceUsedThresholdWithBE.cpuSuppressPolicy",
        ),
        (
            {"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 2**63}},
            "resourceUsedThresholdWithBE.memoryEvictThresholdPercent",
        ),
        (
            {"resourceUsedThresholdWithBE": {"evictEnabledPriorityThreshold": 2**31}},
            "resourceUsedThresholdWithBE.evictEnabledPriorityThreshold",
        ),
        ({"resourceUsedThresholdWithBE": []}, "resourceUsedThresholdWithBE"),
        ({"systemStrategy": {"totalNetworkBandwidth": "ten"}}, "systemStrategy.totalNetworkBandwidth"),
        ({"systemStrategy": {"schedFeatures": {"A": 1}}}, "systemStrategy.schedFeatures[A]"),
        (
            {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"ingressLimit": 1.5}}}},
            "resourceQOSStrategy.lsClass.networkQOS.ingressLimit",
        ),
        (
            {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"blocks": [{"ioCfg": {"readBPS": "1"}}]}}}},
            "resourceQOSStrategy.beClass.blkioQOS.blocks[0].ioCfg.readBPS",
        ),
        ({"extensions": 5}, "extensions"),
        ({"hostApplications": {"name": "a"}}, "hostApplications"),
        ({"hostApplications": [{"cgroupPath": "x"}]}, "hostApplications[0].cgroupPath"),
    ],
)
def test_type_errors_name_the_path_and_value(data: dict[str, Any], path: str) -> None:
    with pytest.raises(DecodeError) as info:
        NodeSLOSpec.from_dict(data)
    assert [e.path for e in info.value.errors] == [path]
    assert path in str(info.value)


def test_all_type_errors_are_reported() -> None:
    with pytest.raises(DecodeError) as info:
        CPUBurstStrategy.from_dict({"cpuBurstPercent": "1", "policy": 2, "sharePoolThresholdPercent": 50})
    assert sorted(e.path for e in info.value.errors) == ["cpuBurstPercent", "policy"]


def test_validate_reports_bounds_and_enums() -> None:
    bad = NodeSLOSpec.from_dict(
        {
            "resourceUsedThresholdWithBE": {
                "cpuSuppressThresholdPercent": 101,
                "cpuSuppressPolicy": "bogus",
                "memoryEvictThresholdPercent": 60,
                "memoryEvictLowerPercent": 70,
            },
            "resourceQOSStrategy": {
                "beClass": {"resctrlQOS": {"catRangeStartPercent": 50, "catRangeEndPercent": 40}}
            },
            "systemStrategy": {"watermarkScaleFactor": 401},
        }
    )
    paths = {e.path for e in validate(bad)}
    assert paths == {
        "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
        "resourceUsedThresholdWithBE.cpuSuppressPolicy",
        "resourceUsedThresholdWithBE.memoryEvictThresholdPercent",
        "resourceQOSStrategy.beClass.resctrlQOS.catRangeEndPercent",
        "systemStrategy.watermarkScaleFactor",
    }
    assert validate(default_node_slo_spec()) == []
    assert validate(NetworkQOSCfg(ingress_limit=101, egress_limit="1x")) != []
    assert validate(NetworkQOSCfg(ingress_limit=100, egress_limit="100M")) == []


# --- defaults -------------------------------------------------------------------------------------------
def test_manager_defaults() -> None:
    assert default_resource_threshold_strategy().to_dict() == {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }
    assert default_cpu_burst_strategy().to_dict() == {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    }
    assert default_system_strategy().to_dict() == {"totalNetworkBandwidth": "0"}
    assert manager_default_resource_qos_strategy().to_dict() == {}


def _memory(values: tuple[int, ...]) -> dict[str, Any]:
    names = (
        "minLimitPercent",
        "lowLimitPercent",
        "throttlingPercent",
        "wmarkRatio",
        "wmarkScalePermill",
        "wmarkMinAdj",
        "priorityEnable",
        "priority",
        "oomKillGroup",
    )
    return {"enable": False, **dict(zip(names, values, strict=True))}


def _class(
    gi: int, idle: int, expeller: bool, resctrl: tuple[int, int, int], memory: tuple[int, ...]
) -> dict[str, Any]:
    return {
        "cpuQOS": {"enable": False, "groupIdentity": gi, "schedIdle": idle, "coreExpeller": expeller},
        "memoryQOS": _memory(memory),
        "blkioQOS": {"enable": False},
        "resctrlQOS": dict(
            zip(
                ("enable", "catRangeStartPercent", "catRangeEndPercent", "mbaPercent"),
                (False, *resctrl),
                strict=True,
            )
        ),
        "networkQOS": {
            "enable": False,
            "ingressRequest": 0,
            "ingressLimit": 0,
            "egressRequest": 0,
            "egressLimit": 0,
        },
    }


KOORDLET_QOS_DEFAULTS = {
    "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
    "lsrClass": _class(2, 0, True, (0, 100, 100), (0, 0, 0, 95, 20, -25, 0, 0, 0)),
    "lsClass": _class(2, 0, True, (0, 100, 100), (0, 0, 0, 95, 20, -25, 0, 0, 0)),
    "beClass": _class(-1, 0, False, (0, 30, 100), (0, 0, 0, 95, 20, 50, 0, 0, 0)),
    "systemClass": _class(0, 0, False, (0, 100, 100), (0, 0, 0, 0, 50, 0, 0, 0, 0)),
    "cgroupRoot": {"blkioQOS": {"enable": False}},
}
NONE_CLASS = _class(0, 0, False, (0, 100, 100), (0, 0, 0, 0, 50, 0, 0, 0, 0))


def test_koordlet_default_spec_field_by_field() -> None:
    spec = default_node_slo_spec()
    assert spec.to_dict() == {
        "resourceUsedThresholdWithBE": default_resource_threshold_strategy().to_dict(),
        "resourceQOSStrategy": KOORDLET_QOS_DEFAULTS,
        "cpuBurstStrategy": default_cpu_burst_strategy().to_dict(),
        "systemStrategy": {"totalNetworkBandwidth": "0"},
        "extensions": {"Object": {}},
    }
    assert default_resource_qos_strategy().to_dict() == KOORDLET_QOS_DEFAULTS
    assert default_node_slo_spec() is not default_node_slo_spec()


def test_none_values() -> None:
    none = none_resource_qos_strategy().to_dict()
    for cls in ("lsrClass", "lsClass", "beClass", "systemClass"):
        assert none[cls] == NONE_CLASS
    assert none["cgroupRoot"] == {"blkioQOS": {"enable": False}}


# --- koordlet merge (docs/rules/koordlet.md#start-order-and-readiness) --------------------------------------
def test_merge_of_empty_nodeslo_is_defaults_with_none_values() -> None:
    merged = merge_node_slo_spec(NodeSLOSpec()).to_dict()
    qos = merged["resourceQOSStrategy"]
    for cls in ("lsrClass", "lsClass", "beClass"):
        assert qos[cls] == NONE_CLASS  # enable is false after the merge: "None" values
    assert qos["systemClass"] == KOORDLET_QOS_DEFAULTS["systemClass"]
    assert qos["cgroupRoot"] == KOORDLET_QOS_DEFAULTS["cgroupRoot"]
    assert merged["resourceUsedThresholdWithBE"] == default_resource_threshold_strategy().to_dict()
    assert merged["cpuBurstStrategy"] == default_cpu_burst_strategy().to_dict()
    assert merged["systemStrategy"] == {"totalNetworkBandwidth": "0"}


def test_merge_enabled_feature_keeps_recommended_values() -> None:
    spec = NodeSLOSpec(
        resource_qos_strategy=ResourceQOSStrategy(
            be_class=ResourceQOS(
                resctrl_qos=ResctrlQOSCfg(enable=True),
                memory_qos=MemoryQOSCfg(enable=True, wmark_ratio=90),
                cpu_qos=CPUQOSCfg(group_identity=2),  # enable unset → false after merge → None values
            ),
            system_class=ResourceQOS(cpu_qos=CPUQOSCfg(enable=False, group_identity=2)),
        )
    )
    qos = merge_node_slo_spec(spec).resource_qos_strategy
    assert qos is not None and qos.be_class is not None and qos.system_class is not None
    assert qos.be_class.resctrl_qos == ResctrlQOSCfg(True, 0, 30, 100)
    memory = qos.be_class.memory_qos
    assert memory is not None and memory.enable is True
    assert (memory.wmark_ratio, memory.wmark_scale_permill, memory.wmark_min_adj) == (90, 20, 50)
    assert qos.be_class.cpu_qos == CPUQOSCfg(False, 0, 0, False)
    assert qos.system_class.cpu_qos == CPUQOSCfg(False, 2, 0, False)  # SYSTEM keeps its values


def test_merge_keeps_other_parts() -> None:
    spec = NodeSLOSpec(
        resource_used_threshold_with_be=ResourceThresholdStrategy(
            enable=True, cpu_suppress_threshold_percent=50
        ),
        system_strategy=SystemStrategy(total_network_bandwidth=Quantity.parse("1G")),
        extensions={"p": 1},
        host_applications=[HostApplicationSpec(name="app")],
    )
    merged = merge_node_slo_spec(spec)
    assert merged.resource_used_threshold_with_be == ResourceThresholdStrategy(
        enable=True,
        cpu_suppress_threshold_percent=50,
        cpu_suppress_policy="cpuset",
        memory_evict_threshold_percent=70,
        cpu_evict_policy="evictByRealLimit",
    )
    assert merged.system_strategy == SystemStrategy(total_network_bandwidth=Quantity.parse("1G"))
    assert merged.extensions == {"p": 1}
    assert merged.host_applications == [HostApplicationSpec(name="app")]


def test_overlay_on_typed_values() -> None:
    old = BlkIOQOSCfg(blocks=[BlockCfg(name="a", type="device", io_cfg=IOCfg(read_iops=1))])
    new = BlkIOQOSCfg(blocks=[BlockCfg(io_cfg=IOCfg(write_iops=2))])
    assert overlay(old, new) == BlkIOQOSCfg(
        blocks=[BlockCfg(name="a", type="device", io_cfg=IOCfg(read_iops=1, write_iops=2))]
    )
    assert overlay(old, None) is old


# --- page-cache switches: booleans, legacy 0/1 read ------------------------------------------------------
SWITCHES = ("pageCacheEnable", "pageCacheReclaimSync")


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize(
    ("raw", "expected"), [(True, True), (False, False), (1, True), (0, False), (None, None)]
)
def test_page_cache_switch_reads_bool_and_legacy_int(name: str, raw: Any, expected: bool | None) -> None:
    cfg = MemoryQOSCfg.from_dict({name: raw, "pageCacheLimitPercent": 30})
    attr = {"pageCacheEnable": "page_cache_enable", "pageCacheReclaimSync": "page_cache_reclaim_sync"}[name]
    got = getattr(cfg, attr)
    assert got is expected  # a real bool (or None), never the int 0/1
    written = cfg.to_dict()
    if expected is None:
        assert name not in written
    else:
        assert written[name] is expected  # always written as a JSON boolean
    assert validate(cfg) == []


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize("raw", [2, -1, 10**30, 1.0, "true", "1", [], {}])
def test_page_cache_switch_rejects_other_values_naming_field_and_value(name: str, raw: Any) -> None:
    data = {"resourceQOSStrategy": {"lsClass": {"memoryQOS": {name: raw}}}}
    with pytest.raises(DecodeError) as info:
        NodeSLOSpec.from_dict(data)
    [err] = info.value.errors
    path = f"resourceQOSStrategy.lsClass.memoryQOS.{name}"
    assert (err.path, err.value) == (path, raw)
    assert path in str(info.value) and repr(raw)[:20] in str(info.value)
    assert "boolean" in err.message and "0 or 1" in err.message


def test_page_cache_switch_overlay_keeps_bool_semantics() -> None:
    old = MemoryQOSCfg.from_dict({"pageCacheEnable": 1, "pageCacheReclaimSync": True})
    new = MemoryQOSCfg.from_dict({"pageCacheEnable": False})
    merged = overlay(old, new)
    assert (merged.page_cache_enable, merged.page_cache_reclaim_sync) == (False, True)
    assert merged.to_dict() == {"pageCacheEnable": False, "pageCacheReclaimSync": True}


def test_resource_qos_config_reads_the_legacy_integer_switches() -> None:
    from apis.sloconfig import node_slo_spec, parse_slo_controller_config

    legacy = '{"clusterStrategy": {"beClass": {"memoryQOS": {"enable": true, "pageCacheEnable": 1,'
    legacy += ' "pageCacheReclaimSync": 0, "pageCacheLimitPercent": 60}}}}'
    cfg, errors = parse_slo_controller_config({"resource-qos-config": legacy}, None)
    assert errors == []
    memory = node_slo_spec(cfg, {}, {}).to_dict()["resourceQOSStrategy"]["beClass"]["memoryQOS"]
    assert memory == {
        "enable": True,
        "pageCacheEnable": True,
        "pageCacheLimitPercent": 60,
        "pageCacheReclaimSync": False,
    }

    bad = '{"clusterStrategy": {"beClass": {"memoryQOS": {"pageCacheEnable": 2}}}}'
    _, errors = parse_slo_controller_config({"resource-qos-config": bad}, None)
    [err] = errors
    assert (err.key, err.field, err.value) == (
        "resource-qos-config",
        "clusterStrategy.beClass.memoryQOS.pageCacheEnable",
        2,
    )
    assert err.rejected
