#!/usr/bin/env bash
# Installs what the real local cluster needs and is not on PyPI: etcd (Debian's etcd-server), openssl,
# kube-apiserver v1.20.2 built once from Debian's source package (koord/localcluster/build-kube.sh),
# kube-scheduler from the same tree (the differential tests' oracle),
# and, for the real local node (as root), Debian's containerd, runc, busybox-static and
# containernetworking-plugins (and prometheus, for the dashboard query test) plus kubelet and
# kube-controller-manager built from the same tree.
# Builds are cached in ~/.cache/koord/k8s/bin (KOORD_CACHE), so later runs take seconds.
# The control-plane part is skipped when KUBEBUILDER_ASSETS names a folder with kube-apiserver and etcd
# (envtest convention); kubelet and kube-controller-manager are taken from there too when present.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=("$here/../koord/localcluster/build-kube.sh")
root=$([ "$(id -u)" = 0 ] && echo yes || echo no)

need=()
command -v openssl >/dev/null || need+=(openssl)  # the throw-away PKI, always
assets=no
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  echo "install-deps: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS for the control plane"
  assets=yes
else
  command -v etcd >/dev/null || need+=(etcd-server)
  command -v flock >/dev/null || need+=(util-linux)
fi
# The real node runs only as root (kubelet manages cgroups, mounts and network namespaces).
if [ "$root" = yes ]; then
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  # The pods' image is this one binary, so it must be the static build.
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v ip >/dev/null || need+=(iproute2)
  # Prometheus: optional for `koord up`; the test suite runs every Grafana dashboard query against it.
  command -v prometheus >/dev/null || need+=(prometheus)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$root" != yes ]; then
    echo "install-deps: missing ${need[*]}; run as root or install them (Debian: apt-get install ${need[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  if [[ " ${need[*]} " == *" prometheus "* ]]; then
    # Debian's package starts its own server (:9090) where it can; koord runs its own, so stop that one.
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/prometheus ]; then
      /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    fi
  fi
fi

components=()
[ "$assets" = yes ] || components+=(kube-apiserver)
# The differential tests compare koord-scheduler with the real kube-scheduler (tests/differential).
[ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-scheduler" ] || components+=(kube-scheduler)
if [ "$root" = yes ]; then
  for c in kubelet kube-controller-manager; do
    [ "$assets" = yes ] && [ -x "$KUBEBUILDER_ASSETS/$c" ] || components+=("$c")
  done
fi
[ ${#components[@]} -eq 0 ] || bash "${build[@]}" "${components[@]}"
