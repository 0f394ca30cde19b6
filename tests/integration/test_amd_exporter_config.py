"""AMD's device metrics exporter's config.json (--amd-metrics-config, the
amd-metrics-exporter name's -amd-metrics-config) on the fake MI300X sysfs
tree: GPUConfig.Fields restricts the AMD families, Labels adds the optional
labels (the mandatory ones stay), CustomLabels adds constant labels,
ExtraPodLabels labels the series of a GPU or partition one pod holds with
that pod's Kubernetes labels (the fake API server serving the pod, the
simulated pod-resources socket attributing it);
CommonConfig.MetricsFieldPrefix renames the families; --collectors takes
AMD's UPPER_CASE field names; a changed file (written atomically, or a
ConfigMap's ..data symlink swapped) applies without a restart, a broken one
keeps the running config; a broken file at start-up is exit 2 with its
file:line:column."""

import json
import os
import pathlib
import sys

import pytest
import yaml

from devlet_harness import run_devlet
from metrics_sim import PodResourcesSim, metrics_port, parse, promtool_check, scrape, select, \
    wait_samples

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock-amd"))
import gen_sysfs  # noqa: E402

NODE = "amd-node-1"
WAIT = 15.0
MANDATORY = {"gpu_id", "serial_number", "card_model", "hostname", "gpu_partition_id",
             "gpu_compute_partition_type", "gpu_memory_partition_type"}
# AMD's own names that promtool's lint dislikes (as test_amd_metrics.py)
AMD_LINT = ("_count", "_counter")


def promtool_ok(text):
    rc, out = promtool_check(text)
    if rc == 3:
        rest = [line for line in out.splitlines()
                if line.strip() and not line.split()[0].endswith(AMD_LINT)]
        return (0, out) if not rest else (rc, out)
    return rc, out


@pytest.fixture
def sysfs(dirs):
    with open(ROOT / "tests" / "mock-amd" / "profiles" / "mi300x-8x-spx.yaml") as f:
        p = yaml.safe_load(f)
    path = os.path.join(dirs.run, "sys")
    gen_sysfs.generate(p, path, dirs.run)
    return path


def write_atomic(path, content):
    """As an editor or kubectl cp would: a new file renamed over the old."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content, indent=2))
    os.rename(tmp, path)


def collect(dirs, sysfs, *extra):
    res = run_devlet(["metrics", "--backends", "amd", "--sysfs-root", sysfs, "--hostname-label",
                      "hostname", "--pod-resources-socket", os.path.join(dirs.run, "none.sock"), *extra],
                     env={"NODE_NAME": NODE})
    assert res.returncode == 0, res.stderr
    rc, out = promtool_ok(res.stdout)
    assert rc == 0, out
    return res, parse(res.stdout)


def device_families(samples):
    return {n for n, _, _ in samples if not n.startswith("devlet_")}


def test_fields_labels_custom_labels_and_prefix(dirs, sysfs):
    cfg = os.path.join(dirs.run, "config.json")
    write_atomic(cfg, {
        "ServerPort": 5000,
        "GPUConfig": {
            "Fields": ["GPU_GFX_ACTIVITY", "GPU_PACKAGE_POWER", "GPU_CLOCK", "GPU_PROF_SM_ACTIVE",
                       "GPU_NODES_TOTAL", "GPU_MADE_UP_FIELD"],
            "Labels": ["GPU_UUID", "DRIVER_VERSION", "VBIOS_VERSION", "SERIAL_NUMBER", "CARD_VENDOR"],
            "CustomLabels": {"CLUSTER_NAME": "west", "team": "ml", "GPU_ID": "refused"},
        },
        "CommonConfig": {"MetricsFieldPrefix": "amd_"},
    })
    res, samples = collect(dirs, sysfs, "--amd-metrics-config", cfg)
    assert device_families(samples) == {"amd_gpu_gfx_activity", "amd_gpu_package_power",
                                        "amd_gpu_clock"}
    assert len(select(samples, "amd_gpu_gfx_activity")) == 8
    (labels, v), = select(samples, "amd_gpu_gfx_activity", gpu_id="2")
    assert v == 14
    assert MANDATORY <= set(labels)
    assert labels["gpu_uuid"] == "3b8f0e2c5a712222"
    assert labels["driver_version"] and labels["vbios_version"] == "113-D65201-X"
    assert labels["cluster_name"] == "west" and labels["team"] == "ml"
    assert labels["gpu_id"] == "2"  # a custom label cannot override AMD's own
    # value labels stay beside the unit's
    clocks = select(samples, "amd_gpu_clock", gpu_id="0")
    assert clocks and all("clock_type" in lab and lab["team"] == "ml" for lab, _ in clocks)
    # each name devlet does not know or cannot give is said, with its place
    assert f'{cfg}:' in res.stderr
    assert "GPU_MADE_UP_FIELD" in res.stderr
    assert "GPU_PROF_SM_ACTIVE" in res.stderr and "GPU_NODES_TOTAL" in res.stderr
    assert "CARD_VENDOR" in res.stderr and "GPU_ID" in res.stderr


def test_no_file_and_empty_fields_are_amds_defaults(dirs, sysfs):
    _, plain = collect(dirs, sysfs)
    _, missing = collect(dirs, sysfs, "--amd-metrics-config", os.path.join(dirs.run, "none.json"))
    cfg = os.path.join(dirs.run, "config.json")
    write_atomic(cfg, {"GPUConfig": {"Fields": [], "Labels": []}})
    _, empty = collect(dirs, sysfs, "--amd-metrics-config", cfg)
    assert device_families(plain) == device_families(missing) == device_families(empty)
    (labels, _), = select(empty, "gpu_gfx_activity", gpu_id="1")
    assert set(labels) == MANDATORY


def test_collectors_take_amds_field_names(dirs, sysfs):
    csv = os.path.join(dirs.run, "counters.csv")
    with open(csv, "w") as f:
        f.write("# AMD's names\nGPU_GFX_ACTIVITY, gauge, activity\nGPU_TOTAL_VRAM, gauge, vram\n")
    res, samples = collect(dirs, sysfs, "--collectors", csv)
    assert device_families(samples) == {"gpu_gfx_activity", "gpu_total_vram"}
    assert "does not export" not in res.stderr
    # with a prefix the field keeps its name
    cfg = os.path.join(dirs.run, "config.json")
    write_atomic(cfg, {"CommonConfig": {"MetricsFieldPrefix": "amd_"}})
    _, samples = collect(dirs, sysfs, "--collectors", csv, "--amd-metrics-config", cfg)
    assert device_families(samples) == {"amd_gpu_gfx_activity", "amd_gpu_total_vram"}


def test_broken_file_at_start_is_exit_2_with_its_place(dirs, sysfs):
    cfg = os.path.join(dirs.run, "config.json")
    write_atomic(cfg, '{\n  "GPUConfig": {\n    "Fields": {"GPU_GFX_ACTIVITY": 1}\n  }\n}\n')
    r = run_devlet(["run", "--backends", "amd", "--sysfs-root", sysfs, "--serve", "metrics",
                    "--metrics-address", "127.0.0.1:0", "--amd-metrics-config", cfg])
    assert r.returncode == 2, r.stderr
    assert f"{cfg}:3:15" in r.stderr
    write_atomic(cfg, '{"GPUConfig": [}')
    r = run_devlet(["run", "--backends", "amd", "--sysfs-root", sysfs, "--serve", "metrics",
                    "--metrics-address", "127.0.0.1:0", "--amd-metrics-config", cfg])
    assert r.returncode == 2, r.stderr
    assert f"{cfg}:1:" in r.stderr


def start(devlet, dirs, sysfs, cfg):
    d = devlet(args=["--backends", "amd", "--sysfs-root", sysfs, "--dev-root", dirs.run,
                     "--serve", "metrics", "--metrics-address", "127.0.0.1:0",
                     "--collect-interval", "100", "--hostname-label", "hostname",
                     "--pod-resources-socket", os.path.join(dirs.run, "none.sock"),
                     "--amd-metrics-config", cfg],
               env={"NODE_NAME": NODE})
    return d, metrics_port(d)


def families_are(want):
    return lambda samples: device_families(samples) == want or None


def test_changed_file_applies_without_restart(devlet, dirs, sysfs):
    cfg = os.path.join(dirs.run, "config.json")  # not there yet: AMD's defaults
    d, port = start(devlet, dirs, sysfs, cfg)
    wait_samples(port, lambda s: {"gpu_gfx_activity", "gpu_total_vram"} <= device_families(s),
                 WAIT, "every family")
    write_atomic(cfg, {"GPUConfig": {"Fields": ["GPU_GFX_ACTIVITY"]}})
    wait_samples(port, families_are({"gpu_gfx_activity"}), WAIT, "Fields applied")
    write_atomic(cfg, {"GPUConfig": {"Fields": ["GPU_POWER_USAGE"], "CustomLabels": {"zone": "a"}},
                       "CommonConfig": {"MetricsFieldPrefix": "amd_"}})
    samples = wait_samples(port, lambda s: s if families_are({"amd_gpu_power_usage"})(s) else None,
                           WAIT, "prefix and custom label applied")
    assert all(lab["zone"] == "a" for lab, _ in select(samples, "amd_gpu_power_usage"))
    # a broken file: said with its place, the running config stays
    since = d.log_size()
    write_atomic(cfg, '{"GPUConfig": {"Fields": [}}')
    d.wait_log(rf"refused, keeping the running one.*{cfg}:1:", since=since, timeout=WAIT)
    samples = parse(scrape(port))
    assert device_families(samples) == {"amd_gpu_power_usage"}
    assert d.alive()


def test_configmap_data_swap_applies(devlet, dirs, sysfs):
    """A ConfigMap volume: config.json -> ..data/config.json, ..data -> a
    timestamped directory, swapped by renaming a new ..data link over it."""
    vol = os.path.join(dirs.run, "configmap")
    os.makedirs(os.path.join(vol, "..v1"))
    write_atomic(os.path.join(vol, "..v1", "config.json"), {"GPUConfig": {"Fields": ["GPU_TOTAL_VRAM"]}})
    os.symlink("..v1", os.path.join(vol, "..data"))
    os.symlink("..data/config.json", os.path.join(vol, "config.json"))
    d, port = start(devlet, dirs, sysfs, os.path.join(vol, "config.json"))
    wait_samples(port, families_are({"gpu_total_vram"}), WAIT, "the first version")
    os.makedirs(os.path.join(vol, "..v2"))
    write_atomic(os.path.join(vol, "..v2", "config.json"),
                 {"GPUConfig": {"Fields": ["GPU_HEALTH"], "Labels": ["DRIVER_VERSION"]}})
    os.symlink("..v2", os.path.join(vol, "..data_tmp"))
    os.rename(os.path.join(vol, "..data_tmp"), os.path.join(vol, "..data"))
    samples = wait_samples(port, lambda s: s if families_are({"gpu_health"})(s) else None, WAIT,
                           "the swapped version")
    assert all("driver_version" in lab for lab, _ in select(samples, "gpu_health"))
    assert d.alive()


@pytest.fixture
def podres(dirs):
    sim = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    yield sim
    sim.stop()


def test_extra_pod_labels_from_the_pod_holding_the_gpu(devlet, dirs, api, kubeconfig, podres):
    """ExtraPodLabels in a file changed at run time: the pod-label source
    starts then (no API call before), and the series of GPU 2, which one pod
    holds, carry its labels ("" for a key the pod lacks, as AMD's exporter);
    the other GPUs' series do not (no pod, so no pod label, as devlet's pod
    and namespace labels)."""
    with open(ROOT / "tests" / "mock-amd" / "profiles" / "mi300x-8x-spx.yaml") as f:
        p = yaml.safe_load(f)
    sysfs = os.path.join(dirs.run, "sys")
    m = gen_sysfs.generate(p, sysfs, dirs.run)
    api.put_pod("team", "trainer", NODE, {"amd-workload-id": "wl-42", "app": "llm"})
    api.put_pod("team", "elsewhere", "node-b", {"amd-workload-id": "other"})
    podres.pods = [("team", "trainer", [("main", [("amd.com/gpu", [m["gpus"][2]["bdf"]])])])]
    podres.start()
    cfg = os.path.join(dirs.run, "config.json")
    write_atomic(cfg, {"GPUConfig": {"Fields": ["GPU_GFX_ACTIVITY", "GPU_TOTAL_VRAM"]}})
    d = devlet(args=["--backends", "amd", "--sysfs-root", sysfs, "--dev-root", dirs.run,
                     "--serve", "metrics", "--metrics-address", "127.0.0.1:0",
                     "--collect-interval", "100", "--hostname-label", "hostname",
                     "--pod-resources-socket", os.path.join(dirs.run, "pod-resources.sock"),
                     "--container-state-dirs", os.path.join(dirs.run, "state"),
                     "--kubeconfig", kubeconfig, "--amd-metrics-config", cfg],
               env={"NODE_NAME": NODE})
    port = metrics_port(d)
    wait_samples(port, lambda s: select(s, "gpu_gfx_activity", gpu_id="2", pod="trainer") or None,
                 WAIT, "GPU 2 attributed")
    # nothing asks for pod labels yet: the API server is not asked
    assert api.hit_count("pods") == 0 and api.hit_count("podwatch") == 0
    write_atomic(cfg, {"GPUConfig": {"Fields": ["GPU_GFX_ACTIVITY", "GPU_TOTAL_VRAM"],
                                     "ExtraPodLabels": {"WORKLOAD_ID": "amd-workload-id",
                                                        "team_tier": "tier"}}})
    wait_samples(port, lambda s: select(s, "gpu_gfx_activity", gpu_id="2", workload_id="wl-42") or None,
                 WAIT, "GPU 2's workload_id")
    text = scrape(port)
    rc, out = promtool_ok(text)
    assert rc == 0, out
    samples = parse(text)
    held = [(n, lab) for n, lab, _ in samples if lab.get("gpu_id") == "2" and not n.startswith("devlet_")]
    assert {n for n, _ in held} == {"gpu_gfx_activity", "gpu_total_vram"}
    for name, lab in held:
        assert lab["workload_id"] == "wl-42" and lab["team_tier"] == "", (name, lab)
        assert lab["pod"] == "trainer" and "app" not in lab, (name, lab)
    for name, lab, _ in samples:
        if lab.get("gpu_id") not in (None, "2"):
            assert "workload_id" not in lab and "team_tier" not in lab, (name, lab)
    # only the node's pods are asked for; the label is not "not exported"
    assert any("fieldSelector=spec.nodeName%3Damd-node-1" in q for _, q in api.requests), api.requests
    assert "not exported" not in d.log_text()
    # a changed pod label comes through the watch
    api.put_pod("team", "trainer", NODE, {"amd-workload-id": "wl-43", "tier": "gold"})
    samples = wait_samples(port, lambda s: s if select(s, "gpu_total_vram", gpu_id="2", workload_id="wl-43",
                                                       team_tier="gold") else None,
                           WAIT, "the changed pod labels")
    assert d.alive()
