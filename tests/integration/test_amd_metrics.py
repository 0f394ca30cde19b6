"""AMD GPU metrics from the fake sysfs trees (tests/mock-amd): AMD's device
metrics exporter's family and label names, values as sysfs gives them,
checked by promtool and scraped by a real Prometheus; attribution of a GPU
to the pod holding it (one of its partitions, by AMD's device IDs) through
the kubelet's pod-resources API; gpu_health following devlet's verdict."""

import os
import pathlib
import sys

import pytest
import yaml

from devlet_harness import run_devlet, wait_until
from metrics_sim import (PodResourcesSim, Prometheus, metrics_port, parse, promtool_check, select,
                         wait_samples)

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock-amd"))
import gen_sysfs  # noqa: E402

NODE = "amd-node-1"
WAIT = 15.0
FAMILIES = ["gpu_gfx_activity", "gpu_umc_activity", "gpu_used_vram", "gpu_total_vram",
            "gpu_free_vram", "gpu_junction_temperature", "gpu_memory_temperature",
            "gpu_package_power", "gpu_power_usage", "gpu_energy_consumed", "gpu_clock",
            "gpu_ecc_correct_total", "gpu_ecc_uncorrect_total", "gpu_health"]


def tree(dirs, profile):
    with open(ROOT / "tests" / "mock-amd" / "profiles" / f"{profile}.yaml") as f:
        p = yaml.safe_load(f)
    sysfs = os.path.join(dirs.run, "sys")
    return sysfs, gen_sysfs.generate(p, sysfs, dirs.run)


@pytest.fixture
def podres(dirs):
    sim = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    yield sim
    sim.stop()


def start(devlet, dirs, sysfs, *extra):
    d = devlet(args=["--backends", "amd", "--sysfs-root", sysfs, "--dev-root", dirs.run,
                     "--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
                     "--hostname-label", "hostname", "--amd-health-interval", "50ms",
                     "--pod-resources-socket", os.path.join(dirs.run, "pod-resources.sock"),
                     "--container-state-dirs", os.path.join(dirs.run, "state"), *extra],
               env={"NODE_NAME": NODE})
    return d, metrics_port(d)


def test_one_collection_with_amds_names(dirs):
    sysfs, m = tree(dirs, "mi300x-8x-spx")
    res = run_devlet(["metrics", "--backends", "amd", "--sysfs-root", sysfs, "--hostname-label",
                      "hostname", "--pod-resources-socket", os.path.join(dirs.run, "none.sock")],
                     env={"NODE_NAME": NODE})
    assert res.returncode == 0, res.stderr
    rc, out = promtool_check(res.stdout)
    assert rc == 0, out
    samples = parse(res.stdout)
    for family in FAMILIES:
        assert len(select(samples, family)) == 8, family
    # MI300X reports no edge temperature: the family is absent, not zero
    assert not select(samples, "gpu_edge_temperature")
    (labels, v), = select(samples, "gpu_gfx_activity", gpu_id="2")
    assert v == 14
    assert labels == {"gpu_id": "2", "serial_number": m["gpus"][2]["serial"],
                      "card_model": "AMD Instinct MI300X OAM", "hostname": NODE,
                      "gpu_partition_id": "0", "gpu_compute_partition_type": "spx",
                      "gpu_memory_partition_type": "nps1"}
    assert select(samples, "gpu_used_vram", gpu_id="2")[0][1] == 302
    assert select(samples, "gpu_total_vram", gpu_id="2")[0][1] == 192 * 1024
    assert select(samples, "gpu_junction_temperature", gpu_id="2")[0][1] == 54
    assert select(samples, "gpu_package_power", gpu_id="2")[0][1] == 184
    (clock, v), = select(samples, "gpu_clock", gpu_id="0")
    assert clock["clock_type"] == "GPU_CLOCK_TYPE_SYSTEM" and v == 1300
    assert all(v == 1 for _, v in select(samples, "gpu_health"))


def test_pod_on_a_partition_and_health(devlet, dirs, podres):
    sysfs, m = tree(dirs, "mi300x-8x-cpx")
    xcp = m["gpus"][1]["devices"][3]["id"]  # a partition of GPU 1
    podres.pods = [("team-a", "infer-0", [("main", [("amd.com/gpu", [xcp])])]),
                   ("ns", "other", [("x", [("example.com/fpga", ["5"])])])]
    podres.start()
    d, port = start(devlet, dirs, sysfs)
    samples = wait_samples(port, lambda s: s if select(s, "gpu_gfx_activity", gpu_id="1", pod="infer-0")
                           else None, WAIT, "GPU 1's series with the pod")
    (lab, _), = select(samples, "gpu_gfx_activity", gpu_id="1")
    assert (lab["pod"], lab["namespace"], lab["container"]) == ("infer-0", "team-a", "main")
    assert all("pod" not in lab for lab, _ in select(samples, "gpu_gfx_activity", gpu_id="2"))
    # an uncorrectable error: devlet's verdict reaches gpu_health and the ECC counter
    with open(os.path.join(m["gpus"][4]["sysfs"], "ras", "umc_err_count"), "w") as f:
        f.write("ue: 3\nce: 1\n")
    samples = wait_samples(port, lambda s: s if select(s, "gpu_health", gpu_id="4")[0][1] == 0 else None,
                           WAIT, "GPU 4 unhealthy in gpu_health")
    assert select(samples, "gpu_ecc_uncorrect_total", gpu_id="4")[0][1] == 3
    assert select(samples, "gpu_health", gpu_id="3")[0][1] == 1


def test_prometheus_scrapes_amd_gpus(devlet, dirs, podres):
    sysfs, m = tree(dirs, "mi210-pair")
    podres.pods = [("team-b", "train-0", [("main", [("amd.com/gpu", [m["gpus"][0]["bdf"]])])])]
    podres.start()
    d, port = start(devlet, dirs, sysfs)
    prom = Prometheus([f"127.0.0.1:{port}"])
    try:
        prom.wait_ready()
        result = wait_until(lambda: (lambda r: r if len(r) == 4 else None)(
            prom.query("gpu_edge_temperature")), 60, "4 edge temperature series", interval=0.2)
        by_gpu = {s["metric"]["gpu_id"]: s for s in result}
        zero = by_gpu["0"]["metric"]
        assert (zero["pod"], zero["namespace"], zero["hostname"]) == ("train-0", "team-b", NODE)
        assert "pod" not in by_gpu["1"]["metric"]
        assert float(by_gpu["3"]["value"][1]) == 41
    except Exception:
        print(prom.log_text())
        raise
    finally:
        prom.stop()


def test_container_with_a_render_node_is_attributed(devlet, dirs):
    """A container the kubelet never told us about, given GPU 1's render node
    (AMD's Allocate gives the DRM nodes; a hand-run container can too): its
    OCI spec's device numbers (char 226) attribute GPU 1 to it."""
    from metrics_sim import PODMAN_STATE_DIRS, busybox_rootfs, cri_annotations, podman_rm, podman_start
    with open(ROOT / "tests" / "mock-amd" / "profiles" / "mi210-pair.yaml") as f:
        p = yaml.safe_load(f)
    sysfs = os.path.join(dirs.run, "sys")
    m = gen_sysfs.generate(p, sysfs, dirs.run, mknod=True)
    render = m["gpus"][1]["devices"][0]["render"]
    d = devlet(args=["--backends", "amd", "--sysfs-root", sysfs, "--dev-root", dirs.run,
                     "--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "none.sock"),
                     "--container-state-dirs", ",".join(PODMAN_STATE_DIRS)],
               env={"NODE_NAME": NODE})
    port = metrics_port(d)
    rootfs = busybox_rootfs(os.path.join(dirs.root, "rootfs"))
    cid = podman_start(rootfs, "--device", f"{dirs.run}/dev/dri/renderD{render}:/dev/dri/renderD{render}",
                       *cri_annotations("gpu-team", "hand-run", "rocm"))
    try:
        samples = wait_samples(port, lambda s: s if select(s, "gpu_gfx_activity", gpu_id="1", pod="hand-run")
                               else None, WAIT, "GPU 1 attributed to the container")
        (lab, _), = select(samples, "gpu_gfx_activity", gpu_id="1")
        assert (lab["namespace"], lab["container"]) == ("gpu-team", "rocm")
        for gpu in ("0", "2", "3"):
            assert all("pod" not in lab for lab, _ in select(samples, "gpu_gfx_activity", gpu_id=gpu))
    finally:
        podman_rm(cid)
