"""AnnotationBinder: the annotations the profile's PreBind plugins name reach the API object in one patch
before the Binding; a pod without them binds with no extra request; a failed patch fails the bind. The keys
come from every plugin that writes annotations at PreBind."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from apis.device import ANNOTATION_DEVICE_ALLOCATED
from apis.numa import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from apis.podgroup import ANNOTATION_BIND_GANG_GROUP_ID, BIND_ANNOTATIONS
from apis.reservation import ANNOTATION_RESERVATION_ALLOCATED
from scheduler.annotationbinder import AnnotationBinder, bind_annotation_keys
from scheduler.framework.status import Status
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.deviceshare.plugin import DeviceShare
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.reservation.plugin import Reservation


class Core:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.fail = fail

    def patch_namespaced_pod(self, name: str, ns: str, body: dict[str, Any]) -> None:
        if self.fail:
            raise client.ApiException(status=409, reason="Conflict")
        self.calls.append((name, ns, body))


class Inner:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def bind(self, pod: dict[str, Any], node: str) -> Status:
        self.log.append(("bind", pod["metadata"]["name"], node))
        return Status.success()


def _pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {}}


def _binder(keys: tuple[str, ...], core: Core, log: list[Any]) -> AnnotationBinder:
    binder = AnnotationBinder(None, Inner(log), keys)
    binder.core = core
    return binder


def test_the_named_annotations_are_patched_before_the_bind() -> None:
    log: list[Any] = []
    core = Core()
    binder = _binder((*BIND_ANNOTATIONS, ANNOTATION_RESOURCE_STATUS), core, log)
    ann = {k: "x" for k in BIND_ANNOTATIONS} | {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1"}', "other": "y"}
    assert binder.bind(_pod("a", ann), "n").is_success()
    wanted = {k: "x" for k in BIND_ANNOTATIONS} | {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1"}'}
    assert core.calls == [("a", "ns", {"metadata": {"annotations": wanted}})]
    assert ANNOTATION_BIND_GANG_GROUP_ID in core.calls[0][2]["metadata"]["annotations"]
    assert binder.bind(_pod("b", {"other": "y"}), "n").is_success()
    assert binder.bind(_pod("c"), "n").is_success()
    assert len(core.calls) == 1  # nothing to patch for pods without them
    assert log == [("bind", "a", "n"), ("bind", "b", "n"), ("bind", "c", "n")]


def test_a_failed_patch_fails_the_bind() -> None:
    log: list[Any] = []
    binder = _binder((ANNOTATION_DEVICE_ALLOCATED,), Core(fail=True), log)
    status = binder.bind(_pod("a", {ANNOTATION_DEVICE_ALLOCATED: "{}"}), "n")
    assert not status.is_success()
    assert "409" in status.message() and "ns/a" in status.message()
    assert log == []  # never bound without its allocation


def test_the_keys_come_from_the_plugins_that_write_them() -> None:
    plugins = [
        NodeResourcesFit(),
        Coscheduling(),
        Reservation(),
        NodeNUMAResource(),
        DeviceShare(),
        Coscheduling(),
    ]
    assert bind_annotation_keys(plugins) == (  # type: ignore[arg-type]
        *BIND_ANNOTATIONS, ANNOTATION_RESERVATION_ALLOCATED, ANNOTATION_RESOURCE_STATUS,
        ANNOTATION_RESOURCE_SPEC, ANNOTATION_DEVICE_ALLOCATED,
    )  # fmt: skip
    assert bind_annotation_keys([NodeResourcesFit()]) == ()  # type: ignore[list-item]
