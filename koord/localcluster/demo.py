"""The demo workload of `koord up`: real LS and BE pods, all scheduled by koord-scheduler, in the
namespace ``koord-demo`` (labelled ``koordinator.sh/enable-colocation=true``).

- ``ls-web``: a latency-sensitive service (koord-prod, QoS LS, Burstable) — the work koord protects;
  pinned to the real node when there is one, since only there do containers really run.
- ``be-burner``: a best-effort pod (koord-batch, QoS BE) requesting batch resources and burning CPU, also
  on the real node, so the koordlet's CPU suppress has something to hold back. The real node's CPU is the
  whole machine's: on a busy machine these two may wait, Pending with the scheduler's reason (too little
  batch-cpu, load over the threshold), which the status view prints.
- ``be-batch``: a **plain** Deployment (cpu/memory requests, no QoS label, no priority class, default
  scheduler) whose pods join colocation without being changed by hand: the ClusterColocationProfile
  ``koord-demo-batch`` (shipped here) matches the namespace and the pods' label, and koord-manager's
  mutating webhook rewrites each pod at creation into QoS BE, ``koord-batch``, koord-scheduler and
  ``kubernetes.io/batch-cpu``/``batch-memory`` (docs/rules/colocation-profile.md). Not pinned:
  koord-scheduler spreads them by load (LoadAwareScheduling) over every node with batch capacity. On
  simulated nodes they "use" ``koord.sh/simulated-cpu``; on the real node they sleep. Without
  kube-controller-manager (no real node) the same template is created as bare pods ``be-batch-<i>``.

Pure manifests (``demo_pods``, ``batch_deployment``, ``batch_pods``, ``demo_profile``,
``demo_namespace``) plus ``apply_demo``/``delete_demo``, which take a kubernetes ApiClient.

Imports: standard library, kubernetes (lazily), apis.{constants,kubeobjects},
koord.localcluster.{podspec,emunode}.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from apis import constants as c
from apis.constants import BATCH_CPU, BATCH_MEMORY
from apis.constants import LABEL_POD_QOS as QOS_LABEL
from apis.kubeobjects import Pod, PodSpec, ResourceRequirements
from koord.localcluster.emunode import CPU_ANNOTATION, MEMORY_ANNOTATION
from koord.localcluster.podspec import BURN_CPU, busybox_pod

NAMESPACE = "koord-demo"
SCHEDULER = "koord-scheduler"
# Upstream's example profile selects namespaces and pods by this label.
COLOCATION_LABEL = "koordinator.sh/enable-colocation"
PROFILE = "koord-demo-batch"
# The label the demo profile adds to every pod it mutated: the status view's MUTATED-BY column.
PROFILE_LABEL = "koord.sh/colocation-profile"
BATCH = "be-batch"


def _batch(cpu_milli: int, memory: str) -> ResourceRequirements:
    amounts = {BATCH_CPU: str(cpu_milli), BATCH_MEMORY: memory}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def demo_pods(real_node: str | None) -> list[Pod]:
    """Pure: the demo's hand-written pods; ``real_node`` pins ``ls-web`` and ``be-burner`` to it (None:
    unpinned)."""
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
    if real_node is not None:
        for pod in pods[:2]:
            pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": real_node}
    return pods


def batch_template() -> Pod:
    """Pure: the plain pod the batch workload is made of, as a team would write it: cpu/memory requests
    equal to limits, the colocation label, nothing koord-specific (the webhook adds the rest)."""
    plain = {"cpu": "200m", "memory": "64Mi"}
    return busybox_pod(
        BATCH,
        namespace=NAMESPACE,
        labels={"app": BATCH, COLOCATION_LABEL: "true"},
        resources={"requests": dict(plain), "limits": dict(plain)},
        annotations={CPU_ANNOTATION: "400m", MEMORY_ANNOTATION: "256Mi"},
    )


def batch_deployment(replicas: int) -> dict[str, Any]:
    """Pure: the batch workload as a plain Deployment of ``batch_template()``."""
    pod = batch_template()
    meta = pod["metadata"]
    spec: PodSpec = pod["spec"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": BATCH, "namespace": NAMESPACE, "labels": {"app": BATCH}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": BATCH}},
            "template": {"metadata": {"labels": meta.get("labels"), "annotations": meta.get("annotations")},
                         "spec": spec},
        },
    }  # fmt: skip


def batch_pods(count: int) -> list[Pod]:
    """Pure: the batch workload as ``count`` bare pods ``be-batch-<i>`` (no kube-controller-manager)."""
    pods = []
    for i in range(count):
        pod = batch_template()
        pod["metadata"]["name"] = f"{BATCH}-{i}"
        pods.append(pod)
    return pods


def demo_namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {COLOCATION_LABEL: "true"}},
    }


def demo_profile() -> dict[str, Any]:
    """Pure: the ClusterColocationProfile shipped with the demo (upstream's example profile, plus a label
    naming the profile on the pods it mutates)."""
    on = {"matchLabels": {COLOCATION_LABEL: "true"}}
    return {
        "apiVersion": c.CONFIG_API_VERSION,
        "kind": c.CLUSTER_COLOCATION_PROFILE_KIND,
        "metadata": {"name": PROFILE},
        "spec": {
            "namespaceSelector": on,
            "selector": on,
            "qosClass": "BE",
            "priorityClassName": "koord-batch",
            "koordinatorPriority": 1000,
            "schedulerName": SCHEDULER,
            "labels": {PROFILE_LABEL: PROFILE},
        },
    }


def _create(call: Any, *args: Any) -> None:
    from kubernetes.client import ApiException

    try:
        call(*args)
    except ApiException as e:
        if e.status != 409:  # left as it is
            raise


def prepare_demo(api: Any) -> None:
    """Creates the labelled namespace and the demo profile (existing ones are left as they are)."""
    from kubernetes import client

    _create(client.CoreV1Api(api).create_namespace, demo_namespace())
    custom: Any = client.CustomObjectsApi(api)
    plural = c.CLUSTER_COLOCATION_PROFILE_PLURAL
    _create(custom.create_cluster_custom_object, c.CONFIG_GROUP, c.CONFIG_VERSION, plural, demo_profile())


def apply_demo(api: Any, pods: list[Pod], *, batch: int, deployments: bool) -> None:
    """Creates the pods and the batch workload (a Deployment when ``deployments``, i.e.
    kube-controller-manager runs; else bare pods); existing ones are left as they are. Call it after
    ``prepare_demo``, once the mutating webhook serves (``webhook_serves``)."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api)
    for pod in pods:
        _create(core.create_namespaced_pod, NAMESPACE, pod)
    if deployments:
        _create(client.AppsV1Api(api).create_namespaced_deployment, NAMESPACE, batch_deployment(batch))
    else:
        for pod in batch_pods(batch):
            _create(core.create_namespaced_pod, NAMESPACE, pod)


def webhook_serves(api: Any) -> bool:
    """Whether a pod of the batch workload, created now, would come back mutated: a dry-run create
    through the real admission chain (the webhooks declare no side effects)."""
    from kubernetes import client
    from kubernetes.client import ApiException

    core: Any = client.CoreV1Api(api)
    try:
        resp = core.create_namespaced_pod(NAMESPACE, batch_template(), dry_run="All", _preload_content=False)
    except ApiException:
        return False
    labels = (json.loads(resp.data).get("metadata") or {}).get("labels") or {}
    return bool(labels.get(PROFILE_LABEL) == PROFILE)


def delete_demo(api: Any) -> None:
    from kubernetes import client
    from kubernetes.client import ApiException

    with contextlib.suppress(ApiException):
        client.CoreV1Api(api).delete_namespace(NAMESPACE)
