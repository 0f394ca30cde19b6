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
#   scripts/build-image.sh               build and commit the images and their index
#   scripts/build-image.sh --rootfs DIR  only lay the build host's image files out
#                                        in DIR (the Containerfile's build stage)
#
# One image per architecture in ARCHES, IMAGE:VERSION-<arch>, and an OCI image
# index (manifest list) IMAGE:VERSION-index naming them as linux/<arch>; push
# it with `buildah manifest push --all IMAGE:VERSION-index docker://...`.  The
# build host's image is also IMAGE:VERSION and IMAGE:latest, as before.  An
# arch other than the host's is cross-built (`make ARCH=arm64`, Debian's
# cross toolchain and multiarch libraries: `scripts/deps.sh arm64`) and its
# libraries are listed by its own loader run under qemu-user.
#
# Environment:
#   BUILD           build directory (default: build); `make` runs there first
#   ARCHES          the images' architectures (default: "amd64 arm64"; the
#                   build host's is always among them)
#   BUILD_<ARCH>    build directory of a cross-built arch (default:
#                   $BUILD-<arch>, e.g. build-arm64)
#   IMAGE           image name (default: localhost/devlet)
#   OCI_ARCHIVE     also write the index and every image as one OCI layout
#                   archive (an OCI image index, oci-archive:) at this path
#   VERSION         tag (default: the Makefile's `git describe` version)
#   STORAGE_DRIVER  containers-storage driver for buildah, e.g. vfs when
#                   overlay mounts are refused (default: storage.conf's);
#                   podman must then be given the same --storage-driver
#
# Idempotent: the image carries a digest of its files and of this script as
# the label io.devlet.build-digest; when IMAGE:VERSION-<arch> already has the
# same digest nothing is rebuilt.  Prints the build host's image reference and
# its size on stdout, and each arch's image and size and the index's
# platforms on stderr.
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

host_arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
ARCHES=${ARCHES:-amd64 arm64}
case " $ARCHES " in *" $host_arch "*) ;; *) ARCHES="$host_arch $ARCHES" ;; esac
[ -z "$rootfs_only" ] || ARCHES=$host_arch

tools="sha256sum"
[ -n "$rootfs_only" ] || tools="buildah $tools"
for tool in $tools; do
        command -v "$tool" >/dev/null 2>&1 || { echo "build-image: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done

ctr=""
stage_root=""
if [ -z "$rootfs_only" ]; then
        stage_root=$(mktemp -d)
        cleanup() {
                # shellcheck disable=SC2086
                [ -n "$ctr" ] && buildah $DRIVER_OPT rm "$ctr" >/dev/null 2>&1
                rm -rf "$stage_root"
        }
        trap cleanup EXIT INT TERM
fi

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

# ldd for the arch being staged: the host's, or the target's own loader
# (its PT_INTERP, from the multiarch libc6:<arch>) under qemu-user, whose
# --list prints what ldd prints
arch_ldd() {
        if [ "$arch" = "$host_arch" ]; then
                ldd "$1"
        else
                $qemu -L / "$interp" --list "$1"
        fi
}

# The path of library $1 in $libc_dir or its /usr twin, which Debian's
# package $2 installs; fails (and with set -e the build, as it is called
# in an assignment) without it.
beside_libc() {
        for dir in "$libc_dir" "/usr$libc_dir"; do
                if [ -e "$dir/$1" ]; then echo "$dir/$1"; return 0; fi
        done
        echo "build-image: $1 not found beside $libc_dir/libc (scripts/deps.sh installs $2)" >&2
        exit 1
}

# Builds ARCH's devlet and lays the image's files out in $stage.
stage_arch() {
        if [ "$arch" = "$host_arch" ]; then
                build=$BUILD
                make_arch=""
                strip=strip
                for tool in ldd strip; do
                        command -v "$tool" >/dev/null 2>&1 || { echo "build-image: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
                done
        else
                case "$arch" in
                arm64) triplet=aarch64-linux-gnu; qemu=qemu-aarch64-static; interp=/lib/ld-linux-aarch64.so.1 ;;
                *) echo "build-image: cannot build for $arch (arm64 is the one cross-built arch)" >&2; exit 1 ;;
                esac
                build=$(eval echo "\${BUILD_$(echo "$arch" | tr '[:lower:]' '[:upper:]'):-$BUILD-$arch}")
                make_arch="ARCH=$arch"
                strip=$triplet-strip
                for tool in "$triplet-gcc" "$strip" "$qemu"; do
                        command -v "$tool" >/dev/null 2>&1 || { echo "build-image: $tool not found (scripts/deps.sh arm64 installs it)" >&2; exit 1; }
                done
                [ -e "$interp" ] || { echo "build-image: $interp not found (scripts/deps.sh arm64 installs libc6:$arch)" >&2; exit 1; }
        fi
        # shellcheck disable=SC2086
        make -s -j2 $make_arch BUILD="$build" $make_version "$build/devlet" >&2
        bin="$build/devlet"
        mkdir -p "$stage"

        libs=$(arch_ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
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
        ssl=$(beside_libc libssl.so.3 libssl-dev)
        stage_lib "$ssl"
        for lib in $(arch_ldd "$ssl" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
                stage_lib "$lib"
        done
        # libcrypt (libxcrypt), which basic authentication on the metrics port
        # dlopens when the web configuration has users (src/metrics/web-auth.c)
        crypt=$(beside_libc libcrypt.so.1 libcrypt-dev)
        stage_lib "$crypt"
        mkdir -p "$stage/usr/bin"
        "$strip" --strip-unneeded -o "$stage/usr/bin/devlet" "$bin"
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
}

if [ -n "$rootfs_only" ]; then
        arch=$host_arch
        stage_arch
        exit 0
fi


# Commits $stage as IMAGE:VERSION-<arch> unless that image already has its
# digest.
commit_arch() {
        digest=$( (cd "$stage" && find . \( -type f -o -type l \) | LC_ALL=C sort | while read -r f; do
                if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; else sha256sum "$f"; fi
        done; sha256sum "$root/scripts/build-image.sh" | cut -d' ' -f1; echo "$VERSION $arch") | sha256sum | cut -d' ' -f1)

        ref="$IMAGE:$VERSION-$arch"
        # shellcheck disable=SC2086
        have=$(buildah $DRIVER_OPT inspect --type image --format '{{index .OCIv1.Config.Labels "io.devlet.build-digest"}}' \
                "$ref" 2>/dev/null || true)
        [ "$have" != "$digest" ] || return 0
        # shellcheck disable=SC2086
        ctr=$(buildah $DRIVER_OPT from --quiet --arch "$arch" --os linux scratch)
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT copy --quiet "$ctr" "$stage" / >/dev/null
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT config \
                --arch "$arch" --os linux \
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
        buildah $DRIVER_OPT commit --quiet --rm "$ctr" "$ref" >/dev/null
        ctr=""
}

index="$IMAGE:$VERSION-index"
# shellcheck disable=SC2086
buildah $DRIVER_OPT manifest rm "$index" >/dev/null 2>&1 || true
# shellcheck disable=SC2086
buildah $DRIVER_OPT manifest create "$index" >/dev/null
for arch in $ARCHES; do
        stage="$stage_root/$arch"
        stage_arch
        commit_arch
        # shellcheck disable=SC2086
        size=$(buildah $DRIVER_OPT images --noheading --format '{{.Size}}' "$IMAGE:$VERSION-$arch" | head -n 1)
        echo "build-image: linux/$arch $IMAGE:$VERSION-$arch $size" >&2
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT manifest add --arch "$arch" --os linux "$index" "containers-storage:$IMAGE:$VERSION-$arch" >/dev/null
done
# shellcheck disable=SC2086
echo "build-image: index $index: $(buildah $DRIVER_OPT manifest inspect "$index" |
        sed -n 's/.*"\(architecture\|os\)": "\([^"]*\)".*/\2/p' | paste -sd' ' | sed 's/\([^ ]*\) \([^ ]*\) */\2\/\1 /g')" >&2
if [ -n "${OCI_ARCHIVE:-}" ]; then
        rm -f "$OCI_ARCHIVE"
        # shellcheck disable=SC2086
        buildah $DRIVER_OPT manifest push --quiet --all --format oci "$index" "oci-archive:$OCI_ARCHIVE:$IMAGE:$VERSION" >&2
        echo "build-image: OCI archive $OCI_ARCHIVE" >&2
fi
# shellcheck disable=SC2086
buildah $DRIVER_OPT tag "$IMAGE:$VERSION-$host_arch" "$IMAGE:$VERSION" "$IMAGE:latest"
# shellcheck disable=SC2086
size=$(buildah $DRIVER_OPT images --noheading --format '{{.Size}}' "$IMAGE:$VERSION" | head -n 1)
echo "$IMAGE:$VERSION $size"
