"""The binder step that carries PreBind's annotations to the API: the plugins of a profile that write
annotations at PreBind (``AnnotatingPreBind``: Coscheduling's bind-gang annotations, Reservation's
``reservation-allocated``, NodeNUMAResource's ``resource-status``/``resource-spec``, DeviceShare's
``device-allocated``) name their keys, and before the Binding the pod's values for those keys are patched
onto the API object in one request (docs/architecture.md#binding-annotations). A pod without any binds as it
is, with no extra request. A failed patch fails the bind, so the pod is retried rather than running without
its allocation.
Imports: the kubernetes client, apis.pod, scheduler (framework, scheduler).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes import client

from apis.pod import pod_annotations
from scheduler.framework.interfaces import AnnotatingPreBind, Plugin, Pod
from scheduler.framework.status import Status
from scheduler.scheduler import Binder


def bind_annotation_keys(plugins: Iterable[Plugin]) -> tuple[str, ...]:
    """The annotation keys the given plugins' PreBind may write, each once, in the plugins' order."""
    keys: dict[str, None] = {}
    for p in plugins:
        if isinstance(p, AnnotatingPreBind):
            keys.update(dict.fromkeys(p.bind_annotations))
    return tuple(keys)


class AnnotationBinder:
    """Patches the pod's ``keys`` annotations onto the API object, then binds through ``binder``."""

    def __init__(self, api: Any, binder: Binder, keys: Iterable[str]) -> None:
        self.core, self.binder, self.keys = client.CoreV1Api(api), binder, tuple(keys)

    def bind(self, pod: Pod, node: str) -> Status:
        annotations = pod_annotations(pod)
        wanted = {k: annotations[k] for k in self.keys if k in annotations}
        if wanted:
            meta = pod["metadata"]
            try:
                self.core.patch_namespaced_pod(
                    meta["name"], meta.get("namespace", ""), {"metadata": {"annotations": wanted}}
                )
            except client.ApiException as e:
                what = f"patching {sorted(wanted)} of {meta.get('namespace')}/{meta['name']}"
                return Status.error(f"{what}: {e.status} {e.reason}", plugin="DefaultBinder")
        return self.binder.bind(pod, node)
