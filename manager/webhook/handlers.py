"""The three admission handlers, each an adapter from an AdmissionRequest to a pure decision and back:
``/mutate-pod`` (manager.webhook.profile.mutate_pod, its result as a JSONPatch), ``/validate-pod``
(manager.webhook.validate_pod) and ``/validate-configmap`` (manager.webhook.validate_config).

As upstream's handlers: a request for a subresource or another resource is allowed untouched; a
refusal of either validator is controller-runtime's ``Errored(400, aggregate)`` (upstream's pod and
ConfigMap handlers turn their checks' error into exactly that); a ``ProfileError`` of the mutation is
``Errored(500, message)``. A pod without a namespace is judged with the request's, which never enters
the patch. The reads (profiles, namespace labels, priority classes, nodes) are callables, so the
handlers stay free of the API (manager.webhook.gateway provides them; tests pass plain functions).
``default_handlers`` builds the handlers ``HandlerOptions`` asks for on the real decisions; the
``*_handler`` builders take the decision as a parameter (tests pass stand-ins).
Imports: the standard library, apis.constants, manager.webhook.{admission,profile,validate_pod,
validate_config}.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis import constants as c
from manager.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    Handler,
    allowed,
    errored,
    json_patch,
)
from manager.webhook.profile import ProfileError, mutate_pod
from manager.webhook.validate_config import validate_slo_config
from manager.webhook.validate_pod import refusal_reason, validate_pod

__all__ = ["HandlerOptions", "Reads", "default_handlers", "mutate_pod_handler", "validate_configmap_handler",
           "validate_pod_handler"]  # fmt: skip

MUTATE_POD, VALIDATE_POD, VALIDATE_CONFIGMAP = "/mutate-pod", "/validate-pod", "/validate-configmap"
OPERATIONS = ("CREATE", "UPDATE")


@dataclass(frozen=True)
class HandlerOptions:
    """Which handlers to serve and the feature gates / names they take."""

    mutate_pods: bool = True
    validate_pods: bool = True
    validate_configmaps: bool = True
    skip_mutating_resources: bool = False  # gate ColocationProfileSkipMutatingResources
    skip_validating_priority: bool = False  # gate ColocationProfileSkipValidatingPriority
    check_node_strategy_names: bool = False  # upstream's --node-strategy-name-need-check
    config_namespace: str = c.DEFAULT_CONFIG_NAMESPACE
    config_name: str = c.SLO_CONTROLLER_CONFIG_NAME


@dataclass(frozen=True)
class Reads:
    """What the handlers read, as callables (manager.webhook.gateway.WebhookGateway's methods)."""

    profiles: Callable[[], Sequence[Mapping[str, Any]]] = list
    namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda name: None
    priority_classes: Callable[[], Mapping[str, Mapping[str, Any]]] = dict
    nodes: Callable[[], Iterable[Mapping[str, Any]]] = list


def _other(req: AdmissionRequest, resource: str) -> bool:
    return bool(req.sub_resource) or req.resource != resource


def _with_namespace(obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """A shallow copy of ``obj`` whose metadata.namespace is set (the request's when it has none)."""
    meta = dict(obj.get("metadata") or {})
    if not meta.get("namespace"):
        meta["namespace"] = namespace
    return {**obj, "metadata": meta}


def mutate_pod_handler(
    mutate_pod: Callable[..., Any],
    profile_error: type[Exception],
    reads: Reads,
    *,
    skip_mutating_resources: bool = False,
    rand_intn: Callable[[int], int] = random.randrange,
) -> Handler:
    """``/mutate-pod``: ClusterColocationProfiles applied to a pod being created."""

    def handle(req: AdmissionRequest) -> AdmissionResponse:
        if _other(req, "pods") or req.operation not in OPERATIONS:
            return allowed()
        if req.object is None:
            return errored(400, "the request carries no pod")
        before = _with_namespace(req.object, req.namespace)
        try:
            result = mutate_pod(
                before, operation=req.operation, profiles=reads.profiles(),
                namespace_labels=reads.namespace_labels(before["metadata"]["namespace"]),
                priority_classes=reads.priority_classes(),
                skip_mutating_resources=skip_mutating_resources, rand_intn=rand_intn,
            )  # fmt: skip
        except profile_error as e:
            return errored(500, str(e))
        if not result.mutated:
            return allowed()
        return AdmissionResponse(True, patch=tuple(json_patch(before, result.pod)))

    return handle


def validate_pod_handler(
    validate_pod: Callable[..., list[str]], *, skip_validating_priority: bool = False
) -> Handler:
    """``/validate-pod``: QoS class and priority class rules of colocation."""

    def handle(req: AdmissionRequest) -> AdmissionResponse:
        if _other(req, "pods") or req.operation not in OPERATIONS or req.object is None:
            return allowed()
        messages = validate_pod(
            _with_namespace(req.object, req.namespace), operation=req.operation, old_pod=req.old_object,
            skip_validating_priority=skip_validating_priority,
        )  # fmt: skip
        return errored(400, refusal_reason(messages)) if messages else allowed()

    return handle


def validate_configmap_handler(
    validate_slo_config: Callable[..., list[str]], reads: Reads, options: HandlerOptions = HandlerOptions()
) -> Handler:
    """``/validate-configmap``: the slo-controller-config checks (other ConfigMaps are allowed)."""

    def nodes() -> Iterator[Mapping[str, Any]]:  # listed only when the ConfigMap is the one checked
        yield from reads.nodes()

    def handle(req: AdmissionRequest) -> AdmissionResponse:
        if _other(req, "configmaps") or req.operation not in OPERATIONS or req.object is None:
            return allowed()
        messages = validate_slo_config(
            _with_namespace(req.object, req.namespace), operation=req.operation, old=req.old_object,
            name=options.config_name, namespace=options.config_namespace, nodes=nodes(),
            check_node_strategy_names=options.check_node_strategy_names,
        )  # fmt: skip
        return errored(400, refusal_reason(messages)) if messages else allowed()

    return handle


def default_handlers(reads: Reads, options: HandlerOptions = HandlerOptions()) -> dict[str, Handler]:
    """The paths ``options`` asks for, each with its handler on the real decision."""
    handlers: dict[str, Handler] = {}
    if options.mutate_pods:
        handlers[MUTATE_POD] = mutate_pod_handler(
            mutate_pod, ProfileError, reads, skip_mutating_resources=options.skip_mutating_resources
        )
    if options.validate_pods:
        handlers[VALIDATE_POD] = validate_pod_handler(
            validate_pod, skip_validating_priority=options.skip_validating_priority
        )
    if options.validate_configmaps:
        handlers[VALIDATE_CONFIGMAP] = validate_configmap_handler(validate_slo_config, reads, options)
    return handlers
