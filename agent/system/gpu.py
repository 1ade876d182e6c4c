"""The node's GPUs, one facade over two backends (docs/rules/koordlet-gpu.md#backends).

* ``NVMLBackend``: NVIDIA's management library through ``nvidia-ml-py`` (``import pynvml``). The package is
  optional: when it is absent or ``nvmlInit`` fails the node has no GPUs, logged once (upstream does not
  retry the init either). Health follows upstream's Xid check: a device whose event registration is not
  supported, or that raised a critical Xid error, is unhealthy for good.
* ``FakeGPUBackend``: a directory tree, ``<root>/gpus/<index>/{uuid,minor,name,memory_total_bytes,bus_id,
  numa_node,pcie_id,healthy,health_reason,health_message}`` and ``<root>/gpus/driver_version``, for tests and
  for ``koord up`` on machines without cards.

Both return a ``GPUInventory`` of typed ``GPU`` records and translate every failure of their source
(``pynvml.NVMLError``, ``OSError``, bad file text) into ``GPUError`` naming the card and the field, so
callers handle one exception type (psutil-style).

Imports: standard library only (``pynvml`` is loaded at run time, never at import time).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "APPLICATION_XIDS",
    "GPU",
    "FakeGPUBackend",
    "GPUBackend",
    "GPUError",
    "GPUInventory",
    "NVMLBackend",
    "open_backend",
    "pcie_root",
    "sysfs_bus_id",
]

log = logging.getLogger(__name__)

# Xid errors caused by applications, not the card: the card stays healthy (upstream's health check,
# docs/rules/koordlet-gpu.md#backends).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
NOT_SUPPORTED_REASON = "DeviceHealthCheckNotSupported"
NOT_SUPPORTED_MESSAGE = "device does not support health checking"
_PCIE_RE = re.compile(r"pci\d{4}:[0-9a-fA-F]{2}")
_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no"}


class GPUError(RuntimeError):
    """A GPU source failed; the message names the card and the field."""


@dataclass(frozen=True, slots=True)
class GPU:
    """One card as the backends see it."""

    index: int
    uuid: str
    minor: int
    """``/dev/nvidia<minor>``."""
    model: str
    """The product name as the driver reports it, e.g. ``NVIDIA A100-SXM4-80GB``."""
    memory_total_bytes: int
    bus_id: str
    """``domain:bus:device.function`` as sysfs names it, lower case (``0000:3b:00.0``)."""
    numa_node: int
    """NUMA node of the card; sysfs ``-1`` (no affinity) is read as 0, as upstream does; -1 = unknown."""
    pcie_id: str = ""
    """The PCIe root complex (``pci0000:3a``); "" = unknown."""
    healthy: bool = True
    health_reason: str = ""
    health_message: str = ""


@dataclass(frozen=True, slots=True)
class GPUInventory:
    gpus: tuple[GPU, ...] = ()
    driver_version: str = ""
    """"" when unknown (NVML's ``nvmlSystemGetDriverVersion`` failed, or the fake tree has none)."""


class GPUBackend(Protocol):
    name: str

    def inventory(self) -> GPUInventory:
        """The cards now; ``GPUError`` when the source fails."""
        ...

    def close(self) -> None: ...


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:3B:00.0`` (or legacy ``0000:3B:00.0``) → sysfs ``0000:3b:00.0``."""
    text = bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if sep and len(domain) == 8 and domain.startswith("0000"):
        return f"{domain[4:]}:{rest}"
    return text


def numa_from_sysfs(text: str) -> int:
    """``numa_node`` text → node; ``-1`` (no affinity) is node 0 as upstream reads it."""
    node = int(text.strip())
    return 0 if node == -1 else node


def pcie_root(sys_root: Path, bus_id: str) -> tuple[int, str]:
    """(NUMA node, PCIe root complex) of ``bus_id`` from ``<sys>/bus/pci/devices/<bus_id>``: ``numa_node``
    and the first ``pciDDDD:BB`` of the resolved path. Unreadable → (-1, "")."""
    dev = sys_root / "bus" / "pci" / "devices" / bus_id
    try:
        node = numa_from_sysfs((dev / "numa_node").read_text())
    except (OSError, ValueError):
        node = -1
    found = _PCIE_RE.search(os.path.realpath(dev))
    return node, (found.group(0) if found else "")


# ------------------------------------------------------------------------------------------- fake tree


class FakeGPUBackend:
    """Cards described by files under ``<root>/gpus`` (one directory per NVML index)."""

    name = "fake"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _field(self, card: Path, field: str, default: str | None = None) -> str:
        try:
            return (card / field).read_text().strip()
        except FileNotFoundError:
            if default is not None:
                return default
            raise GPUError(f"fake GPU {card}: {field} is missing") from None
        except OSError as e:
            raise GPUError(f"fake GPU {card}: {field}: {e.strerror or e}") from e

    def _int(self, card: Path, field: str, default: str | None = None) -> int:
        text = self._field(card, field, default)
        try:
            return int(text)
        except ValueError:
            raise GPUError(f"fake GPU {card}: {field} {text!r} is not an integer") from None

    def _card(self, card: Path) -> GPU:
        healthy_text = self._field(card, "healthy", "true").lower()
        if healthy_text not in _TRUE | _FALSE:
            raise GPUError(f"fake GPU {card}: healthy {healthy_text!r} is not true/false")
        numa_text = self._field(card, "numa_node", "")
        try:
            numa = numa_from_sysfs(numa_text) if numa_text else -1
        except ValueError:
            raise GPUError(f"fake GPU {card}: numa_node {numa_text!r} is not an integer") from None
        memory = self._int(card, "memory_total_bytes")
        minor = self._int(card, "minor")
        if memory < 0 or minor < 0:
            bad = ("memory_total_bytes", memory) if memory < 0 else ("minor", minor)
            raise GPUError(f"fake GPU {card}: {bad[0]} {bad[1]} is negative")
        return GPU(
            index=int(card.name),
            uuid=self._field(card, "uuid"),
            minor=minor,
            model=self._field(card, "name", ""),
            memory_total_bytes=memory,
            bus_id=sysfs_bus_id(self._field(card, "bus_id", "")),
            numa_node=numa,
            pcie_id=self._field(card, "pcie_id", ""),
            healthy=healthy_text in _TRUE,
            health_reason=self._field(card, "health_reason", ""),
            health_message=self._field(card, "health_message", ""),
        )

    def inventory(self) -> GPUInventory:
        base = self.root / "gpus"
        try:
            cards = sorted(
                (p for p in base.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
            )
        except FileNotFoundError:
            return GPUInventory()
        except OSError as e:
            raise GPUError(f"fake GPU tree {base}: {e.strerror or e}") from e
        gpus = tuple(self._card(card) for card in cards)
        driver = self._field(base, "driver_version", "")
        return GPUInventory(gpus, driver)

    def close(self) -> None:
        return None


# ------------------------------------------------------------------------------------------------ NVML


class NVMLBackend:
    """The cards through NVML. ``module`` replaces ``pynvml`` (tests inject a fake module object);
    ``sys_root`` locates ``bus/pci/devices`` for the NUMA node and the PCIe root."""

    name = "nvml"

    def __init__(
        self,
        sys_root: Path = Path("/sys"),
        module: Any | None = None,
        loader: Callable[[str], Any] = importlib.import_module,
    ) -> None:
        self.sys_root = Path(sys_root)
        self._module = module
        self._loader = loader
        self._nvml: Any | None = None
        self._tried = False
        self._lock = threading.Lock()
        self._events: Any | None = None
        self._registered = False
        self._unhealthy: dict[str, tuple[str, str]] = {}  # bus id → (reason, message); never cleared

    def _init(self) -> Any | None:
        """pynvml after one ``nvmlInit``; None (logged once) when the package or the library is missing."""
        if self._tried:
            return self._nvml
        self._tried = True
        try:
            mod = self._module if self._module is not None else self._loader("pynvml")
        except ImportError:
            log.info("nvidia-ml-py (pynvml) is not installed: this node reports no GPUs")
            return None
        try:
            mod.nvmlInit()
        except Exception as e:  # pynvml.NVMLError, or OSError from loading libnvidia-ml.so
            log.warning("NVML init failed (%s): this node reports no GPUs", e)
            return None
        self._nvml = mod
        return mod

    def _register_events(self, nvml: Any, handles: list[tuple[Any, str]]) -> None:
        """Upstream's health check set-up: register every card for critical Xid events; a card that does
        not support it is unhealthy (docs/rules/koordlet-gpu.md#backends)."""
        self._registered = True
        try:
            self._events = nvml.nvmlEventSetCreate()
        except Exception as e:
            log.warning("NVML event set not created (%s): GPU health is not checked", e)
            return
        for handle, bus_id in handles:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._events)
            except Exception as e:
                if getattr(e, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                    log.info("GPU %s is too old to support health checking: marked unhealthy", bus_id)
                    self._unhealthy[bus_id] = (NOT_SUPPORTED_REASON, NOT_SUPPORTED_MESSAGE)
                else:
                    log.info("GPU %s: event registration failed: %s", bus_id, e)

    def _drain_events(self, nvml: Any, bus_ids: list[str]) -> None:
        """Every pending event without waiting; a critical Xid that is not an application error makes its
        card unhealthy (an event without a device: every card)."""
        if self._events is None:
            return
        for _ in range(1024):  # bounded: a storm of events is read over several rounds
            try:
                event = nvml.nvmlEventSetWait(self._events, 0)
            except Exception:  # NVML_ERROR_TIMEOUT: nothing pending (any other error: try next round)
                return
            if int(event.eventType) != int(nvml.nvmlEventTypeXidCriticalError):
                continue
            xid = int(event.eventData)
            if xid in APPLICATION_XIDS:
                continue
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(event.device))
                bus = sysfs_bus_id(_text(nvml.nvmlDeviceGetPciInfo(event.device).busId))
            except Exception:
                continue
            message = f"Xid error detected on device, error code: {xid}"
            for bus_id in bus_ids if not uuid else [b for b in bus_ids if b == bus]:
                self._unhealthy[bus_id] = (f"Xid{xid}", message)
                log.warning("GPU %s unhealthy: %s", bus_id, message)

    def inventory(self) -> GPUInventory:
        with self._lock:
            nvml = self._init()
            if nvml is None:
                return GPUInventory()
            return self._inventory(nvml)

    def _inventory(self, nvml: Any) -> GPUInventory:
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as e:
            raise GPUError(f"NVML: device count: {e}") from e
        gpus: list[GPU] = []
        handles: list[tuple[Any, str]] = []
        for index in range(count):
            field = "handle"
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                field = "uuid"
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                field = "minor number"
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
                field = "memory info"
                memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
                field = "name"
                model = _text(nvml.nvmlDeviceGetName(handle))
                field = "PCI info"
                bus_id = sysfs_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
            except Exception as e:
                raise GPUError(f"NVML: GPU {index}: {field}: {e}") from e
            numa, pcie = pcie_root(self.sys_root, bus_id)
            gpus.append(GPU(index, uuid, minor, model, memory, bus_id, numa, pcie))
            handles.append((handle, bus_id))
        if not self._registered:
            self._register_events(nvml, handles)
        self._drain_events(nvml, [b for _, b in handles])
        gpus = [
            replace(g, healthy=False, health_reason=bad[0], health_message=bad[1])
            if (bad := self._unhealthy.get(g.bus_id))
            else g
            for g in gpus
        ]
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as e:
            log.info("NVML: driver version unknown: %s", e)
            driver = ""
        return GPUInventory(tuple(gpus), driver)

    def close(self) -> None:
        with self._lock:
            if self._nvml is None:
                return
            try:
                if self._events is not None:
                    self._nvml.nvmlEventSetFree(self._events)
                self._nvml.nvmlShutdown()
            except Exception as e:
                log.info("NVML shutdown: %s", e)
            self._nvml, self._events = None, None
            self._tried = self._registered = False  # a later inventory() initialises NVML again


def open_backend(fake_root: Path | None = None, sys_root: Path = Path("/sys")) -> GPUBackend:
    """The fake tree when ``fake_root`` is given, else NVML (no cards without ``pynvml`` or a driver)."""
    if fake_root is not None:
        return FakeGPUBackend(fake_root)
    return NVMLBackend(sys_root)
