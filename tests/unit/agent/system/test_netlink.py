"""Tests of the netlink adapter: the pure stats conversion and dump decoding on crafted and captured bytes,
the reader's error handling on a fake socket, and the real host links compared with pyroute2's ``IPRoute``."""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from agent.system import netlink
from agent.system.netlink import (
    InterfaceCounters,
    LinkReader,
    NetlinkError,
    counters_from_link_stats,
    decode_link_dump,
    encode_getlink_request,
)

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


# --- crafted netlink bytes ---------------------------------------------------------------------------------


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def rtattr(kind: int, payload: bytes) -> bytes:
    return _pad(struct.pack("=HH", 4 + len(payload), kind) + payload)


def nlmsg(kind: int, seq: int, payload: bytes, flags: int = 2) -> bytes:  # 2 = NLM_F_MULTI
    return _pad(struct.pack("=IHHII", 16 + len(payload), kind, flags, seq, 4242) + payload)


def stats64(*head: int) -> bytes:
    """struct rtnl_link_stats64: the 8 given counters in kernel order, then 16 more u64 (all 7)."""
    return struct.pack("=24Q", *head, *([7] * 16))


def link(seq: int, index: int, name: str | None, stats: bytes | None) -> bytes:
    attrs = rtattr(16, b"\x01") + rtattr(4, struct.pack("=I", 1500))  # IFLA_OPERSTATE (odd length), MTU
    if name is not None:
        attrs += rtattr(3, name.encode() + b"\0")
    if stats is not None:
        attrs += rtattr(7, bytes(92)) + rtattr(23, stats)  # IFLA_STATS (32-bit) first, as the kernel does
    attrs += rtattr(0x8000 | 26, rtattr(2, bytes(8)))  # nested IFLA_AF_SPEC after the stats
    return nlmsg(16, seq, struct.pack("=BxHiII", 0, 1, index, 0, 0) + attrs)


def done(seq: int) -> bytes:
    return nlmsg(3, seq, struct.pack("=i", 0))


def error(seq: int, code: int) -> bytes:
    return nlmsg(2, seq, struct.pack("=i", code) + struct.pack("=IHHII", 32, 18, 0x301, seq, 0), flags=0)


# kernel order: rx_packets, tx_packets, rx_bytes, tx_bytes, rx_errors, tx_errors, rx_dropped, tx_dropped
LO_STATS = stats64(1, 2, 30, 40, 5, 6, 7, 8)
LO = InterfaceCounters(rx_bytes=30, tx_bytes=40, rx_packets=1, tx_packets=2, rx_errors=5, tx_errors=6,
                       rx_dropped=7, tx_dropped=8)  # fmt: skip
ETH_STATS = stats64(2**40, 11, 2**63, 13, 0, 0, 0, 1)
ETH = InterfaceCounters(2**63, 13, 2**40, 11, 0, 0, 0, 1)


def test_abi_constants_match_pyroute2() -> None:
    from pyroute2.netlink import NLMSG_DONE, NLMSG_ERROR, NLMSG_OVERRUN
    from pyroute2.netlink.rtnl import RTM_NEWLINK
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg, stats_names

    assert (netlink.NLMSG_ERROR, netlink.NLMSG_DONE, netlink.NLMSG_OVERRUN) == (
        NLMSG_ERROR,
        NLMSG_DONE,
        NLMSG_OVERRUN,
    )
    assert netlink.RTM_NEWLINK == RTM_NEWLINK
    assert ifinfmsg.nla_map[netlink.IFLA_IFNAME][0] == "IFLA_IFNAME"
    assert ifinfmsg.nla_map[netlink.IFLA_STATS64][0] == "IFLA_STATS64"
    assert stats_names[:8] == (
        "rx_packets",
        "tx_packets",
        "rx_bytes",
        "tx_bytes",
        "rx_errors",
        "tx_errors",
        "rx_dropped",
        "tx_dropped",
    )


def test_encode_getlink_request() -> None:
    req = encode_getlink_request(77, 18, 0x301)
    assert len(req) == 32
    assert struct.unpack_from("=IHHII", req) == (32, 18, 0x301, 77, 0)
    assert req[16:] == bytes(16)  # AF_UNSPEC, every link


def test_decode_link_with_and_without_stats() -> None:
    out: dict[str, InterfaceCounters] = {}
    data = link(5, 1, "lo", LO_STATS) + link(5, 2, "nostats0", None) + link(5, 3, "eth0", ETH_STATS) + done(5)
    assert decode_link_dump(data, 5, out) is True
    assert out == {"lo": LO, "eth0": ETH}


def test_decode_accepts_memoryview_and_nameless_link_is_left_out() -> None:
    out: dict[str, InterfaceCounters] = {}
    data = bytearray(link(1, 9, None, LO_STATS) + link(1, 1, "lo", LO_STATS) + done(1))
    assert decode_link_dump(memoryview(data), 1, out) is True
    assert out == {"lo": LO}


def test_decode_multi_part_dump_over_several_buffers() -> None:
    out: dict[str, InterfaceCounters] = {}
    assert decode_link_dump(link(9, 1, "lo", LO_STATS), 9, out) is False
    assert decode_link_dump(link(9, 2, "eth0", ETH_STATS) + link(9, 3, "x", None), 9, out) is False
    assert decode_link_dump(done(9), 9, out) is True
    assert out == {"lo": LO, "eth0": ETH}


def test_decode_skips_replies_of_another_request() -> None:
    out: dict[str, InterfaceCounters] = {}
    stale = link(8, 1, "old", LO_STATS) + done(8) + error(8, -errno.EBUSY)
    assert decode_link_dump(stale + link(9, 2, "eth0", ETH_STATS), 9, out) is False
    assert out == {"eth0": ETH}


def test_decode_nlmsg_error() -> None:
    with pytest.raises(NetlinkError, match="kernel error") as info:
        decode_link_dump(link(3, 1, "lo", LO_STATS) + error(3, -errno.EPERM), 3, {})
    assert info.value.errno == errno.EPERM
    assert decode_link_dump(error(3, 0), 3, {}) is True  # an ack ends the request


def test_decode_overrun() -> None:
    with pytest.raises(NetlinkError, match="OVERRUN"):
        decode_link_dump(nlmsg(4, 3, b""), 3, {})


def _truncated_attribute() -> bytes:
    msg = bytearray(link(1, 1, "lo", LO_STATS))
    struct.pack_into("=H", msg, 32, 200)  # first rtattr claims 200 bytes, past the message end
    return bytes(msg)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (link(1, 1, "lo", LO_STATS)[:-8], "truncated netlink message"),
        (link(1, 1, "lo", LO_STATS) + bytes(8), "truncated netlink header"),
        (_truncated_attribute(), "truncated link attribute"),
        (link(1, 1, "lo", LO_STATS[:32]), "truncated IFLA_STATS64"),
        (nlmsg(16, 1, bytes(8)), "truncated RTM_NEWLINK"),
        (nlmsg(2, 1, b""), "truncated NLMSG_ERROR"),
        (struct.pack("=IHHII", 8, 16, 0, 1, 0), "truncated netlink message"),
    ],
)
def test_decode_rejects_malformed_bytes(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_link_dump(data, 1, {})


# --- the reader on a fake socket ---------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[tuple[LinkReader, socket.socket]]:
    """A reader whose socket is one end of a datagram pair; the test plays the kernel on the other end."""
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ours.settimeout(2.0)
    kernel.settimeout(2.0)
    reader = LinkReader()
    reader._sock = ours
    try:
        yield reader, kernel
    finally:
        reader.close()
        kernel.close()


def test_reader_multi_datagram_dump(fake: tuple[LinkReader, socket.socket]) -> None:
    reader, kernel = fake
    seq = reader._seq + 1
    kernel.send(link(seq - 1, 1, "stale", LO_STATS) + done(seq - 1))
    kernel.send(link(seq, 1, "lo", LO_STATS))
    kernel.send(link(seq, 2, "eth0", ETH_STATS) + done(seq))
    assert reader.read() == {"lo": LO, "eth0": ETH}
    request = kernel.recv(100)
    assert struct.unpack_from("=IHHII", request)[3] == seq
    assert reader._sock is not None  # long-lived


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (lambda seq: error(seq, -errno.EACCES), "kernel error"),
        (lambda seq: link(seq, 1, "lo", LO_STATS[:16]), "truncated IFLA_STATS64"),
        (lambda seq: bytes(70_000), "exceeds"),
    ],
)
def test_reader_failure_closes_and_raises(
    fake: tuple[LinkReader, socket.socket], reply: Any, message: str
) -> None:
    reader, kernel = fake
    kernel.send(reply(reader._seq + 1))
    with pytest.raises(NetlinkError, match=message):
        reader.read()
    assert reader._sock is None  # reopened on the next read


def test_errors_are_translated_and_socket_reopened() -> None:
    class Broken:
        def send(self, data: bytes) -> int:
            raise RuntimeError("socket gone")

        def close(self) -> None:
            pass

    reader = LinkReader()
    reader._sock = Broken()  # type: ignore[assignment]
    try:
        with pytest.raises(NetlinkError, match="socket gone"):
            reader.read()
        assert reader._sock is None
        assert "lo" in reader.read()  # a fresh real socket
    finally:
        reader.close()


# --- the real host -----------------------------------------------------------------------------------------


def test_captured_dump_decodes_like_pyroute2() -> None:
    """One captured dump, decoded by ``decode_link_dump`` and by pyroute2's ``ifinfmsg``, agrees exactly."""
    from pyroute2.netlink import NETLINK_ROUTE, NLM_F_DUMP, NLM_F_REQUEST
    from pyroute2.netlink.rtnl import RTM_GETLINK, RTM_NEWLINK
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

    buffers: list[bytes] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE) as sock:
        sock.settimeout(5.0)
        sock.send(encode_getlink_request(1, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP))
        ours: dict[str, InterfaceCounters] = {}
        while True:
            buffers.append(sock.recv(65536))
            if decode_link_dump(buffers[-1], 1, ours):
                break
    theirs: dict[str, InterfaceCounters] = {}
    for data in buffers:
        off = 0
        while off < len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if kind == RTM_NEWLINK:
                msg = ifinfmsg(data[off : off + length])
                msg.decode()
                stats = msg.get_attr("IFLA_STATS64")
                if stats is not None:
                    theirs[msg.get_attr("IFLA_IFNAME")] = counters_from_link_stats(stats)
            off += (length + 3) & ~3
    assert "lo" in ours
    assert ours == theirs


def _ipr_counters() -> dict[str, InterfaceCounters]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {
            link.get_attr("IFLA_IFNAME"): counters_from_link_stats(link.get_attr("IFLA_STATS64"))
            for link in ipr.get_links()
            if link.get_attr("IFLA_STATS64") is not None
        }


def test_reader_agrees_with_pyroute2_iproute() -> None:
    reader = LinkReader()
    try:
        before = _ipr_counters()
        ours = reader.read()
        after = _ipr_counters()
    finally:
        reader.close()
    assert set(ours) == set(before) == set(after)
    for name, counters in ours.items():
        for field in InterfaceCounters.__slots__:
            assert getattr(before[name], field) <= getattr(counters, field) <= getattr(after[name], field), (
                name,
                field,
            )


def test_real_loopback_counters_are_monotonic() -> None:
    reader = LinkReader()
    try:
        first = reader.read()
        assert "lo" in first
        # generate some loopback traffic between the two reads
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"x" * 100, ("127.0.0.1", 9))
        second = reader.read()
    finally:
        reader.close()
    a, b = first["lo"], second["lo"]
    for field in InterfaceCounters.__slots__:
        assert getattr(b, field) >= getattr(a, field) >= 0
    assert b.tx_packets > a.tx_packets
