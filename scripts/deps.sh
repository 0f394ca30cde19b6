#!/bin/sh
# Installs the Debian packages devlet's build and tests need, when run as root
# and they are missing; otherwise names them and fails.
#   scripts/deps.sh            everything (build + tests)
#   scripts/deps.sh build      only what `make` needs
#   scripts/deps.sh arm64      only what `make ARCH=arm64` and `make check-arm64`
#                              need: Debian's aarch64 cross compiler, the arm64
#                              -dev packages (multiarch: dpkg learns arm64 once)
#                              and qemu-user-static to run the results
set -eu

build_pkgs="gcc make pkg-config libuv1-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
libyaml-dev libjansson-dev libssl-dev libcrypt-dev"
test_pkgs="clang libclang-rt-14-dev libcmocka-dev protobuf-compiler python3 python3-grpcio
python3-protobuf python3-pytest python3-yaml buildah podman runc prometheus busybox-static
containernetworking-plugins openssl"
# the linux/arm64 build (cross, multiarch) and its tests under qemu-user;
# protoc-c runs on the build host, so protobuf-c-compiler stays amd64
arm64_pkgs="gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross
libasan8-arm64-cross libubsan1-arm64-cross libasan8:arm64 libubsan1:arm64 qemu-user-static
libuv1-dev:arm64 libnghttp2-dev:arm64 libprotobuf-c-dev:arm64 libyaml-dev:arm64
libjansson-dev:arm64 libssl-dev:arm64 libcrypt-dev:arm64 libcmocka-dev:arm64"
# kubectl (kustomize) and node/npm (manifest schema checks) may come from
# other packages that conflict with Debian's; Debian's only when none is on PATH.
command -v kubectl >/dev/null 2>&1 || test_pkgs="$test_pkgs kubernetes-client"
command -v node >/dev/null 2>&1 || test_pkgs="$test_pkgs nodejs"
command -v npm >/dev/null 2>&1 || test_pkgs="$test_pkgs npm"

case "${1:-all}" in
build) want="$build_pkgs" ;;
arm64) want="$arm64_pkgs" ;;
*) want="$build_pkgs $test_pkgs $arm64_pkgs" ;;
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
        case "$missing" in
        *:arm64*)
                dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
                ;;
        esac
        apt-get update -qq >&2
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing >&2
        exit 0
fi
echo "deps: missing Debian packages:$missing" >&2
echo "deps: install them with: sudo apt-get install$missing" >&2
exit 1
