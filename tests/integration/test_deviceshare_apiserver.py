"""DeviceShare in koord-scheduler against the real API server, on fake GPU trees
(docs/rules/scheduler-deviceshare.md#wiring), replaying docs/guides/gpu-sharing.md: two Nodes (4 cards of
16Gi; 2 cards of 8Gi, one unhealthy) whose Device objects the koordlet's own reporter writes from fake
card trees through the koordlet's gateway; the guide's scheduler profile; the guide's pods created one by
one. Shared, whole-card, percentage, memory-only and multi-card pods bind where the guide says with the
guide's `device-allocated` annotation, which also equals what `koord simulate` (kind DeviceShare,
operation allocate) gives for that node's Device and the pods already there; an invalid request, a
fragmented one and one over the Node's resources stay Pending with the guide's messages; deleting a pod
frees its cards for a pending one. And a card the koordlet reports repaired (its reporter's merge patch,
the scheduler's Device informer, the Device Update event) takes a pod that waited for it.

The Nodes advertise the GPU resources in status.allocatable as the guide's table says: koord-manager writes
them from the Device while colocation is enabled (docs/rules/manager.md#gpu-device-resources,
tests/integration/test_gpu_node_resources_apiserver.py); this test runs no manager, so it sets them.
Imports: agent (gateway, GPU backend, Device reporter), apis, koord.simulate, kube.rest, scheduler, the
test fixtures, kubernetes, yaml, pytest and the standard library."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client

from agent.gateway import KubeGateway
from agent.system.gpu import open_backend
from agent.topology.device_reporter import DeviceReporter
from apis.device import ANNOTATION_DEVICE_ALLOCATED, DEVICE_GROUP, DEVICE_PLURAL, DEVICE_VERSION
from apis.quantity import Quantity
from koord.simulate import simulate_scenario
from kube.rest import KubeRest
from scheduler.config import parse_config
from scheduler.framework.results import fit_error_message
from scheduler.framework.status import Status
from scheduler.main import SchedulerService
from scheduler.plugins.nodeaffinity import ERR_REASON_POD
from scheduler.registry import KNOWN
from tests.fixtures.gpus import FakeCard, write_card_tree
from tests.helpers.scheduler import running_scheduler
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "gpu-sharing.md"
SELECT = "koord-gpu-guide"  # keeps the guide's pods off nodes other tests may have left
GiB = 1024**3
XID79 = "Xid error detected on device, error code: 79"


def _cards() -> dict[str, list[FakeCard]]:
    """The guide's cards: gpu-a 4 x 16Gi, gpu-b 2 x 8Gi with minor 1 unhealthy."""
    a_bus = [("0000:3b:00.0", "0", "pci0000:3a"), ("0000:5e:00.0", "0", "pci0000:5d"),
             ("0000:86:00.0", "1", "pci0000:85"), ("0000:af:00.0", "1", "pci0000:ae")]  # fmt: skip
    v100 = "Tesla V100-SXM2-16GB"
    a = [
        FakeCard(f"GPU-aaaaaaaa-0000-4000-8000-00000000000{i}", i, v100, 16 * GiB, bus, numa, pcie)
        for i, (bus, numa, pcie) in enumerate(a_bus)
    ]
    b = [
        FakeCard("GPU-bbbbbbbb-0000-4000-8000-000000000000", 0, "Tesla P4", 8 * GiB, "0000:3b:00.0", "0",
                 "pci0000:3a"),
        FakeCard("GPU-bbbbbbbb-0000-4000-8000-000000000001", 1, "Tesla P4", 8 * GiB, "0000:d8:00.0", "1",
                 "pci0000:d7", healthy="false", health_reason="Xid79", health_message=XID79),
    ]  # fmt: skip
    return {"gpu-a": a, "gpu-b": b}


# --- the guide ------------------------------------------------------------------------------------
def _guide() -> str:
    return GUIDE.read_text()


def _fenced(lang: str) -> list[str]:
    """The guide's fenced blocks of that info string ("" = plain), read fence by fence."""
    blocks: list[str] = []
    current: list[str] | None = None
    info = ""
    for line in _guide().splitlines():
        if current is None and line.startswith("```"):
            info, current = line[3:].strip(), []
        elif current is not None and line.strip() == "```":
            if info == lang:
                blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    assert current is None, "an unclosed fence in the guide"
    return blocks


def _yaml_docs() -> list[dict[str, Any]]:
    return [d for block in _fenced("yaml") for d in yaml.safe_load_all(block) if d]


def _table(header: str) -> list[list[str]]:
    """The rows of every plain ``` block whose first line matches ``header``: a row is split on spaces
    into as many cells as the header has, the last cell taking the rest of the line (a message)."""
    rows: list[list[str]] = []
    for block in _fenced(""):
        lines = block.splitlines()
        if lines and re.fullmatch(header, lines[0].strip()):
            ncols = len(lines[0].split())
            rows += [line.split(maxsplit=ncols - 1) for line in lines[1:] if line.strip()]
    return rows


def _placed() -> list[list[str]]:
    return _table(r"POD +NODE +DEVICE-ALLOCATED")


def _pending() -> dict[str, str]:
    return {pod: message for pod, message in _table(r"POD +MESSAGE")}


def _allocatable() -> dict[str, dict[str, str]]:
    """The guide's table of what each Node advertises."""
    text = _guide()
    header = re.search(r"^\| node \| (`.*)\|$", text, re.M)
    assert header, "no allocatable table in the guide"
    names = [c.strip().strip("`") for c in header.group(1).split("|") if c.strip()]
    out: dict[str, dict[str, str]] = {}
    for row in re.finditer(r"^\| `(gpu-[ab])` \|((?: [0-9]+(?:Gi)? \|)+)$", text, re.M):
        values = [c.strip() for c in row.group(2).split("|") if c.strip()]
        out[row.group(1)] = dict(zip(names, values, strict=True))
    assert set(out) == {"gpu-a", "gpu-b"}, out
    return out


def _config() -> Any:
    [config] = [d for d in _yaml_docs() if d["kind"] == "KubeSchedulerConfiguration"]
    # the test's only change: retry a pending pod within a second once something frees
    return parse_config({**config, "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 1}, KNOWN)


# --- the cluster ----------------------------------------------------------------------------------
class World:
    def __init__(self, kube: Any, rest: KubeRest, ns: str, tmp: Path) -> None:
        self.core: Any = cast(Any, client.CoreV1Api(kube))  # JSON bodies
        self.custom: Any = cast(Any, client.CustomObjectsApi(kube))
        self.ns = ns
        self.pods: list[str] = []
        self.uids: dict[str, str] = {}
        self.reporters: dict[str, DeviceReporter] = {}
        base = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        for name, cards in _cards().items():
            resources = {**base, **_allocatable()[name]}
            node = self.core.create_node({
                "metadata": {"name": name, "labels": {SELECT: "true", f"{SELECT}-node": name}},
                "status": {"allocatable": resources, "capacity": resources},
            })  # fmt: skip
            self.core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here
            self.uids[name] = str(node.metadata.uid)
            root = write_card_tree(tmp / name, cards)
            # as the koordlet's daemon: its gateway, the fake backend, the Node's uid once observed
            self.reporters[name] = DeviceReporter(
                KubeGateway(rest, name), open_backend(root), name, node_uid=partial(self.uids.get, name)
            )

    def device(self, node: str) -> dict[str, Any]:
        return dict(self.custom.get_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, node))

    def create(self, pod: dict[str, Any], node: str | None = None) -> str:
        """The pod in the test's namespace, kept to the test's nodes (to ``node`` when given)."""
        name = str(pod["metadata"]["name"])
        selector = {SELECT: "true", **({f"{SELECT}-node": node} if node else {})}
        spec = {**pod["spec"], "nodeSelector": selector, "terminationGracePeriodSeconds": 0}
        self.core.create_namespaced_pod(self.ns, {**pod, "spec": spec})
        self.pods.append(name)
        return name

    def read(self, name: str) -> Any:
        return self.core.read_namespaced_pod(name, self.ns)

    def node_of(self, name: str) -> str | None:
        return self.read(name).spec.node_name  # type: ignore[no-any-return]

    def annotation(self, name: str) -> str:
        return str((self.read(name).metadata.annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED, ""))

    def unschedulable_message(self, name: str) -> str:
        for c in self.read(name).status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return str(c.message or "")
        return ""

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)
        self.pods.remove(name)

    def close(self) -> None:
        for name in list(self.pods):
            with contextlib.suppress(client.ApiException):
                self.delete_pod(name)
        for node in self.uids:
            with contextlib.suppress(client.ApiException):  # no garbage collector follows the owner here
                self.custom.delete_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, node)
            with contextlib.suppress(client.ApiException):
                self.core.delete_node(node)


@pytest.fixture()
def world(kube: Any, rest: KubeRest, namespace: str, tmp_path: Path) -> Iterator[World]:
    w = World(kube, rest, namespace, tmp_path)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture()
def scheduler(kube: Any, world: World) -> Iterator[SchedulerService]:
    """koord-scheduler with the guide's profile, started after the Devices exist (its informers list
    them before it schedules: a node whose Device it has not seen passes DeviceShare's Filter)."""
    for name, reporter in world.reporters.items():
        assert reporter.tick() == "created", name
        assert reporter.tick() == "unchanged", name
    with running_scheduler(kube, _config()) as service:
        yield service


# --- koord simulate -------------------------------------------------------------------------------
def _requests(pod: dict[str, Any]) -> dict[str, str]:
    [container] = pod["spec"]["containers"]
    return {str(k): str(v) for k, v in container["resources"]["limits"].items()}


def _simulated(devices: list[Any], placed: list[str], requests: dict[str, str]) -> list[dict[str, Any]]:
    """`koord simulate` DeviceShare: normalise the request, then allocate it with the default scorer on
    the node's devices with the annotations of the pods already there."""
    normal = simulate_scenario({"kind": "DeviceShare", "operation": "normalize", "requests": requests})
    assert normal["valid"], requests
    result = simulate_scenario({
        "kind": "DeviceShare", "operation": "allocate", "devices": devices,
        "allocatedPods": [{"deviceAllocations": json.loads(a)} for a in placed],
        "deviceRequests": {"gpu": normal["deviceRequest"]}, "scoringStrategy": {"type": "LeastAllocated"},
    })  # fmt: skip
    assert result["reason"] is None, result
    gpu: list[dict[str, Any]] = result["allocations"]["gpu"]
    return gpu


def _as_ints(annotation: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The annotation's gpu entries with integer resources, and their ids."""
    entries = json.loads(annotation)["gpu"]
    ints = [
        {"minor": e["minor"], "resources": {n: Quantity.parse(v).value() for n, v in e["resources"].items()}}
        for e in entries
    ]
    return ints, [e.get("id", "") for e in entries]


def _check_placement(w: World, pod: str, node: str, annotation: str, requests: dict[str, str],
                     before: dict[str, list[str]]) -> None:  # fmt: skip
    assert wait_for(lambda: w.node_of(pod) is not None, 15), (pod, w.unschedulable_message(pod))
    assert w.node_of(pod) == node, pod
    assert w.annotation(pod) == annotation, pod
    devices = w.device(node)["spec"]["devices"]
    entries, ids = _as_ints(annotation)
    assert entries == _simulated(devices, before[node], requests), pod
    assert ids == [next(d["id"] for d in devices if d["minor"] == e["minor"]) for e in entries], pod
    before[node].append(annotation)


def _messages(w: World, guide_message: str) -> set[str]:
    """The guide's message on its two nodes. Should the cluster hold other nodes, each adds the pod's
    nodeSelector reason, or the PreFilter reason when PreFilter turned the pod away."""
    n = len(w.core.list_node().items)
    if n == 2:
        return {guide_message}
    found = re.fullmatch(r"0/2 nodes are available: 2 (.*)\.", guide_message)
    assert found, guide_message
    reason = Status.unschedulable(found.group(1))
    other = Status.unresolvable(ERR_REASON_POD)
    return {fit_error_message(n, [reason] * n), fit_error_message(n, [reason] * 2 + [other] * (n - 2))}


def _shows(w: World, pod: str, messages: set[str]) -> bool:
    return w.unschedulable_message(pod) in messages


# --- the test -------------------------------------------------------------------------------------
def test_reported_devices_are_the_guides(world: World) -> None:
    """The koordlet's reporter writes gpu-b's Device as the guide shows it (the condition's time aside)."""
    for reporter in world.reporters.values():
        assert reporter.tick() == "created"
    [shown] = [d for d in _yaml_docs() if d["kind"] == "Device"]
    got = world.device("gpu-b")
    assert got["metadata"]["labels"] == shown["metadata"]["labels"]
    [owner] = got["metadata"]["ownerReferences"]
    assert owner == {**shown["metadata"]["ownerReferences"][0], "uid": world.uids["gpu-b"]}
    for device in (*got["spec"]["devices"], *shown["spec"]["devices"]):
        for cond in device.get("conditions") or ():
            cond.pop("lastTransitionTime")
    assert got["spec"] == shown["spec"]
    a = world.device("gpu-a")
    assert a["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "Tesla-V100-SXM2-16GB"
    assert [(d["minor"], d["id"], d["health"], d["resources"]["koordinator.sh/gpu-memory"])
            for d in a["spec"]["devices"]] == [
        (i, f"GPU-aaaaaaaa-0000-4000-8000-00000000000{i}", True, "16Gi") for i in range(4)
    ]  # fmt: skip
    # the guide's offline check: percent on gpu-a after shared and two-cards, as the table shows them
    scenario, answer = (json.loads(block) for block in _fenced("json"))
    assert scenario["devices"] == ["<gpu-a's spec.devices>"]
    shown = {row[0]: json.loads(row[2]) for row in _placed()}
    for annotation in shown.values():
        for entry in annotation["gpu"]:
            del entry["id"]
    on_a_before = [shown["shared"], shown["two-cards"]]
    assert [p["deviceAllocations"] for p in scenario["allocatedPods"]] == on_a_before
    assert simulate_scenario({**scenario, "devices": a["spec"]["devices"]}) == answer


def test_guide_pods_land_as_the_guide_and_koord_simulate_say(world: World, scheduler: Any) -> None:
    pods = [d for d in _yaml_docs() if d["kind"] == "Pod"]
    placed = {row[0]: row for row in _placed()}
    pending = _pending()
    first, freed = list(placed)[:-1], list(placed)[-1]
    assert [p["metadata"]["name"] for p in pods] == [*first, *pending]  # the guide's order
    assert freed in pending
    requests = {p["metadata"]["name"]: _requests(p) for p in pods}
    before: dict[str, list[str]] = {"gpu-a": [], "gpu-b": []}
    for pod in pods:
        name = world.create(pod)
        if name in first:
            _, node, annotation = placed[name]
            _check_placement(world, name, node, annotation, requests[name], before)
        else:
            want = _messages(world, pending[name])
            assert wait_for(partial(_shows, world, name, want), 15), (
                name, world.unschedulable_message(name), want,
            )  # fmt: skip
    # deleting two-cards frees minors 1 and 2 of gpu-a: the fragmented pod binds, the others stay
    world.delete_pod("two-cards")
    before["gpu-a"].remove(placed["two-cards"][2])
    _, node, annotation = placed[freed]
    _check_placement(world, freed, node, annotation, requests[freed], before)
    for name in pending:
        if name != freed:
            assert world.node_of(name) is None, name
            assert world.unschedulable_message(name) in _messages(world, pending[name]), name


def _whole_card(name: str) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1"}
    container = {"name": "c", "image": "busybox", "resources": {"limits": limits}}
    return {
        "metadata": {"name": name},
        "spec": {"schedulerName": "koord-scheduler", "containers": [container]},
    }


def test_a_repaired_card_takes_the_pod_that_waited_for_it(
    world: World, scheduler: Any, tmp_path: Path
) -> None:
    """gpu-b's minor 1 is unhealthy: a second whole card waits on `Insufficient gpu devices`; once the
    koordlet reports the card healthy the pod lands on it, with its UUID."""
    # the device plugin still advertises both cards: only DeviceShare knows minor 1 has no capacity
    world.core.patch_node_status("gpu-b", {"status": {"allocatable": {"nvidia.com/gpu": "2"}}})
    first = world.create(_whole_card("first"), node="gpu-b")
    assert wait_for(lambda: world.node_of(first) == "gpu-b", 15), world.unschedulable_message(first)
    second = world.create(_whole_card("second"), node="gpu-b")
    assert wait_for(lambda: "1 Insufficient gpu devices" in world.unschedulable_message(second), 15), (
        world.unschedulable_message(second)
    )
    card = tmp_path / "gpu-b" / "gpus" / "1"
    (card / "healthy").write_text("true\n")
    for name in ("health_reason", "health_message"):
        (card / name).unlink()
    assert world.reporters["gpu-b"].tick() == "updated"
    [repaired] = [d for d in world.device("gpu-b")["spec"]["devices"] if d["minor"] == 1]
    assert repaired["health"] is True and not repaired.get("conditions")
    assert wait_for(lambda: world.node_of(second) == "gpu-b", 15), world.unschedulable_message(second)
    entries, ids = _as_ints(world.annotation(second))
    memory, ratio = "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"
    assert entries == [
        {"minor": 1, "resources": {"koordinator.sh/gpu-core": 100, memory: 8 * GiB, ratio: 100}}
    ]
    assert ids == ["GPU-bbbbbbbb-0000-4000-8000-000000000001"]
