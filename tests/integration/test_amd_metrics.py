"""AMD GPU metrics from the fake sysfs trees (tests/mock-amd): AMD's device
metrics exporter's family and label names, values as sysfs and the
firmware's gpu_metrics table give them (every layout version, truncated
and garbage tables), checked by promtool and scraped by a real Prometheus;
one series per partition of a partitioned GPU; attribution of a partition
to the pod holding it (by AMD's device IDs) through the kubelet's
pod-resources API; gpu_health following devlet's verdict."""

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
# one series per MI300X (SPX)
FAMILIES = ["gpu_gfx_activity", "gpu_umc_activity", "gpu_used_vram", "gpu_total_vram",
            "gpu_free_vram", "gpu_junction_temperature", "gpu_memory_temperature",
            "gpu_package_power", "gpu_power_usage", "gpu_energy_consumed",
            "gpu_ecc_correct_total", "gpu_ecc_uncorrect_total", "gpu_health",
            "gpu_used_visible_vram", "gpu_total_visible_vram", "gpu_free_visible_vram",
            "gpu_used_gtt", "gpu_total_gtt", "gpu_free_gtt", "gpu_vram_max_bandwidth",
            "pcie_speed", "pcie_max_speed", "pcie_bandwidth", "pcie_bidirectional_bandwidth",
            "pcie_replay_count", "pcie_recovery_count", "pcie_replay_rollover_count",
            "pcie_nack_sent_count", "pcie_nack_received_count",
            "gpu_violation_current_accumulated_counter",
            "gpu_violation_processor_hot_residency_accumulated",
            "gpu_violation_ppt_residency_accumulated",
            "gpu_violation_socket_thermal_residency_accumulated",
            "gpu_violation_vr_thermal_residency_accumulated",
            "gpu_violation_hbm_thermal_residency_accumulated",
            "gpu_ecc_deferred_total"] + [f"gpu_ecc_{kind}_{block}" for kind in ("correct", "uncorrect", "deferred")
                                         for block in ("umc", "gfx", "sdma", "mmhub", "xgmi_wafl", "bif",
                                                       "hdp", "athub")]
# several series per GPU: by clock, link, XCC, engine, HBM stack
LABELLED = {"gpu_clock": ("clock_index", "clock_type"), "gpu_min_clock": ("clock_type",),
            "gpu_max_clock": ("clock_type",), "gpu_xgmi_link_rx": ("link_index",),
            "gpu_xgmi_link_tx": ("link_index",), "gpu_gfx_busy_instantaneous": ("xcc_index",),
            "gpu_vcn_busy_instantaneous": ("vcn_index",), "gpu_jpeg_busy_instantaneous": ("jpeg_index",),
            "gpu_hbm_temperature": ("hbm_index",), "gpu_vcn_activity": ("vcn_index",),
            "gpu_jpeg_activity": ("jpeg_index",)}
# AMD's own names that promtool's lint dislikes (a gauge named *_count or
# *_counter): kept, as dashboards query them by these names
AMD_LINT = {"gpu_violation_current_accumulated_counter", "pcie_nack_received_count",
            "pcie_nack_sent_count", "pcie_recovery_count", "pcie_replay_count",
            "pcie_replay_rollover_count"}


def promtool_ok(text):
    """promtool parses the text; lint findings only on AMD_LINT's names."""
    rc, out = promtool_check(text)
    if rc == 3:
        rest = [line for line in out.splitlines() if line.strip() and line.split()[0] not in AMD_LINT]
        return (0, out) if not rest else (rc, out)
    return rc, out


def collect(dirs, sysfs, *extra):
    res = run_devlet(["metrics", "--backends", "amd", "--sysfs-root", sysfs, "--hostname-label",
                      "hostname", "--pod-resources-socket", os.path.join(dirs.run, "none.sock"), *extra],
                     env={"NODE_NAME": NODE})
    assert res.returncode == 0, res.stderr
    rc, out = promtool_ok(res.stdout)
    assert rc == 0, out
    return res.stdout, parse(res.stdout)


def families_of(text):
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def tree(dirs, profile, **override):
    with open(ROOT / "tests" / "mock-amd" / "profiles" / f"{profile}.yaml") as f:
        p = yaml.safe_load(f)
    p.update(override)
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
    text, samples = collect(dirs, sysfs)
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
    # clocks: the firmware's per-XCC graphics clocks, the DPM levels' range
    gfx = select(samples, "gpu_clock", gpu_id="0", clock_type="GPU_CLOCK_TYPE_SYSTEM")
    assert sorted(lab["clock_index"] for lab, _ in gfx) == [str(k) for k in range(8)]
    assert all(v == 1300 for _, v in gfx)
    assert select(samples, "gpu_clock", gpu_id="0", clock_type="GPU_CLOCK_TYPE_FABRIC")[0][1] == 2000
    assert select(samples, "gpu_min_clock", gpu_id="0", clock_type="GPU_CLOCK_TYPE_SYSTEM")[0][1] == 500
    assert select(samples, "gpu_max_clock", gpu_id="0", clock_type="GPU_CLOCK_TYPE_MEMORY")[0][1] == 1300
    # SPX: one partition of 8 XCCs; 7 XGMI links in use
    busy = select(samples, "gpu_gfx_busy_instantaneous", gpu_id="1")
    assert sorted(int(lab["xcc_index"]) for lab, _ in busy) == list(range(8))
    assert {lab["xcc_index"]: v for lab, v in busy}["3"] == (10 + 3 + 3) % 100
    rx = select(samples, "gpu_xgmi_link_rx", gpu_id="1")
    assert {lab["link_index"]: v for lab, v in rx} == {str(k): 2000 + k for k in range(7)}
    assert select(samples, "pcie_speed", gpu_id="0")[0][1] == 32
    assert select(samples, "pcie_nack_received_count", gpu_id="3")[0][1] == 6
    assert select(samples, "gpu_energy_consumed", gpu_id="1")[0][1] == 123456789001
    assert all(v == 1 for _, v in select(samples, "gpu_health"))
    for family, labels in LABELLED.items():
        for lab, _ in select(samples, family):
            assert all(k in lab for k in labels), (family, lab)


def test_cpx_one_series_per_partition(dirs):
    """MI300X in CPX: 64 partitions, each its own gpu_id and
    gpu_partition_id, its busy figure from gpu_metrics' xcp_stats and its
    VRAM from KFD; what the kernel gives per GPU only on partition 0."""
    sysfs, m = tree(dirs, "mi300x-8x-cpx")
    text, samples = collect(dirs, sysfs)
    busy = select(samples, "gpu_gfx_busy_instantaneous")
    assert len(busy) == 64
    seen = set()
    for lab, v in busy:
        unit = int(lab["gpu_id"])
        gpu, part = divmod(unit, 8)
        assert lab["gpu_partition_id"] == str(part)
        assert lab["serial_number"] == m["gpus"][gpu]["serial"]
        assert lab["gpu_compute_partition_type"] == "cpx"
        assert v == (10 + 3 * gpu + 11 * part) % 100
        seen.add((gpu, part))
    assert len(seen) == 64
    for family in ("gpu_total_vram", "gpu_used_vram", "gpu_free_vram", "gpu_health",
                   "gpu_vcn_busy_instantaneous"):
        assert len(select(samples, family)) == 64, family
    assert {v for _, v in select(samples, "gpu_total_vram")} == {24 * 1024}
    # per-GPU figures once per GPU, on its partition 0
    for family in ("gpu_junction_temperature", "gpu_package_power", "pcie_speed",
                   "gpu_violation_ppt_residency_accumulated", "gpu_ecc_correct_total"):
        got = select(samples, family)
        assert len(got) == 8, family
        assert {lab["gpu_partition_id"] for lab, _ in got} == {"0"}, family
    assert len(select(samples, "gpu_xgmi_link_rx")) == 8 * 7


@pytest.mark.parametrize("profile,expect,absent", [
    ("mi210-pair", {"gpu_edge_temperature", "gpu_hbm_temperature", "gpu_voltage", "gpu_gfx_voltage",
                    "gpu_memory_voltage", "gpu_mma_activity", "gpu_average_package_power"},
     {"gpu_xgmi_link_rx", "gpu_gfx_busy_instantaneous", "gpu_ecc_deferred_total"}),
    ("mi250-4x", {"gpu_hbm_temperature", "gpu_energy_consumed", "pcie_replay_count"},
     {"pcie_nack_sent_count"}),
    ("mi300x-8x-spx", set(FAMILIES) | set(LABELLED) - {"gpu_hbm_temperature", "gpu_vcn_activity",
                                                       "gpu_jpeg_activity"},
     {"gpu_edge_temperature", "gpu_hbm_temperature", "gpu_mma_activity"}),
])
def test_every_family_parses(dirs, profile, expect, absent):
    sysfs, _ = tree(dirs, profile)
    text, samples = collect(dirs, sysfs)
    have = families_of(text)
    assert expect <= have, expect - have
    assert not absent & have, absent & have


# what each gpu_metrics layout adds, and what it lacks
LAYOUTS = {
    "1.3": ({"gpu_hbm_temperature", "gpu_voltage", "gpu_mma_activity"},
            {"gpu_xgmi_link_rx", "pcie_bandwidth", "gpu_gfx_busy_instantaneous"}),
    "1.4": ({"gpu_xgmi_link_rx", "pcie_bandwidth", "gpu_vcn_activity", "pcie_recovery_count"},
            {"pcie_nack_sent_count", "gpu_jpeg_activity", "gpu_gfx_busy_instantaneous"}),
    "1.5": ({"pcie_nack_sent_count", "gpu_jpeg_activity", "gpu_xgmi_link_tx"},
            {"gpu_gfx_busy_instantaneous", "gpu_violation_ppt_residency_accumulated"}),
    "1.6": ({"gpu_gfx_busy_instantaneous", "gpu_violation_ppt_residency_accumulated"},
            {"gpu_vram_max_bandwidth", "gpu_vcn_activity"}),
    "1.7": ({"gpu_gfx_busy_instantaneous", "gpu_vram_max_bandwidth"}, {"gpu_hbm_temperature"}),
    "1.8": ({"gpu_jpeg_busy_instantaneous", "gpu_vram_max_bandwidth"}, {"gpu_voltage"}),
}


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_gpu_metrics_layout(dirs, version):
    """Each layout the kernel has: its families there, the others' absent;
    then broken tables on some GPUs: those lose the table's families and
    keep serving the rest."""
    sysfs, m = tree(dirs, "mi300x-8x-cpx", gpu_metrics=version)
    text, samples = collect(dirs, sysfs)
    present, missing = LAYOUTS[version]
    have = families_of(text)
    assert present <= have, present - have
    assert not missing & have, missing & have
    if "gpu_gfx_busy_instantaneous" in present:
        assert len(select(samples, "gpu_gfx_busy_instantaneous")) == 64
    if "gpu_xgmi_link_rx" in present:
        assert len(select(samples, "gpu_xgmi_link_rx", gpu_id="8")) == 7

    files = [os.path.join(g["sysfs"], "gpu_metrics") for g in m["gpus"]]
    with open(files[0], "rb") as f:
        good = f.read()
    broken = {
        0: good[:40],                                  # truncated: the head only
        1: bytes((i * 37 + 11) & 0xff for i in range(len(good))),  # garbage
        2: bytes([120, 0, 2, 1]) + bytes(116),         # an APU's v2.1
        3: good[:2],                                   # not even a header
        4: b"",                                        # empty
        5: bytes([0xff, 0xff, 1, 7]) + good[4:],       # a size no layout has
    }
    for gpu, blob in broken.items():
        with open(files[gpu], "wb") as f:
            f.write(blob)
    os.unlink(files[6])
    text, samples = collect(dirs, sysfs)
    for gpu in range(8):
        unit = str(gpu * 8)
        # sysfs figures stay whatever the table says
        assert len(select(samples, "gpu_junction_temperature", gpu_id=unit)) == 1
        assert len(select(samples, "gpu_clock", gpu_id=unit, clock_type="GPU_CLOCK_TYPE_SYSTEM")) >= 1
        table_families = [f for f in ("gpu_xgmi_link_rx", "pcie_bandwidth", "gpu_hbm_temperature")
                          if f in present]
        for family in table_families:
            got = select(samples, family, gpu_id=unit)
            assert bool(got) == (gpu == 7), (family, gpu)
    if "gpu_gfx_busy_instantaneous" in present:
        assert {lab["gpu_id"] for lab, _ in select(samples, "gpu_gfx_busy_instantaneous")} == \
            {str(56 + p) for p in range(8)}
    # the truncated table keeps its head: temperatures are in the first bytes
    assert select(samples, "gpu_junction_temperature", gpu_id="0")


def test_pod_on_a_partition_and_health(devlet, dirs, podres):
    """A pod holding partition 5 of GPU 1 is on partition 5's series (gpu_id
    13), not partition 0's, nor any other."""
    sysfs, m = tree(dirs, "mi300x-8x-cpx")
    xcp = m["gpus"][1]["devices"][5]["id"]  # partition 5 of GPU 1
    podres.pods = [("team-a", "infer-0", [("main", [("amd.com/gpu", [xcp])])]),
                   ("ns", "other", [("x", [("example.com/fpga", ["5"])])])]
    podres.start()
    d, port = start(devlet, dirs, sysfs)
    samples = wait_samples(port, lambda s: s if select(s, "gpu_gfx_busy_instantaneous", gpu_id="13",
                                                       pod="infer-0") else None,
                           WAIT, "partition 5's series with the pod")
    (lab, v), = select(samples, "gpu_gfx_busy_instantaneous", gpu_id="13")
    assert (lab["pod"], lab["namespace"], lab["container"]) == ("infer-0", "team-a", "main")
    assert lab["gpu_partition_id"] == "5" and v == (10 + 3 + 55) % 100
    (lab, _), = select(samples, "gpu_total_vram", gpu_id="13")
    assert lab["pod"] == "infer-0"
    owned = {l["gpu_id"] for family in ("gpu_gfx_busy_instantaneous", "gpu_health", "gpu_used_vram")
             for l, _ in select(samples, family) if "pod" in l}
    assert owned == {"13"}
    # an uncorrectable error on GPU 4: devlet's verdict reaches all its partitions
    with open(os.path.join(m["gpus"][4]["sysfs"], "ras", "umc_err_count"), "w") as f:
        f.write("ue: 3\nce: 1\n")
    samples = wait_samples(port, lambda s: s if select(s, "gpu_health", gpu_id="32")[0][1] == 0 else None,
                           WAIT, "GPU 4 unhealthy in gpu_health")
    assert select(samples, "gpu_ecc_uncorrect_total", gpu_id="32")[0][1] == 3
    assert select(samples, "gpu_ecc_uncorrect_umc", gpu_id="32")[0][1] == 3
    assert [v for _, v in select(samples, "gpu_health", gpu_id="39")] == [0]
    assert select(samples, "gpu_health", gpu_id="31")[0][1] == 1
    assert select(samples, "gpu_health", gpu_id="40")[0][1] == 1


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
