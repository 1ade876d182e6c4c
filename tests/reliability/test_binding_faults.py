"""Binding under faults, on this folder's own API server: every pod ends bound exactly once.

- A standalone koord-scheduler binding a burst of pending pods (paced by its client's QPS so the burst
  takes seconds) is SIGKILLed in the middle: its Lease is not released. A new one waits the lease out,
  takes it (docs/architecture.md#leader-election) and binds the rest. Every pod is bound once: the API
  server answered exactly one successful Binding per pod (its own request counters), the new
  scheduler bound exactly the pods the old one had not.
- A bind that meets a pod someone else bound meanwhile (an old leader's late bind) is a handled
  conflict, in both places it can show: the bind answers 409 (rolled back, not retried once the
  informer sees the pod bound), or the pod is bound between the scheduling queue's pop and the cycle
  (the cycle's assume finds it in the cache). Neither crashes the scheduling loop nor binds again.

Imports: standard library, pytest, kubernetes, scheduler (in-process cases), tests.reliability.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.framework.interfaces import Pod
from scheduler.framework.status import Code, Status
from scheduler.gateway import APIBinder
from scheduler.main import SchedulerService
from scheduler.registry import default_profile
from tests.reliability.controlplane_procs import (
    apiserver_binds,
    bare_node,
    delete_node,
    lease,
    node_names,
    pod_manifest,
    scheduler,
)
from tests.reliability.helpers import FreezableControlPlane, sample, scrape, wait_for

pytestmark = pytest.mark.apiserver

LEASE_DURATION = 15.0  # koord-scheduler's (docs/architecture.md#leader-election)
BURST = 24
QPS = 4  # the first scheduler's client: the burst takes ~6 s to bind


@pytest.fixture()
def two_nodes(own_kube: Any) -> Iterator[tuple[str, list[str]]]:
    """Two bare schedulable nodes sharing a fresh label; (label value, names sorted)."""
    tag = uuid.uuid4().hex[:6]
    names = [f"bind-{tag}-a", f"bind-{tag}-b"]
    try:
        for name in names:
            bare_node(own_kube, name, {"koord-test": tag})
        yield tag, names
    finally:
        for name in names:
            delete_node(own_kube, name)


def test_a_scheduler_killed_mid_burst_hands_over_and_every_pod_is_bound_once(
    own_control_plane: FreezableControlPlane,
    own_kube: Any,
    own_namespace: str,
    two_nodes: tuple[str, list[str]],
    tmp_path: Path,
) -> None:
    cp, ns = own_control_plane.cp, own_namespace
    tag, nodes = two_nodes
    core = client.CoreV1Api(own_kube)
    pods = [f"burst-{i:02d}" for i in range(BURST)]
    old = scheduler(cp.kubeconfig_path, tmp_path, ns, "bind-old", f"--kube-api-qps={QPS}",
                    "--kube-api-burst=1", "--bind-workers=2")  # fmt: skip
    new = scheduler(cp.kubeconfig_path, tmp_path, ns, "bind-new", "--bind-workers=4")
    try:
        old.start()
        wait_for(lambda: lease(own_kube, ns, "koord-scheduler")[0] == "bind-old", 30, what="the first lease")
        _, transitions = lease(own_kube, ns, "koord-scheduler")
        before = apiserver_binds(cp).get("201", 0.0)
        for name in pods:
            core.create_namespaced_pod(ns, pod_manifest(name, {"koord-test": tag}))
        wait_for(lambda: sum(map(bool, node_names(own_kube, ns, pods).values())) >= 6, 60, 0.05,
                 what="the burst's first binds")  # fmt: skip
        old.kill()  # mid-burst: the Lease is not released, binds in flight end with the process

        def settled() -> tuple[list[str]] | None:
            """The unbound pods once every successful Binding shows as a bound pod (a bind the API
            server was answering at the kill lands after it)."""
            binds = apiserver_binds(cp).get("201", 0.0) - before
            unbound = [p for p, n in node_names(own_kube, ns, pods).items() if not n]
            return (unbound,) if binds == BURST - len(unbound) else None

        (left,) = wait_for(settled, 10, 0.2, what="the old scheduler's binds to settle")
        assert len(left) >= BURST // 2, f"the burst was not cut in the middle: {len(left)} left"

        new.start()
        wait_for(lambda: lease(own_kube, ns, "koord-scheduler") == ("bind-new", transitions + 1),
                 LEASE_DURATION + 30, what="the new scheduler to take the Lease")  # fmt: skip
        bound = wait_for(lambda: all((b := node_names(own_kube, ns, pods)).values()) and b, 60,
                         what="every pod bound")  # fmt: skip
        assert set(bound.values()) <= set(nodes)
        # Exactly one successful bind per pod: none bound twice, none lost.
        assert apiserver_binds(cp).get("201", 0.0) - before == BURST
        metrics = scrape(new.port)
        assert sample(metrics, "scheduler_schedule_attempts_total", result="scheduled") == len(left)
        assert new.proc is not None and new.proc.poll() is None
    except AssertionError as e:
        raise AssertionError(f"{e}\nold scheduler:\n{old.tail()}\nnew scheduler:\n{new.tail()}") from None
    finally:
        old.kill()
        assert new.stop() in (0, None), new.tail()
        for name in pods:
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


# --- in process: a pod someone else bound meanwhile ----------------------------------------------------


class LateBinder:
    """The API binder, after ``before_bind`` ran (another binder's bind landing first); every outcome kept."""

    def __init__(self, api: Any, before_bind: Callable[[Pod, str], None] | None = None) -> None:
        self.real = APIBinder(api)
        self.before_bind = before_bind
        self.results: list[tuple[str, Status]] = []

    def bind(self, pod: Pod, node: str) -> Status:
        if self.before_bind is not None:
            self.before_bind(pod, node)
        st = self.real.bind(pod, node)
        self.results.append((node, st))
        return st


def _bind(core: Any, ns: str, name: str, node: str) -> None:
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, namespace=ns),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    core.create_namespaced_binding(ns, body, _preload_content=False).release_conn()


@contextlib.contextmanager
def _service(kube: Any) -> Iterator[tuple[SchedulerService, threading.Event]]:
    service = SchedulerService(kube, default_profile(), bind_workers=1)
    stop = threading.Event()
    try:
        service.start(stop)
        yield service, stop
    finally:
        stop.set()
        service.close()


def _ref(ns: str, name: str) -> Pod:
    return {"metadata": {"namespace": ns, "name": name}}


def _cached_on(service: SchedulerService, key: str) -> str:
    pod = service.scheduler.cache.get_pod(key)
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


def test_a_bind_of_a_pod_bound_meanwhile_is_a_handled_conflict(
    own_kube: Any, own_namespace: str, two_nodes: tuple[str, list[str]]
) -> None:
    ns, (tag, nodes) = own_namespace, two_nodes
    core = client.CoreV1Api(own_kube)
    key = f"{ns}/late"
    with _service(own_kube) as (service, stop):
        # The late bind takes the node the scheduler did not pick.
        other = {nodes[0]: nodes[1], nodes[1]: nodes[0]}
        late = lambda pod, node: _bind(core, ns, pod["metadata"]["name"], other[node])  # noqa: E731
        binder = LateBinder(own_kube, late)
        service.scheduler.binder = binder
        loop = threading.Thread(target=service.run, args=(stop,), name="scheduling-loop")
        loop.start()
        try:
            core.create_namespaced_pod(ns, pod_manifest("late", {"koord-test": tag}))
            wait_for(lambda: binder.results, 30, what="the scheduler's bind")
            [(node, st)] = binder.results
            assert st.code == Code.ERROR and " 409 " in st.message(), st.message()
            wait_for(lambda: _cached_on(service, key) == other[node], 10, what="the informer's bound pod")
            time.sleep(2.5)  # past the first backoff (1 s): a retry would have bound by now
            assert len(binder.results) == 1, binder.results
            assert service.scheduler.queue.where(_ref(ns, "late")) is None
            assert not service.scheduler.cache.is_assumed(key)
            assert node_names(own_kube, ns, ["late"]) == {"late": other[node]}
            assert loop.is_alive()
        finally:
            stop.set()
            loop.join(10)
        assert not loop.is_alive()


def test_a_pod_bound_between_pop_and_cycle_is_skipped(
    own_kube: Any, own_namespace: str, two_nodes: tuple[str, list[str]]
) -> None:
    ns, (tag, nodes) = own_namespace, two_nodes
    core = client.CoreV1Api(own_kube)
    key, ref = f"{ns}/raced", _ref(ns, "raced")
    with _service(own_kube) as (service, _):
        binder = LateBinder(own_kube)
        service.scheduler.binder = binder
        sched = service.scheduler
        core.create_namespaced_pod(ns, pod_manifest("raced", {"koord-test": tag}))
        wait_for(lambda: sched.queue.where(ref) == "active", 10, what="the pending pod queued")
        qpi = sched.queue.pop(timeout=5)
        assert qpi is not None and qpi.key == key
        _bind(core, ns, "raced", nodes[1])  # someone else binds it while the cycle has not started
        wait_for(lambda: _cached_on(service, key) == nodes[1], 10, what="the informer's bound pod")

        sched.schedule_pod(qpi)  # the assume meets the bound pod: skipped, not raised
        assert sched.drain_binds(10)
        assert binder.results == []  # no second bind
        assert _cached_on(service, key) == nodes[1] and not sched.cache.is_assumed(key)
        assert sched.queue.where(ref) is None
        assert node_names(own_kube, ns, ["raced"]) == {"raced": nodes[1]}
