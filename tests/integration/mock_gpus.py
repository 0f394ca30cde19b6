"""The mock NVML's node, for the GPU tests, the demo and the benchmark.

MockNode holds a node as data (a profile from tests/mock-nvml/profiles, or
one built in code) and writes it as the YAML file named by MOCK_NVML_CONFIG,
atomically (a temporary file renamed over it), so the mock in a running
devlet sees each change whole on its next call: XID events appended to
`events`, a GPU made lost or found again, a GPU added.  env() is what devlet
needs to load the mock (build/mock-nvml/libnvidia-ml.so.1).

start() runs devlet on a node and waits until the kubelet has a first
ListAndWatch snapshot of each resource named.

mig_minors() writes the driver's /proc/driver/nvidia-caps/mig-minors for a
fake proc root (DEVLET_PROC_ROOT), with the numbering the driver uses.
"""

import copy
import os
from typing import Dict, List, Optional

import yaml

from kubelet_sim import BUILD_DIR

GPU = "nvidia.com/gpu"
# v100-dgx1's GPUs by index
V100 = ["GPU-907a70c3-1012-f037-b64c-e4228c38fb29", "GPU-881ed162-ae2e-b154-7f15-052434b9b5df",
        "GPU-5c90a958-7403-e430-ec66-a78795e761d1", "GPU-c7a2ea20-b2f1-4c94-2e05-319acb5c7427",
        "GPU-7ebff206-8673-4721-4cdd-2055930d6eaf", "GPU-9be4bcfc-49b6-4a08-72e6-cc3ababced20",
        "GPU-2a3af4d4-6b0a-18e8-830e-07bc1e398f10", "GPU-6bf46c69-7d2c-af82-eeea-cbe226e87555"]

MOCK_LIB = os.path.join(BUILD_DIR, "mock-nvml", "libnvidia-ml.so.1")
PROFILES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mock-nvml", "profiles")


def load_profile(name: str) -> dict:
    with open(os.path.join(PROFILES, name + ".yaml")) as f:
        return yaml.safe_load(f)


class MockNode:
    """One node's YAML at path; data is the profile (or data given), copied."""

    def __init__(self, path: str, profile: Optional[str] = None, data: Optional[dict] = None):
        self.path = path
        self.data = copy.deepcopy(data) if data is not None else load_profile(profile)
        self.data.setdefault("devices", [])
        self.write()

    @property
    def devices(self) -> List[dict]:
        return self.data["devices"]

    def uuids(self) -> List[str]:
        return [d["uuid"] for d in self.devices]

    def mig_uuids(self, gpu: int) -> List[str]:
        return [m["uuid"] for m in self.devices[gpu].get("mig", [])]

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            yaml.safe_dump(self.data, f, sort_keys=False)
        os.replace(tmp, self.path)

    def xid(self, device, xid: int, gi: Optional[int] = None, ci: Optional[int] = None):
        """Appends one XID event (device: index or UUID) and writes the file."""
        self.xids([(device, xid, gi, ci)])

    def xids(self, events):
        """Appends (device, xid[, gi, ci]) events in order, in one write."""
        log = self.data.setdefault("events", [])
        for e in events:
            device, xid = e[0], e[1]
            ev = {"device": device, "type": "xid", "xid": xid}
            if len(e) > 2 and e[2] is not None:
                ev["gi"] = e[2]
            if len(e) > 3 and e[3] is not None:
                ev["ci"] = e[3]
            log.append(ev)
        self.write()

    def set_device(self, index: int, **fields):
        """Changes fields of one GPU (lost=True...) and writes the file."""
        self.devices[index].update(fields)
        self.write()

    def env(self, **extra) -> Dict[str, str]:
        return {"DEVLET_NVML_LIBRARY": MOCK_LIB, "MOCK_NVML_CONFIG": self.path, **extra}


def start(devlet, kubelet, node: MockNode, resources=(GPU,), config=None, args=(), env=None):
    """devlet (the conftest factory) on node; waits for each resource's
    registration and first snapshot."""
    d = devlet(config, args=list(args), env=node.env(**(env or {})))
    for r in resources:
        kubelet.wait_for_registration(r)
        kubelet.wait_for_snapshot(r)
    return d


def envs(resp, i=0) -> Dict[str, str]:
    """The envs of container response i of an AllocateResponse."""
    return dict(resp.container_responses[i].envs)


# The driver numbers MIG capability devices per GPU: 15 GPU instances of 1
# access node and 8 compute instances each, after "config" (1) and
# "monitor" (2).
_MIG_GIS, _MIG_CIS, _MIG_FIRST = 15, 8, 3


def mig_minor(gpu_minor: int, gi: int, ci: Optional[int] = None) -> int:
    base = _MIG_FIRST + (gpu_minor * _MIG_GIS + gi) * (1 + _MIG_CIS)
    return base if ci is None else base + 1 + ci


def mig_minors(proc_root: str, n_gpus: int) -> str:
    """Writes <proc_root>/driver/nvidia-caps/mig-minors; returns its path."""
    lines = ["config 1", "monitor 2"]
    for g in range(n_gpus):
        for gi in range(_MIG_GIS):
            lines.append(f"gpu{g}/gi{gi}/access {mig_minor(g, gi)}")
            lines += [f"gpu{g}/gi{gi}/ci{ci}/access {mig_minor(g, gi, ci)}" for ci in range(_MIG_CIS)]
    path = os.path.join(proc_root, "driver", "nvidia-caps", "mig-minors")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
