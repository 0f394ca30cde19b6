"""The Kubernetes labels of a pod on the series of the GPUs it holds
(dcgm-exporter's --kubernetes-enable-pod-labels): `devlet run` with the
mock NVML, a simulated kubelet's pod-resources List attributing a GPU to a
pod, and the fake API server (fake_apiserver.ApiServer) serving that pod
with its labels through a list and a watch of the node's pods."""

import os

import pytest

from devlet_harness import wait_until
from metrics_sim import MockNvml, PodResourcesSim, metrics_port, parse, promtool_check, scrape, select, \
    wait_samples

NODE = "node-a"
WAIT = 20.0
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


def start(devlet, nvml, dirs, kubeconfig, extra=(), env=()):
    d = devlet(args=["--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "pod-resources.sock"),
                     "--container-state-dirs", os.path.join(dirs.run, "state"),
                     "--kubeconfig", kubeconfig, *extra],
               env={**nvml.env(), "NODE_NAME": NODE, **dict(env)})
    return d, metrics_port(d)


def assert_promtool_parses(text):
    rc, out = promtool_check(text)
    assert rc in (0, 3), out
    for line in out.splitlines():
        name, _, problem = line.partition(" ")
        assert name.startswith("DCGM_FI_") and problem in ALLOWED_LINT, line


def temp_series(samples, gpu):
    return select(samples, "DCGM_FI_DEV_GPU_TEMP", gpu=str(gpu))


def labelled(gpu, key, value):
    def check(samples):
        s = temp_series(samples, gpu)
        return s if s and s[0][0].get(key) == value else None
    return check


def hold_gpu(nvml, podres, gpu=2):
    podres.pods = [("team", "trainer", [("main", [("nvidia.com/gpu", [nvml.uuid(gpu)])])])]
    podres.start()


def test_pod_labels_on_the_gpus_series(devlet, nvml, dirs, podres, api, kubeconfig):
    api.put_pod("team", "trainer", NODE, {"app.kubernetes.io/name": "llm", "tier": "gold",
                                          "pod": "clash", "gpu": "clash"})
    api.put_pod("team", "elsewhere", "node-b", {"tier": "other"})
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig, extra=["--kubernetes-enable-pod-labels"])
    samples = wait_samples(port, labelled(2, "app_kubernetes_io_name", "llm"), WAIT, "GPU 2's pod labels")
    (lab, _), = samples
    assert lab["tier"] == "gold" and lab["pod"] == "trainer" and lab["gpu"] == "2"
    # the series of every DCGM family of that GPU carry them; no other GPU does
    text = scrape(port)
    all_samples = parse(text)
    for name, lab, _ in all_samples:
        if name.startswith("DCGM_FI_") and lab.get("gpu") == "2" and "pod" in lab:
            assert lab.get("tier") == "gold", (name, lab)
        if lab.get("gpu") not in (None, "2"):
            assert "tier" not in lab, (name, lab)
    assert_promtool_parses(text)
    # only the node's pods are asked for
    assert any("fieldSelector=spec.nodeName%3Dnode-a" in p for _, p in api.requests), api.requests
    # a change comes through the watch
    api.put_pod("team", "trainer", NODE, {"app.kubernetes.io/name": "llm", "tier": "silver"})
    wait_samples(port, labelled(2, "tier", "silver"), WAIT, "the changed label")


def test_without_the_flag_no_pod_labels_and_no_api_calls(devlet, nvml, dirs, podres, api, kubeconfig):
    api.put_pod("team", "trainer", NODE, {"tier": "gold"})
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig)
    samples = wait_samples(port, labelled(2, "pod", "trainer"), WAIT, "GPU 2 attributed")
    (lab, _), = samples
    assert "tier" not in lab
    assert api.hit_count("pods") == 0 and api.hit_count("podwatch") == 0


def test_dcgm_persona_env_turns_it_on(devlet, nvml, dirs, podres, api, kubeconfig):
    api.put_pod("team", "trainer", NODE, {"tier": "gold"})
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig,
                    env={"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS": "true"})
    wait_samples(port, labelled(2, "tier", "gold"), WAIT, "GPU 2's pod labels")


@pytest.mark.parametrize("mode", ["huge", "malformed", "error"])
def test_hostile_api_server_leaves_metrics_serving(devlet, nvml, dirs, podres, api, kubeconfig, mode):
    api.put_pod("team", "trainer", NODE, {"tier": "gold"})
    api.set_mode(mode, routes=("pods", "podwatch"))
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig, extra=["--kubernetes-enable-pod-labels"])
    d.wait_log(r"pod labels: cannot read the pods", timeout=WAIT)
    wait_until(lambda: api.hit_count("pods") + api.hit_count("podwatch") >= 3, WAIT, "retries")
    samples = wait_samples(port, labelled(2, "pod", "trainer"), WAIT, "GPU 2 attributed")
    (lab, _), = samples
    assert "tier" not in lab
    assert_promtool_parses(scrape(port))
    # one warning for the same error, however many retries
    assert d.log_text().count("pod labels: cannot read the pods") == 1
    # the server heals: the labels come
    api.set_mode(None, routes=("pods", "podwatch"))
    wait_samples(port, labelled(2, "tier", "gold"), 60.0, "labels once the server answers")


def test_unreachable_api_server(devlet, nvml, dirs, podres, api, kubeconfig):
    api.down()
    hold_gpu(nvml, podres)
    d, port = start(devlet, nvml, dirs, kubeconfig, extra=["--kubernetes-enable-pod-labels"])
    d.wait_log(r"pod labels: cannot read the pods", timeout=WAIT)
    samples = wait_samples(port, labelled(2, "pod", "trainer"), WAIT, "GPU 2 attributed")
    assert "tier" not in samples[0][0]
