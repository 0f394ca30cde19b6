#!/bin/sh
# Builds devlet's container image offline with buildah, FROM scratch: no base
# image is pulled, so it works on a machine that reaches no registry.  The
# image holds build/devlet (stripped), the shared libraries `ldd` reports for
# it, the dynamic loader, glibc's libdl/libpthread/librt/libm, which NVML
# (dlopened from the host's driver at run time) links against, and the build
# host's libssl.so.3 and libcrypto.so.3, which the API client and the metrics
# endpoint's TLS dlopen on first use (src/base/ossl.c), and libcrypt.so.1,
# which basic authentication dlopens (src/metrics/web-auth.c), so ldd does
# not list them, and devlet's copies of dcgm-exporter's counters files in
# /etc/dcgm-exporter (deploy/dcgm-exporter/) for `--collectors`/`-f`.  No
# shell, no package manager.  The Containerfile at the repository root builds the same
# layout with a registry-connected builder.
#
#   scripts/build-image.sh               build and commit the image
#   scripts/build-image.sh --rootfs DIR  only lay the image's files out in DIR
#                                        (the Containerfile's build stage)
#
# Environment:
#   BUILD           build directory (default: build); `make` runs there first
#   IMAGE           image name (default: localhost/devlet)
#   VERSION         tag (default: the Makefile's `git describe` version)
#   STORAGE_DRIVER  containers-storage driver for buildah, e.g. vfs when
#                   overlay mounts are refused (default: storage.conf's);
#                   podman must then be given the same --storage-driver
#
# Idempotent: the image carries a digest of its files and of this script as
# the label io.devlet.build-digest; when IMAGE:VERSION already has the same
# digest nothing is rebuilt.  Prints the image reference and its size.
set -eu

rootfs_only=""
case "${1:-}" in
--rootfs)
        rootfs_only=1
        stage=${2:?usage: build-image.sh --rootfs DIR}
        case "$stage" in /*) ;; *) stage="$PWD/$stage" ;; esac
        ;;
"") stage="" ;;
*) echo "usage: build-image.sh [--rootfs DIR]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
root=$(pwd)
BUILD=${BUILD:-build}
IMAGE=${IMAGE:-localhost/devlet}
# an explicit VERSION also goes to make, for trees without .git
make_version=${VERSION:+VERSION=$VERSION}
VERSION=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo 0.1.0)}
DRIVER_OPT=${STORAGE_DRIVER:+--storage-driver=$STORAGE_DRIVER}

tools="ldd strip sha256sum"
[ -n "$rootfs_only" ] || tools="buildah $tools"
for tool in $tools; do
        command -v "$tool" >/dev/null 2>&1 || { echo "build-image: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done

# shellcheck disable=SC2086
make -s -j2 BUILD="$BUILD" $make_version "$BUILD/devlet" >&2
bin="$BUILD/devlet"

ctr=""
if [ -z "$rootfs_only" ]; then
        stage=$(mktemp -d)
        cleanup() {
                # shellcheck disable=SC2086
                [ -n "$ctr" ] && buildah $DRIVER_OPT rm "$ctr" >/dev/null 2>&1
                rm -rf "$stage"
        }
        trap cleanup EXIT INT TERM
fi
mkdir -p "$stage"

# Copies the file a library path names to the same path in the image, under
# the host's real directory (/lib/x86_64-linux-gnu/libc.so.6 lands in
# /usr/lib/x86_64-linux-gnu/ on a merged-/usr host) and keeps the host's
# top-level directory symlinks (/lib -> usr/lib), so every path the loader and
# the binary's PT_INTERP use resolves as it does on the build host.
stage_lib() {
        dir=$(cd "$(dirname "$1")" && pwd -P)
        mkdir -p "$stage$dir"
        cp -L "$1" "$stage$dir/$(basename "$1")"
        top=/$(echo "$1" | cut -d/ -f2)
        if [ -L "$top" ] && [ ! -e "$stage$top" ]; then
                ln -s "$(readlink "$top")" "$stage$top"
        fi
}

libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
[ -n "$libs" ] || { echo "build-image: ldd found no libraries in $bin (static build?)" >&2; exit 1; }
libc_dir=$(dirname "$(echo "$libs" | grep '/libc\.so\.' | head -n 1)")
for lib in $libs; do
        stage_lib "$lib"
done
for extra in libdl.so.2 libpthread.so.0 librt.so.1 libm.so.6; do
        if [ -e "$libc_dir/$extra" ]; then stage_lib "$libc_dir/$extra"; fi
done
# OpenSSL, with what it links (libcrypto), where the loader's default path
# finds it (the image has no ld.so.cache)
ssl=""
for dir in "$libc_dir" "/usr$libc_dir"; do
        if [ -e "$dir/libssl.so.3" ]; then ssl="$dir/libssl.so.3"; break; fi
done
[ -n "$ssl" ] || { echo "build-image: libssl.so.3 not found beside $libc_dir/libc (scripts/deps.sh installs libssl-dev)" >&2; exit 1; }
stage_lib "$ssl"
for lib in $(ldd "$ssl" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
        stage_lib "$lib"
done
# libcrypt (libxcrypt), which basic authentication on the metrics port
# dlopens when the web configuration has users (src/metrics/web-auth.c)
crypt=""
for dir in "$libc_dir" "/usr$libc_dir"; do
        if [ -e "$dir/libcrypt.so.1" ]; then crypt="$dir/libcrypt.so.1"; break; fi
done
[ -n "$crypt" ] || { echo "build-image: libcrypt.so.1 not found beside $libc_dir/libc (scripts/deps.sh installs libcrypt-dev)" >&2; exit 1; }
stage_lib "$crypt"
mkdir -p "$stage/usr/bin"
strip --strip-unneeded -o "$stage/usr/bin/devlet" "$bin"
chmod 0755 "$stage/usr/bin/devlet"
# the vendors' command names (src/persona.c): their charts run these
for name in nvidia-device-plugin gpu-feature-discovery dcgm-exporter config-manager \
        mps-control-daemon k8s-device-plugin k8s-node-labeller amd-metrics-exporter; do
        ln -sf devlet "$stage/usr/bin/$name"
done
# AMD's operator runs ./k8s-device-plugin with workingDir: /root
mkdir -p "$stage/root"
ln -sf /usr/bin/devlet "$stage/root/k8s-device-plugin"
# dcgm-exporter's counters files where its chart and operators look (-f /etc/dcgm-exporter/...)
mkdir -p "$stage/etc/dcgm-exporter"
for csv in default-counters.csv dcp-metrics-included.csv; do
        install -m 0644 "$root/deploy/dcgm-exporter/$csv" "$stage/etc/dcgm-exporter/$csv"
done
[ -z "$rootfs_only" ] || exit 0

digest=$( (cd "$stage" && find . \( -type f -o -type l \) | LC_ALL=C sort | while read -r f; do
        if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; else sha256sum "$f"; fi
done; sha256sum "$root/scripts/build-image.sh" | cut -d' ' -f1; echo "$VERSION") | sha256sum | cut -d' ' -f1)

# shellcheck disable=SC2086
have=$(buildah $DRIVER_OPT inspect --type image --format '{{index .OCIv1.Config.Labels "io.devlet.build-digest"}}' \
        "$IMAGE:$VERSION" 2>/dev/null || true)
if [ "$have" != "$digest" ]; then
        # shellcheck disable=SC2086
        ctr=$(buildah $DRIVER_OPT from --quiet scratch)
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT copy --quiet "$ctr" "$stage" / >/dev/null
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT config \
                --entrypoint '["/usr/bin/devlet"]' --cmd run \
                --user 0:0 --workingdir / \
                --env PATH=/usr/bin \
                --port 9400/tcp \
                --label org.opencontainers.image.title=devlet \
                --label "org.opencontainers.image.description=Kubernetes device plugin, GPU feature discovery, GPU metrics and CDI specs in one small daemon" \
                --label "org.opencontainers.image.version=$VERSION" \
                --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
                --label org.opencontainers.image.base.name=scratch \
                --label "io.devlet.build-digest=$digest" \
                "$ctr"
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT commit --quiet --rm "$ctr" "$IMAGE:$VERSION" >/dev/null
        ctr=""
fi
# shellcheck disable=SC2086
buildah $DRIVER_OPT tag "$IMAGE:$VERSION" "$IMAGE:latest"
# shellcheck disable=SC2086
size=$(buildah $DRIVER_OPT images --noheading --format '{{.Size}}' "$IMAGE:$VERSION" | head -n 1)
echo "$IMAGE:$VERSION $size"
