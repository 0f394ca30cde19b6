"""What the API server sends is bounded after parsing, not only in bytes
(issue 28): devlet with pod labels on (--kubernetes-enable-pod-labels), a
simulated kubelet and the fake API server, whose pods carry what a tenant
can put there: long `args` lists of empty strings and thousands of labels,
each pod under etcd's 1.5 MiB, many of them; and a hostile answer of
16 MiB of `[],[],...`.
devlet's peak RSS (VmHWM) stays within the DaemonSet's 64 MiB, a normal
pod's labels still reach the metrics, and the device plugin answers."""

import os

import pytest

from devlet_harness import wait_until
from metrics_sim import MockNvml, PodResourcesSim, metrics_port, select, wait_samples
from mock_gpus import GPU

NODE = "node-a"
WAIT = 30.0
ASAN = os.environ.get("DEVLET_ASAN") == "1"
HWM_MAX_KIB = (256 if ASAN else 64) * 1024
# empty strings in one pod's args, 4 bytes each as json.dumps writes them,
# and labels, ~17 bytes each: ~1.35 MB a pod, under etcd's 1.5 MiB limit
ARGS_PER_POD = 250_000
LABELS_PER_POD = 20_000
HUGE_PODS = 20


@pytest.fixture
def nvml(dirs):
    return MockNvml(dirs.work)


@pytest.fixture
def podres(dirs):
    sim = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    sim.pods = []
    yield sim
    sim.stop()


def start(devlet, nvml, dirs, kubeconfig):
    d = devlet(args=["--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "pod-resources.sock"),
                     "--container-state-dirs", os.path.join(dirs.run, "state"),
                     "--kubeconfig", kubeconfig, "--kubernetes-enable-pod-labels"],
               env={**nvml.env(), "NODE_NAME": NODE})
    return d, metrics_port(d)


def labelled(gpu, key, value):
    def check(samples):
        s = select(samples, "DCGM_FI_DEV_GPU_TEMP", gpu=str(gpu))
        return s if s and s[0][0].get(key) == value else None
    return check


def hold_gpu(nvml, podres, gpu=2):
    podres.pods = [("team", "trainer", [("main", [("nvidia.com/gpu", [nvml.uuid(gpu)])])])]
    podres.start()


def add_huge_pods(api):
    """Pods on the node whose spec holds a long args list (one list object
    shared by all: the fake server's deepcopy then copies it once) and
    thousands of labels (devlet keeps a pod's first 64)."""
    args = [""] * ARGS_PER_POD
    labels = {f"l{k:05}": "v" for k in range(LABELS_PER_POD)}
    for i in range(HUGE_PODS):
        api.put_pod("tenant", f"huge-{i}", NODE, labels)
        with api.lock:
            pod = api.pods[("tenant", f"huge-{i}")]
            pod["spec"]["containers"] = [{"name": "main", "image": "busybox", "args": args}]


def device_plugin_answers(kubelet, nvml):
    kubelet.wait_for_registration(GPU)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: len(s.ids()) == 8)
    resp = kubelet.allocate(GPU, [[sorted(snap.ids())[0]]])
    assert len(resp.container_responses) == 1


def test_huge_pods_keep_rss_bounded(devlet, kubelet, nvml, dirs, podres, api, kubeconfig):
    add_huge_pods(api)
    api.put_pod("team", "trainer", NODE, {"tier": "gold"})
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig)
    wait_samples(port, labelled(2, "tier", "gold"), WAIT, "the trainer's labels")
    # a change after the watch's first events (the huge pods' ADDED) has
    # come through: those were read too
    api.put_pod("team", "trainer", NODE, {"tier": "silver"})
    wait_samples(port, labelled(2, "tier", "silver"), WAIT, "the changed label")
    device_plugin_answers(kubelet, nvml)
    assert "cannot read the pods" not in d.log_text()
    hwm = d.vm_hwm_kib()
    assert hwm <= HWM_MAX_KIB, f"VmHWM {hwm} KiB over {HWM_MAX_KIB} KiB"
    # the pods came one event at a time (a streaming list), or in pages
    assert any("sendInitialEvents=true" in p or "limit=" in p
               for _, p in api.requests if "/api/v1/pods" in p), api.requests


def test_hostile_values_body_is_refused_with_bounded_rss(devlet, kubelet, nvml, dirs, podres, api,
                                                         kubeconfig):
    api.put_pod("team", "trainer", NODE, {"tier": "gold"})
    api.set_mode("values", routes=("pods", "podwatch"))
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig)
    d.wait_log(r"pod labels: cannot read the pods.*JSON document over \d+ values", timeout=WAIT)
    wait_until(lambda: api.hit_count("pods") + api.hit_count("podwatch") >= 2, WAIT, "a retry")
    device_plugin_answers(kubelet, nvml)
    hwm = d.vm_hwm_kib()
    assert hwm <= HWM_MAX_KIB, f"VmHWM {hwm} KiB over {HWM_MAX_KIB} KiB"
    # the server heals: the labels come
    api.set_mode(None, routes=("pods", "podwatch"))
    wait_samples(port, labelled(2, "tier", "gold"), 60.0, "labels once the server answers")
