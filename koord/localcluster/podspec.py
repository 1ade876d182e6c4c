"""Pod manifests (``apis.kubeobjects.Pod``) running the local busybox image, for end-to-end tests and demos
on a LocalNode: the QoS class follows from the requests/limits chosen here, as kubelet computes it.

Imports: standard library, apis.kubeobjects and koord.localcluster.image only.
"""

from __future__ import annotations

from apis.kubeobjects import Container, ObjectMeta, Pod, PodSpec, ResourceRequirements
from koord.localcluster.image import BUSYBOX_IMAGE

QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
# Exits at once on SIGTERM so deletion and eviction do not wait for the grace period.
SLEEP_FOREVER = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
BURN_CPU = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do :; done"]


def qos_resources(qos: str, cpu: str = "100m", memory: str = "32Mi", cpu_limit: str = "200m",
                  memory_limit: str = "64Mi") -> ResourceRequirements:  # fmt: skip
    """Container resources giving the QoS class `qos`: Guaranteed uses requests == limits
    (cpu, memory); Burstable requests (cpu, memory) under limits (cpu_limit, memory_limit)."""
    if qos == "Guaranteed":
        return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
    if qos == "Burstable":
        return {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu_limit, "memory": memory_limit},
        }
    if qos == "BestEffort":
        return {}
    raise ValueError(f"unknown QoS class {qos!r}: one of {', '.join(QOS_CLASSES)}")


def busybox_pod(
    name: str,
    *,
    namespace: str = "default",
    qos: str = "BestEffort",
    command: list[str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
    scheduler_name: str | None = None,
    priority_class_name: str | None = None,
    resources: ResourceRequirements | None = None,
    extra_resources: ResourceRequirements | None = None,
    host_network: bool = False,
    grace_period_seconds: int = 5,
    image: str = BUSYBOX_IMAGE,
) -> Pod:
    """A one-container pod running `command` (default: sleep forever) in the local busybox image.

    `resources` overrides the QoS-derived resources; `extra_resources` merges more entries (e.g.
    `{"requests": {"kubernetes.io/batch-cpu": "500"}}`). The image is never pulled (it exists only
    in the node's containerd)."""
    res = (resources if resources is not None else qos_resources(qos)).copy()
    extra = extra_resources or {}
    if "requests" in extra:
        res["requests"] = {**res.get("requests", {}), **extra["requests"]}
    if "limits" in extra:
        res["limits"] = {**res.get("limits", {}), **extra["limits"]}
    container: Container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": command or SLEEP_FOREVER,
    }
    if res:
        container["resources"] = res
    spec: PodSpec = {
        "containers": [container],
        "terminationGracePeriodSeconds": grace_period_seconds,
        "restartPolicy": "Always",
    }
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if host_network:
        spec["hostNetwork"] = True
    meta: ObjectMeta = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
