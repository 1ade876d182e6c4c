"""The koordlet flags of the NodeResourceTopology report (docs/rules/koordlet-topology.md#reporting):
defaults (3 s, upstream's; the kubelet's usual paths), ``0`` switching the report off, a bad duration
naming the flag, and the ``NodeTopologyReport`` gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.options import parse


def test_defaults() -> None:
    opts, _ = parse(["--node-name=n1"], {})
    assert opts.node_topology_sync_seconds == 3.0
    assert opts.kubelet_config_file == Path("/var/lib/kubelet/config.yaml")
    assert opts.kubelet_root_dir == Path("/var/lib/kubelet")
    assert opts.feature_gates["NodeTopologyReport"] is True


def test_values_and_off() -> None:
    opts, _ = parse(
        [
            "--node-name=n1",
            "--node-topology-sync-interval=0",
            "--kubelet-config-file=/etc/kubernetes/kubelet.conf",
            "--kubelet-root-dir=/data/kubelet",
            "--feature-gates=NodeTopologyReport=false",
        ],
        {},
    )
    assert opts.node_topology_sync_seconds == 0.0
    assert opts.kubelet_config_file == Path("/etc/kubernetes/kubelet.conf")
    assert opts.kubelet_root_dir == Path("/data/kubelet")
    assert opts.feature_gates["NodeTopologyReport"] is False
    assert not any("NodeTopologyReport" in w for w in opts.warnings)  # implemented: no "ignored" warning
    assert (
        parse(["--node-name=n1", "--node-topology-sync-interval=500ms"], {})[0].node_topology_sync_seconds
        == 0.5
    )


def test_bad_interval_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--node-name=n1", "--node-topology-sync-interval=soon"], {})
    assert "--node-topology-sync-interval: 'soon'" in capsys.readouterr().err
