"""kube.events under object churn (no API server: a recording fake of CoreV1Api): the aggregation map
forgets events whose window has passed, so events about pods that came and went leave nothing behind;
repeats within the window are still counted on the same Event; a count patch's response is read and
its connection released."""

from __future__ import annotations

import json
from typing import Any

from kube.events import EventRecorder


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeResponse:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        self.read_calls = 0
        self.released = False

    def read(self) -> bytes:
        self.read_calls += 1
        return self.data

    def release_conn(self) -> None:
        self.released = True


class FakeCore:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patches: list[FakeResponse] = []

    def create_namespaced_event(self, namespace: str, body: dict[str, Any], **_: Any) -> FakeResponse:
        self.created.append(body)
        return FakeResponse(body)

    def patch_namespaced_event(self, name: str, namespace: str, body: Any, **_: Any) -> FakeResponse:
        resp = FakeResponse({"metadata": {"name": name, "namespace": namespace}})
        self.patches.append(resp)
        return resp


def pod(i: int) -> dict[str, Any]:
    meta = {"name": f"soak-{i}", "namespace": "demo", "uid": f"uid-{i}"}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta}


def test_events_about_pods_that_came_and_went_are_forgotten_after_the_window() -> None:
    clock, core = FakeClock(), FakeCore()
    rec = EventRecorder(core, "koord-scheduler", window=600.0, clock=clock)
    for i in range(2000):  # one FailedScheduling per pod, a pod every 2 s (the soak's churn)
        rec.event(pod(i), "Warning", "FailedScheduling", f"0/21 nodes are available (attempt for {i})")
        clock.now += 2.0
    assert len(core.created) == 2000
    # Only the events of the last 600 s can still be aggregated; before, all 2000 stayed (max_cache 4096).
    assert len(rec) <= 301
    assert len(rec) >= 299


def test_stale_entries_go_even_when_nothing_new_is_created() -> None:
    clock, core = FakeClock(), FakeCore()
    rec = EventRecorder(core, "koord-manager", window=60.0, clock=clock)
    rec.event(pod(1), "Warning", "A", "m")
    rec.event(pod(2), "Warning", "A", "m")
    clock.now += 30
    rec.event(pod(2), "Warning", "A", "m")  # a repeat: patched, pod 2 is the most recent again
    assert len(core.created) == 2 and len(core.patches) == 1
    clock.now += 31  # pod 1's event is 61 s old, pod 2's 31 s
    rec.event(pod(2), "Warning", "A", "m")
    assert len(core.created) == 2 and len(core.patches) == 2
    assert len(rec) == 1


def test_repeats_within_the_window_are_counted_and_the_patch_response_released() -> None:
    clock, core = FakeClock(), FakeCore()
    rec = EventRecorder(core, "koord-manager", window=600.0, clock=clock)
    for _ in range(5):
        rec.event(pod(7), "Warning", "FailedScheduling", "no fit")
        clock.now += 100
    assert len(core.created) == 1 and len(core.patches) == 4
    assert all(r.read_calls == 1 and r.released for r in core.patches)
    clock.now += 600  # past the window since the last occurrence: a new Event
    rec.event(pod(7), "Warning", "FailedScheduling", "no fit")
    assert len(core.created) == 2 and len(rec) == 1


def test_max_cache_still_bounds_the_map_within_the_window() -> None:
    clock, core = FakeClock(), FakeCore()
    rec = EventRecorder(core, "koord-manager", window=600.0, max_cache=50, clock=clock)
    for i in range(200):
        rec.event(pod(i), "Normal", "R", "m")
    assert len(rec) == 50
