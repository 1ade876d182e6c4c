"""Tests for apis.kubeobjects: the TypedDicts keep the shape the rest of koord relies on (every field
optional, JSON field names, every top-level kind a KubeObject)."""

from __future__ import annotations

import re
import typing

import pytest

from apis import kubeobjects as k

ALL = [getattr(k, name) for name in k.__all__]
TOP_LEVEL = [k.Pod, k.Node, k.ConfigMap, k.CustomResource]


@pytest.mark.parametrize("td", ALL, ids=lambda t: t.__name__)
def test_every_field_is_optional(td: type) -> None:
    # API objects omit empty fields: a required key would let mypy accept pod["spec"] on a pod without one.
    assert td.__required_keys__ == frozenset(), f"{td.__name__} has required keys {td.__required_keys__}"


@pytest.mark.parametrize("td", ALL, ids=lambda t: t.__name__)
def test_field_names_are_kubernetes_json_names(td: type) -> None:
    for name in td.__optional_keys__:
        assert re.fullmatch(r"[a-z][A-Za-z0-9]*", name), f"{td.__name__}.{name} is not a camelCase JSON name"


@pytest.mark.parametrize("td", TOP_LEVEL, ids=lambda t: t.__name__)
def test_top_level_kinds_are_kube_objects(td: type) -> None:
    # kube.informer's type variable is bound to KubeObject: each kind must carry its keys, typed alike.
    hints, base = typing.get_type_hints(td), typing.get_type_hints(k.KubeObject)
    assert {name: hints[name] for name in base} == base


def test_nested_fields_are_the_typed_parts() -> None:
    pod, node = typing.get_type_hints(k.Pod), typing.get_type_hints(k.Node)
    assert pod["metadata"] is k.ObjectMeta and pod["spec"] is k.PodSpec and pod["status"] is k.PodStatus
    assert node["spec"] is k.NodeSpec and node["status"] is k.NodeStatus
    spec = typing.get_type_hints(k.PodSpec)
    assert spec["containers"] == list[k.Container] and spec["tolerations"] == list[k.Toleration]
    assert typing.get_type_hints(k.Container)["resources"] is k.ResourceRequirements
    assert typing.get_type_hints(k.NodeSpec)["taints"] == list[k.Taint]
    assert typing.get_type_hints(k.ObjectMeta)["ownerReferences"] == list[k.OwnerReference]
