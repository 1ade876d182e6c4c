"""The ElasticQuota CRD (deploy/crds/scheduling.sigs.k8s.io_elasticquotas.yaml) on the real API server:
established and namespaced with a status subresource; a quota with the tree labels, annotations, min and
max reads back unpruned and parses (apis/elasticquota.py) as the rules say
(docs/rules/scheduler-elasticquota.md#the-elasticquota-object); status.used goes through the subresource as
the status controller's merge patch; a bad quantity is refused by the schema."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.elasticquota import GROUP, PLURAL, VERSION, parse_elastic_quota
from apis.quantity import Quantity
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.plugin import ElasticQuota

pytestmark = pytest.mark.apiserver
P = "quota.scheduling.koordinator.sh/"


def test_crd_is_established_namespaced_with_status(kube: Any) -> None:
    ext: Any = client.ApiextensionsV1Api(kube)
    crd = ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
    assert crd.spec.scope == "Namespaced" and crd.spec.names.kind == "ElasticQuota"
    [version] = crd.spec.versions
    assert (version.name, version.served, version.storage) == (VERSION, True, True)
    assert version.subresources.status is not None
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)


def test_a_quota_round_trips_and_its_status_patch_applies(kube: Any, namespace: str) -> None:
    api: Any = client.CustomObjectsApi(kube)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ElasticQuota",
        "metadata": {
            "name": "team",
            "labels": {P + "parent": "org", P + "allow-lent-resource": "false"},
            "annotations": {P + "shared-weight": '{"cpu":"2"}', P + "namespaces": f'["{namespace}"]'},
        },
        "spec": {"min": {"cpu": "1", "memory": "1Gi"}, "max": {"cpu": 4, "memory": "8Gi"}},
    }
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    got = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "team")
    assert got["spec"] == body["spec"]
    quota = parse_elastic_quota(got)
    assert (quota.parent, quota.allow_lent_resource, quota.namespaces) == ("org", False, (namespace,))
    assert quota.max == {"cpu": Quantity.parse("4"), "memory": Quantity.parse("8Gi")}

    plugin = ElasticQuota(ElasticQuotaArgs())
    plugin.on_quota_add(got)
    plugin.on_any_pod_add(
        {
            "metadata": {"name": "p", "namespace": namespace},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
            },
        }
    )
    patch = plugin.status_patch(got)
    assert patch is not None and patch["status"] == {"used": {"cpu": "500m"}}
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "team", {"status": patch["status"]}
    )
    api.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "team", {"metadata": patch["metadata"]}
    )
    after = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "team")
    assert after["status"] == {"used": {"cpu": "500m"}}
    assert plugin.status_patch(after) is None  # nothing left to write


def test_a_bad_quantity_is_refused(kube: Any, namespace: str) -> None:
    api: Any = client.CustomObjectsApi(kube)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ElasticQuota",
        "metadata": {"name": "bad"},
        "spec": {"max": {"cpu": "lots"}},
    }
    with pytest.raises(ApiException) as err:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert err.value.status == 422 and "spec.max.cpu" in str(err.value.body)
