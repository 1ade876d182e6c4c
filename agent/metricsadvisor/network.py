"""Network collector (koord addition, 1 s): per-interface rx/tx bytes, packets, errors and drops per second
from the netlink counters, as ``node_network_{rx,tx}_{bytes,packets,errors,drops}{interface}``. The first
reading primes; an interface whose counters went backwards (or that is new) is skipped for that tick.

Imports: standard library, agent.system.netlink, agent.metriccache.cache, agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import BaseCollector, CollectContext, ms
from agent.system.netlink import InterfaceCounters, LinkReader

__all__ = ["NetworkCollector", "interface_rates", "is_pod_side_interface"]

_KINDS = (
    ("rx_bytes", "node_network_rx_bytes"),
    ("tx_bytes", "node_network_tx_bytes"),
    ("rx_packets", "node_network_rx_packets"),
    ("tx_packets", "node_network_tx_packets"),
    ("rx_errors", "node_network_rx_errors"),
    ("tx_errors", "node_network_tx_errors"),
    ("rx_dropped", "node_network_rx_drops"),
    ("tx_dropped", "node_network_tx_drops"),
)


def interface_rates(
    last: InterfaceCounters, cur: InterfaceCounters, delta_wall_ns: int
) -> dict[str, float] | None:
    """Pure: kind → per-second rate; None when a counter decreased or no time elapsed."""
    if delta_wall_ns <= 0:
        return None
    seconds = delta_wall_ns / 1e9
    out: dict[str, float] = {}
    for field, kind in _KINDS:
        delta = getattr(cur, field) - getattr(last, field)
        if delta < 0:
            return None
        out[kind] = delta / seconds
    return out


# Host ends of pod network pairs (bridge CNI, Calico, Cilium) and loopback: one per pod, they come and go
# with pods and the pods' own usage is not node network capacity; exporting them would churn series.
POD_SIDE_PREFIXES = ("veth", "cali", "lxc")


def is_pod_side_interface(name: str) -> bool:
    return name == "lo" or name.startswith(POD_SIDE_PREFIXES)


class NetworkCollector(BaseCollector):
    def __init__(
        self,
        interval_seconds: float = 1.0,
        read_links: Callable[[], Mapping[str, InterfaceCounters]] | None = None,
    ) -> None:
        super().__init__("network", interval_seconds)
        self._reader = LinkReader() if read_links is None else None
        self._read = read_links if read_links is not None else self._reader_read
        self._last: Mapping[str, InterfaceCounters] = {}
        self._last_wall = 0
        self._labels: dict[str, Mapping[str, str]] = {}

    def _reader_read(self) -> Mapping[str, InterfaceCounters]:
        assert self._reader is not None
        return self._reader.read()

    def collect(self, ctx: CollectContext) -> list[Sample]:
        wall = ctx.clock_ns()
        cur = self._read()
        last, last_wall = self._last, self._last_wall
        self._last, self._last_wall = cur, wall
        ts = ms(wall)
        out: list[Sample] = []
        for name, counters in cur.items():
            if is_pod_side_interface(name):
                continue
            prev = last.get(name)
            if prev is None:
                continue
            rates = interface_rates(prev, counters, wall - last_wall)
            if rates is None:
                continue
            labels = self._labels.get(name)
            if labels is None:
                labels = self._labels[name] = {"interface": name}
            out.extend(Sample(kind, labels, ts, value) for kind, value in rates.items())
        self._labels = {k: v for k, v in self._labels.items() if k in cur}
        self.mark_started()
        return out

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
