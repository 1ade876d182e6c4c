"""ElasticQuota in koord-scheduler against the real API server (docs/rules/scheduler-elasticquota.md#wiring):
three teams under one parent quota. Team A's pods run beyond its min while B is idle (B's quota is lent);
when B's pods arrive A's runtime shrinks and the leader's overuse revoke takes A's lower-priority pods back,
so B's pods bind; the runtime the status controller patches onto each quota equals what
`koord simulate` (kind ElasticQuota, operation runtime) computes for the same tree and requests; a pod
over its quota's max stays Pending with the quota's reason; the per-quota metrics are exported.
The nodes are the test's own: plenty of cpu (the root's total dwarfs what other tests leave behind) and
three pod slots each, so six one-cpu pods fill them."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apis.elasticquota import (
    ANNOTATION_RUNTIME,
    DEFAULT_QUOTA,
    GROUP,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_QUOTA_NAME,
    PLURAL,
    ROOT_QUOTA,
    SPECIAL_QUOTAS,
    SYSTEM_QUOTA,
    VERSION,
)
from apis.quantity import parse_resource_list
from koord.simulate import simulate_scenario
from scheduler.config import parse_config
from scheduler.main import SchedulerService
from scheduler.plugins.elasticquota import resources as r
from scheduler.quotacontroller import QuotaController
from scheduler.registry import KNOWN
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

NAMESPACE = "koordinator-system"  # quotaGroupNamespace's default
ARGS = {"monitorAllQuotas": True, "delayEvictTime": "1s", "revokePodInterval": "1s"}


def _config(scheduler_name: str) -> Any:
    plugins = {
        "preFilter": {"enabled": [{"name": "ElasticQuota"}]},
        # preemption stays within a quota: DefaultPreemption off at postFilter
        "postFilter": {"enabled": [{"name": "ElasticQuota"}], "disabled": [{"name": "DefaultPreemption"}]},
        "reserve": {"enabled": [{"name": "ElasticQuota"}]},
    }
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": 1,
            "profiles": [
                {
                    "schedulerName": scheduler_name,
                    "plugins": plugins,
                    "pluginConfig": [{"name": "ElasticQuota", "args": ARGS}],
                }
            ],
        },
        KNOWN,
    )


def _api(kube: Any) -> tuple[Any, Any, Any]:
    """The clients as Any: the tests send JSON bodies."""
    return client.CoreV1Api(kube), client.CustomObjectsApi(kube), client.SchedulingV1Api(kube)


class Teams:
    """Two nodes (1000 cpu, 3 pods each), PriorityClasses high and low, and the quota tree: `org`
    (parent, max 6 cpu) over `a`, `b` (min 2, max 6) and `c` (min 1, max 2)."""

    def __init__(self, kube: Any, ns: str) -> None:
        self.core, self.custom, self.sched = _api(kube)
        self.ns, self.tag = ns, uuid.uuid4().hex[:6]
        self.scheduler_name = f"koord-eq-{self.tag}"
        self.q = {k: f"eq-{k}-{self.tag}" for k in ("org", "a", "b", "c")}
        self.classes = {"high": f"eq-high-{self.tag}", "low": f"eq-low-{self.tag}"}
        self.sched.create_priority_class({"metadata": {"name": self.classes["high"]}, "value": 1000})
        self.sched.create_priority_class({"metadata": {"name": self.classes["low"]}, "value": 0})
        self.nodes = [f"eq-{i}-{self.tag}" for i in range(2)]
        for name in self.nodes:
            cap = {"cpu": "1000", "memory": "64Gi", "pods": "3"}
            self.core.create_node({
                "metadata": {"name": name, "labels": {"koord-eq": self.tag}},
                "status": {"allocatable": cap, "capacity": cap},
            })  # fmt: skip
            self.core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here
        self.quota("org", "", {"cpu": "6"}, {"cpu": "6"}, is_parent=True)
        self.quota("a", self.q["org"], {"cpu": "2"}, {"cpu": "6"})
        self.quota("b", self.q["org"], {"cpu": "2"}, {"cpu": "6"})
        self.quota("c", self.q["org"], {"cpu": "1"}, {"cpu": "2"})

    def quota(
        self, key: str, parent: str, qmin: dict[str, str], qmax: dict[str, str], is_parent: bool = False
    ) -> None:
        labels = {LABEL_PARENT: parent, LABEL_IS_PARENT: "true" if is_parent else "false"}
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ElasticQuota",
            "metadata": {"name": self.q[key], "labels": labels},
            "spec": {"min": qmin, "max": qmax},
        })  # fmt: skip

    def pods(self, team: str, n: int, priority: str = "low", cpu: str = "1", start: int = 0) -> list[str]:
        names = [f"{team}-{priority}-{i}" for i in range(start, start + n)]
        for name in names:
            self.core.create_namespaced_pod(self.ns, {
                "metadata": {"name": name, "labels": {LABEL_QUOTA_NAME: self.q[team]}},
                "spec": {"schedulerName": self.scheduler_name, "nodeSelector": {"koord-eq": self.tag},
                         "priorityClassName": self.classes[priority], "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": cpu}}}]},
            })  # fmt: skip
        return names

    def live(self) -> dict[str, Any]:
        return {p.metadata.name: p for p in self.core.list_namespaced_pod(self.ns).items}

    def bound(self) -> set[str]:
        return {name for name, p in self.live().items() if p.spec.node_name}

    def quotas(self) -> dict[str, Any]:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)["items"]
        return {o["metadata"]["name"]: o for o in items}

    def close(self) -> None:
        for name in self.nodes:
            self.core.delete_node(name)
        for name in self.classes.values():
            self.sched.delete_priority_class(name)


@pytest.fixture()
def teams(kube: Any, namespace: str) -> Iterator[tuple[Teams, SchedulerService, CollectorRegistry]]:
    stop = threading.Event()
    world = Teams(kube, namespace)
    registry = CollectorRegistry()
    service = SchedulerService(kube, _config(world.scheduler_name), registry=registry, bind_workers=4)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    try:
        service.start(stop)
        thread.start()
        yield world, service, registry
    finally:
        stop.set()
        thread.join(timeout=10)
        service.close()
        world.close()


def _ints(resource_list: dict[str, Any]) -> dict[str, int]:
    return r.of_quantities(parse_resource_list(resource_list))


def _simulated_runtime(world: Teams, service: SchedulerService) -> dict[str, dict[str, int]]:
    """`koord simulate` kind ElasticQuota operation runtime over the cluster as the API server has it:
    every node's allocatable, every quota (other tests' too: they share the root), this test's pods'
    requests per quota (others' quotas and the default quota as the scheduler counts them)."""
    total: dict[str, int] = {}
    for node in world.core.list_node().items:
        if node.metadata.deletion_timestamp is None:
            total = r.add(total, _ints(node.status.allocatable or {}))
    everything = world.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    quotas = [q for q in everything if q["metadata"]["name"] not in SPECIAL_QUOTAS]
    mine = set(world.q.values())
    assert service.quota_controller is not None
    plugin = service.quota_controller.plugin
    with service.scheduler.lock:
        requests = {
            q["metadata"]["name"]: r.to_json(plugin.manager.quotas[q["metadata"]["name"]].self_request)
            for q in quotas
            if q["metadata"]["name"] not in mine and q["metadata"]["name"] in plugin.manager.quotas
        }
        used = {n: r.to_json(plugin.manager.quotas[n].self_used) for n in (SYSTEM_QUOTA, DEFAULT_QUOTA)}
    for name in mine:
        requests[name] = {}
    for pod in world.live().values():
        quota = (pod.metadata.labels or {}).get(LABEL_QUOTA_NAME)
        cpu = _ints(pod.spec.containers[0].resources.requests)
        requests[quota] = r.to_json(r.add(_ints(requests[quota]), cpu))
    result = simulate_scenario({
        "kind": "ElasticQuota", "operation": "runtime", "args": ARGS, "clusterTotal": r.to_json(total),
        "quotas": quotas, "requests": requests, "used": used,
    })  # fmt: skip
    return {name: result["runtime"][name] for name in mine}


def _patched_runtime(world: Teams) -> dict[str, dict[str, int]]:
    out = {}
    for name, obj in world.quotas().items():
        raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_RUNTIME)
        out[name] = _ints(json.loads(raw)) if raw else {}
    return out


def test_idle_quota_is_lent_and_taken_back_and_status_matches_simulate(
    teams: tuple[Teams, SchedulerService, CollectorRegistry],
) -> None:
    world, service, registry = teams
    controller = service.quota_controller
    assert isinstance(controller, QuotaController)
    q = world.q
    # B and C idle: A's six pods run, four beyond its min of two (B's and C's quota lent)
    high = world.pods("a", 4, "high")
    low = world.pods("a", 2, "low")
    assert wait_for(lambda: world.bound() == set(high + low), timeout=15), world.bound()
    assert wait_for(lambda: _patched_runtime(world).get(q["a"]) == {"cpu": 6000}, timeout=5)
    # B's two pods: B takes its min back; the nodes are full, so A's two low-priority pods are revoked
    bs = world.pods("b", 2)
    assert wait_for(lambda: world.bound() == set(high + bs), timeout=15), world.bound()
    assert set(controller.revoked) == {f"{world.ns}/{name}" for name in low}
    expected = {q["org"]: {"cpu": 6000}, q["a"]: {"cpu": 4000}, q["b"]: {"cpu": 2000}, q["c"]: {"cpu": 0}}

    def status_matches() -> bool:
        patched = _patched_runtime(world)
        return {n: patched.get(n) for n in expected} == _simulated_runtime(world, service) == expected

    assert wait_for(status_matches, timeout=5), (_patched_runtime(world), _simulated_runtime(world, service))

    def used() -> object:
        return world.quotas()[q["a"]].get("status", {}).get("used")

    assert wait_for(lambda: used() == {"cpu": "4"}, timeout=5), used()
    # metrics: runtime and used per quota, the revoked pods
    controller.refresh_metrics()
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    runtime = {
        (s.labels["name"], s.labels["resource"]): s.value
        for s in families["koord_scheduler_elastic_quota_runtime"].samples
    }
    assert runtime[(q["a"], "cpu")] == 4000 and runtime[(q["b"], "cpu")] == 2000
    revoked = {
        s.labels["name"]: s.value
        for s in families["koord_scheduler_elastic_quota_revoked_pods"].samples
        if s.name.endswith("_total")
    }
    assert revoked == {q["a"]: 2}
    # C asks for more than its max: Pending, with the quota's reason on its PodScheduled condition
    [big] = world.pods("c", 1, cpu="3")
    reason = (
        f"Insufficient quotas, quotaName: {q['c']}, runtime: cpu:1250m, used: <empty>, "
        "pod's request: cpu:3, exceedDimensions: [cpu]"
    )

    def condition() -> str:
        for c in world.core.read_namespaced_pod(big, world.ns).status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                return str(c.message)
        return ""

    assert wait_for(lambda: reason in condition(), timeout=10), condition()
    assert big not in world.bound()
    # the leader created the special quotas upstream creates (the root a parent that does not lend)
    specials = {
        o["metadata"]["name"]: o
        for o in world.custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
        if o["metadata"]["name"] in SPECIAL_QUOTAS
    }
    assert set(specials) == SPECIAL_QUOTAS
    assert specials[ROOT_QUOTA]["metadata"]["labels"][LABEL_IS_PARENT] == "true"
    assert specials[DEFAULT_QUOTA]["spec"]["max"] == {
        "cpu": "1844674407370955161",
        "memory": "1844674407370955161",
    }
