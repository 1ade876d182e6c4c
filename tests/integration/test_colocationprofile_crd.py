"""The ClusterColocationProfile CRD on the real API server: established and cluster-scoped, a profile
with every field read back equal (nothing pruned, the free-form patch kept), the printer columns served,
and what the schema refuses (an unknown qosClass, a non-int32 koordinatorPriority, a selector of the
wrong type). The profile read back decodes with apis.colocationprofile."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.colocationprofile import parse_profile
from apis.constants import CLUSTER_COLOCATION_PROFILE_PLURAL, CONFIG_GROUP, CONFIG_VERSION

pytestmark = pytest.mark.apiserver

SPEC: dict[str, Any] = {
    "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
    "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["spark", "flink"]}]},
    "probability": "50%",
    "qosClass": "BE",
    "priorityClassName": "koord-batch",
    "koordinatorPriority": 1000,
    "labels": {"koordinator.sh/mutated": "true"},
    "annotations": {"note": ""},
    "labelKeysMapping": {"app": "app-copy"},
    "annotationKeysMapping": {"a": "b"},
    "labelSuffixes": {"app": "-batch"},
    "schedulerName": "koord-scheduler",
    "patch": {"spec": {"tolerations": [{"key": "batch", "operator": "Exists"}], "x": [1, None, {"y": True}]}},
}


@pytest.fixture()
def profiles(kube: Any) -> Iterator[tuple[Any, list[str]]]:
    api = client.CustomObjectsApi(kube)
    created: list[str] = []
    yield api, created
    for name in created:
        api.delete_cluster_custom_object(
            CONFIG_GROUP, CONFIG_VERSION, CLUSTER_COLOCATION_PROFILE_PLURAL, name
        )


def _create(api: Any, created: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    name = f"profile-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": f"{CONFIG_GROUP}/{CONFIG_VERSION}",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": name},
        "spec": spec,
    }
    out: dict[str, Any] = api.create_cluster_custom_object(
        CONFIG_GROUP, CONFIG_VERSION, CLUSTER_COLOCATION_PROFILE_PLURAL, body
    )
    created.append(name)
    return out


def test_crd_is_established_and_cluster_scoped(kube: Any) -> None:
    crd = client.ApiextensionsV1Api(kube).read_custom_resource_definition(
        f"{CLUSTER_COLOCATION_PROFILE_PLURAL}.{CONFIG_GROUP}"
    )
    assert crd.spec.scope == "Cluster" and crd.spec.names.kind == "ClusterColocationProfile"
    assert crd.status is not None
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def test_full_profile_reads_back_equal_and_decodes(profiles: tuple[Any, list[str]]) -> None:
    api, created = profiles
    out = _create(api, created, copy.deepcopy(SPEC))
    read = api.get_cluster_custom_object(
        CONFIG_GROUP, CONFIG_VERSION, CLUSTER_COLOCATION_PROFILE_PLURAL, out["metadata"]["name"]
    )
    assert read["spec"] == SPEC
    profile = parse_profile(read)
    assert profile.spec.probability == "50%" and profile.spec.patch == SPEC["patch"]
    assert _create(api, created, {"probability": 30, "qosClass": ""})["spec"] == {
        "probability": 30,
        "qosClass": "",
    }


def test_printer_columns_are_served(profiles: tuple[Any, list[str]], kube: Any) -> None:
    api, created = profiles
    _create(api, created, copy.deepcopy(SPEC))
    method, url, headers, body, _ = kube.param_serialize(
        "GET",
        f"/apis/{CONFIG_GROUP}/{CONFIG_VERSION}/{CLUSTER_COLOCATION_PROFILE_PLURAL}",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
    )
    response = kube.call_api(method, url, header_params=headers, body=body)
    response.read()
    table = json.loads(response.data)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[1:] == ["QoSClass", "PriorityClass", "Probability", "Scheduler", "Age"]
    row = next(r for r in table["rows"] if r["object"]["metadata"]["name"] == created[-1])
    assert row["cells"][1:5] == ["BE", "koord-batch", "50%", "koord-scheduler"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"qosClass": "GOLD"}, "spec.qosClass"),
        ({"koordinatorPriority": 2**31}, "spec.koordinatorPriority"),
        ({"selector": {"matchLabels": ["a"]}}, "spec.selector.matchLabels"),
        ({"labels": {"a": 1}}, "spec.labels.a"),
    ],
)
def test_schema_refuses(profiles: tuple[Any, list[str]], spec: dict[str, Any], field: str) -> None:
    api, created = profiles
    with pytest.raises(ApiException) as info:
        _create(api, created, spec)
    assert info.value.status == 422
    assert field in (info.value.body or "")
