"""GPU backends (docs/rules/koordlet-gpu.md#backends): the fake card tree with four cards, and the NVML
backend against a fake ``pynvml`` module object (init failure, package missing, a failing call, the Xid
health check). No real card or driver is involved."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.system.gpu import (
    GPU,
    FakeGPUBackend,
    GPUError,
    GPUInventory,
    NVMLBackend,
    open_backend,
    pcie_root,
    sysfs_bus_id,
)
from tests.fixtures.gpus import FakeCard, FakeNVML, write_card_tree, write_pci_device

GI = 1024**3


def _four_cards() -> list[FakeCard]:
    return [
        FakeCard("GPU-aaaa", 0, bus_id="0000:3b:00.0", numa_node="0"),
        FakeCard("GPU-bbbb", 1, bus_id="0000:5E:00.0", numa_node="-1", pcie_id="pci0000:5d"),
        FakeCard("GPU-cccc", 3, bus_id="0000:86:00.0", numa_node="1", pcie_id=None),
        FakeCard(
            "GPU-dddd", 2, memory_total_bytes=16 * GI, bus_id="0000:af:00.0", numa_node=None,
            healthy="false", health_reason="Xid79", health_message="fell off the bus",
        ),
    ]  # fmt: skip


def test_fake_tree_four_cards(tmp_path: Path) -> None:
    inv = FakeGPUBackend(write_card_tree(tmp_path, _four_cards())).inventory()
    assert inv.driver_version == "535.104.05"
    assert [(g.index, g.uuid, g.minor) for g in inv.gpus] == [
        (0, "GPU-aaaa", 0),
        (1, "GPU-bbbb", 1),
        (2, "GPU-cccc", 3),
        (3, "GPU-dddd", 2),
    ]
    first, second, third, fourth = inv.gpus
    assert first == GPU(0, "GPU-aaaa", 0, "NVIDIA A100-SXM4-80GB", 80 * GI, "0000:3b:00.0", 0, "pci0000:3a")
    # sysfs numa_node -1 (no affinity) is node 0, as upstream reads it; the bus id is lower-cased.
    assert (second.numa_node, second.bus_id, second.pcie_id) == (0, "0000:5e:00.0", "pci0000:5d")
    assert third.pcie_id == ""  # unknown root complex
    assert (fourth.numa_node, fourth.healthy, fourth.health_reason, fourth.health_message) == (
        -1,
        False,
        "Xid79",
        "fell off the bus",
    )
    assert fourth.memory_total_bytes == 16 * GI


def test_fake_tree_orders_by_index_not_name(tmp_path: Path) -> None:
    cards = [FakeCard(f"GPU-{i}", i) for i in range(11)]
    inv = FakeGPUBackend(write_card_tree(tmp_path, cards)).inventory()
    assert [g.index for g in inv.gpus] == list(range(11))  # "10" after "9", not after "1"


def test_fake_tree_missing_is_no_gpus(tmp_path: Path) -> None:
    assert FakeGPUBackend(tmp_path / "nothing").inventory() == GPUInventory()


@pytest.mark.parametrize(
    ("card", "message"),
    [
        (FakeCard("GPU-x", 0, memory_total_bytes="lots"), "memory_total_bytes 'lots' is not an integer"),  # type: ignore[arg-type]
        (FakeCard("GPU-x", -2), "minor -2 is negative"),
        (FakeCard("GPU-x", 0, healthy="maybe"), "healthy 'maybe' is not true/false"),
        (FakeCard("GPU-x", 0, numa_node="one"), "numa_node 'one' is not an integer"),
    ],
)
def test_fake_tree_bad_field_names_it(tmp_path: Path, card: FakeCard, message: str) -> None:
    with pytest.raises(GPUError, match=message):
        FakeGPUBackend(write_card_tree(tmp_path, [card])).inventory()


def test_fake_tree_missing_uuid(tmp_path: Path) -> None:
    write_card_tree(tmp_path, [FakeCard("GPU-x", 0)])
    (tmp_path / "gpus" / "0" / "uuid").unlink()
    with pytest.raises(GPUError, match="uuid is missing"):
        FakeGPUBackend(tmp_path).inventory()


def test_sysfs_bus_id() -> None:
    assert sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id("0000:3B:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id(" 0001:AF:00.1\n") == "0001:af:00.1"


def test_pcie_root_from_sysfs(tmp_path: Path) -> None:
    write_pci_device(tmp_path, "0000:3b:00.0", "pci0000:3a", "-1")
    assert pcie_root(tmp_path, "0000:3b:00.0") == (0, "pci0000:3a")
    assert pcie_root(tmp_path, "0000:99:00.0") == (-1, "")


# ------------------------------------------------------------------------------------------------ NVML


def _nvml_sys(tmp_path: Path, cards: list[FakeCard]) -> Path:
    sys_root = tmp_path / "sys"
    for i, card in enumerate(cards):
        write_pci_device(sys_root, card.bus_id, f"pci0000:{i:02x}", str(i % 2))
    return sys_root


def test_nvml_four_cards(tmp_path: Path) -> None:
    cards = [
        FakeCard(f"GPU-{i}", 3 - i, bus_id=f"0000:{0x3B + i:02x}:00.0", name="Tesla T4") for i in range(4)
    ]
    nvml = FakeNVML(cards)
    backend = NVMLBackend(_nvml_sys(tmp_path, cards), module=nvml)
    inv = backend.inventory()
    assert inv.driver_version == "535.104.05"
    assert [
        (g.index, g.uuid, g.minor, g.model, g.bus_id, g.numa_node, g.pcie_id, g.healthy) for g in inv.gpus
    ] == [
        (0, "GPU-0", 3, "Tesla T4", "0000:3b:00.0", 0, "pci0000:00", True),
        (1, "GPU-1", 2, "Tesla T4", "0000:3c:00.0", 1, "pci0000:01", True),
        (2, "GPU-2", 1, "Tesla T4", "0000:3d:00.0", 0, "pci0000:02", True),
        (3, "GPU-3", 0, "Tesla T4", "0000:3e:00.0", 1, "pci0000:03", True),
    ]
    assert inv.gpus[0].memory_total_bytes == 80 * GI
    backend.inventory()
    assert nvml.calls.count("nvmlInit") == 1
    backend.close()
    assert "nvmlShutdown" in nvml.calls
    backend.inventory()  # a closed backend initialises again when used
    assert nvml.calls.count("nvmlInit") == 2


def test_nvml_init_failure_is_no_gpus_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    nvml = FakeNVML([FakeCard("GPU-0", 0)], init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    backend = NVMLBackend(tmp_path, module=nvml)
    with caplog.at_level(logging.INFO, logger="agent.system.gpu"):
        assert backend.inventory() == GPUInventory()
        assert backend.inventory() == GPUInventory()
    assert nvml.calls == ["nvmlInit"]  # not retried, nothing else asked
    assert len([r for r in caplog.records if "NVML init failed" in r.getMessage()]) == 1


def test_nvml_package_missing_is_no_gpus_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def loader(name: str) -> object:
        raise ModuleNotFoundError(f"No module named {name!r}")

    backend = NVMLBackend(tmp_path, loader=loader)
    with caplog.at_level(logging.INFO, logger="agent.system.gpu"):
        assert backend.inventory() == GPUInventory()
        assert backend.inventory() == GPUInventory()
    assert len([r for r in caplog.records if "not installed" in r.getMessage()]) == 1


def test_nvml_call_failure_names_the_card_and_field(tmp_path: Path) -> None:
    nvml = FakeNVML([FakeCard("GPU-0", 0), FakeCard("GPU-1", 1)], fail_on="nvmlDeviceGetMinorNumber")
    with pytest.raises(GPUError, match="NVML: GPU 0: minor number: NVML error 999"):
        NVMLBackend(tmp_path, module=nvml).inventory()


def test_nvml_driver_version_failure_keeps_the_cards(tmp_path: Path) -> None:
    nvml = FakeNVML([FakeCard("GPU-0", 0)], fail_on="nvmlSystemGetDriverVersion")
    inv = NVMLBackend(tmp_path, module=nvml).inventory()
    assert (len(inv.gpus), inv.driver_version) == (1, "")


def test_nvml_health_check(tmp_path: Path) -> None:
    cards = [FakeCard(f"GPU-{i}", i, bus_id=f"0000:{0x10 + i:02x}:00.0") for i in range(4)]
    nvml = FakeNVML(cards, not_supported={3})
    backend = NVMLBackend(tmp_path, module=nvml)
    inv = backend.inventory()
    assert [(g.healthy, g.health_reason) for g in inv.gpus] == [
        (True, ""),
        (True, ""),
        (True, ""),
        (False, "DeviceHealthCheckNotSupported"),
    ]
    nvml.xid(1, 13)  # an application error: the card is fine
    nvml.xid(2, 79)  # fallen off the bus
    inv = backend.inventory()
    assert [(g.healthy, g.health_reason) for g in inv.gpus] == [
        (True, ""),
        (True, ""),
        (False, "Xid79"),
        (False, "DeviceHealthCheckNotSupported"),
    ]
    assert inv.gpus[2].health_message == "Xid error detected on device, error code: 79"
    # Unhealthy for good (upstream has no recovery either).
    assert not backend.inventory().gpus[2].healthy
    assert nvml.calls.count("nvmlDeviceRegisterEvents") == 4  # registered once


def test_open_backend(tmp_path: Path) -> None:
    assert isinstance(open_backend(tmp_path), FakeGPUBackend)
    assert isinstance(open_backend(None, tmp_path), NVMLBackend)
