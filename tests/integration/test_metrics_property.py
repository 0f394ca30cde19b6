"""Issue 13's property over every mock profile: in `devlet metrics`'s output
each device family has exactly one series per device (GPU or MIG device),
and devlet's per-container families of a device sum to at most the
device's value, the unattributed family holding the rest.  Pods share
devices through pod-resources (replicas and MIG devices), hold others
alone, and processes run on them with and without utilisation figures."""

import os
from collections import defaultdict

import pytest

from devlet_harness import run_devlet
from metrics_sim import PodResourcesSim, parse
from mock_gpus import PROFILES, MockNode, load_profile

MIB = 2 ** 20
PROFILE_NAMES = sorted(f[:-5] for f in os.listdir(PROFILES) if f.endswith(".yaml"))

# devlet's per-container families, the device family each splits and the
# factor from the device family's unit to theirs
SPLITS = {
    "memory_used_bytes": ("DCGM_FI_DEV_FB_USED", MIB),
    "utilization_percent": ("DCGM_FI_DEV_GPU_UTIL", 1),
    "encoder_utilization_percent": ("DCGM_FI_DEV_ENC_UTIL", 1),
    "decoder_utilization_percent": ("DCGM_FI_DEV_DEC_UTIL", 1),
}
PER_CONTAINER = {"devlet_container_" + k for k in SPLITS}


def device_key(labels):
    return labels.get("UUID"), labels.get("GPU_I_ID", "")


def workload(node):
    """Pods and processes on the node's devices: GPU 0 (or its first MIG
    device) shared by two pods, GPU 1 held by one, processes everywhere."""
    units = []
    for i, gpu in enumerate(node.devices):
        migs = gpu.get("mig", [])
        units.append(migs[0]["uuid"] if migs else gpu["uuid"])
        gpu["utilization"] = {"gpu": 60 + i, "memory": 20, "encoder": 10, "decoder": 5}
        procs = [{"pid": 4000000 + 10 * i + k, "usedMemoryMiB": 100 * (k + 1), "smUtil": 20 + k}
                 for k in range(3)]
        if migs:
            for p in procs:
                p.update(gi=migs[0]["gi"], ci=migs[0].get("ci", 0))
        gpu["processes"] = procs
    node.write()
    pods = [("ns", "share-a", [("a", [("nvidia.com/gpu.shared", [units[0] + "::0"])])]),
            ("ns", "share-b", [("b", [("nvidia.com/gpu.shared", [units[0] + "::1"])])])]
    if len(units) > 1:
        pods.append(("ns", "alone", [("c", [("nvidia.com/gpu", [units[1]])])]))
    return pods


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_one_series_per_device_and_shares_that_add_up(profile, dirs):
    node = MockNode(os.path.join(dirs.work, "nvml.yaml"), data=load_profile(profile))
    podres = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    podres.pods = workload(node)
    podres.start()
    try:
        res = run_devlet(["metrics", "--pod-resources-socket", podres.socket_path,
                          "--container-state-dirs", dirs.run], env=node.env())
    finally:
        podres.stop()
    assert res.returncode == 0, res.stderr
    samples = parse(res.stdout)

    per_device = defaultdict(int)
    device_value = {}
    for name, labels, value in samples:
        if name.startswith("DCGM_FI_"):
            per_device[(name, device_key(labels))] += 1
            device_value[(name, device_key(labels))] = value
    assert per_device, "no device families"
    for (name, key), n in per_device.items():
        assert n == 1, f"{name} has {n} series for device {key}"

    # the pods that share GPU 0 are both there, in devlet's families only
    holders = {labels.get("pod") for name, labels, _ in samples
               if name == "devlet_container_memory_used_bytes"}
    assert {"share-a", "share-b"} <= holders

    for suffix, (family, factor) in SPLITS.items():
        sums = defaultdict(float)
        for name, labels, value in samples:
            if name == "devlet_container_" + suffix:
                assert value >= 0
                sums[device_key(labels)] += value
        rest = {device_key(labels): value for name, labels, value in samples
                if name == "devlet_unattributed_" + suffix}
        for key, total in sums.items():
            device = device_value[(family, key)] * factor
            assert total <= device + 1e-6, f"{suffix} on {key}: {total} > {device}"
            assert abs(total + rest[key] - device) < 1e-6 * max(1.0, device), (suffix, key)
    # every family is either one series per device or documented as per container
    names = {name for name, _, _ in samples}
    assert {n for n in names if n.startswith("devlet_container_")} <= PER_CONTAINER
