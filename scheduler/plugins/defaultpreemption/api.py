"""`PreemptionAPI` over the Kubernetes client (docs/rules/scheduler-preemption.md#effects): a victim is
deleted (a pod already gone counts as deleted) and gets a Normal ``Preempted`` Event
(``Preempted by <ns>/<name> on node <node>``, kube's message); ``status.nominatedNodeName`` is set or
cleared with a merge patch of the status subresource.
Imports: standard library, kubernetes client, kube.events, scheduler.framework,
scheduler.plugins.defaultpreemption.effects.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.events import EventRecorder
from scheduler.framework.interfaces import Pod
from scheduler.plugins.defaultpreemption.effects import PreemptionError


def _ref(pod: Pod) -> tuple[str, str]:
    meta = pod["metadata"]
    return str(meta.get("namespace") or "default"), str(meta["name"])


class KubePreemptionAPI:
    def __init__(self, api: Any, component: str = "koord-scheduler") -> None:
        self.core = client.CoreV1Api(api)
        self.events = EventRecorder(api, component)

    def delete_pod(self, victim: Pod, preemptor: Pod, node: str) -> None:
        namespace, name = _ref(victim)
        try:
            self.core.delete_namespaced_pod(name, namespace)
        except ApiException as e:
            if e.status != 404:
                raise PreemptionError(f"deleting pod {namespace}/{name}: {e.status} {e.reason}") from None
        by_ns, by_name = _ref(preemptor)
        self.events.event(
            {"kind": "Pod", "apiVersion": "v1", **victim},
            "Normal",
            "Preempted",
            f"Preempted by {by_ns}/{by_name} on node {node}",
        )

    def set_nominated_node(self, pod: Pod, node: str | None) -> None:
        namespace, name = _ref(pod)
        try:
            self.core.patch_namespaced_pod_status(name, namespace, {"status": {"nominatedNodeName": node}})
        except ApiException as e:
            if e.status != 404:
                raise PreemptionError(
                    f"setting nominatedNodeName of {namespace}/{name}: {e.status} {e.reason}"
                ) from None
