#!/usr/bin/env bash
# Builds Kubernetes v1.20.2 binaries (default: kube-apiserver) from Debian bookworm's `kubernetes`
# source package with Debian's Go, and caches them in $KOORD_CACHE/k8s/bin (default
# ~/.cache/koord/k8s/bin). Idempotent: a binary already built is reused; a flock serialises
# concurrent callers (pytest-xdist, `koord up` and a test run at once).
#
# Usage: koord/localcluster/build-kube.sh [kube-apiserver] [kubelet] [kube-controller-manager] [kube-scheduler] [kubectl]
# kube-scheduler is the differential tests' oracle (tests/differential, docs/testing.md#the-kube-scheduler-oracle).
# Needs root for apt-get (as on CI and the developers' machines).
set -euo pipefail

CACHE=${KOORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/koord}
W=$CACHE/k8s
OUT=$W/bin
VERSION=v1.20.2
SRC_TARBALL=kubernetes_1.20.5+really1.20.2.orig.tar.gz
# Bumped whenever the source patches below change: a binary built at another level is rebuilt.
PATCHLEVEL=3
mkdir -p "$W" "$OUT"
built() { [ -x "$OUT/$1" ] && [ "$(cat "$OUT/$1.patchlevel" 2>/dev/null)" = "$PATCHLEVEL" ]; }

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver)

missing=()
for c in "${components[@]}"; do
  case "$c" in
    kube-apiserver|kubelet|kube-controller-manager|kube-scheduler|kubectl) ;;
    *) echo "build-kube: unknown component '$c'" >&2; exit 2 ;;
  esac
  built "$c" || missing+=("$c")
done
[ ${#missing[@]} -gt 0 ] || { echo "build-kube: cached in $OUT: ${components[*]}"; exit 0; }

exec 9>"$W/.lock"
flock 9
# Another caller may have finished the build while we waited for the lock.
still=()
for c in "${missing[@]}"; do built "$c" || still+=("$c"); done
[ ${#still[@]} -gt 0 ] || { echo "build-kube: cached in $OUT"; exit 0; }

echo "build-kube: building ${still[*]} $VERSION (cold: ~7 min and ~1.3 GB RAM on 2 cores)" >&2
cd "$W"
if [ ! -d "$W/kubernetes-1.20.2" ]; then
  # deb-src for the same archive is needed only for `apt-get source`.
  if ! grep -rqs '^Types: deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      > /etc/apt/sources.list.d/koord-debian-src.sources
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go \
    golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev dpkg-dev >/dev/null
  [ -f "$SRC_TARBALL" ] || apt-get source --download-only -qq kubernetes
  rm -rf "$W/kubernetes-1.20.2.tmp" && mkdir "$W/kubernetes-1.20.2.tmp"
  tar xzf "$SRC_TARBALL" -C "$W/kubernetes-1.20.2.tmp" --strip-components=1
  mv "$W/kubernetes-1.20.2.tmp" "$W/kubernetes-1.20.2"
fi
command -v go >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  golang-go golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev >/dev/null

# k8s 1.20 builds in GOPATH mode.
export GOPATH=$W/gopath GOCACHE=$W/gocache GO111MODULE=off GOFLAGS= CGO_ENABLED=0
mkdir -p "$GOPATH/src/k8s.io" && ln -sfn "$W/kubernetes-1.20.2" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"

# Go >= 1.18: the vendored reflect2 v1.0.1 segfaults at run time (creating a custom resource crashes
# the server), so swap in Debian's reflect2 1.0.2 and json-iterator 1.1.12.
if [ ! -f .koord-reflect2-swapped ]; then
  for p in github.com/modern-go/reflect2 github.com/json-iterator/go; do
    rm -f vendor/$p/*.go vendor/$p/*.s
    for f in /usr/share/gocode/src/$p/*.go /usr/share/gocode/src/$p/*.s; do
      case "$f" in *_test.go|*"*"*) ;; *) cp "$f" vendor/$p/ ;; esac
    done
  done
  touch .koord-reflect2-swapped
fi

# Go >= 1.16: go-openapi's type validator compares reflect.Values with DeepEqual to spot "zero" data,
# which since Go 1.16 is true for "" and makes the server refuse any empty string in a custom resource
# as `must be of type string: "null"` (kubernetes issue 99804). Release builds of 1.20 (Go 1.15) only
# ever matched nil there, so keep exactly that.
# Both copies: apiextensions-apiserver validates with kube-openapi's fork.
for f in vendor/github.com/go-openapi/validate/type.go vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go; do
  sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$f"
  grep -q '^	if data == nil {$' "$f" || { echo "build-kube: the null-type patch did not apply to $f" >&2; exit 1; }
done

# pkg/generated/openapi/zz_generated.openapi.go is not shipped in the tarball.
if [ ! -f pkg/generated/openapi/zz_generated.openapi.go ]; then
  go build -o "$W/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
  DIRS=$(find -H . \( -not \( \( -path ./_\* -o -path ./.\* -o -path ./vendor -o -path ./debian \) -prune \) \) -type f -name '*.go' \
    | sed 's|^./staging/src|vendor|; s|/[^/]*$||; s|^./||' | LC_ALL=C sort -u)
  ODIRS=$(for d in $DIRS; do r=${d/#vendor\/k8s.io\//staging/src/k8s.io/}; [ -d "$r" ] || r=$d
    grep -l '^// *+k8s:' "$r"/*.go 2>/dev/null | xargs -r grep -l '+k8s:openapi-gen=' | sed 's|^staging/src|vendor|' || true; done \
    | grep -vE '^vendor/k8s.io/(code-generator|sample-apiserver)/' | xargs -n1 dirname | LC_ALL=C sort -u)
  "$W/openapi-gen" -i "$(echo "$ODIRS" | sed 's|^|k8s.io/kubernetes/|' | paste -sd,)" \
    -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
    -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$W/violations.report"
fi

V=k8s.io/kubernetes/vendor/k8s.io
LDFLAGS="-s -w -X $V/component-base/version.gitVersion=$VERSION -X $V/component-base/version.gitMajor=1 \
-X $V/component-base/version.gitMinor=20 -X $V/component-base/version.gitTreeState=clean \
-X $V/client-go/pkg/version.gitVersion=$VERSION"
for c in "${still[@]}"; do
  go build -ldflags "$LDFLAGS" -o "$OUT/$c.tmp" "./cmd/$c"
  mv "$OUT/$c.tmp" "$OUT/$c"
  echo "$PATCHLEVEL" > "$OUT/$c.patchlevel"
  echo "build-kube: built $OUT/$c" >&2
done
