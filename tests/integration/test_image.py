"""The container image: built offline FROM scratch by scripts/build-image.sh
(the script is idempotent, so each run of this file calls it), then run with
podman the way that works in this sandbox and on CI (root, runc, cgroupfs,
no network)."""

import json
import os
import pathlib
import subprocess

import pytest

from devlet_harness import BUILD, ROOT, wait_until

# the containers-storage driver build-image.sh used, when not storage.conf's
STORAGE = [f"--storage-driver={os.environ['STORAGE_DRIVER']}"] if os.environ.get("STORAGE_DRIVER") else []
PODMAN = ["podman", *STORAGE]
PODMAN_RUN = PODMAN + [
    "--runtime", "runc", "--cgroup-manager=cgroupfs",
    "run", "--rm", "--pull=never", "--network=none",
    "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000",
]
GLIBC_FOR_NVML = {"libdl.so.2", "libpthread.so.0", "librt.so.1", "libm.so.6"}
# dlopened on first use (src/base/ossl.c: the API client, the metrics port's
# TLS; src/metrics/web-auth.c: basic authentication), so ldd cannot list them
OPENSSL = {"libssl.so.3", "libcrypto.so.3"}
LIBCRYPT = {"libcrypt.so.1"}


def build_image():
    """Runs build-image.sh; returns (image reference, image ID)."""
    res = subprocess.run(
        [str(ROOT / "scripts" / "build-image.sh")],
        env={**os.environ, "BUILD": str(BUILD)},
        capture_output=True, text=True, timeout=900,
    )
    assert res.returncode == 0, res.stderr
    ref = res.stdout.strip().splitlines()[-1].split()[0]
    return ref, inspect(ref)["Id"]


def inspect(ref):
    out = subprocess.run(PODMAN + ["image", "inspect", ref], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]


def run(ref, *args, podman_args=()):
    res = subprocess.run(PODMAN_RUN + list(podman_args) + [ref, *args],
                         capture_output=True, text=True, timeout=120)
    return res


@pytest.fixture(scope="module")
def image():
    return build_image()[0]


def test_build_is_idempotent(image):
    first = inspect(image)["Id"]
    ref, second = build_image()
    assert ref == image
    assert second == first
    assert inspect(ref.rsplit(":", 1)[0] + ":latest")["Id"] == first


def test_image_config(image):
    info = inspect(image)
    cfg = info["Config"]
    assert cfg["Entrypoint"] == ["/usr/bin/devlet"]
    assert cfg["Cmd"] == ["run"]
    assert cfg["User"] == "0:0"
    assert "9400/tcp" in cfg["ExposedPorts"]
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.title"] == "devlet"
    assert labels["org.opencontainers.image.version"] == image.rsplit(":", 1)[1]
    assert labels["org.opencontainers.image.base.name"] == "scratch"


def ldd_names(binary):
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
            names.add(pathlib.Path(parts[2]).name)
        elif parts and parts[0].startswith("/"):
            names.add(pathlib.Path(parts[0]).name)  # the dynamic loader
    return names


def test_image_holds_only_devlet_and_its_libraries(image):
    """No shell, no package manager: the binary, what ldd says it loads,
    glibc's libraries that a dlopened libnvidia-ml.so.1 needs, and OpenSSL."""
    mnt = subprocess.run(PODMAN + ["image", "mount", image], capture_output=True, text=True, check=True)
    root = pathlib.Path(mnt.stdout.strip())
    try:
        files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
        links = {p.relative_to(root).as_posix(): os.readlink(p) for p in root.rglob("*") if p.is_symlink()}
        csv_text = {f: (root / f).read_bytes() for f in files if f.startswith("etc/dcgm-exporter/")}
    finally:
        subprocess.run(PODMAN + ["image", "unmount", image], capture_output=True, check=True)
    assert "usr/bin/devlet" in files
    csvs = {"etc/dcgm-exporter/default-counters.csv", "etc/dcgm-exporter/dcp-metrics-included.csv"}
    assert csvs <= files  # dcgm-exporter's counters files, at its paths
    for csv in csvs:
        assert csv_text[csv] == (ROOT / "deploy/dcgm-exporter" / pathlib.PurePosixPath(csv).name).read_bytes()
    libs = {f for f in files if f != "usr/bin/devlet" and f not in csvs}
    assert {pathlib.PurePosixPath(f).name for f in libs} == \
        ldd_names(BUILD / "devlet") | GLIBC_FOR_NVML | OPENSSL | LIBCRYPT
    assert all(".so" in pathlib.PurePosixPath(f).name for f in libs)
    # the host's merged-/usr directory links (lib -> usr/lib), and the
    # vendors' command names, links to devlet
    names = {f"usr/bin/{n}": "devlet" for n in PERSONAS}
    names["root/k8s-device-plugin"] = "/usr/bin/devlet"
    assert {k: v for k, v in links.items() if k in names} == names
    assert all(target.startswith("usr/") for k, target in links.items() if k not in names), links
    for shell in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/apt-get", "usr/bin/dpkg"):
        assert shell not in files and shell not in links


def test_version_matches_the_binary(image):
    host = subprocess.run([str(BUILD / "devlet"), "version"], capture_output=True, text=True, check=True)
    res = run(image, "version")
    assert res.returncode == 0, res.stderr
    assert res.stdout == host.stdout
    assert res.stdout.startswith("devlet ")


HOSTDEV_CONFIG = """\
version: v1
hostDevices:
  domain: devlet.io
  devices:
  - name: imagetest
    groups:
    - count: 2
      paths:
      - path: /dev/devlet-imagetest
"""


@pytest.fixture
def config_dir(tmp_path):
    d = tmp_path / "config"
    d.mkdir()
    (d / "config.yaml").write_text(HOSTDEV_CONFIG)
    # readable by user 65534, which the list test runs as
    tmp_path.chmod(0o755)
    d.chmod(0o755)
    (d / "config.yaml").chmod(0o644)
    return d


def list_json(image, config_dir, *podman_args):
    res = run(image, "list", "--config-file", "/etc/devlet/config.yaml", "-o", "json",
              podman_args=["--user", "65534:65534", "-v", f"{config_dir}:/etc/devlet:ro",
                           *podman_args])
    assert res.returncode == 0, res.stderr
    (resource,) = json.loads(res.stdout)["resources"]
    assert resource["name"] == "devlet.io/imagetest" and resource["backend"] == "hostdev"
    return resource["devices"]


PERSONAS = ["nvidia-device-plugin", "gpu-feature-discovery", "dcgm-exporter", "config-manager",
            "mps-control-daemon", "k8s-device-plugin", "k8s-node-labeller", "amd-metrics-exporter"]


@pytest.mark.parametrize("command", PERSONAS + ["./k8s-device-plugin"])
def test_vendor_command_names(image, command):
    """The vendors' charts set `command:` to their tool's name (AMD's operator
    to ./k8s-device-plugin with workingDir /root): each is devlet under that
    name."""
    res = run(image, "--version", podman_args=["--entrypoint", command, "--workdir", "/root"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"{command.lstrip('./')} (devlet "), res.stdout


def test_list_sees_a_host_device_mapped_into_the_container(image, config_dir):
    """devlet list, as user 65534, on a config mounted from the host, finds the
    host's /dev/null that podman maps to /dev/devlet-imagetest: two IDs
    (count: 2), healthy, each handing out that device node."""
    devices = list_json(image, config_dir, "--device", "/dev/null:/dev/devlet-imagetest")
    assert [d["id"] for d in devices] == ["imagetest-0", "imagetest-1"]
    for d in devices:
        assert d["health"] == "Healthy"
        assert [(n["host_path"], n["container_path"]) for n in d["devices"]] == \
            [("/dev/devlet-imagetest", "/dev/devlet-imagetest")]

    res = run(image, "list", "--config-file", "/etc/devlet/config.yaml", "-o", "table",
              podman_args=["-v", f"{config_dir}:/etc/devlet:ro", "--device", "/dev/null:/dev/devlet-imagetest"])
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("devlet.io/imagetest", "imagetest-0", "Healthy"),
                                                  ("devlet.io/imagetest", "imagetest-1", "Healthy")]


def test_list_without_the_device_reports_it_unhealthy(image, config_dir):
    """The same config in a container that lacks the device: devlet looks
    inside the container, where the path is missing."""
    devices = list_json(image, config_dir)
    assert [d["health"] for d in devices] == ["Unhealthy", "Unhealthy"]


def test_run_serves_the_kubelet_api_as_root_without_capabilities(image, config_dir, plugin_dir):
    """`devlet run` as the DaemonSet runs it: uid 0, every capability dropped,
    no privilege escalation, read-only root, the config directory mounted
    read-only and the device-plugins directory from the host.  The host's
    devlet probe, acting as the kubelet, reaches the socket it creates; a
    SIGTERM removes the socket and exits 0."""
    sock = plugin_dir / "devlet-devlet.io_imagetest.sock"
    cmd = PODMAN_RUN + [
        "-d", "--user", "0:0", "--cap-drop=all", "--security-opt", "no-new-privileges", "--read-only",
        "-v", f"{config_dir}:/etc/devlet:ro", "-v", f"{plugin_dir}:/var/lib/kubelet/device-plugins",
        "--device", "/dev/null:/dev/devlet-imagetest",
        image, "run", "--config-file", "/etc/devlet/config.yaml",
    ]
    cmd.remove("--rm")  # keep the container to read its exit code
    cid = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    try:
        wait_until(sock.exists, 30.0, "the plugin socket")
        probe = subprocess.run([str(BUILD / "devlet"), "probe", "--socket", str(sock), "--allocate", "imagetest-1"],
                               capture_output=True, text=True, timeout=60)
        assert probe.returncode == 0, probe.stderr
        out = json.loads(probe.stdout)
        assert [(d["id"], d["health"]) for d in out["devices"]] == [("imagetest-0", "Healthy"),
                                                                   ("imagetest-1", "Healthy")]
        assert out["allocate"]["devices"] == [{"container_path": "/dev/devlet-imagetest",
                                               "host_path": "/dev/devlet-imagetest", "permissions": "rw"}]
        subprocess.run(PODMAN + ["stop", "-t", "10", cid], capture_output=True, check=True)
        state = subprocess.run(PODMAN + ["inspect", cid, "--format", "{{.State.ExitCode}}"],
                               capture_output=True, text=True, check=True).stdout.strip()
        assert state == "0"
        assert not sock.exists()
    finally:
        subprocess.run(PODMAN + ["rm", "-f", cid], capture_output=True)


def configmap_volume(d, content, generation):
    """Lays content out as the kubelet lays out a ConfigMap volume: the data in
    a timestamped directory, ..data pointing at it, config.yaml pointing
    through ..data; a later generation swaps ..data with one rename."""
    data = d / f"..gen_{generation}"
    data.mkdir(mode=0o755)
    (data / "config.yaml").write_text(content)
    (data / "config.yaml").chmod(0o644)
    tmp = d / "..data_tmp"
    tmp.symlink_to(data.name)
    tmp.rename(d / "..data")
    if not (d / "config.yaml").is_symlink():
        (d / "config.yaml").symlink_to("..data/config.yaml")


def test_run_reloads_a_configmap_volume_update(image, tmp_path, plugin_dir):
    """The DaemonSet mounts the ConfigMap as a directory (no subPath): an
    update swaps ..data, and devlet in the container serves the new config
    without a restart."""
    config = tmp_path / "config"
    config.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    configmap_volume(config, HOSTDEV_CONFIG, 1)
    sock = plugin_dir / "devlet-devlet.io_imagetest.sock"
    cmd = PODMAN_RUN + [
        "-d", "--user", "0:0", "--cap-drop=all", "--read-only",
        "-v", f"{config}:/etc/devlet:ro", "-v", f"{plugin_dir}:/var/lib/kubelet/device-plugins",
        "--device", "/dev/null:/dev/devlet-imagetest",
        image, "run", "--config-file", "/etc/devlet/config.yaml",
    ]
    cid = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    def device_ids():
        probe = subprocess.run([str(BUILD / "devlet"), "probe", "--socket", str(sock)],
                               capture_output=True, text=True, timeout=60)
        return [d["id"] for d in json.loads(probe.stdout)["devices"]] if probe.returncode == 0 else None

    try:
        wait_until(lambda: device_ids() == ["imagetest-0", "imagetest-1"], 30.0, "two devices")
        configmap_volume(config, HOSTDEV_CONFIG.replace("count: 2", "count: 3"), 2)
        wait_until(lambda: device_ids() == ["imagetest-0", "imagetest-1", "imagetest-2"], 30.0,
                   "three devices")
    finally:
        subprocess.run(PODMAN + ["rm", "-f", "-t", "10", cid], capture_output=True)
