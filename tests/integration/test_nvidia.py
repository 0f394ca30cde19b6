"""devlet's NVIDIA backend seen from a simulated kubelet, over the mock
libnvidia-ml.so.1 (build/mock-nvml, handed to devlet by DEVLET_NVML_LIBRARY;
the GPUs are the YAML named by MOCK_NVML_CONFIG, a copy of a profile that
tests rewrite to inject XID events).

Covers registration of nvidia.com/gpu and the MIG resources, ListAndWatch
with NUMA nodes, Allocate per device list strategy set by flag, env var and
config file, GetPreferredAllocation on the DGX-1 topology, an XID turning a
GPU and all its replicas Unhealthy, devlet with NVML missing
(--fail-on-init-error true and false), and `devlet list`."""

import json
import os
import subprocess

import grpc
import pytest

from devlet_harness import DEVLET_BIN, EXEC_PREFIX, devlet_env, hostdev_config, make_node, run_devlet
from mock_gpus import GPU, V100, MockNode, envs, start

CDI_KEY = "cdi.k8s.io/nvidia-device-plugin_"


# ------------------------------------------------------------ registration, ListAndWatch

def test_registration_and_numa(kubelet, devlet, node):
    n = node("v100-dgx1")
    start(devlet, kubelet, n)
    reg = kubelet.wait_for_registration(GPU)
    assert reg.options.get_preferred_allocation_available
    snap = kubelet.wait_for_snapshot(GPU)
    assert snap.ids() == V100
    assert [d.numa for d in snap.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert snap.healthy_ids() == V100


def test_mig_mixed_resources(kubelet, devlet, node):
    n = node("a100-mig-mixed")
    mig = ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb",
           "nvidia.com/mig-4g.40gb", "nvidia.com/mig-1c.3g.40gb", "nvidia.com/mig-2c.3g.40gb"]
    start(devlet, kubelet, n, resources=[GPU] + mig, args=["--mig-strategy", "mixed"])
    assert len(kubelet.wait_for_snapshot(GPU).ids()) == 4
    small = kubelet.wait_for_snapshot("nvidia.com/mig-1g.10gb")
    assert len(small.ids()) == 9
    assert all(i.startswith("MIG-") for i in small.ids())
    assert small.devices[0].numa == 3
    # each compute-instance profile is its own resource: a pod asking for
    # three compute slices never gets a one-slice compute instance
    assert len(kubelet.wait_for_snapshot("nvidia.com/mig-3g.40gb").ids()) == 3
    assert len(kubelet.wait_for_snapshot("nvidia.com/mig-1c.3g.40gb").ids()) == 1
    assert len(kubelet.wait_for_snapshot("nvidia.com/mig-2c.3g.40gb").ids()) == 1
    resp = kubelet.allocate("nvidia.com/mig-2g.20gb", [["MIG-db5b5fab-8f4d-3e27-dda1-494c73cf256d"]])
    assert envs(resp) == {"NVIDIA_VISIBLE_DEVICES": "MIG-db5b5fab-8f4d-3e27-dda1-494c73cf256d"}


# ------------------------------------------------------------ Allocate

def test_allocate_envvar_flags(kubelet, devlet, node):
    n = node("v100-dgx1")
    start(devlet, kubelet, n, args=["--gds-enabled", "--mofed-enabled"])
    resp = kubelet.allocate(GPU, [[V100[3], V100[0]], [V100[5]]])
    assert envs(resp, 0) == {"NVIDIA_VISIBLE_DEVICES": f"{V100[3]},{V100[0]}",
                             "NVIDIA_GDS": "enabled", "NVIDIA_MOFED": "enabled"}
    assert envs(resp, 1)["NVIDIA_VISIBLE_DEVICES"] == V100[5]
    assert not resp.container_responses[0].devices
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate(GPU, [["GPU-nope"]])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown device: GPU-nope" in e.value.details()


def test_allocate_cdi_from_env(kubelet, devlet, node):
    n = node("v100-dgx1")
    start(devlet, kubelet, n, env={"DEVICE_LIST_STRATEGY": "cdi-annotations,cdi-cri",
                                   "DEVICE_ID_STRATEGY": "index"})
    c = kubelet.allocate(GPU, [[V100[1], V100[2]]]).container_responses[0]
    assert not c.envs and not c.devices and not c.mounts
    names = "k8s.device-plugin.nvidia.com/gpu=1,k8s.device-plugin.nvidia.com/gpu=2"
    (key, value), = c.annotations.items()
    assert key.startswith(CDI_KEY) and len(key) == len(CDI_KEY) + 36
    assert value == names
    assert [d.name for d in c.cdi_devices] == names.split(",")


def test_allocate_volume_mounts_and_specs_from_config(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    for f in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        make_node(os.path.join(dirs.dev, f))
    config = {"version": "v1", "flags": {"nvidiaDevRoot": dirs.root, "plugin": {
        "deviceListStrategy": "volume-mounts", "passDeviceSpecs": True}}}
    start(devlet, kubelet, n, config=config)
    c = kubelet.allocate(GPU, [[V100[4]]]).container_responses[0]
    assert dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
    assert [(m.host_path, m.container_path) for m in c.mounts] == [
        ("/dev/null", f"/var/run/nvidia-container-devices/{V100[4]}")]
    assert [(s.container_path, s.host_path, s.permissions) for s in c.devices] == [
        ("/dev/nvidiactl", f"{dirs.root}/dev/nvidiactl", "rw"),
        ("/dev/nvidia-uvm", f"{dirs.root}/dev/nvidia-uvm", "rw"),
        ("/dev/nvidia-uvm-tools", f"{dirs.root}/dev/nvidia-uvm-tools", "rw"),
        ("/dev/nvidia4", f"{dirs.root}/dev/nvidia4", "rw")]


def test_preferred_on_nvlink(kubelet, devlet, node):
    n = node("v100-dgx1")
    start(devlet, kubelet, n)
    assert kubelet.preferred(GPU, V100, [], 4) == V100[:4]
    assert kubelet.preferred(GPU, V100, [V100[5]], 2) == [V100[5], V100[6]]
    # without GPU 0: of the NV2 pairs left, 2-3 share a PCIe switch
    avail = [g for g in V100 if g != V100[0]]
    assert kubelet.preferred(GPU, avail, [], 2) == [V100[2], V100[3]]


# ------------------------------------------------------------ health

def test_xid_marks_all_replicas(kubelet, devlet, node):
    n = node("v100-dgx1")
    config = {"version": "v1", "sharing": {"timeSlicing": {
        "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}}
    start(devlet, kubelet, n, config=config)
    snap = kubelet.wait_for_snapshot(GPU)
    assert len(snap.ids()) == 24 and snap.ids()[0] == V100[0] + "::0"
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate(GPU, [[V100[0] + "::0", V100[1] + "::0"]])
    assert "maximum request size for shared resources is 1; found 2" in e.value.details()
    n.xid(2, 43)  # ignored by default
    n.xid(2, 79)
    replicas = [f"{V100[2]}::{i}" for i in range(3)]
    snap = kubelet.wait_for_snapshot(GPU, lambda s: all(s.health(r) == "Unhealthy" for r in replicas))
    assert len(snap.healthy_ids()) == 21
    with pytest.raises(grpc.RpcError):
        kubelet.allocate(GPU, [[replicas[0]]])


def test_reload_restarts_the_backend(kubelet, devlet, node):
    n = node("v100-dgx1")
    d = start(devlet, kubelet, n, config={"version": "v1"})
    d.write_config({"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True,
                    "resources": [{"name": "gpu", "replicas": 2, "devices": ["7"]}]}}})
    d.sighup()
    shared = kubelet.wait_for_snapshot("nvidia.com/gpu.shared")
    assert shared.ids() == [V100[7] + "::0", V100[7] + "::1"]
    kubelet.wait_for_snapshot(GPU, lambda s: s.ids() == V100[:7])
    # the new health monitor watches the new resources
    n.xid(7, 79)
    kubelet.wait_for_snapshot("nvidia.com/gpu.shared", lambda s: s.healthy_ids() == [])


# ------------------------------------------------------------ NVML missing

def test_nvml_missing_fail_on_init_error(dirs):
    env = {"DEVLET_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}
    r = subprocess.run(EXEC_PREFIX + [DEVLET_BIN, "run", "--plugin-directory", dirs.plugins, "--backends", "nvidia"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                       env=devlet_env(env))
    assert r.returncode == 1, r.stderr
    assert "cannot load libnvidia-ml.so.1" in r.stderr
    assert os.listdir(dirs.plugins) == []


def test_nvml_missing_keeps_serving_host_devices(kubelet, devlet, dirs):
    make_node(f"{dirs.dev}/fuse")
    config = hostdev_config([{"name": "fuse", "groups": [{"count": 2, "paths": [{"path": f"{dirs.dev}/fuse"}]}]}],
                            domain="devlet.io")
    d = devlet(config, args=["--backends", "nvidia,hostdev", "--fail-on-init-error=false"],
               env={"DEVLET_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
    kubelet.wait_for_registration("devlet.io/fuse")
    assert kubelet.wait_for_snapshot("devlet.io/fuse").ids() == ["fuse-0", "fuse-1"]
    assert d.alive()
    assert "NVIDIA backend not started" in d.log_text()
    assert kubelet.attempts(GPU) == []


# ------------------------------------------------------------ devlet list

def test_list_shows_gpus(dirs):
    n = MockNode(os.path.join(dirs.run, "nvml.yaml"), "v100-dgx1")
    r = run_devlet(["list", "--backends", "nvidia"], env=n.env())
    assert r.returncode == 0, r.stderr
    assert "NVIDIA: driver 535.161.08, CUDA 12.2, 8 GPUs" in r.stdout
    assert V100[0] in r.stdout and "0000:06:00.0" in r.stdout
    rows = [l.split() for l in r.stdout.splitlines() if l.startswith("GPU0 ")]
    assert rows and rows[-1][1:9] == ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]

    r = run_devlet(["list", "-o", "json", "--backends", "nvidia"], env=n.env())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["name"] for x in out["resources"]] == [GPU]
    nv = out["backends"]["nvidia"]
    assert [g["uuid"] for g in nv["gpus"]] == V100
    assert nv["topology"]["nvlinks"][0] == [0, 1, 1, 2, 2, 0, 0, 0]
    assert nv["topology"]["matrix"][0][1] == "NV1"
