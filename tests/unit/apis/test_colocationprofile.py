"""apis.colocationprofile: decoding ClusterColocationProfile objects (errors name the path and value, what
the webhook must decide at mutation time is kept), and its CRD: the committed file is the generated
one, cluster-scoped config.koordinator.sh/v1alpha1, structural, and every field of upstream's spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.colocationprofile import ColocationProfileError, ProfileSelector, parse_profile
from apis.crds import CRDS, cluster_colocation_profile_crd

CRD_PATH = (
    Path(__file__).resolve().parents[3]
    / "deploy"
    / "crds"
    / "config.koordinator.sh_clustercolocationprofiles.yaml"
)
FULL: dict[str, Any] = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "colocation", "annotations": {"config.koordinator.sh/skip-update-resources": ""}},
    "spec": {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
        "probability": "50%",
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "labels": {"l": "v"},
        "annotations": {"a": "v"},
        "labelKeysMapping": {"old": "new"},
        "annotationKeysMapping": {"old": "new"},
        "labelSuffixes": {"l": "-x"},
        "schedulerName": "koord-scheduler",
        "patch": {"spec": {"tolerations": [{"key": "batch", "operator": "Exists"}]}},
    },
}


def test_full_profile_round_trips() -> None:
    profile = parse_profile(FULL)
    assert profile.name == "colocation"
    assert profile.skip_update_resources
    assert profile.spec.probability == "50%" and profile.spec.koordinator_priority == 1000
    assert profile.to_dict() == FULL


def test_skip_annotation_only_in_metadata() -> None:
    assert not parse_profile(
        {"spec": {"annotations": {"config.koordinator.sh/skip-update-resources": "x"}}}
    ).skip_update_resources
    assert parse_profile(
        {"metadata": {"annotations": {"config.koordinator.sh/skip-update-resources": "false"}}}
    ).skip_update_resources


def test_unset_fields_and_empty_maps_are_none() -> None:
    spec = parse_profile(
        {"metadata": {"name": "p"}, "spec": {"labels": {}, "patch": None, "qosClass": ""}}
    ).spec
    assert (spec.labels, spec.patch, spec.qos_class, spec.probability, spec.selector) == (None,) * 5
    assert parse_profile({"spec": {"labels": {"a": None}}}).spec.labels == {"a": ""}  # Go: null → ""


@pytest.mark.parametrize(
    ("raw", "selector"),
    [
        ({}, ProfileSelector()),
        ({"matchLabels": {"a": "not a valid value!"}}, ProfileSelector({"a": "not a valid value!"})),
        (
            {
                "matchLabels": {"a": "not a valid value!"},
                "matchExpressions": [{"key": "b", "operator": "Exists"}],
            },
            None,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, None),
        ({"matchExpressions": [{"key": "a", "operator": "Bogus", "values": ["x"]}]}, None),
    ],
)
def test_selectors_decode_and_record_why_they_cannot_be_evaluated(
    raw: dict[str, Any], selector: ProfileSelector | None
) -> None:
    parsed = parse_profile({"spec": {"selector": raw}}).spec.selector
    assert parsed is not None
    if selector is not None:  # the fast path (matchLabels only) never validates
        assert parsed == selector
    else:
        assert parsed.error


def test_kept_for_the_mutation() -> None:
    spec = parse_profile({"spec": {"probability": "abc", "patch": [1, 2]}}).spec
    assert (spec.probability, spec.patch) == ("abc", [1, 2])


@pytest.mark.parametrize(
    ("raw", "path", "value"),
    [
        ([], "<root>", []),
        ({"metadata": []}, "metadata", []),
        ({"metadata": {"annotations": "x"}}, "metadata.annotations", "x"),
        ({"spec": []}, "spec", []),
        ({"spec": {"qosClass": "GOLD"}}, "spec.qosClass", "GOLD"),
        ({"spec": {"qosClass": 1}}, "spec.qosClass", 1),
        ({"spec": {"probability": 1.5}}, "spec.probability", 1.5),
        ({"spec": {"probability": True}}, "spec.probability", True),
        ({"spec": {"koordinatorPriority": 2**31}}, "spec.koordinatorPriority", 2**31),
        ({"spec": {"labels": {"a": 1}}}, "spec.labels[a]", 1),
        ({"spec": {"labelSuffixes": []}}, "spec.labelSuffixes", []),
        ({"spec": {"schedulerName": 3}}, "spec.schedulerName", 3),
        ({"spec": {"selector": {"matchLabels": []}}}, "spec.selector.matchLabels", []),
        ({"spec": {"namespaceSelector": "x"}}, "spec.namespaceSelector", "x"),
        ({"kind": "Pod"}, "kind", "Pod"),
    ],
)
def test_bad_input_names_path_and_value(raw: Any, path: str, value: Any) -> None:
    with pytest.raises(ColocationProfileError) as info:
        parse_profile(raw)
    assert (info.value.path or "<root>", info.value.value) == (path, value)
    assert path in str(info.value)


def test_error_paths_carry_the_prefix() -> None:
    with pytest.raises(ColocationProfileError, match=r"^profiles\[2\]\.spec\.qosClass: "):
        parse_profile({"spec": {"qosClass": "X"}}, "profiles[2]")


# --- the CRD ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    with CRD_PATH.open() as f:
        loaded = yaml.safe_load(f)
    assert isinstance(loaded, dict)
    return loaded


def test_crd_file_matches_generated(crd: dict[str, Any]) -> None:
    assert crd == cluster_colocation_profile_crd()
    assert CRD_PATH.name in CRDS
    assert "&id" not in CRD_PATH.read_text()


def test_crd_identity_and_columns(crd: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == "clustercolocationprofiles.config.koordinator.sh"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("config.koordinator.sh", "Cluster")
    assert spec["names"] == {
        "kind": "ClusterColocationProfile",
        "listKind": "ClusterColocationProfileList",
        "plural": "clustercolocationprofiles",
        "singular": "clustercolocationprofile",
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "QoSClass": ".spec.qosClass",
        "PriorityClass": ".spec.priorityClassName",
        "Probability": ".spec.probability",
        "Scheduler": ".spec.schedulerName",
        "Age": ".metadata.creationTimestamp",
    }


def _problems(node: Any, path: str) -> list[str]:
    """Structural-schema rules (Kubernetes 1.20): typed nodes (int-or-string and preserve-unknown-fields
    excepted), no CEL, no properties next to additionalProperties."""
    problems: list[str] = []
    if "x-kubernetes-validations" in node:
        problems.append(f"{path}: CEL")
    if "type" not in node and not (
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    ):
        problems.append(f"{path}: no type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties")
    for key, sub in node.get("properties", {}).items():
        problems += _problems(sub, f"{path}.{key}")
    for key in ("additionalProperties", "items"):
        if isinstance(node.get(key), dict):
            problems += _problems(node[key], f"{path}.{key}")
    return problems


def test_crd_schema_is_structural_and_has_upstreams_fields(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _problems(schema, "") == []
    props = schema["properties"]["spec"]["properties"]
    assert set(props) == set(FULL["spec"])
    assert props["qosClass"]["enum"] == ["LSE", "LSR", "LS", "BE", "SYSTEM", ""]
    assert props["probability"]["x-kubernetes-int-or-string"] is True
    assert props["patch"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["koordinatorPriority"] == {
        "type": "integer",
        "format": "int32",
        "maximum": 2**31 - 1,
        "minimum": -(2**31),
    }
