"""Tests of the netlink adapter: the pure stats conversion, and the real ``lo`` interface."""

from __future__ import annotations

from typing import Any

import pytest

from agent.system.netlink import InterfaceCounters, LinkReader, NetlinkError, counters_from_link_stats

STATS: dict[str, Any] = {
    "rx_bytes": 10,
    "tx_bytes": 20,
    "rx_packets": 1,
    "tx_packets": 2,
    "rx_errors": 0,
    "tx_errors": 3,
    "rx_dropped": 4,
    "tx_dropped": 5,
    "multicast": 9,
}


def test_counters_from_stats() -> None:
    assert counters_from_link_stats(STATS) == InterfaceCounters(10, 20, 1, 2, 0, 3, 4, 5)


@pytest.mark.parametrize("bad", [None, -1, "7", True])
def test_counters_reject_bad(bad: Any) -> None:
    with pytest.raises(ValueError, match="rx_bytes"):
        counters_from_link_stats({**STATS, "rx_bytes": bad})


def test_real_loopback_counters_are_monotonic() -> None:
    reader = LinkReader()
    try:
        first = reader.read()
        assert "lo" in first
        # generate some loopback traffic between the two reads
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"x" * 100, ("127.0.0.1", 9))
        second = reader.read()
    finally:
        reader.close()
    a, b = first["lo"], second["lo"]
    for field in InterfaceCounters.__slots__:
        assert getattr(b, field) >= getattr(a, field) >= 0
    assert b.tx_packets > a.tx_packets


def test_errors_are_translated() -> None:
    class Broken:
        def get_links(self) -> Any:
            raise RuntimeError("socket gone")

        def close(self) -> None:
            pass

    reader = LinkReader()
    reader._ipr = Broken()
    with pytest.raises(NetlinkError, match="socket gone"):
        reader.read()
    assert reader._ipr is None  # reopened on the next read
