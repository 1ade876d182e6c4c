"""The demo workload of `koord up`: real LS and BE pods, all scheduled by koord-scheduler, in the
namespace ``koord-demo``.

- ``ls-web``: a latency-sensitive service (koord-prod, QoS LS, Burstable) — the work koord protects;
  pinned to the real node when there is one, since only there do containers really run.
- ``be-burner``: a best-effort pod (koord-batch, QoS BE) requesting batch resources and burning CPU, also
  on the real node, so the koordlet's CPU suppress has something to hold back.
- ``be-batch-<i>``: best-effort batch pods requesting ``kubernetes.io/batch-cpu``/``batch-memory`` and not
  pinned: koord-scheduler spreads them by load (LoadAwareScheduling) over every node with batch
  capacity. On simulated nodes they "use" ``koord.sh/simulated-cpu``; on the real node they sleep.

Pure manifests (``demo_pods``) plus ``apply_demo``/``delete_demo``, which take a kubernetes ApiClient.

Imports: standard library, kubernetes (lazily), apis.{constants,kubeobjects},
koord.localcluster.{podspec,emunode}.
"""

from __future__ import annotations

import contextlib
from typing import Any

from apis.constants import BATCH_CPU, BATCH_MEMORY
from apis.constants import LABEL_POD_QOS as QOS_LABEL
from apis.kubeobjects import Pod, ResourceRequirements
from koord.localcluster.emunode import CPU_ANNOTATION, MEMORY_ANNOTATION
from koord.localcluster.podspec import BURN_CPU, busybox_pod

NAMESPACE = "koord-demo"
SCHEDULER = "koord-scheduler"


def _batch(cpu_milli: int, memory: str) -> ResourceRequirements:
    amounts = {BATCH_CPU: str(cpu_milli), BATCH_MEMORY: memory}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def demo_pods(real_node: str | None, batch_pods: int = 6) -> list[Pod]:
    """Pure: the demo's pods; ``real_node`` pins ``ls-web`` and ``be-burner`` to it (None: unpinned)."""
    pods = [
        busybox_pod(
            "ls-web",
            namespace=NAMESPACE,
            qos="Burstable",
            scheduler_name=SCHEDULER,
            priority_class_name="koord-prod",
            labels={QOS_LABEL: "LS", "app": "koord-demo"},
            annotations={CPU_ANNOTATION: "300m", MEMORY_ANNOTATION: "48Mi"},
        ),
        busybox_pod(
            "be-burner",
            namespace=NAMESPACE,
            qos="BestEffort",
            scheduler_name=SCHEDULER,
            priority_class_name="koord-batch",
            labels={QOS_LABEL: "BE", "app": "koord-demo"},
            command=BURN_CPU,
            resources=_batch(200, "64Mi"),
            annotations={CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "16Mi"},
        ),
    ]
    for i in range(batch_pods):
        pods.append(
            busybox_pod(
                f"be-batch-{i}",
                namespace=NAMESPACE,
                qos="BestEffort",
                scheduler_name=SCHEDULER,
                priority_class_name="koord-batch",
                labels={QOS_LABEL: "BE", "app": "koord-demo"},
                resources=_batch(200, "64Mi"),
                annotations={CPU_ANNOTATION: "400m", MEMORY_ANNOTATION: "256Mi"},
            )
        )
    if real_node is not None:
        for pod in pods[:2]:
            pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": real_node}
    return pods


def apply_demo(api: Any, pods: list[Pod]) -> None:
    """Creates the namespace and the pods (existing ones are left as they are)."""
    from kubernetes import client
    from kubernetes.client import ApiException

    core: Any = client.CoreV1Api(api)
    try:
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    except ApiException as e:
        if e.status != 409:
            raise
    for pod in pods:
        try:
            core.create_namespaced_pod(NAMESPACE, pod)
        except ApiException as e:
            if e.status != 409:
                raise


def delete_demo(api: Any) -> None:
    from kubernetes import client
    from kubernetes.client import ApiException

    with contextlib.suppress(ApiException):
        client.CoreV1Api(api).delete_namespace(NAMESPACE)
