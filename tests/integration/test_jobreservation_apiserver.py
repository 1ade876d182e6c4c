"""JobReservation against the real API server with a real SchedulerService (of a scheduler name of its
own) and real binds
(docs/rules/scheduler-jobreservation.md): a stream of small high-priority gangs keeps four nodes full —
the test "completes" the oldest small job by deleting its pods and submits a new one in its place — while
a large low-priority gang (a PodGroup of 8 one-cpu pods on 16 cpus) waits. With JobReservation enabled
the large gang is elected, nodes are locked for it, and it binds within a bounded number of sessions (a
JobElected Event on its PodGroup, then JobReservationReleased once it is ready). The same stream without
the plugin is the control: the large gang is still pending at the same bound, so the test can fail.
Every loop is bounded in count and time."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client

from scheduler.config import SchedulerConfig, parse_config
from scheduler.main import SchedulerService
from scheduler.plugins.jobreservation.plugin import JobReservation
from scheduler.registry import KNOWN
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

GROUP, VERSION, PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"
PG_LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
# a pod held at Permit holds the scheduler's close until its wait ends: keep it short
GANG_WAIT = "gang.scheduling.koordinator.sh/waiting-time"
COSCHEDULING_POINTS = ("preEnqueue", "preFilter", "reserve", "permit", "preBind", "postBind")
NODES, NODE_CPUS, SMALL_JOBS, SMALL_SIZE, BIG_SIZE = 4, 4, 8, 2, 8
SESSION_SECONDS = 0.2
BOUND_SECONDS = 9.0  # the bound both variants are held to
MAX_SESSIONS = int(BOUND_SECONDS / SESSION_SECONDS) + 5
SMALL_LIFETIME = 1.0  # a small job is completed this long after it was seen bound
TICK = 0.15


def _config(enabled: bool, scheduler_name: str) -> SchedulerConfig:
    plugins: dict[str, Any] = {p: {"enabled": [{"name": "Coscheduling"}]} for p in COSCHEDULING_POINTS}
    # Coscheduling's PostFilter only; no preemption: small pods must not evict the large gang's
    plugins["postFilter"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    profile: dict[str, Any] = {"schedulerName": scheduler_name, "plugins": plugins}
    if enabled:
        plugins["filter"] = {"enabled": [{"name": "JobReservation"}]}
        profile["pluginConfig"] = [
            {"name": "JobReservation", "args": {"sessionPeriodSeconds": SESSION_SECONDS}}
        ]
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": 1,
            "profiles": [profile],
        },
        KNOWN,
    )


class Stream:
    """Four 4-cpu nodes of its own (a tag the pods select), PriorityClasses high and low, small gangs
    of two one-cpu pods kept filling the nodes, and one large gang."""

    def __init__(self, kube: Any, ns: str) -> None:
        self.core: Any = client.CoreV1Api(kube)
        self.custom: Any = client.CustomObjectsApi(kube)
        self.sched: Any = client.SchedulingV1Api(kube)
        self.ns, self.tag = ns, uuid.uuid4().hex[:6]
        # a scheduler of its own: gangs other tests left pending are not its jobs
        self.scheduler_name = f"koord-jr-{self.tag}"
        self.nodes = [f"jr-{i}-{self.tag}" for i in range(NODES)]
        self.classes = {"high": f"jr-high-{self.tag}", "low": f"jr-low-{self.tag}"}
        self.sched.create_priority_class({"metadata": {"name": self.classes["high"]}, "value": 1000})
        self.sched.create_priority_class({"metadata": {"name": self.classes["low"]}, "value": 0})
        for name in self.nodes:
            cap = {"cpu": str(NODE_CPUS), "memory": "64Gi", "pods": "110"}
            self.core.create_node(
                {
                    "metadata": {"name": name, "labels": {"koord-jr": self.tag}},
                    "status": {"allocatable": cap, "capacity": cap},
                }
            )
            self.core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here
        self.jobs: dict[str, float | None] = {}  # live small job -> when first seen bound (None: not yet)
        self.next_job = 0
        self.completed = 0

    def _pod(self, name: str, priority: str, labels: dict[str, str], annotations: dict[str, str]) -> None:
        self.core.create_namespaced_pod(self.ns, {
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"schedulerName": self.scheduler_name, "nodeSelector": {"koord-jr": self.tag},
                     "priorityClassName": self.classes[priority], "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]},
        })  # fmt: skip

    def submit_small(self) -> None:
        job = f"small-{self.next_job}"
        self.next_job += 1
        for i in range(SMALL_SIZE):
            self._pod(f"{job}-{i}", "high", {}, {GANG_NAME: job, GANG_MIN: str(SMALL_SIZE), GANG_WAIT: "3s"})
        self.jobs[job] = None

    def complete(self, job: str) -> None:
        for i in range(SMALL_SIZE):
            self.core.delete_namespaced_pod(f"{job}-{i}", self.ns, grace_period_seconds=0)
        del self.jobs[job]
        self.completed += 1

    def submit_big(self) -> list[str]:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": "big"},
            "spec": {"minMember": BIG_SIZE, "scheduleTimeoutSeconds": 5},
        })  # fmt: skip
        names = [f"big-{i}" for i in range(BIG_SIZE)]
        for name in names:
            self._pod(name, "low", {PG_LABEL: "big"}, {})
        return names

    def bound(self) -> set[str]:
        pods = self.core.list_namespaced_pod(self.ns).items
        return {p.metadata.name for p in pods if p.spec.node_name}

    def step(self, now: float, bound: set[str]) -> None:
        """Notes small jobs seen bound; completes the oldest one that lived its lifetime (at most one
        per step, so completions are spread) and submits a new one in its place."""
        for job, since in self.jobs.items():
            if since is None and all(f"{job}-{i}" in bound for i in range(SMALL_SIZE)):
                self.jobs[job] = now
        done = [
            (since, job)
            for job, since in self.jobs.items()
            if since is not None and now - since >= SMALL_LIFETIME
        ]
        if done:
            self.complete(min(done)[1])
            self.submit_small()

    def close(self) -> None:
        for name in self.nodes:
            self.core.delete_node(name)
        for name in self.classes.values():
            self.sched.delete_priority_class(name)


def _run(kube: Any, ns: str, enabled: bool) -> tuple[Stream, bool, int]:
    """Fills the nodes with small jobs, submits the large gang and keeps the stream going until the
    large gang is bound or BOUND_SECONDS passed; (stream, bound, sessions run when it ended)."""
    stream = Stream(kube, ns)
    stop = threading.Event()
    service = SchedulerService(kube, _config(enabled, stream.scheduler_name), bind_workers=8)
    plugin = next(
        (
            p
            for fw in service.scheduler.frameworks.values()
            for p in fw.plugins
            if isinstance(p, JobReservation)
        ),
        None,
    )
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    try:
        service.start(stop)
        thread.start()
        for _ in range(SMALL_JOBS):
            stream.submit_small()
        smalls = {f"{job}-{i}" for job in stream.jobs for i in range(SMALL_SIZE)}
        assert wait_for(lambda: smalls <= stream.bound(), timeout=15), (
            "the small jobs never filled the nodes",
            sorted(smalls - stream.bound()),
            None
            if plugin is None
            else (plugin.target, sorted(plugin.locked), plugin.sessions, dict(plugin.failed_since)),
            service.scheduler.queue.pending(),
        )
        big = set(stream.submit_big())
        start = time.monotonic()
        done = False
        for _ in range(int(BOUND_SECONDS / TICK) + 20):  # bounded in count and in time
            now = time.monotonic()
            if now - start > BOUND_SECONDS:
                break
            bound = stream.bound()
            if big <= bound:
                done = True
                break
            stream.step(now, bound)
            time.sleep(TICK)
        sessions = plugin.sessions if plugin is not None else 0
        if done and plugin is not None:  # the reservation is released once the gang is ready
            assert wait_for(lambda: plugin.target is None and not plugin.locked, timeout=5)
        return stream, done, sessions
    finally:
        stop.set()
        thread.join(timeout=10)
        service.close()
        stream.close()


def _events(stream: Stream, reason: str) -> list[Any]:
    return [e for e in stream.core.list_namespaced_event(stream.ns).items if e.reason == reason]


def test_a_large_gang_is_not_starved_by_small_ones_with_job_reservation(kube: Any, namespace: str) -> None:
    # control: without the plugin the stream keeps the large gang pending past the bound
    control, bound, _ = _run(kube, namespace, enabled=False)
    assert not bound, "the control bound the large gang: the stream does not starve it"
    assert control.completed >= 4, "the control's stream did not run"
    for name in [f"big-{i}" for i in range(BIG_SIZE)] + [
        f"{j}-{i}" for j in control.jobs for i in range(SMALL_SIZE)
    ]:
        control.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    control.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "big")
    assert wait_for(lambda: not control.core.list_namespaced_pod(namespace).items, timeout=15)
    # with JobReservation the large gang binds within a bounded number of sessions
    stream, bound, sessions = _run(kube, namespace, enabled=True)
    assert bound, f"the large gang did not bind within {BOUND_SECONDS}s ({sessions} sessions)"
    assert 0 < sessions <= MAX_SESSIONS
    assert stream.completed >= 1  # small jobs ran meanwhile
    assert wait_for(lambda: _events(stream, "JobElected"), timeout=10)
    elected = _events(stream, "JobElected")
    assert any(
        e.involved_object.kind == "PodGroup" and e.involved_object.name == "big"
        and e.message == f'job "{namespace}/big" elected for node reservation'
        for e in elected
    ), [(e.involved_object.kind, e.involved_object.name, e.message) for e in elected]  # fmt: skip
    assert wait_for(
        lambda: any(
            e.involved_object.name == "big" and "(ready)" in e.message
            for e in _events(stream, "JobReservationReleased")
        ),
        timeout=10,
    )
