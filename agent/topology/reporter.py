"""The NodeResourceTopology reporter loop (docs/rules/koordlet-topology.md#reporting): every
``--node-topology-sync-interval`` (3 s, upstream's default) it reads the kubelet's config and CPU manager
checkpoint, builds the report (agent.topology.nrt) from the node's CPUs and NUMA memory, the Node and this
node's pods, compares it with the object last observed (the NRT watch, or the object the last write
returned, whichever is newer) and writes only when it differs: a create when there is no object (an
``AlreadyExists`` answer reads it back and patches), else a JSON merge patch. A failed write is logged,
counted and simply retried next round. ``kick()`` runs a round at once (pod events).

Imports: standard library, apis.kubeobjects, agent.gateway (GatewayError only; the writer is injected),
agent.system.nodeinfo, agent.topology.{kubelet,nrt,nrtobject,upsert}.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent.gateway import GatewayError
from agent.system.nodeinfo import NodeTopology
from agent.topology.kubelet import (
    KubeletConfigError,
    read_cpu_manager_state,
    read_kubelet_config,
)
from agent.topology.nrt import KubeletView, NRTBuildError, SharePools, build_status
from agent.topology.nrtobject import create_body, is_changed, patch_body
from agent.topology.upsert import upsert
from apis.kubeobjects import Node, Pod
from apis.numa import KUBELET_POLICY_STATIC

__all__ = ["NRTWriter", "TopologyReporter"]

log = logging.getLogger(__name__)

DEFAULT_SYNC_INTERVAL_SECONDS = 3.0


class NRTWriter(Protocol):
    """The gateway's NRT calls (``agent.gateway.KubeGateway``)."""

    def get_nrt(self) -> dict[str, Any] | None: ...

    def create_nrt(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch_nrt(self, patch: Mapping[str, Any]) -> dict[str, Any]: ...


def _rv(obj: Mapping[str, Any] | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


class TopologyReporter:
    def __init__(
        self,
        *,
        writer: NRTWriter,
        observed: Callable[[], Mapping[str, Any] | None],
        node: Callable[[], Node | None],
        pods: Callable[[], Sequence[Pod]],
        topology: Callable[[], NodeTopology | None],
        numa_meminfo: Callable[[], Mapping[int, Mapping[str, int]] | None],
        share_pools: SharePools,
        kubelet_config_file: Path,
        kubelet_root_dir: Path,
        interval_seconds: float = DEFAULT_SYNC_INTERVAL_SECONDS,
        on_result: Callable[[str], None] | None = None,
    ) -> None:
        self.writer = writer
        self.observed = observed
        self.node = node
        self.pods = pods
        self.topology = topology
        self.numa_meminfo = numa_meminfo
        self.share_pools = share_pools
        self.kubelet_config_file = kubelet_config_file
        self.kubelet_root_dir = kubelet_root_dir
        self.interval_seconds = interval_seconds
        self.on_result = on_result
        self._wake = threading.Event()
        self._last: dict[str, Any] | None = None
        self._said: dict[str, str] = {}

    # -- logging without spam ------------------------------------------------------------------------
    def _say(self, topic: str, level: int, message: str) -> None:
        """Log ``message`` once while it stays the same for ``topic`` (a file missing every 3 s: one
        line)."""
        if self._said.get(topic) != message:
            self._said[topic] = message
            log.log(level, "%s", message)

    def _clear(self, topic: str) -> None:
        self._said.pop(topic, None)

    # -- inputs --------------------------------------------------------------------------------------
    def kubelet_view(self) -> KubeletView:
        """The kubelet config (missing or broken → None: policy ``none``, said once) and, under the static
        policy, the CPU manager checkpoint's entries (missing or broken → none, said once)."""
        try:
            cfg = read_kubelet_config(self.kubelet_config_file)
        except (KubeletConfigError, OSError) as e:
            self._say(
                "kubelet-config", logging.WARNING, f"kubelet config unreadable, reporting policy none: {e}"
            )
            return KubeletView(None)
        if cfg is None:
            self._say(
                "kubelet-config",
                logging.INFO,
                f"no kubelet config at {self.kubelet_config_file}: reporting CPU manager policy none",
            )
            return KubeletView(None)
        self._clear("kubelet-config")
        if cfg.cpu_manager_policy != KUBELET_POLICY_STATIC:
            return KubeletView(cfg)
        try:
            entries = read_cpu_manager_state(self.kubelet_root_dir)
        except (KubeletConfigError, OSError) as e:
            self._say("kubelet-state", logging.WARNING, f"CPU manager checkpoint ignored: {e}")
            return KubeletView(cfg)
        if entries is None:
            self._say(
                "kubelet-state", logging.INFO, f"no CPU manager checkpoint under {self.kubelet_root_dir}"
            )
        else:
            self._clear("kubelet-state")
        return KubeletView(cfg, entries)

    def _current(self) -> Mapping[str, Any] | None:
        """The newer of the watched object and the one the last write returned (the watch may trail our
        own write by a moment); None when the watch has none."""
        seen = self.observed()
        if seen is None:
            return None
        last = self._last
        same = last is not None and (last.get("metadata") or {}).get("uid") == (
            seen.get("metadata") or {}
        ).get("uid")
        return last if same and _rv(last) > _rv(seen) else seen

    def annotations(self) -> dict[str, str] | None:
        """The NRT's annotations as last observed or written (None: no object known yet); what the
        koordlet's cpuset rule reads back (docs/rules/koordlet-cpuset.md#reconcile)."""
        current = self._current() if self.observed() is not None else self._last
        if current is None:
            return None
        ann = (current.get("metadata") or {}).get("annotations")
        return {str(k): str(v) for k, v in ann.items()} if isinstance(ann, Mapping) else None

    # -- one round -------------------------------------------------------------------------------------
    def tick(self) -> str:
        """One round; returns ``skipped``, ``unchanged``, ``created``, ``updated`` or ``failed``."""
        node, topo = self.node(), self.topology()
        if node is None or topo is None:
            what = "the Node" if node is None else "the node's CPU info"
            self._say("inputs", logging.INFO, f"node topology: waiting for {what}")
            return "skipped"
        self._clear("inputs")
        pods = list(self.pods())
        try:
            status = build_status(
                topo, self.numa_meminfo() or {}, self.kubelet_view(), node, pods, self.share_pools
            )
        except NRTBuildError as e:
            self._say("build", logging.ERROR, f"failed to calculate node topology: {e}")
            return "skipped"
        self._clear("build")
        for warning in status.warnings:
            self._say(f"warn:{warning.split(':', 1)[0]}", logging.WARNING, warning)
        current = self._current()
        reason = is_changed(status, current)[1]
        try:
            outcome, written = upsert(
                current,
                create=lambda: self.writer.create_nrt(create_body(node, status)),
                read=self.writer.get_nrt,  # after a 409: the watch has not seen it yet
                changed=lambda obj: is_changed(status, obj)[0],
                patch=lambda obj: self.writer.patch_nrt(patch_body(status, obj)),
            )
        except GatewayError as e:
            # Said once while the cause stays the same (a missing CRD fails every round); counted each time.
            self._say("write", logging.ERROR, f"node topology: write failed (retried next round): {e}")
            self._result("failed")
            return "failed"
        self._clear("write")
        self._last = dict(written)
        if outcome == "unchanged":
            return outcome
        log.info("node topology %s (%s)", outcome, reason)
        self._result("succeeded")
        return outcome

    def _result(self, status: str) -> None:
        if self.on_result is not None:
            self.on_result(status)

    # -- loop ------------------------------------------------------------------------------------------
    def kick(self) -> None:
        """Run the next round now (a pod's cpuset changed, or shutdown)."""
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.tick()
            self._wake.wait(self.interval_seconds)
            self._wake.clear()
