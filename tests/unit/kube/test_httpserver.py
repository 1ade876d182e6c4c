"""ProbeServer on 127.0.0.1:0 with real HTTP requests: /metrics, /healthz, /readyz (failing check named,
raising check is a failure not a 500, ?verbose), 404 elsewhere; parse_addr."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from kube.httpserver import Check, ProbeServer, parse_addr

TIMEOUT = 5.0


def get(server: ProbeServer, path: str) -> tuple[int, str, str]:
    url = f"http://127.0.0.1:{server.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def boom() -> tuple[bool, str]:
    raise RuntimeError("kaboom")


class Flag:
    def __init__(self, ok: bool, detail: str) -> None:
        self.ok = ok
        self.detail = detail

    def __call__(self) -> tuple[bool, str]:
        return self.ok, self.detail


@pytest.fixture()
def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    c = Counter("koord_test_things", "Things counted", ["kind"], registry=reg)
    c.labels("a").inc(3)
    return reg


def serve(
    registry: CollectorRegistry,
    liveness: dict[str, Check] | None = None,
    readiness: dict[str, Check] | None = None,
) -> ProbeServer:
    return ProbeServer("127.0.0.1:0", registry, liveness=liveness, readiness=readiness).start()


@pytest.fixture()
def synced() -> Flag:
    return Flag(False, "informers not synced")


@pytest.fixture()
def server(registry: CollectorRegistry, synced: Flag) -> Iterator[ProbeServer]:
    s = serve(
        registry,
        liveness={"supervisor": lambda: (True, "3 tasks running")},
        readiness={"collectors": lambda: (True, "all ran"), "informers": synced},
    )
    try:
        yield s
    finally:
        s.stop()


def test_port_is_assigned(server: ProbeServer) -> None:
    assert server.port > 0


def test_metrics_exposition(server: ProbeServer) -> None:
    code, ctype, body = get(server, "/metrics")
    assert code == 200
    assert ctype.startswith("text/plain")
    assert "# HELP koord_test_things_total Things counted" in body
    assert 'koord_test_things_total{kind="a"} 3.0' in body


def test_metrics_reflect_registry_changes(server: ProbeServer, registry: CollectorRegistry) -> None:
    Counter("koord_test_late", "Registered after start", registry=registry).inc()
    _, _, body = get(server, "/metrics")
    assert "koord_test_late_total 1.0" in body


@pytest.mark.parametrize("path", ["/healthz", "/livez"])
def test_healthz_ok(server: ProbeServer, path: str) -> None:
    code, ctype, body = get(server, path)
    assert code == 200
    assert ctype == "text/plain"
    assert body == "ok\n"


def test_readyz_failing_check_named_with_detail(server: ProbeServer) -> None:
    code, _, body = get(server, "/readyz")
    assert code == 503
    assert body == "[-]informers failed: informers not synced\nnot ok\n"  # the passing check is not listed


def test_readyz_turns_ready(server: ProbeServer, synced: Flag) -> None:
    synced.ok, synced.detail = True, "synced"
    code, _, body = get(server, "/readyz")
    assert (code, body) == (200, "ok\n")


def test_verbose_lists_passing_checks(server: ProbeServer, synced: Flag) -> None:
    code, _, body = get(server, "/readyz?verbose")
    assert code == 503
    assert body.splitlines() == [
        "[+]collectors ok: all ran",
        "[-]informers failed: informers not synced",
        "not ok",
    ]
    synced.ok, synced.detail = True, "synced"
    code, _, body = get(server, "/readyz?verbose=1")
    assert code == 200
    assert body.splitlines() == ["[+]collectors ok: all ran", "[+]informers ok: synced", "ok"]
    code, _, body = get(server, "/healthz?verbose")
    assert (code, body) == (200, "[+]supervisor ok: 3 tasks running\nok\n")


def test_raising_check_is_a_failure_not_a_500(registry: CollectorRegistry) -> None:
    s = serve(registry, liveness={"crashy": boom, "fine": lambda: (True, "x")})
    try:
        code, _, body = get(s, "/healthz")
        assert code == 503
        lines = body.splitlines()
        assert lines[0].startswith("[-]crashy failed: check raised RuntimeError('kaboom')")
        assert lines[-1] == "not ok"
        assert len(lines) == 2
        # the server keeps serving afterwards
        assert get(s, "/metrics")[0] == 200
    finally:
        s.stop()


def test_no_checks_is_healthy(registry: CollectorRegistry) -> None:
    s = serve(registry)
    try:
        assert get(s, "/healthz")[:3:2] == (200, "ok\n")
        assert get(s, "/readyz")[:3:2] == (200, "ok\n")
    finally:
        s.stop()


@pytest.mark.parametrize("path", ["/", "/metricsx", "/healthz/extra", "/internal-metrics", "/readyz/"])
def test_404_elsewhere(server: ProbeServer, path: str) -> None:
    code, _, body = get(server, path)
    assert code == 404
    assert body == "not found\n"


def test_concurrent_requests(server: ProbeServer) -> None:
    codes: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        code = get(server, "/metrics")[0]
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert codes == [200] * 8


def test_stop_closes_the_port(registry: CollectorRegistry) -> None:
    s = serve(registry)
    port = s.port
    s.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1.0)


def test_stop_without_start_returns(registry: CollectorRegistry) -> None:
    s = ProbeServer("127.0.0.1:0", registry)
    t = threading.Thread(target=s.stop, daemon=True)
    t.start()
    t.join(1.0)
    hung = t.is_alive()
    if hung:  # release the stuck shutdown() so the thread ends and the socket is closed
        s._httpd._BaseServer__is_shut_down.set()  # type: ignore[attr-defined]
        t.join(TIMEOUT)
    assert not hung


# --- parse_addr -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("addr", "want"),
    [
        (":9316", ("0.0.0.0", 9316)),
        ("127.0.0.1:9316", ("127.0.0.1", 9316)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:8080", ("::1", 8080)),
        (":65535", ("0.0.0.0", 65535)),
    ],
)
def test_parse_addr(addr: str, want: tuple[str, int]) -> None:
    assert parse_addr(addr) == want


def test_parse_addr_default_host() -> None:
    assert parse_addr(":80", default_host="127.0.0.1") == ("127.0.0.1", 80)


@pytest.mark.parametrize(
    ("addr", "why"),
    [
        ("9316", "expected"),
        ("", "expected"),
        ("host:", "not a number"),
        ("host:http", "not a number"),
        (":65536", "out of range"),
        (":-1", "out of range"),
    ],
)
def test_parse_addr_errors(addr: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as info:
        parse_addr(addr)
    assert repr(addr) in str(info.value)
