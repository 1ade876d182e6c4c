"""apis.objectcheck: shape checks of hand-written Kubernetes objects name the field path and the value."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from apis.objectcheck import as_node, as_pod, as_pods, bounded_int, finite_number, show

POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "a"}},
    "spec": {
        "nodeName": "n1",
        "priority": 9000,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": 1024}}}],
        "affinity": {"anything": ["goes", 1]},
    },
    "status": {"phase": "Running", "containerStatuses": [{"name": "c", "containerID": "containerd://x"}]},
    "unknownField": [1, 2],
}


def test_a_well_formed_pod_and_node_pass_unchanged() -> None:
    assert as_pod(POD, "pod") == POD
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": 4, "pods": "110"}}}
    assert as_node(node, "node") == node
    assert as_pods(None, "pods") == [] and as_pods([POD], "pods") == [POD]


def test_null_fields_are_unset_as_go_decodes_them() -> None:
    """Objects read from the API server through the Python client carry ``null`` for unset fields."""
    node = {"metadata": {"name": "n1", "finalizers": None, "labels": None}, "spec": None,
            "status": {"allocatable": {"cpu": "4"}, "conditions": None}}  # fmt: skip
    assert as_node(node, "node") == {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}
    assert node["metadata"]["finalizers"] is None  # the input is left as it was


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("metadata",), 5, "pod.metadata: expected an object (ObjectMeta), got 5"),
        (("metadata", "labels", "app"), 5, "pod.metadata.labels.app: expected a string, got 5"),
        (("spec", "priority"), True, "pod.spec.priority: expected an integer, got true"),
        (("spec", "priority"), 1.5, "pod.spec.priority: expected an integer, got 1.5"),
        (("spec", "containers"), {}, "pod.spec.containers: expected a list, got {}"),
        (("spec", "containers", 0), None, "pod.spec.containers[0]: expected an object (Container), got null"),
        (("status", "phase"), [], "pod.status.phase: expected a string, got []"),
        (
            ("spec", "containers", 0, "resources", "requests", "cpu"),
            "x",
            'pod.spec.containers[0].resources.requests.cpu: invalid quantity "x": expected a number with at '
            "least one digit",
        ),
        (("spec", "overhead"), [1], "pod.spec.overhead: expected an object of quantities, got [1]"),
    ],
)
def test_wrong_types_name_the_field_and_value(path: tuple[Any, ...], value: Any, message: str) -> None:
    pod = copy.deepcopy(POD)
    node: Any = pod
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(ValueError) as info:
        as_pod(pod, "pod")
    assert str(info.value) == message


def test_lists_of_pods_name_the_index() -> None:
    with pytest.raises(ValueError, match=r"^pods\[1\]: expected an object \(Pod\), got \"x\"$"):
        as_pods([POD, "x"], "pods")
    with pytest.raises(ValueError, match=r"^pods: expected a list of Pod objects, got \{\}$"):
        as_pods({}, "pods")


def test_numbers_are_finite_and_bounded() -> None:
    assert finite_number(3, "n") == 3.0 and finite_number(-2.5, "n") == -2.5
    assert bounded_int(2**63, "i") == 2**63
    for bad in (True, "1", None, math.inf, math.nan, 1e300, 10**30):
        with pytest.raises(ValueError, match=r"^n: expected "):
            finite_number(bad, "n")
    for bad in (False, 1.0, 2**63 + 1):
        with pytest.raises(ValueError, match=r"^i: expected "):
            bounded_int(bad, "i")


def test_values_are_shown_as_short_json() -> None:
    assert show(None) == "null" and show("a\nb") == '"a\\nb"' and show(object()).startswith("<object")
    assert len(show("x" * 500)) == 80
