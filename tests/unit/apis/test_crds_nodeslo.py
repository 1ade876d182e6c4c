"""The NodeSLO CRD's validation rules (apis/nodeslo.py → apis/crds.py → deploy/crds/): exactly
upstream's kubebuilder bounds and networkQOS defaults, the webhook rules never looser than them, the
page-cache switches admitting booleans and the legacy 0/1, and hack/crd_diff.py, the tool that
compares a CRD with upstream's."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from apis.crds import node_slo_spec_schema
from apis.gojson import SPEC_KEY, FieldSpec, StructKind
from apis.gojson_collections import ListKind, MapKind
from apis.nodeslo import (
    CPUBurstStrategy,
    IOCfg,
    LegacyIntBoolKind,
    MemoryQOSCfg,
    NetworkQOSCfg,
    NodeSLOSpec,
    ResctrlQOSCfg,
    ResourceThresholdStrategy,
)

REPO = Path(__file__).resolve().parents[3]
QOS_CLASSES = ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")

# Upstream's +kubebuilder:validation:Minimum/Maximum markers (apis/slo/v1alpha1/nodeslo_types.go):
# struct → JSON field → (minimum, maximum). Every other field of the NodeSLO has no CRD bound.
UPSTREAM_BOUNDS: dict[type[Any], dict[str, tuple[int | None, int | None]]] = {
    MemoryQOSCfg: {
        "minLimitPercent": (0, None),
        "lowLimitPercent": (0, None),
        "throttlingPercent": (0, None),
        "wmarkRatio": (0, 100),
        "wmarkScalePermill": (1, 1000),
        "wmarkMinAdj": (-25, 50),
        "pageCacheLimitPercent": (0, 100),
    },
    IOCfg: {
        **{name: (0, None) for name in ("readIOPS", "writeIOPS", "readBPS", "writeBPS")},
        "ioWeightPercent": (1, 100),
        "readLatencyPercent": (0, 100),
        "writeLatencyPercent": (0, 100),
        **{
            name: (1, None)
            for name in (
                "modelReadBPS",
                "modelWriteBPS",
                "modelReadSeqIOPS",
                "modelWriteSeqIOPS",
                "modelReadRandIOPS",
                "modelWriteRandIOPS",
            )
        },
    },
    ResctrlQOSCfg: {name: (0, 100) for name in ("catRangeStartPercent", "catRangeEndPercent", "mbaPercent")},
    ResourceThresholdStrategy: {
        **{
            name: (0, 100)
            for name in (
                "cpuSuppressThresholdPercent",
                "cpuSuppressMinPercent",
                "memoryEvictThresholdPercent",
                "memoryEvictLowerPercent",
                "cpuEvictThresholdPercent",
                "cpuEvictLowerPercent",
            )
        },
        **{
            name: (0, None)
            for name in (
                "memoryAllocatableEvictThresholdPercent",
                "memoryAllocatableEvictLowerPercent",
                "cpuAllocatableEvictThresholdPercent",
                "cpuAllocatableEvictLowerPercent",
            )
        },
    },
    CPUBurstStrategy: {"cpuBurstPercent": (0, 10000)},
}
# Upstream's +kubebuilder:default markers.
UPSTREAM_DEFAULTS: dict[type[Any], dict[str, Any]] = {
    NetworkQOSCfg: {"ingressRequest": 0, "ingressLimit": 100, "egressRequest": 0, "egressLimit": 100},
}


def _structs(cls: type[Any], seen: set[type[Any]] | None = None) -> set[type[Any]]:
    """Every typed struct reachable from ``cls``."""
    seen = set() if seen is None else seen
    seen.add(cls)
    for f in dataclasses.fields(cls):
        kind = f.metadata[SPEC_KEY].kind
        while isinstance(kind, (ListKind, MapKind)):
            kind = kind.elem
        if isinstance(kind, StructKind) and kind.cls not in seen:
            _structs(kind.cls, seen)
    return seen


def _specs() -> list[tuple[type[Any], FieldSpec]]:
    return [
        (cls, f.metadata[SPEC_KEY])
        for cls in sorted(_structs(NodeSLOSpec), key=lambda c: c.__name__)
        for f in dataclasses.fields(cls)
        if not f.metadata[SPEC_KEY].inline
    ]


def test_crd_bounds_and_defaults_are_upstreams_markers() -> None:
    bounded = {cls: {} for cls in UPSTREAM_BOUNDS}
    defaults: dict[type[Any], dict[str, Any]] = {}
    for cls, spec in _specs():
        if spec.crd_minimum is not None or spec.crd_maximum is not None:
            bounded.setdefault(cls, {})[spec.name] = (spec.crd_minimum, spec.crd_maximum)
        if spec.crd_default is not None:
            defaults.setdefault(cls, {})[spec.name] = spec.crd_default
    assert bounded == UPSTREAM_BOUNDS
    assert defaults == UPSTREAM_DEFAULTS


def test_webhook_rules_are_never_looser_than_the_crd() -> None:
    """A value the manager's validation accepts is never refused by the API server."""
    checked = 0
    for cls, spec in _specs():
        where = f"{cls.__name__}.{spec.name}"
        if spec.crd_minimum is not None:
            floor = spec.minimum if spec.minimum is not None else spec.exclusive_minimum
            assert floor is not None and floor >= spec.crd_minimum, where
            checked += 1
        if spec.crd_maximum is not None:
            assert spec.maximum is not None and spec.maximum <= spec.crd_maximum, where
            checked += 1
    assert checked > 30


def _props(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    for name in path:
        schema = schema["properties"][name]
    return schema


def test_every_qos_class_carries_the_same_bounds() -> None:
    spec = node_slo_spec_schema()
    for qos in QOS_CLASSES:
        memory = _props(spec, "resourceQOSStrategy", qos, "memoryQOS")["properties"]
        assert (memory["wmarkMinAdj"]["minimum"], memory["wmarkMinAdj"]["maximum"]) == (-25, 50), qos
        io = _props(spec, "resourceQOSStrategy", qos, "blkioQOS", "blocks")["items"]
        weight = _props(io, "ioCfg", "ioWeightPercent")
        assert (weight["minimum"], weight["maximum"]) == (1, 100), qos
        network = _props(spec, "resourceQOSStrategy", qos, "networkQOS")["properties"]
        assert network["egressLimit"]["default"] == 100, qos
    burst = _props(spec, "cpuBurstStrategy", "cpuBurstPercent")
    assert (burst["minimum"], burst["maximum"]) == (0, 10000)
    assert "minimum" not in _props(spec, "systemStrategy", "watermarkScaleFactor")  # webhook rule only


def test_page_cache_switch_schema_admits_booleans_and_legacy_integers_only() -> None:
    schema = LegacyIntBoolKind().openapi()
    assert "type" not in schema and schema["x-kubernetes-preserve-unknown-fields"] is True
    typed = [(type(v), v) for v in schema["enum"]]
    assert sorted(typed, key=repr) == sorted([(bool, False), (bool, True), (int, 0), (int, 1)], key=repr)


# --- hack/crd_diff.py -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crd_diff() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crd_diff", REPO / "hack" / "crd_diff.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _crd_text(spec: dict[str, Any], helm: bool = False) -> str:
    import yaml

    crd = {
        "spec": {
            "versions": [{"schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]
        }
    }
    body = yaml.safe_dump(crd)
    return "{{- if .Values.crds.managed }}\n---\n" + body + "{{- end }}\n" if helm else body


def test_crd_diff_lists_each_differing_keyword_per_path(crd_diff: ModuleType, tmp_path: Path) -> None:
    ours = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 100, "description": "x"},
            "b": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}},
            "c": {"type": "boolean"},
        },
    }
    theirs = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 1, "description": "other words"},
            "b": {"type": "array", "items": {"type": "string"}},
            "d": {"type": "string", "default": "z"},
        },
    }
    lines = crd_diff.differences(
        crd_diff.load_schema(_crd_text(ours)), crd_diff.load_schema(_crd_text(theirs, helm=True))
    )
    assert lines == [
        ".spec.a: minimum ours=0 theirs=1",
        ".spec.a: maximum ours=100 theirs=None",
        ".spec.b[]: enum ours=['p', 'q'] theirs=None",
        ".spec.c: only ours {'type': 'boolean'}",
        ".spec.d: only theirs {'type': 'string', 'default': 'z'}",
    ]
    (tmp_path / "a.yaml").write_text(_crd_text(ours))
    (tmp_path / "b.yaml").write_text(_crd_text(ours, helm=True))
    assert crd_diff.main([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]) == 0
    (tmp_path / "b.yaml").write_text(_crd_text(theirs))
    assert crd_diff.main([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]) == 1


def test_docs_list_every_crd_bound() -> None:
    """docs/crds.md's bounds table follows the code: one row per bounded field, with its bounds."""
    section = (REPO / "docs" / "crds.md").read_text().split("### Bounds")[1].split("### Defaults")[0]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]
    documented = {row[1].strip("`"): (row[2], row[3]) for row in rows}
    assert len(documented) == len(rows)  # one row per field

    def cell(value: float | None) -> str:
        return "" if value is None else f"{value:g}".replace("-", "−")

    expected = {
        spec.name: (cell(spec.crd_minimum), cell(spec.crd_maximum))
        for _, spec in _specs()
        if spec.crd_minimum is not None or spec.crd_maximum is not None
    }
    assert documented == expected
