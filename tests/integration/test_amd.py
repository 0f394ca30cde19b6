"""devlet's AMD backend seen from a simulated kubelet, over fake amdgpu/KFD
sysfs trees generated from the profiles in tests/mock-amd (--sysfs-root,
--dev-root; real character devices under the dev root when we are root).

Covers AMD's resource naming (single, mixed, and single refusing a node with
mixed partition styles in AMD's words), AMD's device IDs and NUMA nodes in
ListAndWatch, Allocate (/dev/kfd, card, render node; CDI names with a CDI
strategy), XGMI-aware preferred allocation (the MI210 bridge pair, 16 of 64
CPX partitions kept on two GPUs), sharing by time-slicing, health (RAS
uncorrectable errors rising, a KFD node vanishing, recovery, a sysfs read
that stalls: the loop never waits for it), nodes without
amdgpu or without KFD, `devlet list` and the podman run of a container with
`--device amd.com/gpu=<id>` from the generated CDI spec."""

import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest
import yaml

from devlet_harness import hostdev_config, make_node, run_devlet, wait_until
from fuse_stall import StalledFile
from http_attack import get

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock-amd"))
import gen_sysfs  # noqa: E402

GPU = "amd.com/gpu"
FAST = ["--amd-health-interval", "50ms"]


class AmdNode:
    """A generated tree: sysfs under <root>/sys, device nodes under <root>/dev."""

    def __init__(self, root, profile):
        self.root = root
        self.sys = os.path.join(root, "sys")
        with open(ROOT / "tests" / "mock-amd" / "profiles" / f"{profile}.yaml") as f:
            self.profile = yaml.safe_load(f)
        self.m = gen_sysfs.generate(self.profile, self.sys, root, mknod=os.geteuid() == 0)

    def args(self, *extra):
        return ["--sysfs-root", self.sys, "--dev-root", self.root, "--backends", "amd", *extra]

    def ids(self, gpu=None):
        gpus = self.m["gpus"] if gpu is None else [self.m["gpus"][gpu]]
        return [d["id"] for g in gpus for d in g["devices"]]

    def write(self, rel, text):
        with open(os.path.join(self.sys, rel), "w") as f:
            f.write(text)

    def gpu_dir(self, i):
        return self.m["gpus"][i]["sysfs"]


@pytest.fixture
def amd(dirs):
    return lambda profile: AmdNode(dirs.run, profile)


def start(devlet, kubelet, node, *args, resources=(GPU,), config=None):
    d = devlet(config, args=node.args(*args))
    for r in resources:
        kubelet.wait_for_registration(r)
        kubelet.wait_for_snapshot(r)
    return d


# ------------------------------------------------------------ naming, IDs, NUMA

def test_single_strategy_ids_and_numa(kubelet, devlet, amd):
    n = amd("mi300x-8x-spx")
    start(devlet, kubelet, n)
    reg = kubelet.wait_for_registration(GPU)
    assert reg.options.get_preferred_allocation_available
    snap = kubelet.wait_for_snapshot(GPU)
    assert snap.ids() == [g["bdf"] for g in n.m["gpus"]]
    assert [d.numa for d in snap.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert snap.healthy_ids() == snap.ids()


def test_mixed_strategy_with_amds_flag_spelling(kubelet, devlet, amd):
    n = amd("mi300x-8x-cpx")
    start(devlet, kubelet, n, "-resource_naming_strategy=mixed", resources=["amd.com/cpx_nps4"])
    snap = kubelet.wait_for_snapshot("amd.com/cpx_nps4")
    assert snap.ids() == n.ids()
    assert len(snap.ids()) == 64
    assert snap.ids()[:3] == ["0000:0c:00.0", "amdgpu_xcp_0", "amdgpu_xcp_1"]
    assert GPU not in kubelet.accepted() and not kubelet.accepted(GPU)


def test_mixed_node(kubelet, devlet, amd):
    n = amd("mixed-node")
    res = run_devlet(["list"] + n.args())
    assert res.returncode == 1
    assert ("Partitions of different styles across GPUs in a node is not supported with single "
            "strategy. Please start device plugin with mixed strategy") in res.stderr
    start(devlet, kubelet, n, "--resource-naming-strategy", "mixed",
          resources=["amd.com/spx_nps1", "amd.com/cpx_nps4"])
    assert len(kubelet.wait_for_snapshot("amd.com/spx_nps1").ids()) == 4
    assert len(kubelet.wait_for_snapshot("amd.com/cpx_nps4").ids()) == 32


# ------------------------------------------------------------ Allocate

def test_allocate_device_nodes_and_cdi(kubelet, devlet, amd):
    n = amd("mi300x-8x-cpx")
    start(devlet, kubelet, n)
    resp = kubelet.allocate(GPU, [["amdgpu_xcp_0", "0000:0c:00.0"], ["amdgpu_xcp_13"]])
    c0 = resp.container_responses[0]
    assert [(d.container_path, d.host_path, d.permissions) for d in c0.devices] == [
        ("/dev/kfd", f"{n.root}/dev/kfd", "rw"),
        ("/dev/dri/card2", f"{n.root}/dev/dri/card2", "rw"),
        ("/dev/dri/renderD129", f"{n.root}/dev/dri/renderD129", "rw"),
        ("/dev/dri/card1", f"{n.root}/dev/dri/card1", "rw"),
        ("/dev/dri/renderD128", f"{n.root}/dev/dri/renderD128", "rw"),
    ]
    assert [d.container_path for d in resp.container_responses[1].devices] == [
        "/dev/kfd", "/dev/dri/card16", "/dev/dri/renderD143"]
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate(GPU, [["0000:ff:00.0"]])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown device: 0000:ff:00.0" in e.value.details()


def test_allocate_cdi_cri(kubelet, devlet, amd):
    n = amd("mi210-pair")
    start(devlet, kubelet, n, "--device-list-strategy", "cdi-cri,cdi-annotations")
    c = kubelet.allocate(GPU, [["0000:22:00.0"]]).container_responses[0]
    assert not c.devices
    assert [d.name for d in c.cdi_devices] == ["amd.com/gpu=0000:22:00.0"]
    assert dict(c.annotations) == {"cdi.k8s.io/devlet-amd": "amd.com/gpu=0000:22:00.0"}


# ------------------------------------------------------------ preferred allocation

def test_preferred_xgmi_pair(kubelet, devlet, amd):
    n = amd("mi210-pair")
    start(devlet, kubelet, n)
    ids = n.ids()
    assert kubelet.preferred(GPU, ids, [], 2) == ids[:2]
    assert kubelet.preferred(GPU, ids, [ids[1]], 2) == ids[:2]
    # the bridge broken up: every pair is PCIe on one NUMA node, the lowest win
    assert kubelet.preferred(GPU, ids[1:], [], 2) == ids[1:3]


def test_preferred_partitions_stay_together(kubelet, devlet, amd):
    n = amd("mi300x-8x-cpx")
    start(devlet, kubelet, n)
    ids = n.ids()
    got = kubelet.preferred(GPU, ids, [], 16)
    assert sorted(got) == sorted(n.ids(0) + n.ids(1))
    # GPU 0 has 3 partitions free: a request for 2 goes there, not to an idle GPU
    avail = ids[5:]
    assert sorted(kubelet.preferred(GPU, avail, [], 2)) == sorted(n.ids(0)[5:7])


# ------------------------------------------------------------ sharing

def test_time_slicing(kubelet, devlet, amd):
    n = amd("mi210-pair")
    cfg = {"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "amd.com/gpu", "replicas": 3}]}}}
    start(devlet, kubelet, n, config=cfg)
    snap = kubelet.wait_for_snapshot(GPU)
    assert snap.ids()[:4] == ["0000:0c:00.0::0", "0000:0c:00.0::1", "0000:0c:00.0::2",
                              "0000:22:00.0::0"]
    assert len(snap.ids()) == 12
    got = kubelet.preferred(GPU, snap.ids(), [], 2)
    assert got == ["0000:0c:00.0::0", "0000:22:00.0::0"]
    c = kubelet.allocate(GPU, [["0000:0c:00.0::1", "0000:0c:00.0::2"]]).container_responses[0]
    assert [d.container_path for d in c.devices] == ["/dev/kfd", "/dev/dri/card1",
                                                      "/dev/dri/renderD128"]


def test_time_slicing_selects_by_amd_device_id(kubelet, devlet, amd):
    """AMD's own IDs select the shared GPUs and partitions: a PCI address
    (exit 2 while the sharing section knew NVIDIA's grammar only) and an
    index into the resource."""
    n = amd("mi210-pair")
    cfg = {"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "amd.com/gpu", "replicas": 2, "devices": ["0000:22:00.0", "0"]}]}}}
    start(devlet, kubelet, n, config=cfg)
    ids = kubelet.wait_for_snapshot(GPU).ids()
    assert [i for i in ids if i.startswith("0000:22:00.0")] == ["0000:22:00.0::0",
                                                                 "0000:22:00.0::1"]
    assert [i for i in ids if i.startswith("0000:0c:00.0")] == ["0000:0c:00.0::0",
                                                                 "0000:0c:00.0::1"]
    assert len(ids) == 2 * 2 + len(n.ids()) - 2


# ------------------------------------------------------------ health

def test_ras_error_marks_gpu_and_partitions_unhealthy_then_recovers(kubelet, devlet, amd):
    n = amd("mi300x-8x-cpx")
    cfg = {"version": "v1", "health": {"recovery": {"enabled": True, "quietPeriod": "1s"}}}
    start(devlet, kubelet, n, *FAST, config=cfg)
    n.write(os.path.relpath(n.gpu_dir(3), n.sys) + "/ras/umc_err_count", "ue: 2\nce: 0\n")
    bad = set(n.ids(3))
    snap = kubelet.wait_for_snapshot(GPU, lambda s: set(s.ids()) - set(s.healthy_ids()) == bad)
    assert len(snap.healthy_ids()) == 56
    kubelet.wait_for_snapshot(GPU, lambda s: len(s.healthy_ids()) == 64)


def test_health_checks_configured_for_amd(kubelet, devlet, amd):
    """health.amd.disabled in the config file leaves RAS errors unjudged
    (AMD_DISABLE_HEALTHCHECKS is its env var); NVIDIA's
    DP_DISABLE_HEALTHCHECKS=all does not turn AMD's checks off: a KFD node
    that vanishes still fails its GPU."""
    n = amd("mi210-pair")
    cfg = {"version": "v1", "health": {"amd": {"disabled": ["ras"]}}}
    d = devlet(cfg, args=n.args(*FAST), env={"DP_DISABLE_HEALTHCHECKS": "all"})
    kubelet.wait_for_registration(GPU)
    kubelet.wait_for_snapshot(GPU)
    d.wait_log(r"DP_DISABLE_HEALTHCHECKS=all is NVIDIA's")
    d.wait_log(r"found GPUs gpus=4 .*health=partly ignored")
    n.write(os.path.relpath(n.gpu_dir(2), n.sys) + "/ras/sdma_err_count", "ue: 3\nce: 0\n")
    node = n.m["gpus"][1]["devices"][0]["kfd_node"]
    shutil.rmtree(os.path.join(n.sys, "class/kfd/kfd/topology/nodes", str(node)))
    snap = kubelet.wait_for_snapshot(GPU, lambda s: s.health("0000:22:00.0") == "Unhealthy")
    assert snap.health("0000:38:00.0") == "Healthy"
    assert "GPU unhealthy gpu=2" not in d.log_text()


def test_health_config_errors_name_the_file(amd, dirs):
    n = amd("mi210-pair")
    path = os.path.join(dirs.work, "bad.yaml")
    with open(path, "w") as f:
        f.write("version: v1\nhealth:\n  amd:\n    disabled: [ras, xid]\n")
    res = run_devlet(["run", "--config-file", path, "--kubelet-socket", "",
                      "--metrics-address", ""] + n.args())
    assert res.returncode == 2, res.stderr
    assert f"{path}:4:" in res.stderr and "xid" in res.stderr, res.stderr


def test_device_count_serves_the_first_gpus(kubelet, devlet, amd):
    """AMD_GPU_DEVICE_COUNT (AMD's documented env var): the first N GPUs in
    PCI order are served with their partitions, the rest left out."""
    n = amd("mi300x-8x-cpx")
    d = devlet(None, args=n.args(*FAST), env={"AMD_GPU_DEVICE_COUNT": "3"})
    kubelet.wait_for_registration(GPU)
    snap = kubelet.wait_for_snapshot(GPU)
    assert sorted(snap.ids()) == sorted(n.ids(0) + n.ids(1) + n.ids(2))
    d.wait_log(r"serving the first 3 of 8 GPUs")


def test_bare_rename_stays_in_amds_domain(kubelet, devlet, amd):
    n = amd("mi210-pair")
    cfg = {"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "amd.com/gpu", "rename": "gpu-ts", "replicas": 2}]}}}
    start(devlet, kubelet, n, config=cfg, resources=("amd.com/gpu-ts",))
    assert len(kubelet.wait_for_snapshot("amd.com/gpu-ts").ids()) == 8


def test_kfd_node_vanishing_is_unhealthy_without_recovery(kubelet, devlet, amd):
    n = amd("mi210-pair")
    d = start(devlet, kubelet, n, *FAST)
    node = n.m["gpus"][1]["devices"][0]["kfd_node"]
    shutil.rmtree(os.path.join(n.sys, "class/kfd/kfd/topology/nodes", str(node)))
    kubelet.wait_for_snapshot(GPU, lambda s: s.health("0000:22:00.0") == "Unhealthy")
    d.wait_log(r"GPU unhealthy gpu=1 pci=0000:22:00.0 reason=\"KFD topology node")
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate(GPU, [["0000:22:00.0"]])
    assert "unhealthy" in e.value.details()


def test_stalled_sysfs_read_fails_its_gpu_and_delays_nothing(kubelet, devlet, amd, dirs):
    """A GPU in reset blocks sysfs reads for tens of seconds: GPU 1's
    gpu_busy_percent becomes a file whose reads never return (FUSE).  The
    reads run off the loop, so Allocate on another resource and /health keep
    answering at once, and GPU 1 goes unhealthy after the stall bound (2 s);
    GPU 0 stays healthy.  (Read on the loop, the stall froze Allocate and
    /health with it.)"""
    n = amd("mi210-pair")
    make_node(f"{dirs.dev}/fuse")
    cfg = hostdev_config([{"name": "fuse", "groups": [{"count": 2, "paths": [
        {"path": f"{dirs.dev}/fuse"}]}]}], domain="devlet.io")
    busy = os.path.join(n.gpu_dir(1), "gpu_busy_percent")
    stall = StalledFile(busy, "3\n")
    try:
        d = start(devlet, kubelet, n, *FAST, "--backends", "amd,hostdev", "--metrics-address",
                  "127.0.0.1:0", resources=(GPU, "devlet.io/fuse"), config=cfg)
        port = int(d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1))
        probes = {"allocate": [], "health": []}
        failures = []
        stop = threading.Event()

        def probe():
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    kubelet.allocate("devlet.io/fuse", [["fuse-0"]], timeout=1.5)
                    probes["allocate"].append(time.monotonic() - t0)
                except Exception as e:  # noqa: BLE001 - a timeout is the finding
                    failures.append(f"Allocate: {e}")
                try:
                    status, body, secs = get(port, "/health", timeout=1.5)
                    probes["health"].append(secs)
                    if status != 200:
                        failures.append(f"/health {status} {body}")
                except OSError as e:
                    failures.append(f"/health: {e}")
                stop.wait(0.05)

        prober = threading.Thread(target=probe, daemon=True)
        t0 = time.monotonic()
        stall.hold()
        prober.start()
        try:
            snap = kubelet.wait_for_snapshot(GPU, lambda s: s.health("0000:22:00.0") == "Unhealthy",
                                             timeout=10)
            took = time.monotonic() - t0
            seen = len(probes["health"])  # the probes go on past the verdict
            wait_until(lambda: len(probes["health"]) >= seen + 5 or failures, 10, "probes after it")
        finally:
            stop.set()
            prober.join(5)
        assert snap.health("0000:0c:00.0") == "Healthy"
        assert stall.reads_held >= 1
        assert 1.9 <= took < 6, took
        d.wait_log(r"GPU unhealthy gpu=1 pci=0000:22:00.0 reason=\"sysfs reads stalled")
        assert failures == []
        assert len(probes["allocate"]) >= 10 and max(probes["allocate"]) < 1.0, probes
        assert len(probes["health"]) >= 10 and max(probes["health"]) < 1.0, probes
    finally:
        stall.close()  # the stuck read fails and its thread ends


# ------------------------------------------------------------ nodes without AMD GPUs

def test_no_kfd_and_no_amdgpu(amd, dirs):
    n = amd("no-kfd")
    res = run_devlet(["list"] + n.args())
    assert res.returncode == 1
    assert "KFD, the compute interface, is not there" in res.stderr
    args = [a for a in n.args() if a not in ("--backends", "amd")]
    res = run_devlet(["list"] + args)
    assert res.returncode == 0, res.stderr
    assert "no AMD GPUs served: amdgpu drives 2 GPU(s) but KFD" in res.stderr
    res = run_devlet(["list", "--sysfs-root", dirs.work, "--backends", "amd",
                      "--fail-on-init-error=false"])
    assert res.returncode == 0
    assert "the amdgpu driver is not loaded" in res.stderr


def test_list_shows_partitions_xgmi_and_labels(amd):
    n = amd("mi210-pair")
    res = run_devlet(["list"] + n.args())
    assert res.returncode == 0, res.stderr
    assert "AMD Instinct MI210" in res.stdout
    assert "GPU0   X      XGMI   PCIE   PCIE" in res.stdout
    res = run_devlet(["list", "-o", "json"] + n.args())
    j = json.loads(res.stdout)["backends"]["amd"]
    assert j["gpus"][0]["links"] == ["X", "XGMI", "PCIE", "PCIE"]
    assert j["labels"]["amd.com/gpu.family"] == "AI"
    assert j["labels"]["amd.com/gpu.vram"] == "64G"
    assert j["labels"]["beta.amd.com/gpu.cu-count.104"] == "4"


# ------------------------------------------------------------ CDI, consumed by podman

@pytest.fixture
def amd_kind_lock():
    fd = os.open("/run/devlet-test-cdi-amd.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def test_cdi_spec_in_podman(amd, amd_kind_lock):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="devlet-amd-cdi-", dir="/tmp"))
    out = pathlib.Path("/var/run/cdi") / f"devlet-test-amd-{uuid.uuid4().hex[:10]}.yaml"
    try:
        n = AmdNode(str(tmp / "node"), "mi210-pair")
        out.parent.mkdir(parents=True, exist_ok=True)
        res = run_devlet(["cdi", "generate", "--output", str(out)] + n.args())
        assert res.returncode == 0, res.stderr
        spec = yaml.safe_load(out.read_text())
        assert spec["kind"] == GPU
        dev = next(d for d in spec["devices"] if d["name"] == "0000:22:00.0")
        nodes = {x["path"]: x for x in dev["containerEdits"]["deviceNodes"]}
        assert nodes["/dev/dri/renderD129"]["major"] == 226
        assert nodes["/dev/kfd"]["major"] == n.m["kfd_major"]
        root = tmp / "rootfs"
        (root / "bin").mkdir(parents=True)
        shutil.copy("/bin/busybox", root / "bin" / "busybox")
        for applet in ("sh", "stat", "ls"):
            (root / "bin" / applet).symlink_to("busybox")
        cmd = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs", "run", "--rm",
               "--network=none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000",
               "--device", f"{GPU}=0000:22:00.0", "--rootfs", str(root), "/bin/sh", "-c",
               "stat -c '%n %t:%T' /dev/kfd /dev/dri/card2 /dev/dri/renderD129; ls /dev/dri"]
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        kfd = f"{n.m['kfd_major']:x}:0"
        assert got.stdout.splitlines() == [f"/dev/kfd {kfd}", "/dev/dri/card2 e2:2",
                                           "/dev/dri/renderD129 e2:81", "card2", "renderD129"]
    finally:
        out.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------ reloads

def test_reload_keeps_a_failed_gpu_and_drops_a_vanished_one(kubelet, devlet, amd):
    n = amd("mi210-pair")
    d = start(devlet, kubelet, n, *FAST, config={"version": "v1"})
    n.write(os.path.relpath(n.gpu_dir(2), n.sys) + "/ras/sdma_err_count", "ue: 1\nce: 0\n")
    kubelet.wait_for_snapshot(GPU, lambda s: s.health("0000:38:00.0") == "Unhealthy")
    # GPU 3 vanishes (unplugged, driver unbound) before the reload's fresh scan
    os.unlink(os.path.join(n.sys, "module/amdgpu/drivers/pci:amdgpu", n.m["gpus"][3]["bdf"]))
    since = d.log_size()
    d.sighup()
    d.wait_log(r"found GPUs gpus=3", since=since)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: len(s.ids()) == 3)
    # the RAS errors were counted before the reload: still unhealthy, not news again
    assert snap.health("0000:38:00.0") == "Unhealthy"
    assert snap.healthy_ids() == ["0000:0c:00.0", "0000:22:00.0"]
    assert "0000:5c:00.0" not in snap.ids()


# ------------------------------------------------------------ labels

def test_labels_as_amds_labeller(amd, dirs):
    n = amd("mi300x-8x-cpx")
    out = os.path.join(dirs.work, "labels")
    res = run_devlet(["labels", "--output-file", out, "--no-timestamp", "--resource-naming-strategy",
                      "mixed"] + n.args())
    assert res.returncode == 0, res.stderr
    labels = dict(line.split("=", 1) for line in open(out).read().splitlines())
    assert labels["amd.com/gpu.family"] == "AI"
    assert labels["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
    assert labels["amd.com/gpu.vram"] == "24G"
    assert labels["beta.amd.com/gpu.vram.24G"] == "64"
    assert labels["amd.com/gpu.compute-memory-partition"] == "cpx_nps4"
    assert labels["amd.com/gpu.compute-partitioning-supported"] == "true"
    assert labels["amd.com/gpu.driver-version"] == "6.10.5"
    assert labels["amd.com/gpu.count"] == "8"
    assert labels["amd.com/cpx_nps4.count"] == "64"
    # AMD's firmware labels, counted over GPUs and partitions as the others;
    # the fw_version files' hex in decimal, 0 for blocks MI300X lacks
    fw = {k: v for k, v in labels.items() if k.startswith("beta.amd.com/gpu.firmware.")}
    assert fw["beta.amd.com/gpu.firmware.MEC.fw.157"] == "64"
    assert fw["beta.amd.com/gpu.firmware.SMC.fw.5597952"] == "64"
    assert fw["beta.amd.com/gpu.firmware.VCE.fw.0"] == "64"
    assert {k.split(".")[4] for k in fw} == {"VCE", "UVD", "MC", "ME", "PFP", "CE", "RLC", "MEC",
                                             "SMC", "SDMA0"}


def test_labeller_flags_select_label_groups(amd, dirs):
    """AMD's labeller's flags, with one dash as its DaemonSet passes them:
    only the groups named (both label forms), plus the counts; without any,
    every group (above)."""
    n = amd("mi300x-8x-cpx")
    out = os.path.join(dirs.work, "labels")
    res = run_devlet(["labels", "--output-file", out, "--no-timestamp", "-vram", "-cu-count",
                      "-firmware"] + n.args())
    assert res.returncode == 0, res.stderr
    labels = dict(line.split("=", 1) for line in open(out).read().splitlines())
    groups = {k.split("/", 1)[1].split(".")[1] for k in labels
              if k.startswith(("amd.com/gpu.", "beta.amd.com/gpu."))}
    assert groups == {"vram", "cu-count", "count", "firmware"}, labels
    assert labels["beta.amd.com/gpu.firmware.SDMA0.fw.19"] == "64"
    assert labels["amd.com/gpu.vram"] == "24G" and labels["beta.amd.com/gpu.vram.24G"] == "64"


def test_devlet_run_writes_amds_labels(kubelet, devlet, amd):
    n = amd("mi210-pair")
    d = start(devlet, kubelet, n, *FAST)
    gfd = os.path.join(d.workdir, "gfd")
    from devlet_harness import wait_until
    wait_until(lambda: os.path.exists(gfd) and "amd.com/gpu.family=AI" in open(gfd).read(), 10,
               "the labels file with AMD's labels")
    assert "amd.com/gpu.count=4" in open(gfd).read().splitlines()


def test_devlet_run_writes_the_specs_allocate_names(kubelet, devlet, amd):
    """With cdi-cri, devlet run writes a spec per AMD resource, and every CDI
    name Allocate answers is a device of it."""
    n = amd("mi300x-8x-cpx")
    d = start(devlet, kubelet, n, "--device-list-strategy", "cdi-cri", "--resource-naming-strategy",
              "mixed", resources=["amd.com/cpx_nps4"])
    spec_file = os.path.join(d.workdir, "cdi", "amd.com-cpx_nps4.yaml")
    from devlet_harness import wait_until
    wait_until(lambda: os.path.exists(spec_file), 10, spec_file)
    spec = yaml.safe_load(open(spec_file))
    assert spec["kind"] == "amd.com/cpx_nps4"
    names = {dv["name"] for dv in spec["devices"]}
    assert names == set(n.ids())
    c = kubelet.allocate("amd.com/cpx_nps4", [["amdgpu_xcp_9"]]).container_responses[0]
    (cdi_name,) = [x.name for x in c.cdi_devices]
    kind, name = cdi_name.split("=")
    assert kind == spec["kind"] and name in names
    edits = next(dv for dv in spec["devices"] if dv["name"] == name)["containerEdits"]
    paths = [x["path"] for x in edits.get("deviceNodes", [])] + \
        [x["containerPath"] for x in edits.get("mounts", [])]
    assert sorted(paths) == ["/dev/dri/card12", "/dev/dri/renderD139", "/dev/kfd"]
