"""SchedulerService.close lets the pods held at Permit go at once (they are rejected, their binding
threads finish) instead of waiting out their Permit timeouts, which are a gang's wait time: 10 minutes
by default (docs/rules/scheduler-coscheduling.md#wiring)."""

from __future__ import annotations

import time

from kubernetes.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry

from scheduler.config import load_config
from scheduler.framework.waiting import WaitingPod
from scheduler.main import SchedulerService
from scheduler.registry import KNOWN


def test_close_rejects_held_pods_instead_of_waiting_for_their_timeout() -> None:
    api = ApiClient(Configuration(host="http://127.0.0.1:1"))
    service = SchedulerService(api, load_config(None, KNOWN), registry=CollectorRegistry())
    pod = {"metadata": {"name": "held", "namespace": "ns", "uid": "u1"}, "spec": {}}
    held = WaitingPod(pod, "n1", {"Coscheduling": 600.0})
    service.waiting[held.key] = held
    # the binding thread that waits on it, as Scheduler._bind does
    done = service.scheduler._binds.submit(held.wait)
    t0 = time.monotonic()
    service.close()
    assert time.monotonic() - t0 < 10
    status = done.result(timeout=0)
    assert not status.is_success()
    assert status.message() == "the scheduler is shutting down"
    api.close()
