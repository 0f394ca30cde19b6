#!/bin/sh
# Builds the real peers of devlet's end-to-end tests from the Go module proxy,
# at the versions tests/cluster/versions.env pins, and caches them outside the
# clone:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/devlet/peers/<name>-<version>/bin/...
#
# so only a fresh machine pays the build.  A peer's directory is complete once
# its `.done` stamp exists; an interrupted build is redone from scratch.
#
#   scripts/peers.sh            build what is missing, then print one line per
#                               peer: NAME=DIR (DIR holds bin/)
#   scripts/peers.sh NAME...    only these (kubernetes etcd containerd helm
#                               kubelet-old)
#   scripts/peers.sh --dir NAME print NAME's directory (built or not)
#
# K8S=1.X in the environment picks the Kubernetes release: the newest
# (KUBERNETES_VERSION, the default) or the oldest minor still supported
# (KUBERNETES_OLDEST_VERSION); any other is refused.
#
# Kubernetes cannot be `go install`ed (its go.mod replaces every staging
# module with a path in its own tree), so each peer is built from a small
# wrapper module made here: it requires the peer's module and, for
# Kubernetes, replaces each k8s.io/<staging> with k8s.io/<staging>@v0.Y.Z.
# Everything is static (CGO_ENABLED=0).
set -eu

cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck disable=SC1091
. "$root/tests/cluster/versions.env"
minor_of() { echo "$1" | sed -n 's/^v\([0-9]*\.[0-9]*\)\..*/\1/p'; }
if [ -n "${K8S:-}" ]; then
        case "${K8S#v}" in
        "$(minor_of "$KUBERNETES_VERSION")") ;;
        "$(minor_of "$KUBERNETES_OLDEST_VERSION")") KUBERNETES_VERSION=$KUBERNETES_OLDEST_VERSION ;;
        *) echo "peers: K8S=$K8S: the pinned releases are $(minor_of "$KUBERNETES_VERSION") (newest, the default) and $(minor_of "$KUBERNETES_OLDEST_VERSION") (oldest supported)" >&2
           exit 2 ;;
        esac
fi
cache=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/devlet/peers
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "peers: go not found (Go 1.25 or newer is needed to build the peers)" >&2; exit 1; }
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

peer_version() {
        case "$1" in
        kubernetes) echo "$KUBERNETES_VERSION" ;;
        etcd) echo "$ETCD_VERSION" ;;
        containerd) echo "$CONTAINERD_VERSION" ;;
        helm) echo "$HELM_VERSION" ;;
        kubelet-old) echo "$KUBELET_OLD_VERSION" ;;
        *) echo "peers: unknown peer $1 (kubernetes etcd containerd helm kubelet-old)" >&2; exit 2 ;;
        esac
}

peer_dir() { echo "$cache/$1-$(peer_version "$1")"; }

# wrapper DIR MODULE VERSION: a module that requires MODULE@VERSION
wrapper() {
        mkdir -p "$1"
        printf 'module devlet.local/peers\n\ngo 1.25.0\n\nrequire %s %s\n' "$2" "$3" > "$1/go.mod"
}

# k8s_build DIR VERSION PACKAGE...: Kubernetes' commands from a wrapper module
k8s_build() {
        dir=$1 v=$2
        shift 2
        minor=$(echo "$v" | cut -d. -f2)
        gomod=$(cd "$dir/src" && go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
        [ -f "$gomod" ] || { echo "peers: no go.mod for k8s.io/kubernetes@$v" >&2; exit 1; }
        gominor=$(sed -n 's/^go 1\.\([0-9]*\).*/\1/p' "$gomod")
        {
                # the GODEBUG defaults its own release was tested with
                # (go.mod's godebug line knows go1.21 and later)
                [ "$gominor" -lt 21 ] || echo "godebug default=go1.$gominor"
                echo "replace ("
                sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\t\1 => \1 v0.'"${v#v1.}"'|p' "$gomod"
                echo ")"
        } >> "$dir/src/go.mod"
        ld="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1"
        ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
        (cd "$dir/src" && go build -trimpath -ldflags "$ld" -o "$dir/bin/" "$@")
}

build_kubernetes() {
        k8s_build "$1" "$KUBERNETES_VERSION" k8s.io/kubernetes/cmd/kube-apiserver \
                k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
                k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl
}

# a kubelet from before v1.26, which sends the plugin socket's path as
# :authority (tests/e2e/test_old_kubelet.py)
build_kubelet_old() {
        k8s_build "$1" "$KUBELET_OLD_VERSION" k8s.io/kubernetes/cmd/kubelet
}

build_etcd() {
        (cd "$1/src" && go build -trimpath -ldflags "-s -w" -o "$1/bin/etcd" go.etcd.io/etcd/server/v3 &&
                go build -trimpath -ldflags "-s -w" -o "$1/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3)
}

build_containerd() {
        v=$CONTAINERD_VERSION
        ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$v"
        (cd "$1/src" && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ld" -o "$1/bin/" \
                github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
                github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
}

build_helm() {
        (cd "$1/src" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
                -o "$1/bin/helm" helm.sh/helm/v3/cmd/helm)
}

build() {
        name=$1
        dir=$(peer_dir "$name")
        [ -f "$dir/.done" ] && return 0
        v=$(peer_version "$name")
        echo "peers: building $name $v into $dir" >&2
        rm -rf "$dir"
        case "$name" in
        kubernetes|kubelet-old) wrapper "$dir/src" k8s.io/kubernetes "$v" ;;
        etcd) wrapper "$dir/src" go.etcd.io/etcd/server/v3 "$v"
              echo "require go.etcd.io/etcd/etcdctl/v3 $v" >> "$dir/src/go.mod" ;;
        containerd) wrapper "$dir/src" github.com/containerd/containerd/v2 "$v" ;;
        helm) wrapper "$dir/src" helm.sh/helm/v3 "$v" ;;
        esac
        start=$(date +%s)
        "build_$(echo "$name" | tr - _)" "$dir"
        echo "peers: $name $v built in $(( $(date +%s) - start )) s" >&2
        rm -rf "$dir/src"
        touch "$dir/.done"
}

case "${1:-}" in
--dir) peer_dir "${2:?usage: peers.sh --dir NAME}"; exit 0 ;;
esac
names=${*:-kubernetes etcd containerd helm kubelet-old}
for n in $names; do build "$n"; done
for n in $names; do echo "$n=$(peer_dir "$n")"; done
