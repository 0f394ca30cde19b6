#!/bin/sh
# Installs the Debian packages devlet's build and tests need, when run as root
# and they are missing; otherwise names them and fails.
#   scripts/deps.sh            everything (build + tests)
#   scripts/deps.sh build      only what `make` needs
set -eu

build_pkgs="gcc make pkg-config libuv1-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
libyaml-dev libjansson-dev libssl-dev libcrypt-dev"
test_pkgs="clang libclang-rt-14-dev libcmocka-dev protobuf-compiler python3 python3-grpcio
python3-protobuf python3-pytest python3-yaml buildah podman runc prometheus busybox-static
containernetworking-plugins openssl"
# kubectl (kustomize) and node/npm (manifest schema checks) may come from
# other packages that conflict with Debian's; Debian's only when none is on PATH.
command -v kubectl >/dev/null 2>&1 || test_pkgs="$test_pkgs kubernetes-client"
command -v node >/dev/null 2>&1 || test_pkgs="$test_pkgs nodejs"
command -v npm >/dev/null 2>&1 || test_pkgs="$test_pkgs npm"

case "${1:-all}" in
build) want="$build_pkgs" ;;
*) want="$build_pkgs $test_pkgs" ;;
esac

missing=""
for p in $want; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
                missing="$missing $p"
        fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "deps: installing$missing" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing >&2
        exit 0
fi
echo "deps: missing Debian packages:$missing" >&2
echo "deps: install them with: sudo apt-get install$missing" >&2
exit 1
