"""The koordlet's node topology reports as its composition root (agent.daemon) wires them: the
NodeResourceTopology reporter with its informer, kicked by pod events that change a cpuset
(docs/rules/koordlet-topology.md#reporting), and the Device reporter (gate ``Accelerators``,
docs/rules/koordlet-gpu.md#reporting), with the views of this node they read (CPU topology, NUMA
meminfo, the Node's UID) and the one the QoS strategies read (the NRT annotations last reported).
Imports: standard library, apis.{constants,kubeobjects}, kube.informer, agent.*.
"""

from __future__ import annotations

import threading

from agent.gateway import KubeGateway
from agent.metriccache.kv import NODE_CPU_INFO, NODE_NUMA_INFO
from agent.metrics import AgentMetrics
from agent.metricsadvisor.framework import CollectContext
from agent.options import Options
from agent.statesinformer.informer import StatesInformer
from agent.supervisor import Supervisor
from agent.system.gpu import open_backend
from agent.system.nodeinfo import NodeTopology
from agent.topology.device_reporter import DeviceReporter
from agent.topology.reporter import TopologyReporter
from agent.topology.sharepools import share_pools
from apis import constants as c
from apis.kubeobjects import CustomResource, Pod
from kube.informer import Informer

__all__ = ["NRT_SYNC_WAIT_SECONDS", "TopologyReports"]

NRT_SYNC_WAIT_SECONDS = 10.0


class TopologyReports:
    """The NRT reporter (with its informer) and the Device reporter of one koordlet; either is None when
    ``--node-topology-sync-seconds`` is not positive or its gate is off."""

    def __init__(
        self,
        opts: Options,
        gateway: KubeGateway,
        states: StatesInformer,
        context: CollectContext,
        metrics: AgentMetrics,
    ) -> None:
        self.context = context
        self.states = states
        self.nrt_informer: Informer[CustomResource] | None = None
        self.topology_reporter: TopologyReporter | None = None
        if opts.node_topology_sync_seconds > 0 and opts.feature_gates.get("NodeTopologyReport", True):
            informer = self.nrt_informer = gateway.nrt_informer()
            self.topology_reporter = TopologyReporter(
                writer=gateway,
                observed=lambda: informer.get(opts.node_name),
                node=states.node,
                pods=lambda: [m.pod for m in states.pods()],
                topology=self.topology,
                numa_meminfo=self.numa_meminfo,
                share_pools=share_pools,
                kubelet_config_file=opts.kubelet_config_file,
                kubelet_root_dir=opts.kubelet_root_dir,
                interval_seconds=opts.node_topology_sync_seconds,
                on_result=metrics.on_topology_report,
            )
            gateway.add_pod_listener(self.pod_event)
        # The Device report (upstream's gate Accelerators, docs/rules/koordlet-gpu.md#reporting) shares the
        # NRT report's interval, as upstream's.
        self.device_reporter: DeviceReporter | None = None
        if opts.node_topology_sync_seconds > 0 and opts.feature_gates.get("Accelerators", False):
            self.device_reporter = DeviceReporter(
                gateway,
                open_backend(opts.gpu_fake_root, opts.paths.sys),
                opts.node_name,
                opts.node_topology_sync_seconds,
                node_uid=self.node_uid,
                on_result=metrics.on_device_report,
            )

    def start(self, supervisor: Supervisor, stop: threading.Event) -> None:
        """The reporters' threads (once the states informer has synced)."""
        if self.topology_reporter is not None and self.nrt_informer is not None:
            self.nrt_informer.start(stop)
            informer, reporter = self.nrt_informer, self.topology_reporter

            def report_topology(stop: threading.Event) -> None:
                # Without the watch a round still works (a create answered 409 reads the object back).
                informer.has_synced.wait(NRT_SYNC_WAIT_SECONDS)
                reporter.run(stop)

            supervisor.spawn("node-topology", report_topology)
        if self.device_reporter is not None:
            supervisor.spawn("device-report", self.device_reporter.run)

    def topology(self) -> NodeTopology | None:
        topo = self.context.kv.get(NODE_CPU_INFO)
        return topo if isinstance(topo, NodeTopology) else None

    def numa_meminfo(self) -> dict[int, dict[str, int]] | None:
        info = self.context.kv.get(NODE_NUMA_INFO)
        return info if isinstance(info, dict) else None

    def node_uid(self) -> str | None:
        """This Node's UID once the informer has seen it (it owns the Device object)."""
        meta = (self.states.node() or {}).get("metadata") or {}
        return str(meta.get("uid") or "") or None

    def nrt_annotations(self) -> dict[str, str] | None:
        """This node's NRT annotations as last reported (None without the report: the Node's are read)."""
        reporter = self.topology_reporter
        return reporter.annotations() if reporter is not None else None

    def pod_event(self, old: Pod | None, new: Pod | None) -> None:
        """A pod added, gone, or whose cpuset or QoS changed moves the share pools: report now."""
        reporter = self.topology_reporter
        if reporter is None:
            return
        if old is None or new is None or _cpuset_inputs(old) != _cpuset_inputs(new):
            reporter.kick()


def _cpuset_inputs(pod: Pod) -> tuple[object, object]:
    """What of a pod the share pools read: its resource-status annotation and raw QoS label."""
    meta = pod.get("metadata") or {}
    return (
        (meta.get("annotations") or {}).get(c.ANNOTATION_RESOURCE_STATUS),
        (meta.get("labels") or {}).get(c.LABEL_POD_QOS),
    )
