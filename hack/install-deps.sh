#!/usr/bin/env bash
# Installs what the real local control plane needs and is not on PyPI: etcd (Debian's etcd-server),
# openssl, and kube-apiserver v1.20.2 built once from Debian's source package (koord/localcluster/build-kube.sh).
# Skipped when KUBEBUILDER_ASSETS names a folder with kube-apiserver and etcd (envtest convention).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  echo "install-deps: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"; exit 0
fi
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v openssl >/dev/null || need+=(openssl)
command -v flock >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root or install them (Debian: apt-get install ${need[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
bash "$here/../koord/localcluster/build-kube.sh" kube-apiserver
