"""The NRT reporter loop (docs/rules/koordlet-topology.md#reporting) over an in-memory API: create when
missing, no write while unchanged, a merge patch after a pod's cpuset moves the pools, a failed write
retried next round and counted, AlreadyExists read back, kubelet files read from disk with one log line
when missing; and the gateway's NRT calls over a recording KubeRest."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from agent.gateway import GatewayError, KubeGateway
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.topology.reporter import TopologyReporter
from agent.topology.sharepools import share_pools
from apis.kubeobjects import Node, Pod
from kube.rest import KubeRest, RestError

CPUS = tuple(CpuInfo(cpu, cpu % 2, 0, 0) for cpu in range(4))
NODE: Node = {"metadata": {"name": "n1", "uid": "node-uid", "annotations": {}}}
POOLS = "node.koordinator.sh/cpu-shared-pools"
POLICY = "kubelet.koordinator.sh/cpu-manager-policy"


class FakeAPI:
    """One NRT in memory; the resourceVersion grows with each write. ``fail`` makes the next writes fail."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.rv = 0
        self.calls: list[str] = []
        self.fail: int = 0

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"].setdefault("uid", "nrt-uid")
        self.obj = obj
        copy: dict[str, Any] = json.loads(json.dumps(obj))
        return copy

    def _maybe_fail(self, what: str) -> None:
        if self.fail:
            self.fail -= 1
            raise GatewayError(f"noderesourcetopologies/n1: {what} failed: 500 Internal Server Error", 500)

    def get_nrt(self) -> dict[str, Any] | None:
        self.calls.append("get")
        return json.loads(json.dumps(self.obj)) if self.obj is not None else None

    def create_nrt(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        self._maybe_fail("POST")
        if self.obj is not None:
            raise GatewayError("noderesourcetopologies/n1: POST failed: 409 Conflict", 409)
        return self._bump(json.loads(json.dumps(body)))

    def patch_nrt(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append("patch")
        self._maybe_fail("PATCH")
        assert self.obj is not None
        obj = json.loads(json.dumps(self.obj))
        obj["metadata"]["annotations"].update(patch["metadata"]["annotations"])
        obj["topologyPolicies"] = patch["topologyPolicies"]
        obj["zones"] = patch["zones"]
        return self._bump(obj)


def lsr_pod(cpuset: str) -> Pod:
    return {
        "metadata": {
            "uid": "p",
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpuset})},
        }
    }


def reporter(
    api: FakeAPI, tmp_path: Path, pods: list[Pod], results: list[str], watch: bool = True
) -> TopologyReporter:
    return TopologyReporter(
        writer=api,
        observed=(lambda: api.obj) if watch else (lambda: None),
        node=lambda: NODE,
        pods=lambda: pods,
        topology=lambda: NodeTopology(CPUS, (0,)),
        numa_meminfo=lambda: {0: {"MemTotal": 1024**3}},
        share_pools=share_pools,
        kubelet_config_file=tmp_path / "config.yaml",
        kubelet_root_dir=tmp_path,
        on_result=results.append,
    )


def test_create_then_nothing_then_patch_on_a_new_cpuset(tmp_path: Path) -> None:
    api, pods, results = FakeAPI(), [], []  # type: ignore[var-annotated]
    r = reporter(api, tmp_path, pods, results)
    assert r.tick() == "created"
    assert api.obj is not None
    assert api.obj["metadata"]["annotations"][POOLS] == '[{"socket":0,"node":0,"cpuset":"0-3"}]'
    assert r.tick() == "unchanged" and r.tick() == "unchanged"
    assert api.calls == ["create"]
    pods.append(lsr_pod("1"))
    assert r.tick() == "updated"
    assert api.obj["metadata"]["annotations"][POOLS] == '[{"socket":0,"node":0,"cpuset":"0,2-3"}]'
    assert results == ["succeeded", "succeeded"]


def test_annotations_read_back_the_object(tmp_path: Path) -> None:
    api, results = FakeAPI(), []  # type: ignore[var-annotated]
    r = reporter(api, tmp_path, [], results)
    assert r.annotations() is None
    r.tick()
    ann = r.annotations()
    assert ann is not None and ann[POOLS] == '[{"socket":0,"node":0,"cpuset":"0-3"}]'
    blind = reporter(api, tmp_path, [], results, watch=False)
    assert blind.annotations() is None
    blind.tick()  # AlreadyExists: read back, remembered
    assert blind.annotations() == ann


def test_a_failed_write_is_counted_and_retried_next_round(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, results = FakeAPI(), []  # type: ignore[var-annotated]
    r = reporter(api, tmp_path, [], results)
    api.fail = 1
    with caplog.at_level(logging.ERROR, "agent.topology.reporter"):
        assert r.tick() == "failed"
    assert "500" in caplog.text and api.obj is None
    assert r.tick() == "created"
    assert results == ["failed", "succeeded"]


def test_already_exists_is_read_back_and_patched_only_if_different(tmp_path: Path) -> None:
    api, pods, results = FakeAPI(), [], []  # type: ignore[var-annotated]
    reporter(api, tmp_path, pods, results).tick()
    blind = reporter(api, tmp_path, pods, results, watch=False)  # its watch has not seen the object
    assert blind.tick() == "unchanged"
    assert api.calls == ["create", "create", "get"]
    pods.append(lsr_pod("0"))
    assert blind.tick() == "updated"
    assert api.calls[-3:] == ["create", "get", "patch"]


def test_kubelet_files_are_read_and_a_missing_config_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, results = FakeAPI(), []  # type: ignore[var-annotated]
    r = reporter(api, tmp_path, [], results)
    with caplog.at_level(logging.INFO, "agent.topology.reporter"):
        r.tick()
        r.tick()
        r.tick()
    assert caplog.text.count("no kubelet config") == 1
    assert api.obj is not None and api.obj["metadata"]["annotations"][POLICY] == '{"policy":"none"}'
    (tmp_path / "config.yaml").write_text("cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n")
    (tmp_path / "cpu_manager_state").write_text('{"policyName":"static","entries":{"g":{"c":"3"}}}')
    assert r.tick() == "updated"
    ann = api.obj["metadata"]["annotations"]
    assert ann[POLICY] == '{"policy":"static","reservedCPUs":"0"}'
    assert ann[POOLS] == '[{"socket":0,"node":0,"cpuset":"0-2"}]'  # CPU 3 is the kubelet's
    assert json.loads(ann["node.koordinator.sh/pod-cpu-allocs"])[0]["uid"] == "g"


def test_waits_for_the_node_and_cpu_info(tmp_path: Path) -> None:
    api, results = FakeAPI(), []  # type: ignore[var-annotated]
    r = reporter(api, tmp_path, [], results)
    r.topology = lambda: None
    assert r.tick() == "skipped" and api.calls == []


def test_run_stops_and_kick_wakes_it(tmp_path: Path) -> None:
    api, results = FakeAPI(), []  # type: ignore[var-annotated]
    r = reporter(api, tmp_path, [], results)
    r.interval_seconds = 3600.0
    stop = threading.Event()
    t = threading.Thread(target=r.run, args=(stop,))
    t.start()
    stop.set()
    r.kick()
    t.join(30)
    assert not t.is_alive()
    assert api.calls[0] == "create"


# --- the gateway's NRT calls ---------------------------------------------------------------------------
class RecordingRest:
    def __init__(self, error: RestError | None = None) -> None:
        self.calls: list[tuple[str, str, Any, str]] = []
        self.error = error

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                query: Any = None, timeout: Any = None) -> Any:  # fmt: skip
        self.calls.append((method, path, body, content_type))
        if self.error is not None:
            raise self.error
        return {"metadata": {"name": "n1"}}


def gateway(rest: RecordingRest) -> KubeGateway:
    return KubeGateway(cast(KubeRest, rest), "n1")


def test_gateway_paths_and_merge_patch() -> None:
    rest = RecordingRest()
    gw = gateway(rest)
    assert gw.get_nrt() == {"metadata": {"name": "n1"}}
    gw.create_nrt({"metadata": {"name": "n1"}})
    gw.patch_nrt({"topologyPolicies": ["None"]})
    path = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
    assert rest.calls == [
        ("GET", f"{path}/n1", None, "application/json"),
        ("POST", path, {"metadata": {"name": "n1"}}, "application/json"),
        ("PATCH", f"{path}/n1", {"topologyPolicies": ["None"]}, "application/merge-patch+json"),
    ]


def test_gateway_errors_name_the_object() -> None:
    missing = gateway(RecordingRest(RestError("GET", "/x", 404, "Not Found", {"message": "gone"})))
    assert missing.get_nrt() is None
    broken = gateway(
        RecordingRest(RestError("PATCH", "/x", 422, "Unprocessable Entity", {"message": "bad zones"}))
    )
    with pytest.raises(GatewayError) as e:
        broken.patch_nrt({})
    assert e.value.status == 422
    assert str(e.value) == "noderesourcetopologies/n1: PATCH failed: 422 Unprocessable Entity: bad zones"
    with pytest.raises(GatewayError, match="devices/n1: POST failed: 422"):
        broken.create_custom_object(
            "scheduling.koordinator.sh", "v1alpha1", "devices", {"metadata": {"name": "n1"}}
        )
