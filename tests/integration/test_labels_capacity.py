"""Labels and capacity can never disagree: on every mock profile, under every
MIG strategy, with and without time-slicing, each NVIDIA resource devlet
serves (`devlet list -o json`) has the GFD labels (`devlet labels`) saying
so: <resource>.count GPUs or MIG devices, times <resource>.replicas, equals
the devices served; every nvidia.com/mig-<profile> label names a resource
served with that many devices.  NVIDIA's plugin and GFD disagree here (a
1c.3g.40gb compute instance is served as mig-3g.40gb but labelled
mig-1c.3g.40gb; nvidia.com/gpu.count counts MIG-enabled GPUs under mixed)."""

import json
import os
import pathlib

import pytest

from devlet_harness import run_devlet
from mock_gpus import MOCK_LIB, PROFILES as PROFILES_DIR

QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
PROFILES = sorted(p.name[:-5] for p in pathlib.Path(PROFILES_DIR).glob("*.yaml"))
SHARING = {"none": None,
           "time-slicing": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                           "      - name: nvidia.com/gpu\n        replicas: 3\n"}


def devlet_json(args, env):
    res = run_devlet(args, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("sharing", sorted(SHARING))
@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
@pytest.mark.parametrize("profile", PROFILES)
def test_label_counts_equal_devices_served(profile, strategy, sharing, tmp_path):
    env = {**QUIET, "DEVLET_NVML_LIBRARY": MOCK_LIB,
           "MOCK_NVML_CONFIG": os.path.join(PROFILES_DIR, profile + ".yaml")}
    args = ["--backends", "nvidia", "--mig-strategy", strategy]
    if SHARING[sharing]:
        cfg = tmp_path / "config.yaml"
        cfg.write_text(SHARING[sharing])
        args += ["--config-file", str(cfg)]
    served = {r["name"]: len(r["devices"])
              for r in json.loads(devlet_json(["list", "-o", "json", *args], env))["resources"]}
    text = devlet_json(["labels", "--no-timestamp", "--machine-type-file", "", *args], env)
    labels = dict(line.split("=", 1) for line in text.split())
    for name, n in served.items():
        count = int(labels[f"{name}.count"])
        replicas = max(int(labels.get(f"{name}.replicas", "1")), 1)
        assert count * replicas == n, (name, labels)
    for key, value in labels.items():
        if key.startswith("nvidia.com/mig-") and key.endswith(".count"):
            name = key[:-len(".count")]
            replicas = max(int(labels.get(f"{name}.replicas", "1")), 1)
            assert served.get(name, 0) == int(value) * replicas, (key, served)
    if strategy == "single" and "nvidia.com/gpu.product" in labels and \
            labels["nvidia.com/gpu.product"].endswith("-MIG-INVALID"):
        assert labels["nvidia.com/gpu.count"] == "0" and not served
