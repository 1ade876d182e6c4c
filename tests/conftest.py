"""Shared fixtures: one real local control plane (etcd + kube-apiserver) per test session, started
only when a test asks for it, with the koord CRDs and base objects installed; a fresh namespace per
test for isolation; koord's own client of it (``rest``); a ``stop`` event set when a test ends, for
the threads it starts; and, for every test, a check that it leaves no thread or child process behind.
"""

from __future__ import annotations

import gc
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import psutil
import pytest

from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane
from kube.rest import KubeRest

LEAK_GRACE_S = 10.0  # a stopped grpc.aio server's poller thread took over 2 s to end on a loaded CI machine
"""How long a test's threads and child processes get, after the test, to finish stopping."""

SessionOwner = Callable[[], Iterable[int]]
"""The PIDs a session fixture owns now."""


@pytest.fixture(scope="session")
def session_processes() -> list[SessionOwner]:
    """Where a session fixture whose processes a test may restart (the real node of tests/e2e, which
    a test stops and starts again) registers what it owns: the leak check counts neither those
    processes nor their children."""
    return []


@pytest.fixture(autouse=True)
def no_leaked_threads_or_processes(session_processes: list[SessionOwner]) -> Iterator[None]:
    """Fails the test if it leaves a thread or a child process running (or a child not waited for).

    The baseline is what is alive when the test starts: pytest sets up session- and module-scoped
    fixtures (the real control plane, the real node) before this function-scoped one, so what they
    started is in it; and autouse fixtures are set up first in their scope, so this check runs after
    the test's own fixtures are torn down. What leaked is named, not killed: it may belong to a
    session fixture the test misused, and killing it would fail every later test too.
    """
    me = psutil.Process()
    threads_before = set(threading.enumerate())
    children_before = set(me.children(recursive=True))
    yield
    deadline = time.monotonic() + LEAK_GRACE_S
    threads = [t for t in threading.enumerate() if t not in threads_before and not _grpc_poller(t)]
    children = _new_children(me, children_before, session_processes)
    while (threads or children) and time.monotonic() < deadline:
        # Some threads end when their owner is freed, not when it is stopped (grpc.aio's poller thread
        # ends when the last aio server or channel is deallocated): collect what the test let go of,
        # which may sit in a reference cycle (an exception's traceback) until the next collection.
        gc.collect()
        joinable = [t for t in threads if not isinstance(t, threading._DummyThread)]  # foreign: no join
        for t in joinable:
            t.join(0.1 / len(joinable))
        if not joinable:
            time.sleep(0.05)
        threads = _running(me, threads)
        children = _new_children(me, children_before, session_processes)
    if not (threads or children):
        return
    lines = [f"thread {t.name!r} (daemon={t.daemon}, target={_target(t)})" for t in threads]
    lines += [f"process {_describe(p)}" for p in children]
    pytest.fail(
        f"the test left {len(lines)} thread(s)/process(es) behind after {LEAK_GRACE_S:.0f}s:\n  "
        + "\n  ".join(lines),
        pytrace=False,
    )


def _grpc_poller(t: threading.Thread) -> bool:
    """grpc.aio's one process-wide poller thread. It runs while grpc's aio state is initialised and ends
    only when its completion queue drains after the last aio object is freed; in some interleavings of
    a stopped server with an aborted client stream (seen once per full run, never alone) that happens
    after the test, or never. It is grpc's, one per process, not something a test started and forgot:
    the check does not count it (the hub's own threads, the loop thread and its pools, still are)."""
    return _target(t) == "PollerCompletionQueue._poll_wrapper"


def _running(me: psutil.Process, threads: list[threading.Thread]) -> list[threading.Thread]:
    """The threads still running. A foreign thread that called into Python (a grpc C-core thread)
    stays in threading.enumerate() for good; it runs while its OS thread exists."""
    tids = {t.id for t in me.threads()}
    return [
        t for t in threads
        if (t.native_id in tids if isinstance(t, threading._DummyThread) else t.is_alive())
    ]  # fmt: skip


def _new_children(
    me: psutil.Process, before: set[psutil.Process], owners: list[SessionOwner]
) -> list[psutil.Process]:
    """Children started during the test that still run, or exited and were never waited for (zombies),
    other than the session fixtures' processes and their children."""
    owned = {pid for owner in owners for pid in owner()}
    alive = []
    for p in me.children(recursive=True):
        if p in before:
            continue
        try:
            if owned & {p.pid, *(a.pid for a in p.parents())}:
                continue
            p.status()
        except psutil.NoSuchProcess:
            continue
        alive.append(p)
    return alive


def _target(t: threading.Thread) -> str:
    fn = getattr(t, "_target", None)  # CPython keeps the target until run() returns
    return getattr(fn, "__qualname__", repr(fn)) if fn is not None else type(t).__qualname__


def _describe(p: psutil.Process) -> str:
    try:
        status = p.status()
        try:
            command = " ".join(p.cmdline())[:200]
        except psutil.ZombieProcess:  # a zombie keeps its name, not its command line
            command = ""
        return f"{p.pid} {status}: {command or p.name()}"
    except psutil.NoSuchProcess:
        return f"{p.pid} (gone)"


@pytest.fixture()
def stop() -> Iterator[threading.Event]:
    """The event a test's threads (supervised loops, informers) watch; set when the test ends, also when it
    fails, so they end before the leak check looks."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(state_dir=tmp_path_factory.mktemp("controlplane"))
    cp.start()
    try:
        bootstrap(cp.api_client())
        yield cp
    finally:
        cp.stop()


@pytest.fixture()
def kube(control_plane: ControlPlane) -> Iterator[Any]:
    """A kubernetes.client.ApiClient authenticated as the admin."""
    api = control_plane.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture()
def rest(control_plane: ControlPlane) -> Iterator[KubeRest]:
    """koord's own API client (kube.rest) for the session's control plane, closed after the test."""
    r = KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path))
    try:
        yield r
    finally:
        r.close()


@pytest.fixture()
def namespace(kube: Any) -> Iterator[str]:
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(kube)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name)
