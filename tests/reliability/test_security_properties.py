"""Security properties, checked over generated inputs:

(a) the BE evictors evict only BE pods (docs/rules/koordlet.md#be-evictors-evict-only-be-pods): the memory
    and CPU eviction strategies' pure `decide`, over pods of every raw QoS label (near-misses such as
    `be` or `BE ` included) and priority, random usage, thresholds and gates, never evict a pod whose raw
    `koordinator.sh/qosClass` label is not exactly `BE` with BEMemoryEvict or BECPUEvict, and their
    candidate lists hold BE pods only — the rule itself, not only the re-check before an eviction;
(b) bearer tokens are never logged: the MetricHub's authentication (TokenReview over a real HTTP
    client against a fake API server, the static token file) and the koordlet's hub client, run with
    every logger at DEBUG, write no token to the log or to stdout/stderr — neither for an accepted
    token, nor a refused one, nor when the TokenReview fails;
(c) the resource executor's confined file system (docs/rules/koordlet.md#confinement) never writes,
    creates or reads outside its root, whatever relative path it is given (`..`, `.`, symbolic links
    to inside and outside the root, absolute parts). The example cases (a link swapped in mid-write,
    FIFOs, sockets, devices) stay in tests/unit/agent/resourceexecutor/test_confinement.py.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager import cpuevict, memoryevict
from agent.qosmanager.evictplan import EvictState
from agent.qosmanager.framework import Snapshot
from agent.reporter.hubpush import HubPusher
from agent.resourceexecutor.hostfs import ConfinedFS, RefusedPathError
from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver
from apis import constants as c
from apis.kubeobjects import Node
from apis.nodeslo import NodeSLOSpec, ResourceThresholdStrategy
from manager.metrichub.auth import Authorizer, ChainAuthenticator, StaticTokenAuthenticator
from manager.metrichub.kubeauth import tokenreview_authenticator
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc
from tests.reliability.fuzz import objects
from tests.reliability.fuzz.budget import EXAMPLES, fuzz_settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BE_GATES = (memoryevict.BE_MEMORY_EVICT, cpuevict.BE_CPU_EVICT)


# --- (a) BE evictors evict only BE pods ---------------------------------------------------------------------
class Metrics:
    """One value per series (kind, pod UID or BE allocation); every window holds plenty of samples."""

    def __init__(self, values: Mapping[tuple[str, str], float]) -> None:
        self.values = values

    def _get(self, kind: str, labels: Mapping[str, str]) -> float | None:
        return self.values.get((kind, labels.get("pod_uid", "") or labels.get("be_allocation", "")))

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        return self._get(kind, labels)

    def avg(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        return self._get(kind, labels)

    def count(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> int:
        return 0 if self._get(kind, labels) is None else 1000


class NoCgroups:
    def read(self, spec: Any, cgroup_dir: str) -> Any | None:
        return None

    def children(self, cgroup_dir: str) -> Sequence[str]:
        return ()


percent = st.integers(-5, 105)
thresholds = st.builds(
    ResourceThresholdStrategy,
    enable=st.just(True),
    memory_evict_threshold_percent=st.none() | percent,
    memory_evict_lower_percent=st.none() | percent,
    memory_allocatable_evict_threshold_percent=st.none() | st.integers(50, 200),
    memory_allocatable_evict_lower_percent=st.none() | st.integers(0, 150),
    cpu_evict_be_satisfaction_upper_percent=st.none() | percent,
    cpu_evict_be_satisfaction_lower_percent=st.none() | percent,
    cpu_evict_be_usage_threshold_percent=st.none() | percent,
    cpu_evict_time_window_seconds=st.none() | st.integers(1, 600),
    cpu_evict_threshold_percent=st.none() | percent,
    cpu_evict_lower_percent=st.none() | percent,
    cpu_allocatable_evict_threshold_percent=st.none() | st.integers(50, 200),
    cpu_allocatable_evict_lower_percent=st.none() | st.integers(0, 150),
    cpu_evict_policy=st.sampled_from(("evictByRealLimit", "evictByAllocatable", "")),
    evict_enabled_priority_threshold=st.none() | st.sampled_from(objects.PRIORITIES),
    allocatable_evict_priority_threshold=st.none() | st.sampled_from(objects.PRIORITIES),
)
qos_labels = st.sampled_from(objects.QOS_LABELS) | st.none() | st.just("BE")


@st.composite
def eviction_worlds(draw: st.DrawFn) -> tuple[Snapshot, frozenset[str]]:
    pods = [draw(objects.pods(f"u{i}", qos_labels)) for i in range(draw(st.integers(1, 8)))]
    metas = [pod_meta(p, CgroupDriver.CGROUPFS) for p in pods]
    values: dict[tuple[str, str], float] = {
        ("node_memory_usage", ""): draw(st.floats(0, 1.2)) * 100e9,
        ("node_cpu_usage", ""): draw(st.floats(0, 40)),
    }
    for m in metas:
        if draw(st.booleans()):
            values[("pod_memory_usage", m.uid)] = draw(st.floats(0, 30e9))
            values[("pod_cpu_usage", m.uid)] = draw(st.floats(0, 8))
    for allocation in ("usage", "request", "real-limit"):
        if draw(st.integers(0, 4)):
            values[("node_be", allocation)] = draw(st.floats(0, 40_000))
    batch = {c.BATCH_CPU: draw(st.sampled_from(("0", "500", "8k", "20k"))), c.BATCH_MEMORY: "40G"}
    node: Node = {
        "metadata": {"name": "n"},
        "status": {
            "capacity": {"cpu": "32", "memory": "100G", **batch},
            "allocatable": {"cpu": "32", "memory": "100G", **batch},
        },
    }
    gates = {g: draw(st.booleans()) | (g in BE_GATES) for g in (*memoryevict.GATES, *cpuevict.GATES)}
    snapshot = Snapshot(
        now=NOW,
        node=node,
        node_slo=NodeSLOSpec(resource_used_threshold_with_be=draw(thresholds)),
        pods=metas,
        metrics=Metrics(values),
        cgroups=NoCgroups(),
        cgroup_version=CgroupVersion.V2,
        cgroup_driver=CgroupDriver.CGROUPFS,
        topology=None,
        gates=gates,
    )
    evicted = frozenset(m.uid for m in metas if draw(st.integers(0, 5)) == 0)
    return snapshot, evicted


def _raw_be(pod: PodMeta) -> bool:
    """docs/rules/koordlet.md#be-evictors-evict-only-be-pods: the raw QoS label is exactly ``BE``."""
    labels = (pod.pod.get("metadata") or {}).get("labels") or {}
    return labels.get(c.LABEL_POD_QOS) == "BE"


def _memory_pressure_world() -> tuple[Snapshot, frozenset[str]]:
    """A world where BEMemoryEvict must evict: node memory at 120 % of capacity, a BE pod and an LS pod
    using memory, every gate on, memory evict threshold 70 %. Always among the examples, so the property is
    exercised whatever the generated worlds happen to be."""
    pods = [
        {"metadata": {"name": f"pod-{q}", "namespace": "ns", "uid": f"u-{q}", "labels": {c.LABEL_POD_QOS: q}},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "1G"}}}]},
         "status": {"phase": "Running"}}
        for q in ("BE", "LS")
    ]  # fmt: skip
    metas = [pod_meta(cast(Any, p), CgroupDriver.CGROUPFS) for p in pods]
    values: dict[tuple[str, str], float] = {("node_memory_usage", ""): 120e9, ("node_cpu_usage", ""): 4.0}
    for m in metas:
        values[("pod_memory_usage", m.uid)] = 30e9
        values[("pod_cpu_usage", m.uid)] = 1.0
    node: Node = {
        "metadata": {"name": "n"},
        "status": {
            "capacity": {"cpu": "32", "memory": "100G"},
            "allocatable": {"cpu": "32", "memory": "100G"},
        },
    }
    snapshot = Snapshot(
        now=NOW, node=node,
        node_slo=NodeSLOSpec(
            resource_used_threshold_with_be=ResourceThresholdStrategy(
                enable=True, memory_evict_threshold_percent=70
            )
        ),
        pods=metas, metrics=Metrics(values), cgroups=NoCgroups(), cgroup_version=CgroupVersion.V2,
        cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
        gates=dict.fromkeys((*memoryevict.GATES, *cpuevict.GATES), True),
    )  # fmt: skip
    return snapshot, frozenset()


def test_be_evictors_evict_only_be_pods() -> None:
    evicted_by_be_gates = []

    @fuzz_settings(EXAMPLES)
    @given(eviction_worlds())
    @example(_memory_pressure_world())
    def check(world: tuple[Snapshot, frozenset[str]]) -> None:
        snapshot, already = world
        s = snapshot.node_slo.resource_used_threshold_with_be if snapshot.node_slo else None
        usage = {p.uid: 1.0 for p in snapshot.pods}
        assert all(
            _raw_be(p) for p in memoryevict.candidates(memoryevict.BE_MEMORY_EVICT, snapshot.pods, usage, s)
        )
        assert all(_raw_be(p) for p in cpuevict.candidates(cpuevict.BE_CPU_EVICT, snapshot.pods, usage, s))
        decisions = (
            memoryevict.decide(snapshot, memoryevict.MemoryEvictConfig(already_evicted=already), None),
            cpuevict.decide(snapshot, cpuevict.CPUEvictConfig(already_evicted=already), EvictState()),
        )
        for decision in decisions:
            for ev in decision.evictions:
                if ev.strategy in BE_GATES:
                    assert _raw_be(ev.pod), (
                        f"{ev.strategy} evicted {ev.pod.name}, labels {ev.pod.pod['metadata']}"
                    )
                    evicted_by_be_gates.append(ev.pod.uid)

    check()
    assert evicted_by_be_gates, "no example made a BE evictor evict: the property was never exercised"


# --- (b) tokens are never logged ----------------------------------------------------------------------------
GOOD, REFUSED, REVIEW_FAILS, STATIC = (
    f"tok-{name}-{uuid.uuid4().hex}" for name in ("good", "bad", "err", "static")
)
TOKENS = (GOOD, REFUSED, REVIEW_FAILS, STATIC)
AGENT = "system:serviceaccount:koordinator-system:koordlet"


class FakeAPIServer(http.server.BaseHTTPRequestHandler):
    """TokenReviews as kube-apiserver answers them: the spec (the token included) echoed back, the status
    authenticated for GOOD, not for any other token, and a 500 for REVIEW_FAILS."""

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        token = review["spec"]["token"]
        if token == REVIEW_FAILS:
            body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500}
            body["message"] = "Internal error occurred: the authentication webhook timed out"
            self._answer(500, body)
            return
        status: dict[str, Any] = {"authenticated": False, "error": "invalid bearer token"}
        if token == GOOD:
            extra = {"authentication.kubernetes.io/node-name": ["node-a"]}
            status = {"authenticated": True, "user": {"username": AGENT, "groups": [], "extra": extra}}
        self._answer(201, {**review, "status": status})

    def _answer(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def api_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeAPIServer)
    thread = threading.Thread(target=server.serve_forever, name="fake-apiserver")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _everything_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    names = ("", "manager", "agent", "kube", "kubernetes", "urllib3", "grpc", "asyncio")
    for name in [*names, *logging.root.manager.loggerDict]:
        caplog.set_level(logging.DEBUG, logger=name)


def test_tokens_are_never_logged(
    api_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    from kubernetes import client

    config = client.Configuration()
    config.host = api_server
    api = client.ApiClient(config)
    _everything_at_debug(caplog)  # after Configuration(), which puts its loggers back to WARNING
    static_file = tmp_path / "tokens.csv"
    static_file.write_text(f"{STATIC},system:node:node-b\n")
    auth = ChainAuthenticator(
        StaticTokenAuthenticator(static_file, check_interval=0), tokenreview_authenticator(api)
    )
    server, port = serve(HubStore(), authenticator=auth, authorizer=Authorizer())
    token_file = tmp_path / "token"
    pusher = HubPusher(f"127.0.0.1:{port}", token_file=token_file, timeout=10)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.MetricHubStub(channel)
    outcomes = {}
    try:
        for token, node in ((GOOD, "node-a"), (STATIC, "node-b"), (REFUSED, "node-a"), (REFUSED, "node-a"),
                            (REVIEW_FAILS, "node-a"), (GOOD, "node-b")):  # fmt: skip
            token_file.write_text(token + "\n")
            outcomes[(token, node)] = pusher.push(pb.NodeMetricReport(node_name=node))
            with pytest.raises(grpc.RpcError):  # no token here is a reader's
                stub.List(pb.ListRequest(), timeout=10, metadata=(("authorization", f"Bearer {token}"),))
        token_file.unlink()
        outcomes[("missing", "node-a")] = pusher.push(pb.NodeMetricReport(node_name="node-a"))
        static_file.write_text(f"{STATIC}\n")  # broken: the last good tokens stay, a warning is logged
        os.utime(static_file, ns=(1, 1))
        token_file.write_text(STATIC)
        outcomes[(STATIC, "again")] = pusher.push(pb.NodeMetricReport(node_name="node-b"))
    finally:
        channel.close()
        pusher.close()
        assert server.stop(grace=None).wait(5)
        api.close()  # type: ignore[no-untyped-call]
    assert outcomes == {
        (GOOD, "node-a"): True, (STATIC, "node-b"): True, (REFUSED, "node-a"): False,
        (REVIEW_FAILS, "node-a"): False, (GOOD, "node-b"): False, ("missing", "node-a"): False,
        (STATIC, "again"): True,
    }  # fmt: skip
    out, err = capfd.readouterr()
    logged = [caplog.text, out, err, *(str(r.args) + str(r.exc_text) for r in caplog.records)]
    for token in TOKENS:
        assert not any(token in text for text in logged), f"token {token[:8]}… was logged"
    assert any("cannot authenticate now" in r.getMessage() for r in caplog.records)  # the error paths ran
    assert any("static token file" in r.getMessage() for r in caplog.records)


# --- (c) the executor's confined file system stays in its root ----------------------------------------------
COMPONENTS = ("a", "b", "f", "new", "..", ".", "", "in", "out", "file-out", "cpu", "cpu,cpuacct", "x" * 300)


def _tree(base: Path) -> tuple[Path, Path]:
    """root/{a/{f, file-out -> outside/secret}, b/, in -> a, out -> ../outside, cpu -> cpu,cpuacct,
    cpu,cpuacct/f} and outside/{secret, d/}: links inside the root, out of it, and a cgroup v1 one."""
    root, outside = base / "root", base / "outside"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "cpu,cpuacct").mkdir()
    (root / "a" / "f").write_text("in\n")
    (root / "cpu,cpuacct" / "f").write_text("in\n")
    (outside / "d").mkdir(parents=True)
    (outside / "secret").write_text("untouched\n")
    (root / "in").symlink_to("a")
    (root / "out").symlink_to("../outside")
    (root / "cpu").symlink_to("cpu,cpuacct")
    (root / "a" / "file-out").symlink_to(outside / "secret")
    return root, outside


def _state(top: Path, skip: Path | None = None) -> dict[str, str]:
    """Every entry under ``top`` (not following links, leaving out ``skip``) with its content or target."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d != skip]
        for name in [*dirnames, *filenames]:
            p = here / name
            if p.is_symlink():
                out[str(p)] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p)] = p.read_text()
            else:
                out[str(p)] = "dir"
    return out


FILES = ("a/f", "cpu/f", "cpu,cpuacct/f", "a/new", "b/new", "new", "a/file-out", "in/f", "out/secret")
relative_paths = st.one_of(
    st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6).map("/".join),
    st.tuples(st.lists(st.sampled_from(COMPONENTS), max_size=3), st.sampled_from(FILES)).map(
        lambda t: "/".join([*t[0], t[1]])
    ),
    st.sampled_from(FILES),
)
operations = st.lists(
    st.tuples(st.sampled_from(("write", "mkdir", "read")), relative_paths, st.booleans()),
    min_size=1,
    max_size=4,
)


def test_confined_fs_never_leaves_its_root() -> None:
    written = []

    @fuzz_settings(EXAMPLES)
    @given(operations)
    def check(ops: list[tuple[str, str, bool]]) -> None:
        base = Path(tempfile.mkdtemp(prefix="confined-"))
        try:
            root, outside = _tree(base)
            real_root = os.path.realpath(root)
            fs = ConfinedFS([root])
            before = _state(base, skip=root)
            for op, rel, absolute_part in ops:
                # an absolute part replaces everything before it, as a path join does
                path = (outside / rel) if absolute_part else root / rel
                try:
                    if op == "write":
                        fs.write(path, "X")
                    elif op == "mkdir":
                        fs.mkdir(path, 0o755)
                    else:
                        fs.read(path)
                except (RefusedPathError, OSError):
                    continue
                assert os.path.realpath(path).startswith(real_root + "/"), f"{op} {path} left the root"
                written.append(op)
            assert _state(base, skip=root) == before, f"{ops} changed something outside the root"
        finally:
            shutil.rmtree(base)

    check()
    assert {"write", "mkdir", "read"} <= set(written), "some operation never succeeded: a vacuous run"
