"""Renders the configuration files of the local node: containerd's config (its own root, state,
socket; CRI with overlayfs, runc and the cgroupfs driver), the kubelet's KubeletConfiguration and
the CNI bridge network. Pure functions returning text; the values follow a recipe shown to work on
this kind of host (cgroup v1, root without CAP_SYS_RESOURCE).

Imports: standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps its state: everything the node writes lives under `root`."""

    root: Path

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def kubelet(self) -> Path:
        return self.root / "kubelet"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def run_dirs(self) -> list[Path]:
        """The folders a stopped node no longer needs (logs and config stay for debugging)."""
        return [self.containerd, self.kubelet, self.root / "cni"]


def containerd_toml(paths: NodePaths, sandbox_image: str, runc: Path, cni_bin_dir: Path) -> str:
    c = paths.containerd
    return f"""version = 2
root = "{c / "root"}"
state = "{c / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{paths.containerd_socket}"
[ttrpc]
  address = "{paths.containerd_socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{c / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  # Required here: root lacks CAP_SYS_RESOURCE, so a negative oom_score_adj fails every sandbox.
  restrict_oom_score_adj = true
  # Network namespaces under our state folder, so teardown finds (and unmounts) them there.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{runc}"
        Root = "{c / "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin_dir}"
    conf_dir = "{paths.cni_conf_dir}"
"""


def kubelet_config(
    paths: NodePaths,
    *,
    address: str,
    port: int,
    healthz_port: int,
    ca_cert: Path,
    tls_cert: Path,
    tls_key: Path,
) -> str:
    """KubeletConfiguration (JSON, which kubelet reads as YAML)."""
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(tls_cert),
        "tlsPrivateKeyFile": str(tls_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": True,
        "cgroupRoot": "/",
        "enforceNodeAllocatable": ["pods"],
        "failSwapOn": False,
        # A shared test machine's disk is often fuller than kubelet's defaults allow: never GC the
        # local-only images (they cannot be pulled back) and evict only when really out of space.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "syncFrequency": "10s",
        # Ready is posted at the first status update after the runtime's network is up: 2 s instead
        # of 10 s makes the node Ready ~8 s sooner; the load on a local API server is negligible.
        "nodeStatusUpdateFrequency": "2s",
        "serializeImagePulls": False,
        # No KUBE-MARK-*/KUBE-FIREWALL rules in the host's iptables.
        "makeIPTablesUtilChains": False,
    }
    return json.dumps(cfg, indent=2)


def cni_conflist(paths: NodePaths, bridge: str, subnet: str, gateway: str) -> str:
    """A bridge network without masquerading or iptables rules. The bridge itself carries the node IP
    (made before kubelet starts), so pod addresses start after it."""
    prefix = subnet.rsplit(".", 1)[0]
    conf = {
        "cniVersion": "0.4.0",
        "name": "koord-local",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(paths.cni_ipam_dir),
                    "ranges": [[{"subnet": subnet, "rangeStart": f"{prefix}.2", "gateway": gateway}]],
                },
            }
        ],
    }
    return json.dumps(conf, indent=2)
