"""The DRA model in `devlet list -o json`: each device's "dra" object, what
its family's DRA driver would publish for it (resource.k8s.io/v1
ResourceSlice device shape), on the mock machines the other tests use:
the mock NVML profiles, the fake AMD sysfs trees, fake host devices."""

import json
import os
import pathlib
import re
import sys

import yaml

from devlet_harness import hostdev_config, make_node, run_devlet, write_config
from mock_gpus import V100, MockNode

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock-amd"))
import gen_sysfs  # noqa: E402

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
CLUSTER = "5c1b0e6a-3f0e-4a8e-9d4c-0b7f2c9e1a11"


def list_json(args, env=None):
    r = run_devlet(["list", "-o", "json", *args], env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def devices(out, resource=None):
    return [d for r in out["resources"] if resource in (None, r["name"]) for d in r["devices"]]


def value(dra, name):
    """An attribute's one typed value: ("string", "x"), ("version", "1.2.3")..."""
    (kind, v), = dra["attributes"][name].items()
    return kind, v


def units(out):
    """{name: dra} over every device, checking that devices sharing a name
    (replicas of one unit) publish the same thing."""
    seen = {}
    for d in devices(out):
        dra = d["dra"]
        assert DNS_LABEL.match(dra["name"]), dra["name"]
        assert seen.setdefault(dra["name"], dra) == dra
    return seen


def fake_pci(sysfs, bus_ids, root="pci0000:00"):
    """<sysfs>/bus/pci/devices/<bdf> links as the kernel makes them."""
    os.makedirs(os.path.join(sysfs, "bus", "pci", "devices"), exist_ok=True)
    for bdf in bus_ids:
        dev = os.path.join(sysfs, "devices", root, "0000:00:01.0", bdf)
        os.makedirs(dev, exist_ok=True)
        os.symlink(os.path.relpath(dev, os.path.join(sysfs, "bus", "pci", "devices")),
                   os.path.join(sysfs, "bus", "pci", "devices", bdf))


# ------------------------------------------------------------ NVIDIA

def test_nvidia_gpus(dirs):
    n = MockNode(os.path.join(dirs.run, "nvml.yaml"), "v100-dgx1")
    sysfs = os.path.join(dirs.run, "sys")
    buses = ["0000:" + d["pciBusId"].split(":", 1)[1].lower() for d in n.devices]
    fake_pci(sysfs, buses)
    out = list_json(["--backends", "nvidia", "--sysfs-root", sysfs], env=n.env())
    devs = devices(out, "nvidia.com/gpu")
    assert [d["id"] for d in devs] == V100
    for i, d in enumerate(devs):
        dra = d["dra"]
        assert dra["driver"] == "gpu.nvidia.com"
        assert dra["name"] == f"gpu-{i}"
        assert value(dra, "type") == ("string", "gpu")
        assert value(dra, "uuid") == ("string", V100[i])
        assert value(dra, "productName") == ("string", "Tesla V100-SXM2-32GB")
        assert value(dra, "brand") == ("string", "Tesla")
        assert value(dra, "architecture") == ("string", "Volta")
        assert value(dra, "cudaComputeCapability") == ("version", "7.0.0")
        assert value(dra, "driverVersion") == ("version", "535.161.8")  # 535.161.08
        assert value(dra, "cudaDriverVersion") == ("version", "12.2.0")  # 12020
        assert value(dra, "resource.kubernetes.io/pciBusID") == ("string", buses[i])
        assert value(dra, "pcieBusID") == ("string", buses[i])
        assert value(dra, "resource.kubernetes.io/pcieRoot") == ("string", "pci0000:00")
        assert value(dra, "resource.kubernetes.io/numaNode")[0] == "int"
        assert "cliqueID" not in dra["attributes"]
        assert dra["capacity"] == {"memory": {"value": "32Gi"}}
    assert len(units(out)) == 8


def test_nvidia_mig_devices(dirs):
    n = MockNode(os.path.join(dirs.run, "nvml.yaml"), "a100-mig-mixed")
    out = list_json(["--backends", "nvidia", "--mig-strategy", "mixed"], env=n.env())
    by_id = {d["id"]: d["dra"] for d in devices(out)}
    dra = by_id["MIG-db5b5fab-8f4d-3e27-dda1-494c73cf256d"]
    assert dra["name"] == "gpu-0-mig-2g20gb-14-0"
    assert value(dra, "type") == ("string", "mig")
    assert value(dra, "profile") == ("string", "2g.20gb")
    assert value(dra, "parentUUID") == ("string", n.devices[0]["uuid"])
    assert value(dra, "productName") == ("string", "NVIDIA A100-SXM4-80GB")
    assert value(dra, "driverVersion") == ("version", "550.54.15")
    assert dra["capacity"] == {
        "multiprocessors": {"value": "28"}, "copyEngines": {"value": "2"},
        "decoders": {"value": "1"}, "encoders": {"value": "0"},
        "jpegEngines": {"value": "0"}, "ofaEngines": {"value": "0"},
        "memory": {"value": "19968Mi"},
        "memorySlice0": {"value": "1"}, "memorySlice1": {"value": "1"}}
    assert by_id["MIG-73ab4876-7734-d7c1-c7fd-e805ec99108d"]["name"] == "gpu-0-mig-3g40gb-9-4"
    # 16 MIG devices and 4 whole GPUs, each its own name
    names = units(out)
    assert len(names) == 20
    assert sorted(k for k in names if not k.startswith("gpu-0") and "mig" not in k) == \
        ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]


def test_nvidia_replicas_and_clique(dirs):
    n = MockNode(os.path.join(dirs.run, "nvml.yaml"), "v100-dgx1")
    n.devices[0]["fabric"] = {"clusterUuid": CLUSTER, "cliqueId": 3}
    n.devices[1]["fabric"] = {"clusterUuid": CLUSTER, "cliqueId": 3, "state": "in_progress"}
    n.write()
    cfg = os.path.join(dirs.work, "config.yaml")
    write_config(cfg, {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}})
    out = list_json(["--backends", "nvidia", "--config-file", cfg], env=n.env())
    devs = devices(out, "nvidia.com/gpu")
    assert len(devs) == 16
    assert [d["dra"]["name"] for d in devs[:4]] == ["gpu-0", "gpu-0", "gpu-1", "gpu-1"]
    assert devs[0]["dra"] == devs[1]["dra"]
    assert value(devs[0]["dra"], "cliqueID") == ("string", f"{CLUSTER}.3")
    assert "cliqueID" not in devs[2]["dra"]["attributes"]  # registration in progress
    assert len(units(out)) == 8


# ------------------------------------------------------------ AMD

def amd_tree(dirs, profile):
    with open(ROOT / "tests" / "mock-amd" / "profiles" / f"{profile}.yaml") as f:
        p = yaml.safe_load(f)
    sysfs = os.path.join(dirs.run, profile, "sys")
    m = gen_sysfs.generate(p, sysfs, os.path.join(dirs.run, profile))
    return ["--backends", "amd", "--sysfs-root", sysfs,
            "--dev-root", os.path.join(dirs.run, profile)], m


def test_amd_gpus_and_hive(dirs):
    args, m = amd_tree(dirs, "mi210-pair")
    out = list_json(args)
    devs = devices(out, "amd.com/gpu")
    assert [d["id"] for d in devs] == [g["bdf"] for g in m["gpus"]]
    for d, g in zip(devs, m["gpus"]):
        dra = d["dra"]
        own = g["devices"][0]
        assert dra["driver"] == "gpu.amd.com"
        assert dra["name"] == f"gpu-{own['card']}-{own['render']}"
        assert value(dra, "type") == ("string", "amdgpu")
        assert value(dra, "productName") == ("string", "AMD_Instinct_MI210")
        assert value(dra, "deviceID") == ("string", "0x740f")
        assert value(dra, "family") == ("string", "AI")
        assert value(dra, "gfxTarget") == ("string", "gfx90a")
        assert value(dra, "driverVersion") == ("version", "6.8.5")
        assert value(dra, "cardIndex") == ("int", own["card"])
        assert value(dra, "renderIndex") == ("int", own["render"])
        assert value(dra, "numaNode") == ("int", g["numa"])
        assert value(dra, "resource.kubernetes.io/pciBusID") == ("string", g["bdf"])
        assert value(dra, "resource.kubernetes.io/pcieRoot") == ("string", "pci0000:00")
        assert dra["capacity"] == {"memory": {"value": "64Gi"}, "computeUnits": {"value": "104"},
                                   "simdUnits": {"value": "416"}}
        if g["hive"]:
            assert value(dra, "xgmiHiveID") == ("string", str(g["hive"]))
        else:
            assert "xgmiHiveID" not in dra["attributes"]
    assert [bool(g["hive"]) for g in m["gpus"]] == [True, True, False, False]


def test_amd_partitions(dirs):
    args, m = amd_tree(dirs, "mi300x-8x-cpx")
    out = list_json(args + ["--resource-naming-strategy", "mixed"])
    devs = devices(out, "amd.com/cpx_nps4")
    assert len(devs) == 64
    want = [f"gpu-{p['card']}-{p['render']}" for g in m["gpus"] for p in g["devices"]]
    assert [d["dra"]["name"] for d in devs] == want
    assert len(units(out)) == 64
    first = devs[1]["dra"]  # amdgpu_xcp_0: GPU 0's second partition
    assert value(first, "type") == ("string", "amdgpu-partition")
    assert value(first, "partitionProfile") == ("string", "cpx_nps4")
    assert value(first, "computePartition") == ("string", "cpx")
    assert value(first, "memoryPartition") == ("string", "nps4")
    assert value(first, "gfxTarget") == ("string", "gfx942")
    assert value(first, "resource.kubernetes.io/pciBusID") == ("string", m["gpus"][0]["bdf"])
    assert first["capacity"] == {"memory": {"value": "24Gi"}, "computeUnits": {"value": "38"},
                                 "simdUnits": {"value": "152"}}


# ------------------------------------------------------------ host devices

def test_hostdev(dirs):
    fuse = os.path.join(dirs.dev, "fuse")
    make_node(fuse, major=10, minor=229)
    for i in range(2):
        make_node(os.path.join(dirs.dev, f"ttyQ{i}"), char_device=False)
    cfg = os.path.join(dirs.work, "config.yaml")
    write_config(cfg, hostdev_config([
        {"name": "fuse", "groups": [{"count": 3, "paths": [{"path": fuse}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": os.path.join(dirs.dev, "ttyQ*")}]}]},
    ]))
    out = list_json(["--backends", "hostdev", "--config-file", cfg])
    devs = devices(out, "devlet.io/fuse")
    assert [d["id"] for d in devs] == ["fuse-0", "fuse-1", "fuse-2"]
    for d in devs:
        dra = d["dra"]
        assert dra["driver"] == "hostdev.devlet.io"
        assert dra["name"] == "fuse-0"  # three IDs, one device
        assert value(dra, "path") == ("string", fuse)
        assert value(dra, "resource") == ("string", "devlet.io/fuse")
        if os.geteuid() == 0:
            assert value(dra, "major") == ("int", 10)
            assert value(dra, "minor") == ("int", 229)
        assert dra["capacity"] == {}
    serial = [d["dra"] for d in devices(out, "devlet.io/serial")]
    assert [s["name"] for s in serial] == ["serial-0", "serial-1"]
    assert value(serial[1], "path") == ("string", os.path.join(dirs.dev, "ttyQ1"))
    assert len(units(out)) == 3
