"""Netlink adapter: per-interface rx/tx bytes, packets, errors and drops from the kernel's ``IFLA_STATS64``.

The only module that imports ``pyroute2``; its errors are translated to ``NetlinkError`` at this boundary.
``InterfaceCounters`` / ``counters_from_link_stats`` are pure. Imports: standard library and pyroute2.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["InterfaceCounters", "LinkReader", "NetlinkError", "counters_from_link_stats"]


class NetlinkError(OSError):
    """Reading the links over netlink failed."""


@dataclass(frozen=True, slots=True)
class InterfaceCounters:
    """Monotonic counters of one interface."""

    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int
    rx_errors: int
    tx_errors: int
    rx_dropped: int
    tx_dropped: int


_FIELDS = (
    "rx_bytes",
    "tx_bytes",
    "rx_packets",
    "tx_packets",
    "rx_errors",
    "tx_errors",
    "rx_dropped",
    "tx_dropped",
)


def counters_from_link_stats(stats: Mapping[str, Any]) -> InterfaceCounters:
    """Pure: pick the counters from a ``IFLA_STATS64`` mapping; ``ValueError`` when one is missing or bad."""
    values: list[int] = []
    for key in _FIELDS:
        value = stats.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"IFLA_STATS64: bad or missing {key}: {value!r}")
        values.append(value)
    return InterfaceCounters(*values)


class LinkReader:
    """A long-lived ``IPRoute`` socket (opened lazily, reopened after an error)."""

    def __init__(self) -> None:
        self._ipr: Any = None

    def _socket(self) -> Any:
        if self._ipr is None:
            try:
                from pyroute2 import IPRoute

                self._ipr = IPRoute()
            except Exception as exc:
                raise NetlinkError(f"netlink: cannot open a route socket: {exc}") from exc
        return self._ipr

    def read(self) -> dict[str, InterfaceCounters]:
        """Counters per interface name (links without stats64 are left out); ``NetlinkError`` on failure."""
        ipr = self._socket()
        try:
            links = ipr.get_links()
            out: dict[str, InterfaceCounters] = {}
            for link in links:
                name = link.get_attr("IFLA_IFNAME")
                stats = link.get_attr("IFLA_STATS64")
                if isinstance(name, str) and stats is not None:
                    out[name] = counters_from_link_stats(stats)
            return out
        except ValueError as exc:
            raise NetlinkError(f"netlink: {exc}") from exc
        except Exception as exc:
            self.close()
            raise NetlinkError(f"netlink: get_links failed: {exc}") from exc

    def close(self) -> None:
        ipr, self._ipr = self._ipr, None
        if ipr is not None:
            with contextlib.suppress(Exception):  # closing a broken socket: nothing more to do
                ipr.close()
