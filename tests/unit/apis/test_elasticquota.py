"""apis/elasticquota.py: the ElasticQuota object as the scheduler reads it (label and annotation rules,
docs/rules/scheduler-elasticquota.md#labels-and-annotations) and parse errors naming field and value."""

from __future__ import annotations

from typing import Any

import pytest

from apis.elasticquota import (
    ROOT_QUOTA,
    is_pod_non_preemptible,
    parse_elastic_quota,
    parse_namespaces,
    parse_shared_weight,
    pod_quota_label,
)
from apis.quantity import Quantity

P = "quota.scheduling.koordinator.sh/"


def _quota(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any
) -> Any:
    return {
        "metadata": {
            "name": "q",
            "namespace": "ns",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def test_defaults_of_the_labels() -> None:
    q = parse_elastic_quota(_quota(max={"cpu": "4", "memory": "1Gi"}, min={"cpu": "500m"}))
    assert (q.name, q.namespace, q.parent) == ("q", "ns", ROOT_QUOTA)
    assert not q.is_parent and q.allow_lent_resource and q.tree_id == "" and not q.is_root
    assert q.max == {"cpu": Quantity.parse("4"), "memory": Quantity.parse("1Gi")}
    assert q.min == {"cpu": Quantity.parse("500m")}
    assert q.shared_weight is None and q.effective_shared_weight == q.max
    assert q.namespaces == ()


@pytest.mark.parametrize(
    ("labels", "parent", "is_parent", "lend"),
    [
        ({P + "parent": "p", P + "is-parent": "true", P + "allow-lent-resource": "false"}, "p", True, False),
        (
            {P + "parent": "", P + "is-parent": "True", P + "allow-lent-resource": "False"},
            ROOT_QUOTA,
            False,
            True,
        ),
        ({P + "is-parent": "yes", P + "allow-lent-resource": "no"}, ROOT_QUOTA, False, True),
    ],
)
def test_label_rules_are_exact(labels: dict[str, str], parent: str, is_parent: bool, lend: bool) -> None:
    q = parse_elastic_quota(_quota(labels))
    assert (q.parent, q.is_parent, q.allow_lent_resource) == (parent, is_parent, lend)


def test_the_root_has_no_parent() -> None:
    root = parse_elastic_quota({"metadata": {"name": ROOT_QUOTA, "labels": {P + "parent": "x"}}})
    assert root.parent == ""


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"cpu": "2", "memory": 3}', {"cpu": Quantity.parse("2"), "memory": Quantity.parse("3")}),
        ('{"cpu": "0", "memory": 0}', None),  # all zeros: the max is used
        ("{}", None),
        ("not json", None),
        ('["cpu"]', None),
        ('{"cpu": "x"}', None),
        (None, None),
    ],
)
def test_shared_weight(text: str | None, want: dict[str, Quantity] | None) -> None:
    assert parse_shared_weight(text) == want


def test_namespaces_annotation() -> None:
    assert parse_namespaces('["a", "b"]') == ("a", "b")
    assert parse_namespaces('["a", 1]') == ()
    assert parse_namespaces("a") == ()
    q = parse_elastic_quota(
        _quota(annotations={P + "namespaces": '["x"]', P + "shared-weight": '{"cpu":"1"}'})
    )
    assert q.namespaces == ("x",) and q.effective_shared_weight == {"cpu": Quantity.parse("1")}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], r"quota=\[\]: expected an ElasticQuota object"),
        ({"metadata": 3}, "quota.metadata=3: expected an object"),
        ({"metadata": {}}, "quota.metadata.name=None: expected a non-empty string"),
        ({"metadata": {"name": "q", "namespace": 1}}, "quota.metadata.namespace=1"),
        ({"metadata": {"name": "q", "labels": {"a": 1}}}, "quota.metadata.labels.a=1: expected a string"),
        ({"metadata": {"name": "q", "annotations": []}}, r"quota.metadata.annotations=\[\]"),
        ({"metadata": {"name": "q"}, "spec": 1}, "quota.spec=1: expected an object"),
        ({"metadata": {"name": "q"}, "spec": {"max": {"cpu": "lots"}}}, 'quota.spec.max: resource "cpu"'),
        ({"metadata": {"name": "q"}, "spec": {"min": []}}, r"quota.spec.min=\[\]: expected a ResourceList"),
    ],
)
def test_errors_name_the_field(obj: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_elastic_quota(obj)


def test_pod_labels() -> None:
    pod = {"metadata": {"labels": {P + "name": "a", P + "preemptible": "false"}}}
    assert pod_quota_label(pod) == "a" and is_pod_non_preemptible(pod)
    assert not is_pod_non_preemptible({"metadata": {"labels": {P + "preemptible": "False"}}})
    assert pod_quota_label({"metadata": {"labels": {P + "name": 3}}}) == ""
