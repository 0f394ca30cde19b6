"""A Python NVML client loads the mock libnvidia-ml.so.1 the way pynvml does.

pynvml itself cannot be installed here (no python3-pynvml in the Debian
archive areas this system uses, and no PyPI), so the client here is a few
ctypes declarations in the same style: it loads
"libnvidia-ml.so.1" by soname, found through LD_LIBRARY_PATH, in a child
process, and reports what NVML told it; the test compares that with the
profile's YAML.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from devlet_harness import BUILD

ROOT = Path(__file__).resolve().parents[2]
LIBDIR = BUILD / "mock-nvml"
PROFILES = ROOT / "tests" / "mock-nvml" / "profiles"

CLIENT = r"""
import ctypes, json, sys
from ctypes import byref, c_char, c_uint, c_ulonglong, c_void_p, create_string_buffer

class Memory(ctypes.Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]

class Attributes(ctypes.Structure):
    _fields_ = [("multiprocessorCount", c_uint), ("sharedCopyEngineCount", c_uint),
                ("sharedDecoderCount", c_uint), ("sharedEncoderCount", c_uint),
                ("sharedJpegCount", c_uint), ("sharedOfaCount", c_uint),
                ("gpuInstanceSliceCount", c_uint), ("computeInstanceSliceCount", c_uint),
                ("memorySizeMB", c_ulonglong)]

class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", c_char * 16), ("domain", c_uint), ("bus", c_uint),
                ("device", c_uint), ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint),
                ("busId", c_char * 32)]

nvml = ctypes.CDLL("libnvidia-ml.so.1")
nvml.nvmlErrorString.restype = ctypes.c_char_p

def check(ret):
    if ret != 0:
        raise SystemExit("NVML error %d: %s" % (ret, nvml.nvmlErrorString(ret).decode()))

def text(fn, handle):
    buf = create_string_buffer(96)
    check(fn(handle, buf, c_uint(96)))
    return buf.value.decode()

check(nvml.nvmlInit_v2())
out = {"driver": None, "gpus": []}
buf = create_string_buffer(80)
check(nvml.nvmlSystemGetDriverVersion(buf, c_uint(80)))
out["driver"] = buf.value.decode()
count = c_uint()
check(nvml.nvmlDeviceGetCount_v2(byref(count)))
for i in range(count.value):
    h = c_void_p()
    check(nvml.nvmlDeviceGetHandleByIndex_v2(c_uint(i), byref(h)))
    mem = Memory()
    check(nvml.nvmlDeviceGetMemoryInfo(h, byref(mem)))
    pci = PciInfo()
    check(nvml.nvmlDeviceGetPciInfo_v3(h, byref(pci)))
    gpu = {"name": text(nvml.nvmlDeviceGetName, h), "uuid": text(nvml.nvmlDeviceGetUUID, h),
           "total": mem.total, "busId": pci.busId.decode(), "mig": None}
    cur, pend = c_uint(), c_uint()
    if nvml.nvmlDeviceGetMigMode(h, byref(cur), byref(pend)) == 0 and cur.value == 1:
        gpu["mig"] = []
        n = c_uint()
        check(nvml.nvmlDeviceGetMaxMigDeviceCount(h, byref(n)))
        for k in range(n.value):
            m = c_void_p()
            if nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, c_uint(k), byref(m)) != 0:
                continue
            attr = Attributes()
            check(nvml.nvmlDeviceGetAttributes_v2(m, byref(attr)))
            gi = c_uint()
            check(nvml.nvmlDeviceGetGpuInstanceId(m, byref(gi)))
            gpu["mig"].append({"uuid": text(nvml.nvmlDeviceGetUUID, m),
                               "name": text(nvml.nvmlDeviceGetName, m),
                               "gi": gi.value, "memory": attr.memorySizeMB,
                               "sms": attr.multiprocessorCount})
    out["gpus"].append(gpu)
check(nvml.nvmlShutdown())
json.dump(out, sys.stdout)
"""


def run_client(profile):
    lib = LIBDIR / "libnvidia-ml.so.1"
    assert lib.exists(), f"{lib} is missing: run make first"
    env = dict(os.environ, LD_LIBRARY_PATH=str(LIBDIR), MOCK_NVML_CONFIG=str(PROFILES / profile))
    done = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def load_profile(name):
    with open(PROFILES / name) as f:
        return yaml.safe_load(f)


def test_every_profile_enumerates_as_configured():
    for name in sorted(p.name for p in PROFILES.glob("*.yaml")):
        cfg = load_profile(name)
        got = run_client(name)
        assert got["driver"] == cfg["driverVersion"]
        assert [g["uuid"] for g in got["gpus"]] == [d["uuid"] for d in cfg["devices"]]
        assert [g["name"] for g in got["gpus"]] == [d["name"] for d in cfg["devices"]]
        # NVML writes the hex digits of bus IDs in upper case.
        assert [g["busId"] for g in got["gpus"]] == [d["pciBusId"].upper() for d in cfg["devices"]]
        for g, d in zip(got["gpus"], cfg["devices"]):
            assert g["total"] == (d["memoryMiB"] - d.get("memoryReservedMiB", 0)) << 20, name


def test_mig_devices_as_configured():
    cfg = load_profile("a100-mig-mixed.yaml")
    got = run_client("a100-mig-mixed.yaml")
    for g, d in zip(got["gpus"], cfg["devices"]):
        if "mig" not in d:
            assert g["mig"] is None
            continue
        assert [m["uuid"] for m in g["mig"]] == [m["uuid"] for m in d["mig"]]
        assert [m["gi"] for m in g["mig"]] == [m["gi"] for m in d["mig"]]
        assert [m["memory"] for m in g["mig"]] == [m["memoryMiB"] for m in d["mig"]]
        assert [m["sms"] for m in g["mig"]] == [m["multiprocessors"] for m in d["mig"]]
        assert [m["name"] for m in g["mig"]] == [f"{d['name']} MIG {m['profile']}" for m in d["mig"]]
