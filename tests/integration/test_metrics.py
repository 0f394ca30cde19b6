"""devlet's metrics endpoint end to end: `devlet run` with the mock NVML
(the DGX H100 profile), scraped over HTTP, checked by promtool and by a
real Prometheus server, and attribution from the three sources — OCI specs
of podman containers (a privileged one included), processes mapped through
/proc/<pid>/cgroup, and a simulated kubelet's pod-resources List."""

import os
import subprocess

import pytest

from devlet_harness import run_devlet, wait_until
from metrics_sim import (PODMAN_STATE_DIRS, MockNvml, PodResourcesSim, Prometheus, busybox_rootfs,
                         cri_annotations, http_get, metrics_port, parse, podman_pid, podman_rm,
                         podman_start, promtool_check, scrape, select, wait_samples)

NODE = "node-a"
WAIT = 20.0
DCGM_FAMILIES = [
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
]
# promtool's lint objects to dcgm-exporter's names, which dashboards need
# as they are; these are the only complaints allowed, and only on DCGM_*
ALLOWED_LINT = (
    'counter metrics should have "_total" suffix',
    "label names should be written in 'snake_case' not 'camelCase'",
    "metric name should not include type 'counter'",
)


@pytest.fixture
def nvml(dirs):
    return MockNvml(dirs.work)


@pytest.fixture
def podres(dirs):
    sim = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    yield sim
    sim.stop()


def start(devlet, nvml, dirs, state_dirs=None, extra=()):
    state_dirs = state_dirs or [os.path.join(dirs.run, "state")]
    d = devlet(args=["--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "pod-resources.sock"),
                     "--container-state-dirs", ",".join(state_dirs), *extra],
               env={**nvml.env(), "NODE_NAME": NODE})
    return d, metrics_port(d)


def assert_promtool_parses(text):
    """promtool parses text; its only findings are the allowed ones on DCGM names."""
    rc, out = promtool_check(text)
    assert rc in (0, 3), out  # 1: could not parse; 3: lint findings only
    for line in out.splitlines():
        name, _, problem = line.partition(" ")
        assert name.startswith("DCGM_FI_") and problem in ALLOWED_LINT, line


def gpu_series(samples, family, gpu):
    return select(samples, family, gpu=str(gpu))


# ---------------------------------------------------------------- the endpoint

def test_endpoint_serves_every_family(devlet, nvml, dirs):
    # NVLink data counters: 0 on an idle H100, traffic on GPU 0
    nvml.devices[0]["nvlinkCounters"] = {"dataTxKiB": 1000, "dataRxKiB": 24, "rawTxKiB": 5, "rawRxKiB": 6}
    nvml.write()
    d, port = start(devlet, nvml, dirs)
    samples = wait_samples(port, lambda s: s if select(s, "devlet_collections_total") and
                           select(s, "DCGM_FI_DEV_GPU_TEMP") else None, WAIT, "a first collection")
    for family in DCGM_FAMILIES:
        got = sorted(int(lab["gpu"]) for lab, _ in select(samples, family))
        assert got == list(range(8)), f"{family}: {got}"
    assert sorted((lab["gpu"], v) for lab, v in select(samples, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")) == \
        [("0", 1024)] + [(str(i), 0) for i in range(1, 8)]
    labels, value = gpu_series(samples, "DCGM_FI_DEV_GPU_TEMP", 3)[0]
    assert labels == {
        "gpu": "3", "UUID": nvml.uuid(3), "pci_bus_id": "00000000:5D:00.0", "device": "nvidia3",
        "modelName": "NVIDIA H100 80GB HBM3", "Hostname": NODE, "DCGM_FI_DRIVER_VERSION": "550.54.15",
    }
    assert value == nvml.devices[3]["temperatureC"]
    assert gpu_series(samples, "DCGM_FI_DEV_POWER_USAGE", 0)[0][1] == nvml.devices[0]["powerMilliwatts"] / 1000
    assert (gpu_series(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1)[0][1]
            == nvml.devices[1]["energyMillijoules"])
    # nobody uses these GPUs: exported once each, without pod labels
    assert all("pod" not in lab for lab, _ in select(samples, "DCGM_FI_DEV_FB_USED"))
    assert select(samples, "devlet_build_info")[0][1] == 1

    status, headers, body = http_get(port, "/metrics")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    # one HELP and TYPE per family, families contiguous
    names = [line.split()[2] for line in body.splitlines() if line.startswith("# TYPE ")]
    assert len(names) == len(set(names))
    seen, current = set(), None
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{")[0].split(" ")[0]
        if name != current:
            assert name not in seen, f"{name} is not contiguous"
            seen.add(name)
            current = name
    series = [line.rsplit(" ", 1)[0] for line in body.splitlines() if not line.startswith("#")]
    assert len(series) == len(set(series)), "duplicate series"

    assert http_get(port, "/health") == (200, http_get(port, "/health")[1], "ok")
    assert http_get(port, "/nothing")[0] == 404
    status, headers, _ = http_get(port, "/metrics", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_promtool_parses_the_output(devlet, nvml, dirs, podres):
    podres.pods = [("ns", 'we"ird\\pod', [("c", [("nvidia.com/gpu", [nvml.uuid(0)])])])]
    podres.start()
    d, port = start(devlet, nvml, dirs)
    text = wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_GPU_TEMP", gpu="0", pod='we"ird\\pod'),
                        WAIT, "the attributed series") and scrape(port)
    assert_promtool_parses(text)
    rc, out = promtool_check("".join(l + "\n" for l in text.splitlines()
                                     if "DCGM_FI_" not in l))
    assert rc == 0, out  # devlet's own families pass the linter


def test_devlet_metrics_prints_one_collection(nvml, dirs):
    res = run_devlet(["metrics", "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                      "--container-state-dirs", dirs.run], env={**nvml.env(), "NODE_NAME": NODE})
    assert res.returncode == 0, res.stderr
    samples = parse(res.stdout)
    assert len(select(samples, "DCGM_FI_DEV_SM_CLOCK", Hostname=NODE)) == 8
    assert_promtool_parses(res.stdout)


# Grace nodes (tests/mock-nvml/profiles): a GH200 and a GB200 NVL72 tray,
# one series per GPU with the GPU's own model name, UUID and memory
@pytest.mark.parametrize("profile,model,count", [("gh200.yaml", "NVIDIA GH200 480GB", 1),
                                                 ("gb200-nvl-tray.yaml", "NVIDIA GB200", 4)])
def test_grace_nodes_one_collection(dirs, profile, model, count):
    grace = MockNvml(dirs.work, profile)
    res = run_devlet(["metrics", "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                      "--container-state-dirs", dirs.run], env={**grace.env(), "NODE_NAME": NODE})
    assert res.returncode == 0, res.stderr
    series = select(parse(res.stdout), "DCGM_FI_DEV_FB_FREE", Hostname=NODE)
    assert len(series) == count
    assert sorted((labels["UUID"], value) for labels, value in series) == \
        sorted((d["uuid"], d["memoryMiB"]) for d in grace.devices)
    assert {labels["modelName"] for labels, _ in series} == {model}
    assert_promtool_parses(res.stdout)


def test_hostname_label_and_disabled_endpoint(devlet, nvml, dirs):
    d, port = start(devlet, nvml, dirs, extra=["--hostname-label", "hostname"])
    samples = wait_samples(port, lambda s: s if select(s, "DCGM_FI_DEV_GPU_TEMP") else None, WAIT,
                           "GPU series")
    assert all(lab.get("hostname") == NODE and "Hostname" not in lab
               for lab, _ in select(samples, "DCGM_FI_DEV_GPU_TEMP"))
    other = os.path.join(dirs.root, "plugins2")
    os.mkdir(other)
    off = devlet(args=["--metrics-address", ""], env=nvml.env(), plugin_dir=other)
    off.wait_log(r"waiting for the kubelet|nothing to serve")
    assert "serving metrics" not in off.log_text()


def test_pod_resources_absent_is_logged_once(devlet, nvml, dirs, podres):
    d, port = start(devlet, nvml, dirs)
    wait_samples(port, lambda s: select(s, "devlet_pod_resources_up", ) and
                 select(s, "devlet_pod_resources_up")[0][1] == 0, WAIT, "pod-resources down")
    wait_until(lambda: len(select(parse(scrape(port)), "devlet_collections_total")) and
               select(parse(scrape(port)), "devlet_collections_total")[0][1] >= 5, WAIT, "5 collections")
    assert d.log_text().count("pod-resources unavailable") == 1
    # the kubelet appears: attribution starts, and that is logged once too
    podres.pods = [("ns", "late", [("c", [("nvidia.com/gpu", ["4"])])])]
    podres.start()
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_GPU_TEMP", gpu="4", pod="late"), WAIT,
                 "GPU 4 attributed")
    assert d.log_text().count("pod-resources answering") == 1


# ---------------------------------------------------------------- Prometheus

def test_prometheus_scrapes_devlet(devlet, nvml, dirs, podres):
    podres.pods = [("team-a", "trainer-0", [("main", [("nvidia.com/gpu", [nvml.uuid(6)])])])]
    podres.start()
    d, port = start(devlet, nvml, dirs)
    prom = Prometheus([f"127.0.0.1:{port}"])
    try:
        prom.wait_ready()
        result = wait_until(lambda: (lambda r: r if len(r) == 8 else None)(
            prom.query("DCGM_FI_DEV_GPU_TEMP")), 60, "8 GPU temperature series in Prometheus", interval=0.2)
        by_gpu = {s["metric"]["gpu"]: s for s in result}
        six = by_gpu["6"]["metric"]
        assert six["UUID"] == nvml.uuid(6)
        assert (six["pod"], six["namespace"], six["container"]) == ("trainer-0", "team-a", "main")
        assert six["Hostname"] == NODE and six["job"] == "devlet"
        assert "pod" not in by_gpu["5"]["metric"]
        assert float(by_gpu["2"]["value"][1]) == nvml.devices[2]["temperatureC"]
        up = prom.query('up{job="devlet"}')
        assert up and up[0]["value"][1] == "1"
        assert prom.query("devlet_build_info")
        energy = prom.query('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}')
        assert float(energy[0]["value"][1]) == nvml.devices[0]["energyMillijoules"]
    except Exception:
        print(prom.log_text())
        raise
    finally:
        prom.stop()


# ---------------------------------------------------------------- attribution

def test_pod_resources_two_pods_share_a_gpu(devlet, nvml, dirs, podres):
    # Issue 13 changed this test's semantics on purpose: one series per device
    # and family (sum/avg/count over DCGM_FI_* count GPUs, not pods); pod
    # labels only where exactly one container holds the device; who holds
    # a shared device shows in devlet's per-container families.
    uuid = nvml.uuid(3)
    podres.pods = [
        ("ns", "pod-a", [("a", [("nvidia.com/gpu.shared", [f"{uuid}::0"])])]),
        ("ns", "pod-b", [("b", [("nvidia.com/gpu.shared", [f"{uuid}::1"])])]),
        ("ns", "pod-c", [("c", [("nvidia.com/gpu", ["7"])])]),            # by index
        ("ns", "other", [("x", [("example.com/fpga", ["5"])])]),          # not a GPU
    ]
    podres.start()
    d, port = start(devlet, nvml, dirs)
    samples = wait_samples(port, lambda s: s if len(gpu_series(s, "devlet_container_memory_used_bytes", 3)) == 2
                           else None, WAIT, "two containers on GPU 3")
    pods = sorted(lab["pod"] for lab, _ in gpu_series(samples, "devlet_container_memory_used_bytes", 3))
    assert pods == ["pod-a", "pod-b"]
    for family in ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_SM_CLOCK"):
        (lab, _), = gpu_series(samples, family, 3)
        assert "pod" not in lab and "container" not in lab
    assert [lab["pod"] for lab, _ in gpu_series(samples, "DCGM_FI_DEV_GPU_TEMP", 7)] == ["pod-c"]
    assert all("pod" not in lab for lab, _ in gpu_series(samples, "DCGM_FI_DEV_GPU_TEMP", 5))
    # a pod goes away: its series with it, and GPU 3 has one holder left
    podres.pods = podres.pods[1:]
    wait_samples(port, lambda s: [lab.get("pod") for lab, _ in gpu_series(s, "DCGM_FI_DEV_FB_FREE", 3)] == ["pod-b"],
                 WAIT, "pod-a's series gone")


@pytest.fixture
def rootfs(dirs):
    return busybox_rootfs(os.path.join(dirs.root, "rootfs"))


@pytest.fixture
def containers():
    ids = []
    yield ids
    for cid in ids:
        podman_rm(cid)


def test_podman_privileged_container_with_env(devlet, nvml, dirs, rootfs, containers):
    uuid = nvml.uuid(2)
    d, port = start(devlet, nvml, dirs, state_dirs=PODMAN_STATE_DIRS)
    containers.append(podman_start(rootfs, "--privileged", "-e", f"NVIDIA_VISIBLE_DEVICES={uuid}",
                                   *cri_annotations("gpu-team", "priv-pod", "cuda")))
    samples = wait_samples(port, lambda s: s if gpu_series(s, "DCGM_FI_DEV_GPU_TEMP", 2) and
                           gpu_series(s, "DCGM_FI_DEV_GPU_TEMP", 2)[0][0].get("pod") == "priv-pod" else None,
                           WAIT, "GPU 2 attributed to the privileged container")
    lab, _ = gpu_series(samples, "DCGM_FI_DEV_GPU_TEMP", 2)[0]
    assert (lab["namespace"], lab["container"], lab["UUID"]) == ("gpu-team", "cuda", uuid)
    # only GPU 2: a privileged container sees every device node, that is no claim
    for gpu in (0, 1, 3, 4, 5, 6, 7):
        assert all("pod" not in lab for lab, _ in gpu_series(samples, "DCGM_FI_DEV_GPU_TEMP", gpu))
    # the container stops: its spec and its series go
    podman_rm(containers.pop())
    wait_samples(port, lambda s: all("pod" not in lab for lab, _ in gpu_series(s, "DCGM_FI_DEV_GPU_TEMP", 2)),
                 WAIT, "GPU 2 no longer attributed")


def test_podman_process_without_gpu_request(devlet, nvml, dirs, rootfs, containers):
    d, port = start(devlet, nvml, dirs, state_dirs=PODMAN_STATE_DIRS)
    cid = podman_start(rootfs, *cri_annotations("batch", "sneaky-pod", "worker"))
    containers.append(cid)
    pid = podman_pid(cid)
    with open(f"/proc/{pid}/cgroup") as f:
        assert cid in f.read()
    # the container asked for no GPU, yet a process of it runs on GPU 5
    nvml.devices[5]["utilization"] = {"gpu": 50, "memory": 10}
    nvml.set_processes(5, [{"pid": pid, "usedMemoryMiB": 1234, "smUtil": 42},
                           {"pid": 1, "usedMemoryMiB": 66, "smUtil": 3}])
    samples = wait_samples(port, lambda s: s if select(s, "DCGM_FI_DEV_FB_USED", gpu="5", pod="sneaky-pod") else None,
                           WAIT, "GPU 5 attributed through the process")
    # issue 13: the device's series carries the device's value (its only
    # holder's labels); the container's own share is in devlet's families
    (lab, used), = select(samples, "DCGM_FI_DEV_FB_USED", gpu="5")
    assert (lab["namespace"], lab["container"], used) == ("batch", "worker", 1300)
    (lab, used), = select(samples, "devlet_container_memory_used_bytes", gpu="5")
    assert (lab["namespace"], lab["container"], used) == ("batch", "worker", 1234 * 2**20)
    (lab, util), = select(samples, "devlet_container_utilization_percent", gpu="5")
    assert util == 42  # its own share, not the host process's
    (_, rest), = select(samples, "devlet_unattributed_memory_used_bytes", gpu="5")
    assert rest == 66 * 2**20
    (_, rest), = select(samples, "devlet_unattributed_utilization_percent", gpu="5")
    assert rest == 50 - 42
    # the process ends: GPU 5 is nobody's again
    nvml.set_processes(5, [])
    wait_samples(port, lambda s: all("pod" not in lab for lab, _ in select(s, "DCGM_FI_DEV_FB_USED", gpu="5")),
                 WAIT, "GPU 5 unattributed")


def test_bad_specs_do_not_hurt(devlet, nvml, dirs):
    state = os.path.join(dirs.run, "state")
    for name, content in (("a" * 64, b"{not json"), ("b" * 64, b"\x00\xff" * 100),
                          ("c" * 64, b"[]"), ("d" * 64, b'{"process": 5, "annotations": []}')):
        os.makedirs(os.path.join(state, name))
        with open(os.path.join(state, name, "config.json"), "wb") as f:
            f.write(content)
    os.makedirs(os.path.join(state, "e" * 64))
    os.mkfifo(os.path.join(state, "e" * 64, "config.json"))
    good = os.path.join(state, "f" * 64)
    os.makedirs(good)
    with open(os.path.join(good, "config.json"), "w") as f:
        f.write('{"process": {"env": ["NVIDIA_VISIBLE_DEVICES=1"]}, "annotations": {'
                '"io.kubernetes.pod.name": "ok", "io.kubernetes.pod.namespace": "n",'
                '"io.kubernetes.container.name": "c"}}')
    d, port = start(devlet, nvml, dirs)
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_GPU_TEMP", gpu="1", pod="ok"), WAIT, "GPU 1 attributed")
    assert d.alive()


def test_reload_keeps_serving_on_the_same_port(devlet, nvml, dirs):
    from metrics_sim import free_port
    port = free_port()
    d = devlet(args=["--metrics-address", f"127.0.0.1:{port}", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                     "--container-state-dirs", dirs.run], env=nvml.env())
    d.wait_log(r"serving metrics")
    # a scrape leaves a connection behind (keep-alive, then TIME_WAIT)
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_GPU_TEMP"), WAIT, "GPU series")
    since = d.log_size()
    d.sighup()
    d.wait_log(r"reloaded resources=\d+ metrics=kept", since=since)  # its settings did not change
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_GPU_TEMP"), WAIT, "GPU series after the reload")
    assert "cannot serve metrics" not in d.log_text()


def test_xid_from_the_health_monitor(devlet, nvml, dirs):
    d, port = start(devlet, nvml, dirs)
    d.wait_log(r"health monitoring started")
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="4"), WAIT, "XID series")
    nvml.config["events"] = [{"device": 4, "type": "xid", "xid": 43},
                             {"device": 4, "type": "xid", "xid": 79},
                             {"device": 1, "type": "xid", "xid": 43}]
    nvml.write()

    def seen(s):
        return (select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="4") == [(select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="4")[0][0], 79)]
                and select(s, "devlet_xid_events_total", UUID=nvml.uuid(4), xid="79") and s)
    samples = wait_samples(port, seen, WAIT, "GPU 4's last XID (79)")
    assert select(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="1")[0][1] == 43
    assert select(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="0")[0][1] == 0
    counts = {(lab["UUID"], lab["xid"]): v for lab, v in select(samples, "devlet_xid_events_total")}
    assert counts == {(nvml.uuid(4), "43"): 1, (nvml.uuid(4), "79"): 1, (nvml.uuid(1), "43"): 1}
    # the XID made GPU 4 unhealthy: one unhealthy nvidia.com/gpu device
    assert select(samples, "devlet_devices", resource="nvidia.com/gpu", health="unhealthy")[0][1] == 1


def test_xid_counters_survive_a_reload(devlet, nvml, dirs):
    from metrics_sim import free_port
    port = free_port()
    d = devlet(args=["--metrics-address", f"127.0.0.1:{port}", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                     "--container-state-dirs", dirs.run], env=nvml.env())
    d.wait_log(r"health monitoring started")
    d.wait_log(r"serving metrics")  # listening: the port may be scraped
    nvml.config["events"] = [{"device": 4, "type": "xid", "xid": 79}, {"device": 4, "type": "xid", "xid": 79}]
    nvml.write()
    count = lambda s, gpu, xid: [v for _, v in select(s, "devlet_xid_events_total", UUID=nvml.uuid(gpu), xid=xid)]  # noqa: E731
    wait_samples(port, lambda s: count(s, 4, "79") == [2], WAIT, "GPU 4's two XIDs")
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="4") == [(
        select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="4")[0][0], 79)], WAIT, "GPU 4's last XID")
    since = d.log_size()
    d.sighup()
    d.wait_log(r"reloaded resources=\d+ metrics=kept", since=since)
    # the collector, kept across the reload, still has GPU 4's last XID
    samples = wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="4") and s, WAIT,
                           "the XID series after the reload")
    assert select(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="4")[0][1] == 79
    assert count(samples, 4, "79") == [2]
    # an XID after the reload, seen by the new backend only: the sentinel
    nvml.config["events"].append({"device": 1, "type": "xid", "xid": 48})
    nvml.write()
    # the series reads NVML in the collector, the counter comes from the
    # health monitor through the loop: a scrape may hold one before the other
    samples = wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="1")[0][1] == 48
                           and count(s, 1, "48") and s, WAIT, "GPU 1's XID and its count")
    assert count(samples, 1, "48") == [1]
    assert count(samples, 4, "79") == [2]
    assert select(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="4")[0][1] == 79
    # GPU 4 is still unhealthy, GPU 1 now too
    assert select(samples, "devlet_devices", resource="nvidia.com/gpu", health="unhealthy")[0][1] == 2


# ---------------------------------------------------------------- profiling (issue 13 §2)

PROF_FAMILIES = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("graphicsUtil", 0.01), "DCGM_FI_PROF_SM_ACTIVE": ("smUtil", 0.01),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("smOccupancy", 0.01), "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensorUtil", 0.01),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dramBwUtil", 0.01), "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64Util", 0.01),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32Util", 0.01), "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16Util", 0.01),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcieTxMiBps", 2 ** 20), "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcieRxMiBps", 2 ** 20),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlinkTxMiBps", 2 ** 20),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlinkRxMiBps", 2 ** 20),
}


def test_profiling_families_from_gpm(devlet, nvml, dirs):
    gpm = {key: 10 + i for i, (key, _) in enumerate(PROF_FAMILIES.values())}
    nvml.devices[2]["gpm"] = gpm
    nvml.write()
    d, port = start(devlet, nvml, dirs)
    samples = wait_samples(port, lambda s: s if select(s, "DCGM_FI_PROF_SM_ACTIVE", gpu="2") else None,
                           WAIT, "profiling families")
    for family, (key, scale) in PROF_FAMILIES.items():
        (lab, value), = gpu_series(samples, family, 2)
        assert value == pytest.approx(gpm[key] * scale), family
        assert lab["UUID"] == nvml.uuid(2)
        assert sorted(int(lab["gpu"]) for lab, _ in select(samples, family)) == list(range(8)), family
    status, _, body = http_get(port, "/metrics")
    assert "# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.\n" in body


def test_profiling_families_absent_without_gpm(dirs):
    nvml = MockNvml(dirs.work, "v100-dgx1.yaml")
    nvml.devices[1]["pcieThroughputKBps"] = {"tx": 300, "rx": 7}
    nvml.write()
    res = run_devlet(["metrics", "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                      "--container-state-dirs", dirs.run], env=nvml.env())
    assert res.returncode == 0, res.stderr
    samples = parse(res.stdout)
    # absent, not zero: Volta has no GPM; the PCIe rates NVML keeps are there
    for family in PROF_FAMILIES:
        if "PCIE" not in family:
            assert not select(samples, family), family
    assert gpu_series(samples, "DCGM_FI_PROF_PCIE_TX_BYTES", 1)[0][1] == 300 * 1024
    assert gpu_series(samples, "DCGM_FI_PROF_PCIE_RX_BYTES", 1)[0][1] == 7 * 1024
    listing = run_devlet(["list"], env=nvml.env())
    assert listing.returncode == 0, listing.stderr
    assert "Profiling metrics (DCGM_FI_PROF_*): GPUs 0,1,2,3,4,5,6,7 lack NVML GPM" in listing.stdout


def test_collectors_file_selects_the_families(nvml, dirs):
    csv = os.path.join(dirs.work, "counters.csv")
    with open(csv, "w") as f:
        f.write("# Format\n# DCGM FIELD, Prometheus metric type, help message\n\n"
                "DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).\n"
                "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned.\n"
                "DCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_TX, counter, NVSwitch TX\n"
                "DCGM_FI_DRIVER_VERSION,        label, Driver Version\n")
    res = run_devlet(["metrics", "--collectors", csv, "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                      "--container-state-dirs", dirs.run], env=nvml.env())
    assert res.returncode == 0, res.stderr
    names = {name for name, _, _ in parse(res.stdout) if name.startswith("DCGM_FI_")}
    assert names == {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_SM_ACTIVE"}
    assert select(parse(res.stdout), "devlet_container_memory_used_bytes") == []  # no pods here
    assert res.stderr.count("fields=DCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_TX") == 1
    assert "NVSwitch module" in res.stderr
    # dcgm-exporter's env var names the same file
    res = run_devlet(["metrics", "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
                      "--container-state-dirs", dirs.run], env={**nvml.env(), "DCGM_EXPORTER_COLLECTORS": csv})
    assert {name for name, _, _ in parse(res.stdout) if name.startswith("DCGM_FI_")} == names


def test_kubernetes_virtual_gpus_adds_per_pod_series(devlet, nvml, dirs, podres):
    uuid = nvml.uuid(3)
    podres.pods = [("ns", "pod-a", [("a", [("nvidia.com/gpu.shared", [f"{uuid}::0"])])]),
                   ("ns", "pod-b", [("b", [("nvidia.com/gpu.shared", [f"{uuid}::1"])])])]
    podres.start()
    d, port = start(devlet, nvml, dirs, extra=["--kubernetes-virtual-gpus"])
    samples = wait_samples(port, lambda s: s if len(gpu_series(s, "DCGM_FI_DEV_GPU_UTIL", 3)) == 3 else None,
                           WAIT, "GPU 3's series and one per pod")
    per_pod = sorted((lab["pod"], lab["vgpu"]) for lab, _ in gpu_series(samples, "DCGM_FI_DEV_GPU_UTIL", 3)
                     if "pod" in lab)
    assert per_pod == [("pod-a", "0"), ("pod-b", "1")]
    assert len(gpu_series(samples, "DCGM_FI_DEV_FB_USED", 3)) == 3
    # only GPU_UTIL and FB_USED get them, as with dcgm-exporter
    assert len(gpu_series(samples, "DCGM_FI_DEV_GPU_TEMP", 3)) == 1
