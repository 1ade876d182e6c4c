"""manager.webhook.handlers with stand-in decisions: what reaches the pure functions (the request's
namespace filled in, the reads), the JSONPatch of a mutation, refusals as Errored(400, aggregate) and a
ProfileError as Errored(500), and the requests every handler lets through untouched."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from manager.webhook import profile, validate_config, validate_pod
from manager.webhook.admission import AdmissionRequest, AdmissionResponse
from manager.webhook.handlers import (
    HandlerOptions,
    Reads,
    default_handlers,
    mutate_pod_handler,
    validate_configmap_handler,
    validate_pod_handler,
)

POD = {"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}}


def _req(resource: str = "pods", operation: str = "CREATE", obj: Any = POD, **kw: Any) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", api_version="admission.k8s.io/v1", operation=operation, resource=resource, namespace="ns",
        object=obj, **kw,
    )  # fmt: skip


class ProfileError(ValueError):
    pass


@dataclass(frozen=True)
class Mutation:
    mutated: bool
    pod: dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def mutate(self, pod: Mapping[str, Any], **kw: Any) -> Mutation:
        self.calls.append({"pod": pod, **kw})
        if pod["metadata"]["labels"].get("app") == "refuse":
            raise ProfileError("PriorityClass koord-batch not found")
        if kw["operation"] != "CREATE":
            return Mutation(False, dict(pod))
        out = copy.deepcopy(dict(pod))
        out["metadata"]["labels"]["koordinator.sh/qosClass"] = "BE"
        return Mutation(True, out)


READS = Reads(
    profiles=lambda: [{"metadata": {"name": "colocation"}}],
    namespace_labels=lambda name: {"tier": "batch"} if name == "ns" else None,
    priority_classes=lambda: {"koord-batch": {"value": 5000}},
    nodes=lambda: [{"metadata": {"name": "n1"}}],
)


def test_the_mutation_gets_the_reads_and_answers_with_a_patch() -> None:
    rec = Recorder()
    handle = mutate_pod_handler(
        rec.mutate, ProfileError, READS, skip_mutating_resources=True, rand_intn=lambda n: 0
    )
    answer = handle(_req())
    assert answer.allowed and answer.patch == (
        {"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"},
    )  # the namespace filled in from the request is not patched
    call = rec.calls[0]
    assert call["pod"]["metadata"]["namespace"] == "ns" and "namespace" not in POD["metadata"]
    assert call["namespace_labels"] == {"tier": "batch"} and call["profiles"] == READS.profiles()
    assert call["priority_classes"] == {"koord-batch": {"value": 5000}} and call["skip_mutating_resources"]
    assert handle(_req(operation="UPDATE")) == AdmissionResponse(True)  # not mutated: no patch
    refused = handle(_req(obj={"metadata": {"labels": {"app": "refuse"}}}))
    assert (refused.allowed, refused.code, refused.message) == (
        False,
        500,
        "PriorityClass koord-batch not found",
    )


@pytest.mark.parametrize(
    "req",
    [
        _req(resource="pods", sub_resource="status"),
        _req(resource="configmaps"),
        _req(operation="DELETE", obj=None),
        _req(operation="CONNECT"),
    ],
)
def test_other_requests_pass_every_handler_untouched(req: AdmissionRequest) -> None:
    def never(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the decision was asked")

    for handle in (mutate_pod_handler(never, ProfileError, READS), validate_pod_handler(never)):
        assert handle(req) == AdmissionResponse(True)
    cm = validate_configmap_handler(never, READS)
    assert cm(_req(resource="pods")) == AdmissionResponse(True)
    assert cm(_req(resource="configmaps", operation="DELETE", obj=None)) == AdmissionResponse(True)


def test_a_pod_refusal_is_errored_400_with_the_aggregate() -> None:
    seen: list[dict[str, Any]] = []

    def validate(pod: Mapping[str, Any], **kw: Any) -> list[str]:
        seen.append({"pod": pod, **kw})
        return ["a", "b", "a"] if kw["operation"] == "UPDATE" else []

    handle = validate_pod_handler(validate, skip_validating_priority=True)
    assert handle(_req()) == AdmissionResponse(True)
    old = {"metadata": {"name": "p"}}
    refused = handle(_req(operation="UPDATE", old_object=old))
    assert (refused.allowed, refused.code, refused.message) == (False, 400, "[a, b]")
    assert seen[1]["old_pod"] == old and seen[1]["skip_validating_priority"]
    assert seen[1]["pod"]["metadata"]["namespace"] == "ns"


def test_the_configmap_check_gets_names_nodes_and_the_old_object() -> None:
    seen: list[dict[str, Any]] = []

    def validate(cm: Mapping[str, Any], **kw: Any) -> list[str]:
        seen.append({"cm": cm, **kw, "nodes": list(kw["nodes"])})
        return ["colocation-config: enable: 1 is not a boolean"]

    options = HandlerOptions(config_namespace="kc", config_name="slo", check_node_strategy_names=True)
    refused = validate_configmap_handler(validate, READS, options)(
        _req(
            resource="configmaps",
            operation="UPDATE",
            obj={"metadata": {"name": "slo"}},
            old_object={"data": {}},
        )
    )
    assert (refused.code, refused.message) == (400, "colocation-config: enable: 1 is not a boolean")
    assert (seen[0]["name"], seen[0]["namespace"], seen[0]["check_node_strategy_names"]) == (
        "slo",
        "kc",
        True,
    )
    assert seen[0]["nodes"] == [{"metadata": {"name": "n1"}}] and seen[0]["old"] == {"data": {}}
    assert seen[0]["cm"]["metadata"] == {"name": "slo", "namespace": "ns"}


def test_default_handlers_serve_what_the_options_ask_for() -> None:
    assert sorted(default_handlers(READS)) == ["/mutate-pod", "/validate-configmap", "/validate-pod"]
    only = HandlerOptions(mutate_pods=False, validate_configmaps=False)
    assert sorted(default_handlers(READS, only)) == ["/validate-pod"]


def test_the_real_decisions_behind_the_default_handlers() -> None:
    """Each path answers what its pure function decides."""
    colocation = {"metadata": {"name": "colocation"}, "spec": {"qosClass": "BE"}}
    reads = Reads(profiles=lambda: [colocation], namespace_labels=lambda name: {})
    handlers = default_handlers(reads)
    assert sorted(handlers) == ["/mutate-pod", "/validate-configmap", "/validate-pod"]

    mutated = handlers["/mutate-pod"](_req())
    expected = profile.mutate_pod(
        {**POD, "metadata": {**POD["metadata"], "namespace": "ns"}}, operation="CREATE",
        profiles=[colocation], namespace_labels={}, priority_classes={},
    )  # fmt: skip
    assert expected.mutated and mutated.allowed and mutated.patch
    assert {"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"} in mutated.patch

    be_prod = {"metadata": {"name": "p", "labels": {"koordinator.sh/qosClass": "BE"}},
               "spec": {"priority": 9500, "containers": [{"name": "c"}]}}  # fmt: skip
    messages = validate_pod.validate_pod({**be_prod, "metadata": {**be_prod["metadata"], "namespace": "ns"}},
                                         operation="CREATE", old_pod=None)  # fmt: skip
    refused = handlers["/validate-pod"](_req(obj=be_prod))
    assert messages and (refused.code, refused.message) == (400, validate_pod.refusal_reason(messages))

    bad = {"metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
           "data": {"colocation-config": '{"enable": "yes"}'}}  # fmt: skip
    messages = validate_config.validate_slo_config(bad, operation="CREATE", old=None)
    refused = handlers["/validate-configmap"](_req(resource="configmaps", obj=bad))
    assert messages and (refused.code, refused.message) == (400, validate_pod.refusal_reason(messages))
