"""CDI specs from `devlet cdi generate`, consumed by a real runtime.

podman (with runc) reads the generated spec from /etc/cdi or /var/run/cdi
(the two directories podman 4.3 reads) and runs a busybox-static container
with `--device <kind>=<name>`; the container sees the device node with the
right major:minor and the bind-mounted files.  Host-device kinds carry a
random suffix so parallel runs do not collide; the NVIDIA kind is fixed
(k8s.device-plugin.nvidia.com/gpu, what Allocate names), so runs on one host
take turns through a lock.  Every spec file is removed afterwards.
"""

import fcntl
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid

import pytest
import yaml

from devlet_harness import DEVLET_BIN as DEVLET, MOCK_NVML_LIB as MOCK_NVML, ROOT
from devlet_harness import devlet_cli as devlet
from host_dirs import host_dirs

PODMAN_RUN = [
    "podman", "--runtime", "runc", "--cgroup-manager=cgroupfs",
    "run", "--rm", "--network=none",
    "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000",
]
BUSYBOX = "/bin/busybox"
PROFILES = ROOT / "tests" / "mock-nvml" / "profiles"
NVIDIA_KIND = "k8s.device-plugin.nvidia.com/gpu"
CDI_DIRS = [pathlib.Path("/etc/cdi"), pathlib.Path("/var/run/cdi")]


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="devlet-cdi-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rootfs(tmp):
    """A busybox-static root filesystem for `podman run --rootfs`."""
    root = tmp / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in ("sh", "stat", "cat", "ls", "od", "head"):
        (root / "bin" / applet).symlink_to("busybox")
    return root


@pytest.fixture
def spec_files():
    """Spec files the test writes into the runtime's directories, removed
    afterwards whatever happens; the directories exist meanwhile (a fresh
    machine has neither) and go again if the test created them."""
    made = []
    with host_dirs(*CDI_DIRS):
        yield made
        for p in made:
            pathlib.Path(p).unlink(missing_ok=True)


def unique_name():
    return "cditest" + uuid.uuid4().hex[:10]


def podman_run(rootfs, device, script):
    res = subprocess.run(PODMAN_RUN + ["--device", device, "--rootfs", str(rootfs),
                                       "/bin/sh", "-c", script],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"podman failed ({res.returncode}): {res.stderr}"
    return res.stdout


def write_config(tmp, name, groups):
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump({"version": "v1", "hostDevices": {
        "devices": [{"name": name, "groups": groups}]}}))
    return cfg


def test_hostdev_spec_in_podman(tmp, rootfs, spec_files):
    name = unique_name()
    node = tmp / "zero0"
    os.mknod(node, 0o666 | 0o020000, os.makedev(1, 5))  # like /dev/zero
    data = tmp / "data.txt"
    data.write_text("hello from the host\n")
    cfg = write_config(tmp, name, [{"count": 2, "paths": [
        {"path": str(node), "mountPath": "/dev/thing0"},
        {"path": str(data), "mountPath": "/etc/thing.txt", "type": "Mount", "readOnly": True},
    ]}])

    out = pathlib.Path("/etc/cdi") / f"devlet.io-{name}.yaml"
    spec_files.append(out)
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev", "--output", out)
    assert res.returncode == 0, res.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o644"

    spec = yaml.safe_load(out.read_text())
    assert spec["kind"] == f"devlet.io/{name}"
    assert spec["cdiVersion"] == "0.5.0"  # host paths differ from container paths
    assert [d["name"] for d in spec["devices"]] == [f"{name}-0", f"{name}-1"]
    node_spec = spec["devices"][1]["containerEdits"]["deviceNodes"][0]
    assert node_spec == {"path": "/dev/thing0", "hostPath": str(node), "type": "c",
                         "major": 1, "minor": 5, "permissions": "rw"}

    got = podman_run(rootfs, f"devlet.io/{name}={name}-1",
                     "stat -c '%t:%T %F' /dev/thing0; head -c 4 /dev/thing0 | od -An -tx1; "
                     "cat /etc/thing.txt; (echo x > /etc/thing.txt) 2>/dev/null || echo read-only")
    lines = got.splitlines()
    assert lines[0] == "1:5 character special file"
    assert lines[1].split() == ["00", "00", "00", "00"]
    assert lines[2] == "hello from the host"
    assert lines[3] == "read-only"


def test_digit_names_and_json_in_var_run(tmp, rootfs, spec_files):
    """Glob matches named 0 and 1 become CDI devices "0" and "1" (cdiVersion
    0.5.0, names quoted in YAML); the JSON form in /var/run/cdi works too."""
    name = unique_name()
    gpus = tmp / "gpus"
    gpus.mkdir()
    for i in (0, 1):
        os.mknod(gpus / str(i), 0o666 | 0o020000, os.makedev(1, 3 + i * 2))  # null, zero
    cfg = write_config(tmp, name, [{"paths": [{"path": str(gpus / "*")}]}])

    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev")
    assert res.returncode == 0, res.stderr
    assert '- name: "0"' in res.stdout
    spec = yaml.safe_load(res.stdout)
    assert [d["name"] for d in spec["devices"]] == ["0", "1"]

    outdir = pathlib.Path("/var/run/cdi")
    spec_files.append(outdir / f"devlet.io-{name}.json")
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev",
                 "--format", "json", "--output-dir", outdir)
    assert res.returncode == 0, res.stderr
    spec = json.loads((outdir / f"devlet.io-{name}.json").read_text())
    assert spec["cdiVersion"] == "0.5.0"
    assert spec["devices"][1]["containerEdits"]["deviceNodes"][0]["path"] == str(gpus / "1")

    got = podman_run(rootfs, f"devlet.io/{name}=1", f"stat -c '%t:%T' {gpus}/1; ls {gpus}")
    assert got.split() == ["1:5", "1"]


def test_generate_errors(tmp):
    name = unique_name()
    cfg = write_config(tmp, name, [{"paths": [{"path": "/dev/null"}]}])
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev",
                 "--format", "toml")
    assert res.returncode == 2 and "unknown format" in res.stderr
    res = devlet("cdi", "generate", "--config-file", cfg, "--vendor", "bad/vendor")
    assert res.returncode == 2 and "not a valid CDI kind" in res.stderr
    res = devlet("cdi", "frobnicate")
    assert res.returncode == 2
    res = devlet("cdi", "generate", "--config-file", tmp / "missing.yaml")
    assert res.returncode != 0 and "missing.yaml" in res.stderr
    res = devlet("cdi", "generate", "--help")
    assert res.returncode == 0 and "--output" in res.stdout

    # a resource whose name CDI refuses as a class: a warning, no spec
    cfg = write_config(tmp, "3d-" + name, [{"paths": [{"path": "/dev/null"}]}])
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev")
    assert res.returncode == 1
    assert "not a valid CDI kind" in res.stderr and res.stdout == ""


# ---- NVIDIA ----

@pytest.fixture
def nvidia_kind_lock():
    """One test at a time per host may hold a spec of the fixed NVIDIA kind;
    a spec of that kind that is not ours (a real plugin's) is not touched."""
    fd = os.open("/run/devlet-test-cdi-nvidia.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        for d in CDI_DIRS:
            for f in (d.iterdir() if d.is_dir() else []):
                if f.suffix in (".yaml", ".json") and NVIDIA_KIND in f.read_text(errors="replace"):
                    pytest.fail(f"{f} already holds CDI kind {NVIDIA_KIND}; this test will not "
                                "shadow or replace it")
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def fake_gpu_node(tmp, exist_ok=False):
    """A dev root with the nodes of GPUs 0 and 1 (major 195, as the NVIDIA
    driver's) and a driver root with a fake libcuda and nvidia-smi."""
    dev = tmp / "devroot" / "dev"
    dev.mkdir(parents=True, exist_ok=exist_ok)
    for name, minor in (("nvidia0", 0), ("nvidia1", 1), ("nvidiactl", 255)):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
    os.mknod(dev / "nvidia-uvm", 0o666 | stat.S_IFCHR, os.makedev(237, 0))
    drv = tmp / "driver"
    lib = drv / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.550.54.15").write_text("fake libcuda 550.54.15\n")
    (lib / "libcuda.so.1").symlink_to("libcuda.so.550.54.15")
    (lib / "libnvidia-ml.so.550.54.15").write_text("fake libnvidia-ml 550.54.15\n")
    (lib / "libnvidia-ml.so.1").symlink_to("libnvidia-ml.so.550.54.15")
    (lib / "libnvidia-ml.so.535.104.05").write_text("another driver's\n")
    bindir = drv / "usr" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "nvidia-smi").write_text("#!/bin/sh\necho fake nvidia-smi\n")
    (bindir / "nvidia-smi").chmod(0o755)
    return tmp / "devroot", drv


def nvidia_generate(tmp, *args, profile="h100-8x-nvswitch.yaml"):
    dev_root, drv = fake_gpu_node(tmp)
    env = {**os.environ, "DEVLET_NVML_LIBRARY": str(MOCK_NVML),
           "MOCK_NVML_CONFIG": str(PROFILES / profile)}
    return devlet("cdi", "generate", "--backends", "nvidia", "--dev-root", dev_root,
                  "--nvidia-driver-root", drv, "--nvidia-cdi-hook-path", tmp / "no-hook",
                  *args, env=env), drv


def test_nvidia_spec_in_podman(tmp, rootfs, spec_files, nvidia_kind_lock):
    out = pathlib.Path("/var/run/cdi") / f"devlet-test-{uuid.uuid4().hex[:10]}.yaml"
    spec_files.append(out)
    res, drv = nvidia_generate(tmp, "--vendor", "k8s.device-plugin.nvidia.com", "--class", "gpu",
                               "--output", out)
    assert res.returncode == 0, res.stderr
    # GPUs 2-7 of the profile have no node under the dev root: left out, said
    assert "nvidia7 missing" in res.stderr
    spec = yaml.safe_load(out.read_text())
    assert spec["kind"] == NVIDIA_KIND
    uuids = [g["uuid"] for g in yaml.safe_load((PROFILES / "h100-8x-nvswitch.yaml").read_text())["devices"]]
    names = [d["name"] for d in spec["devices"]]
    assert names == ["0", uuids[0], "1", uuids[1], "all"]
    lib = "/usr/lib/x86_64-linux-gnu"
    mounts = {m["containerPath"]: m for m in spec["containerEdits"]["mounts"]}
    assert set(mounts) == {f"{lib}/libcuda.so.550.54.15", f"{lib}/libcuda.so.1",
                           f"{lib}/libnvidia-ml.so.550.54.15", f"{lib}/libnvidia-ml.so.1",
                           "/usr/bin/nvidia-smi"}
    assert mounts["/usr/bin/nvidia-smi"]["hostPath"] == str(drv / "usr" / "bin" / "nvidia-smi")
    assert mounts["/usr/bin/nvidia-smi"]["options"] == ["ro", "nosuid", "nodev", "bind"]
    assert "hooks" not in spec["containerEdits"]  # no hook program: no hook

    got = podman_run(rootfs, f"{NVIDIA_KIND}=0",
                     "stat -c '%n %t:%T' /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm; "
                     "ls /dev/nvidia1 2>/dev/null || echo no-nvidia1; "
                     f"cat {lib}/libcuda.so.1 {lib}/libnvidia-ml.so.1; /usr/bin/nvidia-smi; "
                     f"(echo x > {lib}/libcuda.so.1) 2>/dev/null || echo read-only")
    assert got.splitlines() == [
        "/dev/nvidia0 c3:0", "/dev/nvidiactl c3:ff", "/dev/nvidia-uvm ed:0", "no-nvidia1",
        "fake libcuda 550.54.15", "fake libnvidia-ml 550.54.15", "fake nvidia-smi", "read-only"]

    # by UUID, and all of them
    got = podman_run(rootfs, f"{NVIDIA_KIND}={uuids[0]}", "stat -c '%t:%T' /dev/nvidia0")
    assert got.split() == ["c3:0"]
    got = podman_run(rootfs, f"{NVIDIA_KIND}=all", "stat -c '%n %t:%T' /dev/nvidia0 /dev/nvidia1")
    assert got.splitlines() == ["/dev/nvidia0 c3:0", "/dev/nvidia1 c3:1"]


def test_nvidia_spec_kinds_and_hook(tmp):
    hook = tmp / "bin" / "nvidia-cdi-hook"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    res, _ = nvidia_generate(tmp, "--format", "json", "--nvidia-cdi-hook-path", hook,
                             profile="mig-one-plain-one.yaml")
    assert res.returncode == 0, res.stderr
    spec = json.loads(res.stdout)
    assert spec["kind"] == "nvidia.com/gpu"  # nvidia-ctk's default
    assert spec["cdiVersion"] == "0.5.0"
    gpus = yaml.safe_load((PROFILES / "mig-one-plain-one.yaml").read_text())["devices"]
    migs = [m["uuid"] for m in gpus[0]["mig"]]
    assert [d["name"] for d in spec["devices"]] == [
        "0", gpus[0]["uuid"], "0:0", migs[0], "0:1", migs[1], "0:2", migs[2], "1", gpus[1]["uuid"],
        "all"]
    hooks = spec["containerEdits"]["hooks"]
    assert hooks == [{"hookName": "createContainer", "path": str(hook),
                      "args": ["nvidia-cdi-hook", "update-ldcache", "--folder",
                               "/usr/lib/x86_64-linux-gnu"]}]


def test_devlet_run_writes_the_nvidia_spec(tmp):
    """devlet run, with a CDI device-list strategy, writes the NVIDIA spec of
    the kind its Allocate answers name, and the GPU labels beside it."""
    dev_root, drv = fake_gpu_node(tmp)
    cdi, labels = tmp / "cdi", tmp / "gfd"
    env = {**os.environ, "DEVLET_NVML_LIBRARY": str(MOCK_NVML),
           "MOCK_NVML_CONFIG": str(PROFILES / "h100-8x-nvswitch.yaml")}
    proc = subprocess.Popen([str(DEVLET), "run", "--backends", "nvidia",
                             "--plugin-directory", str(tmp / "plugins"),
                             "--dev-root", str(dev_root), "--nvidia-driver-root", str(drv),
                             "--device-list-strategy", "cdi-cri", "--cdi-spec-dir", str(cdi),
                             "-o", str(labels), "--no-timestamp"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    spec_file = cdi / "k8s.device-plugin.nvidia.com-gpu.yaml"
    try:
        deadline = time.monotonic() + 10
        while not (spec_file.exists() and labels.exists()):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no spec or labels written"
            time.sleep(0.02)
        spec = yaml.safe_load(spec_file.read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert spec["kind"] == NVIDIA_KIND
    uuids = [g["uuid"] for g in yaml.safe_load((PROFILES / "h100-8x-nvswitch.yaml").read_text())["devices"]]
    assert [d["name"] for d in spec["devices"]] == ["0", uuids[0], "1", uuids[1], "all"]
    assert oct(spec_file.stat().st_mode & 0o777) == "0o644"
    assert "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n" in labels.read_text()
    assert spec_file.exists()  # left for containers that restart


def test_nvidia_mig_device_in_podman(tmp, rootfs, spec_files, nvidia_kind_lock):
    """A MIG device "<gpu>:<mig>" gives the container its GPU's node and the
    two access capabilities nvidia-caps/mig-minors names."""
    proc = tmp / "proc"
    (proc / "driver" / "nvidia-caps").mkdir(parents=True)
    (proc / "driver" / "nvidia-caps" / "mig-minors").write_text(
        "config 1\nmonitor 2\ngpu0/gi1/access 21\ngpu0/gi1/ci0/access 22\n")
    caps = tmp / "devroot" / "dev" / "nvidia-caps"
    caps.mkdir(parents=True)
    for minor in (21, 22):
        os.mknod(caps / f"nvidia-cap{minor}", 0o666 | stat.S_IFCHR, os.makedev(238, minor))
    out = pathlib.Path("/var/run/cdi") / f"devlet-test-{uuid.uuid4().hex[:10]}.yaml"
    spec_files.append(out)
    env = {**os.environ, "DEVLET_PROC_ROOT": str(proc)}
    dev_root, drv = fake_gpu_node(tmp, exist_ok=True)
    res = devlet("cdi", "generate", "--backends", "nvidia", "--dev-root", dev_root,
                 "--nvidia-driver-root", drv, "--nvidia-cdi-hook-path", tmp / "no-hook",
                 "--vendor", "k8s.device-plugin.nvidia.com", "--class", "gpu", "--output", out,
                 env={**env, "DEVLET_NVML_LIBRARY": str(MOCK_NVML),
                      "MOCK_NVML_CONFIG": str(PROFILES / "mig-one-plain-one.yaml")})
    assert res.returncode == 0, res.stderr
    got = podman_run(rootfs, f"{NVIDIA_KIND}=0:0",
                     "stat -c '%n %t:%T' /dev/nvidia0 /dev/nvidia-caps/*; "
                     "ls /dev/nvidia1 2>/dev/null || echo no-nvidia1")
    assert got.splitlines() == ["/dev/nvidia0 c3:0", "/dev/nvidia-caps/nvidia-cap21 ee:15",
                                "/dev/nvidia-caps/nvidia-cap22 ee:16", "no-nvidia1"]
