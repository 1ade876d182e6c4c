"""`koord up`'s koordlet command line (koord.localcluster.components.koordlet_args) as the koordlet parses
it: the host paths, the QoS mode, and the real node's kubelet files (its config and root dir live under
the node's folder, docs/rules/koordlet-topology.md#kubelet-cpu-manager) or the koordlet's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.options import parse
from koord.localcluster.components import NodeHost, koordlet_args


def test_real_node_points_the_koordlet_at_its_kubelet(tmp_path: Path) -> None:
    node = tmp_path / "node"
    host = NodeHost(
        Path("/proc"), Path("/sys"), tmp_path / "cg", simulated=False, qos="dry-run",
        kubelet_config=node / "config" / "kubelet-config.yaml", kubelet_dir=node / "kubelet",
    )  # fmt: skip
    opts, _ = parse(
        koordlet_args("n1", host, tmp_path / "kubeconfig", 4242, "127.0.0.1:9", tmp_path / "k"), {}
    )
    assert opts.node_name == "n1" and opts.addr == "127.0.0.1:4242" and opts.hub_address == "127.0.0.1:9"
    assert opts.paths.cgroup_root == tmp_path / "cg" and opts.hub_token_file == tmp_path / "k" / "hub-token"
    assert opts.enable_qos and opts.qos_dry_run
    assert opts.kubelet_config_file == tmp_path / "node" / "config" / "kubelet-config.yaml"
    assert opts.kubelet_root_dir == tmp_path / "node" / "kubelet"
    assert opts.warnings == ()


@pytest.mark.parametrize(("qos", "enabled", "dry"), [("on", True, False), ("off", False, False)])
def test_simulated_node_keeps_the_kubelet_defaults(
    tmp_path: Path, qos: str, enabled: bool, dry: bool
) -> None:
    host = NodeHost(tmp_path / "proc", tmp_path / "sys", tmp_path / "cg", simulated=True, qos=qos)
    args = koordlet_args("sim-0", host, tmp_path / "kubeconfig", 1, "127.0.0.1:9", tmp_path)
    assert not any(a.startswith("--kubelet-") for a in args)
    opts, _ = parse(args, {})
    assert (opts.enable_qos, opts.qos_dry_run) == (enabled, dry)
    assert opts.kubelet_config_file == Path("/var/lib/kubelet/config.yaml")
    assert opts.kubelet_root_dir == Path("/var/lib/kubelet")
