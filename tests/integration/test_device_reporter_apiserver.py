"""The koordlet's Device reporter against the real API server (docs/rules/koordlet-gpu.md#reporting):
through the real gateway it creates the node's Device (owned by the Node, the CRD's schema accepting it),
writes nothing on an unchanged round, patches a card turning unhealthy, wipes labels and annotations someone
else added, and drops the devices when the cards are gone; and a whole koordlet with ``Accelerators`` on and
``--gpu-fake-root`` reports a fake tree of three cards, one unhealthy, with the NodeResourceTopology report
off (~10 s)."""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.daemon import Koordlet
from agent.gateway import KubeGateway
from agent.options import parse
from agent.system.cgroup import CgroupVersion
from agent.system.gpu import FakeGPUBackend
from agent.system.podcgroup import CgroupDriver
from agent.topology.device_reporter import DeviceReporter
from koord.localcluster.controlplane import ControlPlane
from kube.rest import KubeRest
from tests.fixtures.gpus import FakeCard, write_card_tree
from tests.fixtures.hosttree import HostTree
from tests.integration.podhelpers import wait_for

GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "devices"
GIB = 1024**3


@pytest.fixture()
def node(kube: Any) -> Iterator[tuple[str, str]]:
    """(name, uid) of a fresh Node; its Device is deleted with it."""
    core: Any = client.CoreV1Api(kube)
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    created = core.create_node({"metadata": {"name": name}})
    yield name, created.metadata.uid
    core.delete_node(name)
    with contextlib.suppress(client.exceptions.ApiException):
        client.CustomObjectsApi(kube).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def _card(i: int, **kw: Any) -> FakeCard:
    return FakeCard(f"GPU-{i}", i, bus_id=f"0000:{0x3B + i:02x}:00.0", memory_total_bytes=16 * GIB, **kw)


def test_reporter_creates_patches_and_wipes(
    rest: KubeRest, kube: Any, node: tuple[str, str], tmp_path: Path
) -> None:
    name, uid = node
    custom: Any = client.CustomObjectsApi(kube)
    write_card_tree(tmp_path, [_card(i) for i in range(2)])
    results: list[str] = []
    reporter = DeviceReporter(
        KubeGateway(rest, name),
        FakeGPUBackend(tmp_path),
        name,
        node_uid=lambda: uid,
        on_result=results.append,
    )

    def device() -> dict[str, Any]:
        return dict(custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name))

    assert reporter.tick() == "created"
    obj = device()
    assert obj["metadata"]["ownerReferences"][0]["uid"] == uid
    assert [d["minor"] for d in obj["spec"]["devices"]] == [0, 1]
    assert reporter.tick() == "unchanged"

    (tmp_path / "gpus" / "1" / "healthy").write_text("false")
    (tmp_path / "gpus" / "1" / "health_reason").write_text("Xid79")
    assert reporter.tick() == "updated"
    card1 = device()["spec"]["devices"][1]
    assert card1["health"] is False and card1["conditions"][0]["reason"] == "Xid79"
    assert reporter.tick() == "unchanged"  # the condition's time is carried over, not a change

    # Someone else's label and annotation are wiped, as upstream's update does.
    patch = {"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}}
    custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, patch)
    assert reporter.tick() == "updated"
    meta = device()["metadata"]
    assert "x" not in meta["labels"] and not meta.get("annotations")

    shutil.rmtree(tmp_path / "gpus")  # cards gone: no devices, no labels
    assert reporter.tick() == "updated"
    obj = device()
    assert "devices" not in obj["spec"] and not obj["metadata"].get("labels")
    assert reporter.tick() == "unchanged"
    assert results == ["succeeded"] * 4 and reporter.failures == 0


def test_koordlet_reports_its_fake_cards(
    kube: Any, node: tuple[str, str], tmp_path: Path, control_plane: ControlPlane
) -> None:
    name, uid = node
    custom: Any = client.CustomObjectsApi(kube)
    host = HostTree(tmp_path / "host", CgroupVersion.V2, CgroupDriver.CGROUPFS).one_numa_node(
        4, 16 * 1024 * 1024, 12 * 1024 * 1024
    )
    cards = write_card_tree(
        tmp_path / "cards",
        [
            _card(0),
            _card(1, healthy="false", health_reason="Xid79", health_message="fallen off the bus"),
            _card(2),
        ],
    )
    argv = [
        f"--node-name={name}",
        f"--cgroup-root-dir={host.paths.cgroup_root}",
        f"--proc-root-dir={host.paths.proc}",
        f"--sys-root-dir={host.paths.sys}",
        "--addr=127.0.0.1:0",
        "--no-enable-qos",
        "--no-enable-node-metric-report",
        "--metric-cache-path=",
        "--audit-log=",
        "--feature-gates=NetworkCollector=false,NodeTopologyReport=false,Accelerators=true",
        "--node-topology-sync-interval=1s",
        f"--gpu-fake-root={cards}",
    ]
    opts, _ = parse(argv, {})
    off, _ = parse([*argv[:-3], "--feature-gates=NetworkCollector=false", argv[-1]], {})
    idle = Koordlet(off, rest=KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path)))
    idle.rest.close()
    idle.server.stop()  # bound, never started
    # Accelerators is off by default, whatever --gpu-fake-root says
    assert idle.reports.device_reporter is None
    agent = Koordlet(opts, rest=KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path)))
    assert agent.reports.device_reporter is not None and agent.reports.topology_reporter is None

    def device() -> dict[str, Any] | None:
        try:
            return dict(custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name))
        except client.exceptions.ApiException:
            return None

    agent.start()
    try:
        assert wait_for(lambda: device() is not None, 30)
        obj = device()
        assert obj is not None
    finally:
        agent.shutdown()
    # Worked by hand from the card tree (docs/rules/koordlet-gpu.md#device-object): 16 GiB a card,
    # NUMA node 0 under root complex pci0000:3a, cards sorted by minor, a condition only on card 1.
    resources = {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "16Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    expected = [
        {
            "type": "gpu",
            "id": f"GPU-{i}",
            "minor": i,
            "health": i != 1,
            "resources": resources,
            "topology": {
                "socketID": -1,
                "nodeID": 0,
                "pcieID": "pci0000:3a",
                "busID": f"0000:{0x3B + i:02x}:00.0",
            },
        }
        for i in range(3)
    ]
    devices = obj["spec"]["devices"]
    [condition] = devices[1].pop("conditions")
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "Healthy",
        "status": "False",
        "reason": "Xid79",
        "message": "fallen off the bus",
    }
    assert devices == expected
    assert obj["metadata"]["labels"] == {
        "node.koordinator.sh/gpu-vendor": "nvidia",
        "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
        "node.koordinator.sh/gpu-driver-version": "535.104.05",
    }
    owner = obj["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Node", name, uid, True)
    # Every write succeeded and was counted.
    labels = {"node": name, "status": "succeeded"}
    written = agent.registry.get_sample_value("koordlet_device_reports_total", labels)
    assert written is not None and written >= 1
    assert (
        agent.registry.get_sample_value("koordlet_device_reports_total", {**labels, "status": "failed"}) == 0
    )
