"""The vendors' command names: the one binary, linked as NVIDIA's
nvidia-device-plugin, gpu-feature-discovery, dcgm-exporter, config-manager
and mps-control-daemon and as AMD's k8s-device-plugin, k8s-node-labeller and
amd-metrics-exporter, runs each tool's own argument lists (from the vendors'
charts and manifests, and the common cloud variants) and does that tool's
job only: the exporter serves metrics and registers nothing, the plugin
registers and serves no metrics, the labellers write labels.  A flag devlet
cannot honour is refused with its reason (exit 2); one that means nothing
here is accepted with a note.  config-manager follows a Node label through
a (fake) API server."""

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.parse

import pytest

from devlet_harness import DEVLET_BIN, ROOT, Devlet, devlet_env, run_devlet, wait_until
from fake_apiserver import (ApiServer, JSONHandler, TLSServer, make_certs, server_context,
                            write_kubeconfig)
from metrics_sim import free_port, http_get, metrics_port, parse, promtool_check, scrape, select
from mock_gpus import MockNode

sys.path.insert(0, str(ROOT / "tests" / "mock-amd"))
import gen_sysfs  # noqa: E402
import yaml  # noqa: E402

NAMES = ["nvidia-device-plugin", "gpu-feature-discovery", "dcgm-exporter", "config-manager",
         "mps-control-daemon", "k8s-device-plugin", "k8s-node-labeller", "amd-metrics-exporter"]

# dcgm-exporter's default counters (a few rows; the full files are the
# collectors tests' business)
COUNTERS = """# Format
# If line starts with a '#' it is considered a comment
# DCGM FIELD, Prometheus metric type, help message
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_GPU_TEMP,  gauge, GPU temperature (in C).
DCGM_FI_DEV_GPU_UTIL,  gauge, GPU utilization (in %).
DCGM_FI_DEV_FB_USED,   gauge, Framebuffer memory used (in MiB).
"""


@pytest.fixture
def links(tmp_path):
    """A directory of links to devlet under each vendor name, as the image has them."""
    d = tmp_path / "bin"
    d.mkdir()
    for n in NAMES:
        os.symlink(DEVLET_BIN, d / n)
    return d


class Tool(Devlet):
    """A devlet process started under a vendor name with that tool's argv
    (no devlet flags added)."""

    def command(self):
        return [self.binary] + self.args


@pytest.fixture
def tool(request, build_dir, dirs, links):
    started = []

    def start(name, args, env=None, expect_exit=False):
        t = Tool(dirs.plugins, os.path.join(dirs.work, f"{name}{len(started)}"), None, args=args,
                 env=env, binary=str(links / name))
        started.append(t)
        return t.start()
    yield start
    problems = []
    for t in started:
        if t.proc.poll() is not None and t.returncode is None:
            continue  # the test looked at its exit itself
        rc = t.terminate()
        if rc != 0:
            problems.append(f"{t.binary} exited {rc} after SIGTERM")
        rep = t.sanitizer_report()
        if rep:
            problems.append(rep)
    assert not problems, problems


def run_as(links, name, args, env=None, timeout=30):
    return subprocess.run([str(links / name)] + args, capture_output=True, text=True,
                          timeout=timeout, env=devlet_env(env), stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name", NAMES)
def test_each_name_answers_version(links, name):
    r = run_as(links, name, ["--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{name} (devlet "), r.stdout


# ---------------------------------------------------------------- dcgm-exporter

def counters(dirs):
    p = os.path.join(dirs.run, "default-counters.csv")
    with open(p, "w") as f:
        f.write(COUNTERS)
    return p


@pytest.mark.parametrize("argv", [
    # the chart's and the static manifest's: -f with the DCP file
    lambda c, a: ["-f", c, "-a", a],
    # AKS: a 5 s interval, kubernetes mapping, the flex device string
    lambda c, a: ["-f", c, "--address", a, "-c", "5000", "-k", "-d", "f",
                  "--kubernetes-gpu-id-type", "uid", "--nvidia-resource-names", "nvidia.com/a100",
                  "--pod-resources-kubelet-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"],
    # urfave/cli spellings, and the window flags
    lambda c, a: [f"--collectors={c}", f"--address={a}", "--collect-interval=1000",
                  "--kubernetes=true", "-r", "localhost:5555", "-x", "300000",
                  "--clock-events-count-window-size=300000"],
], ids=["chart", "aks", "long-forms"])
def test_dcgm_exporter_serves_metrics_and_registers_nothing(tool, node, dirs, kubelet, argv):
    n = node("h100-8x-nvswitch")
    port = free_port()
    t = tool("dcgm-exporter", argv(counters(dirs), f"127.0.0.1:{port}"), env=n.env())
    t.wait_log(rf"serving metrics address=\S+ port={port}")
    text = wait_until(lambda: (lambda s: s if "DCGM_FI_DEV_GPU_TEMP{" in s else None)(scrape(port)),
                      20, "GPU series")
    samples = parse(text)
    assert len(select(samples, "DCGM_FI_DEV_GPU_TEMP")) == 8
    # only the CSV's families of the device metrics
    assert not select(samples, "DCGM_FI_DEV_POWER_USAGE")
    rc, out = promtool_check(text)
    assert rc in (0, 3), out  # 3: lint findings only (dcgm-exporter's camelCase labels)
    # ready means serving metrics: nothing to register
    assert http_get(port, "/ready")[0] == 200
    # the exporter's job only: no plugin sockets, no kubelet registration
    assert not t.own_sockets()
    assert not kubelet.attempts()
    assert not os.path.exists(os.path.join(t.workdir, "gfd"))


def test_dcgm_exporter_env_vars_and_no_hostname(tool, node, dirs):
    n = node("h100-8x-nvswitch")
    port = free_port()
    t = tool("dcgm-exporter", ["-n"], env=n.env(
        DCGM_EXPORTER_LISTEN=f"127.0.0.1:{port}", DCGM_EXPORTER_INTERVAL="500",
        DCGM_EXPORTER_COLLECTORS=counters(dirs), DCGM_EXPORTER_KUBERNETES="true",
        DCGM_REMOTE_HOSTENGINE_INFO="localhost:5555"))
    t.wait_log(rf"serving metrics address=\S+ port={port}")
    samples = parse(wait_until(
        lambda: (lambda s: s if "DCGM_FI_DEV_GPU_TEMP{" in s else None)(scrape(port)), 20,
        "GPU series"))
    for labels, _ in select(samples, "DCGM_FI_DEV_GPU_TEMP"):
        assert "Hostname" not in labels and "hostname" not in labels, labels
    # the meaningless flag is noted, once
    assert t.log_text().count("remote-hostengine-info accepted and ignored") == 1


def test_dcgm_exporter_refuses_old_namespace(links):
    r = run_as(links, "dcgm-exporter", ["-o"])
    assert r.returncode == 2
    assert "use-old-namespace is not supported" in r.stderr
    r = run_as(links, "dcgm-exporter", ["--no-such-flag"])
    assert r.returncode == 2
    assert "unknown flag --no-such-flag" in r.stderr


# ---------------------------------------------------------------- NVIDIA's plugin and GFD

NVIDIA_PLUGIN_ARGS = ["--mig-strategy=none", "--fail-on-init-error=true", "--pass-device-specs=false",
                      "--device-list-strategy=envvar", "--device-id-strategy=uuid",
                      "--nvidia-driver-root=/"]


def test_nvidia_device_plugin_registers_and_serves_no_metrics(tool, node, dirs, kubelet):
    n = node("h100-8x-nvswitch")
    t = tool("nvidia-device-plugin", NVIDIA_PLUGIN_ARGS + ["--plugin-directory", dirs.plugins],
             env=n.env(MIG_STRATEGY="none", FAIL_ON_INIT_ERROR="true"))
    kubelet.wait_for_registration("nvidia.com/gpu")
    snap = kubelet.wait_for_snapshot("nvidia.com/gpu")
    assert len(snap.ids()) == 8
    assert "serving metrics" not in t.log_text()
    # NVIDIA's plugin logs in klog's format
    assert any(line.startswith("I1") or line.startswith("I0")
               for line in t.log_text().splitlines()), t.log_text()[:500]


def test_gpu_feature_discovery_oneshot_writes_the_file(links, node, dirs):
    n = node("h100-8x-nvswitch")
    out = os.path.join(dirs.run, "gfd")
    r = run_as(links, "gpu-feature-discovery",
               ["--oneshot", "--output-file", out, "--mig-strategy=none", "--no-timestamp"],
               env=n.env())
    assert r.returncode == 0, r.stderr
    labels = dict(line.split("=", 1) for line in open(out).read().splitlines())
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.product"].startswith("NVIDIA-H100")


def test_gpu_feature_discovery_keeps_labelling(tool, node, dirs, kubelet):
    n = node("h100-8x-nvswitch")
    out = os.path.join(dirs.run, "gfd")
    t = tool("gpu-feature-discovery", ["--sleep-interval=1s", "-o", out], env=n.env())
    wait_until(lambda: os.path.exists(out), 10, "the labels file")
    assert "nvidia.com/gpu.count=8" in open(out).read()
    assert t.alive()
    assert not t.own_sockets() and not kubelet.attempts()
    assert "serving metrics" not in t.log_text()


# ---------------------------------------------------------------- AMD

class AmdTree:
    def __init__(self, root, profile):
        with open(ROOT / "tests" / "mock-amd" / "profiles" / f"{profile}.yaml") as f:
            prof = yaml.safe_load(f)
        self.sys = os.path.join(root, "sys")
        self.root = root
        gen_sysfs.generate(prof, self.sys, root, mknod=os.geteuid() == 0)

    def env(self):
        return {"DEVLET_SYSFS_ROOT": self.sys, "DEV_ROOT": self.root}


def test_amd_device_plugin_with_the_operators_args(tool, dirs, kubelet):
    tree = AmdTree(dirs.root, "mi300x-8x-spx")
    t = tool("k8s-device-plugin", ["-logtostderr=true", "-stderrthreshold=INFO", "-v=5",
                                   "-pulse=30", "-driver_type=container",
                                   "--kubelet-url=http://localhost:10250",
                                   "--plugin-directory", dirs.plugins], env=tree.env())
    kubelet.wait_for_registration("amd.com/gpu")
    assert len(kubelet.wait_for_snapshot("amd.com/gpu").ids()) == 8
    assert "serving metrics" not in t.log_text()
    assert "kubelet-url accepted and ignored" in t.log_text()


def test_amd_device_plugin_refuses_passthrough(links):
    r = run_as(links, "k8s-device-plugin", ["-driver_type=vf-passthrough"])
    assert r.returncode == 2
    assert "-driver_type=vf-passthrough is not supported" in r.stderr
    assert "VFIO passthrough" in r.stderr


LABELLER_ARGS = ["-logtostderr=true", "-vram", "-cu-count", "-simd-count", "-device-id", "-family",
                  "-product-name", "-driver-version", "-compute-memory-partition",
                  "-compute-partitioning-supported", "-memory-partitioning-supported"]


def test_amd_node_labeller_patches_the_node(tool, dirs, kubelet, tmp_path):
    """AMD's labeller writes the Node's labels through the API server, and so
    does k8s-node-labeller by default, with AMD's DS_NODE_NAME."""
    tree = AmdTree(dirs.root, "mi300x-8x-spx")
    (tmp_path / "c").mkdir()
    certs = make_certs(tmp_path / "c")
    api = ApiServer(certs)
    try:
        api.add_node("amd-node-1", labels={"team": "ml"})
        kc = write_kubeconfig(tmp_path / "kubeconfig", api.url,
                              f"    certificate-authority: {certs / 'ca.crt'}", "    token: t")
        t = tool("k8s-node-labeller", LABELLER_ARGS + ["--kubeconfig", str(kc)],
                 env={**tree.env(), "DS_NODE_NAME": "amd-node-1"})
        api.wait_for(lambda: api.node_meta("amd-node-1").get("labels", {}).get(
            "amd.com/gpu.family") == "AI", 15, "AMD labels on the Node")
        labels = api.node_meta("amd-node-1")["labels"]
        assert labels["team"] == "ml"
        assert labels["amd.com/gpu.vram"] and labels["amd.com/gpu.cu-count"]
        assert not t.own_sockets() and not kubelet.attempts()
        assert not os.path.exists(os.path.join(t.workdir, "gfd"))
        assert t.terminate() == 0
    finally:
        api.stop()


def test_amd_node_labeller_to_the_features_file(tool, dirs, kubelet):
    tree = AmdTree(dirs.root, "mi300x-8x-spx")
    t = tool("k8s-node-labeller", ["-vram", "-family", "--labels-output", "features.d"],
             env=tree.env())
    out = os.path.join(t.workdir, "gfd")
    wait_until(lambda: os.path.exists(out) and "amd.com/gpu.family" in open(out).read(), 10,
               "AMD labels")
    text = open(out).read()
    # the groups asked for only, as AMD's labeller
    assert "amd.com/gpu.vram" in text and "amd.com/gpu.cu-count" not in text


def test_amd_metrics_exporter_port_from_its_config(tool, dirs):
    tree = AmdTree(dirs.root, "mi300x-8x-spx")
    port = free_port()
    cfgfile = os.path.join(dirs.run, "config.json")
    with open(cfgfile, "w") as f:
        json.dump({"ServerPort": port, "GPUConfig": {"Fields": ["GPU_GFX_ACTIVITY"]}}, f)
    t = tool("amd-metrics-exporter", ["-amd-metrics-config", cfgfile, "-agent-grpc-port", "50061"],
             env={**tree.env(), "DEVLET_POD_RESOURCES_SOCKET": os.path.join(dirs.run, "no.sock")})
    t.wait_log(rf"serving metrics address=\S+ port={port}")
    samples = parse(wait_until(lambda: (lambda s: s if "gpu_" in s else None)(scrape(port)), 20,
                               "AMD series"))
    series = [lab for n, lab, _ in samples if n.startswith("gpu_")]
    assert series and all("hostname" in lab and "Hostname" not in lab for lab in series)
    # the rest of the file is the AMD family's --amd-metrics-config: its Fields apply
    assert {n for n, _, _ in samples if not n.startswith("devlet_")} == {"gpu_gfx_activity"}
    assert not t.own_sockets()


def test_amd_metrics_exporter_broken_config_exits_2(links, dirs):
    cfgfile = os.path.join(dirs.run, "config.json")
    with open(cfgfile, "w") as f:
        f.write('{"ServerPort": 5000,\n  "GPUConfig": [}')
    r = run_as(links, "amd-metrics-exporter", ["-amd-metrics-config", cfgfile])
    assert r.returncode == 2
    assert f"{cfgfile}:2:" in r.stderr


# ---------------------------------------------------------------- MPS

def test_mps_control_daemon_mount_shm_is_done_by_the_sidecar(links):
    r = run_as(links, "mps-control-daemon", ["mount-shm"])
    assert r.returncode == 0, r.stderr
    assert "mount-shm" in r.stderr


# ---------------------------------------------------------------- config-manager

class NodeApi:
    """GET and WATCH of one Node whose labels a test sets.  watch_mode makes
    every watch hostile: "ends" (ended at once), "gone" (status 410),
    "gone-event" (one ERROR event with a 410 Status, then ended)."""

    def __init__(self, certs, name):
        self.name = name
        self.labels = {}
        self.rv = 1
        self.cond = threading.Condition()
        self.gets = self.watches = 0
        self.watch_mode = None
        api = self

        class Handler(JSONHandler):
            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query)
                if u.path == f"/api/v1/nodes/{api.name}":
                    with api.cond:
                        api.gets += 1
                        obj = api.node()
                        api.cond.notify_all()
                    return self.send_json(200, obj)
                if u.path == "/api/v1/nodes" and q.get("watch") != ["1"]:
                    assert q["fieldSelector"] == [f"metadata.name={api.name}"]
                    with api.cond:
                        api.gets += 1
                        obj = {"kind": "NodeList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": str(api.rv)},
                               "items": [api.node()]}
                        api.cond.notify_all()
                    return self.send_json(200, obj)
                if u.path == "/api/v1/nodes" and q.get("watch") == ["1"]:
                    assert q["fieldSelector"] == [f"metadata.name={api.name}"]
                    with api.cond:
                        api.watches += 1
                        mode = api.watch_mode
                        api.cond.notify_all()
                    if mode == "gone":
                        return self.send_status(410, "Expired", "too old resource version")
                    self.start_chunked()
                    if mode == "gone-event":
                        ev = {"type": "ERROR", "object": {
                            "kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "too old resource version", "reason": "Expired",
                            "code": 410}}
                        self.chunk((json.dumps(ev) + "\n").encode())
                    if mode:
                        return self.end_chunked()
                    seen = int(q.get("resourceVersion", ["0"])[0] or 0)
                    if q.get("sendInitialEvents") == ["true"]:
                        # a streaming list: the node, then the bookmark
                        # that ends the initial events
                        with api.cond:
                            node, seen = api.node(), api.rv
                        mark = {"kind": "Node", "apiVersion": "v1", "metadata": {
                            "resourceVersion": str(seen),
                            "annotations": {"k8s.io/initial-events-end": "true"}}}
                        self.chunk((json.dumps({"type": "ADDED", "object": node}) + "\n"
                                    + json.dumps({"type": "BOOKMARK", "object": mark}) + "\n"
                                    ).encode())
                    with api.cond:
                        while True:
                            if api.rv > seen:
                                seen = api.rv
                                ev = {"type": "MODIFIED", "object": api.node()}
                                api.cond.release()
                                try:
                                    self.chunk((json.dumps(ev) + "\n").encode())
                                finally:
                                    api.cond.acquire()
                            if not api.cond.wait(0.5) and api.stopping:
                                break
                    return self.end_chunked()
                return self.send_status(404, "NotFound", "no such path")

        self.stopping = False
        self.lock = threading.Lock()
        self.connections = 0
        self.server = TLSServer(("127.0.0.1", 0), Handler)
        self.server.ctx = server_context(certs)
        self.server.api = self
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def node(self):
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": dict(self.labels),
                             "resourceVersion": str(self.rv)}}

    def set_label(self, key, value):
        with self.cond:
            if value is None:
                self.labels.pop(key, None)
            else:
                self.labels[key] = value
            self.rv += 1
            self.cond.notify_all()

    def stop(self):
        self.stopping = True
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def node_api(tmp_path):
    (tmp_path / "certs").mkdir()
    certs = make_certs(tmp_path / "certs")
    api = NodeApi(certs, "gpu-node-1")
    kc = tmp_path / "kubeconfig"
    write_kubeconfig(kc, f"https://127.0.0.1:{api.port}",
                     f"    certificate-authority: {certs / 'ca.crt'}",
                     f"    client-certificate: {certs / 'client.crt'}\n"
                     f"    client-key: {certs / 'client.key'}")
    api.kubeconfig = str(kc)
    yield api
    api.stop()


def configs(tmp_path):
    src = tmp_path / "available"
    src.mkdir()
    for name in ("default", "a100-mig", "ts-4"):
        (src / name).write_text(f"version: v1\n# {name}\n")
    return src


def cm_args(api, src, dst, *extra):
    return ["--kubeconfig", api.kubeconfig, "--node-name", api.name,
            f"--config-file-srcdir={src}", f"--config-file-dst={dst}", "--default-config=default",
            "--send-signal=false", *extra]


def test_config_manager_oneshot_takes_the_label_or_the_default(links, node_api, tmp_path):
    src = configs(tmp_path)
    dst = tmp_path / "config.yaml"
    r = run_as(links, "config-manager", cm_args(node_api, src, dst, "--oneshot"))
    assert r.returncode == 0, r.stderr
    assert os.readlink(dst) == f"{src}/default"
    node_api.set_label("nvidia.com/device-plugin.config", "a100-mig")
    r = run_as(links, "config-manager", cm_args(node_api, src, dst, "--oneshot"))
    assert r.returncode == 0, r.stderr
    assert os.readlink(dst) == f"{src}/a100-mig"
    # a label naming no file: an error, nothing changed (as NVIDIA's)
    node_api.set_label("nvidia.com/device-plugin.config", "../../etc/passwd")
    r = run_as(links, "config-manager", cm_args(node_api, src, dst, "--oneshot"))
    assert r.returncode == 1
    assert "unknown configuration" in r.stderr
    assert os.readlink(dst) == f"{src}/a100-mig"


def test_config_manager_required_flags_exit_1(links):
    r = run_as(links, "config-manager", ["--oneshot"])
    assert r.returncode == 1
    assert "invalid <node-name>" in r.stderr


def test_config_manager_follows_the_label_and_signals(links, node_api, tmp_path, dirs):
    src = configs(tmp_path)
    dst = tmp_path / "config.yaml"
    # a process whose argv[0] is the one to signal: it records SIGHUPs
    marker, ready = tmp_path / "hups", tmp_path / "ready"
    victim = subprocess.Popen(
        ["bash", "-c", f"exec -a devlet-cm-test-target bash -c "
                       f"'trap \"echo hup >> {marker}\" HUP; : > {ready}; "
                       f"while :; do sleep 0.05; done'"])
    try:
        # its trap is set before config-manager can signal it (a SIGHUP
        # before the trap ends the process)
        wait_until(ready.exists, 10, "the process to signal")
        args = cm_args(node_api, src, dst)
        args.remove("--send-signal=false")
        args += ["--process-to-signal=devlet-cm-test-target", "--signal=1"]
        t = Tool(dirs.plugins, os.path.join(dirs.work, "cm"), None, args=args,
                 binary=str(links / "config-manager")).start()
        try:
            wait_until(lambda: os.path.islink(dst) and os.readlink(dst) == f"{src}/default", 10,
                       "the default config")
            # the first SIGHUP is recorded before the label changes: two
            # standard signals sent while the trap is pending are one
            wait_until(lambda: marker.exists() and marker.read_text().count("hup") >= 1, 10,
                       "the first SIGHUP to the process")
            node_api.set_label("nvidia.com/device-plugin.config", "ts-4")
            wait_until(lambda: os.readlink(dst) == f"{src}/ts-4", 10, "the labelled config")
            wait_until(lambda: marker.exists() and marker.read_text().count("hup") >= 2, 10,
                       "SIGHUP to the process")
            node_api.set_label("nvidia.com/device-plugin.config", None)
            wait_until(lambda: os.readlink(dst) == f"{src}/default", 10, "back to the default")
            assert t.terminate() == 0
        finally:
            t.kill()
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("mode", ["ends", "gone", "gone-event"])
def test_config_manager_paces_refused_watches(links, node_api, tmp_path, dirs, mode):
    """A server that ends every Node watch at once or refuses it with 410
    (a status or an ERROR event) gets a backoff, never a loop: at most 10
    watches and 10 reads of the node in 5 s (a loop made 69,057 watches in
    10 s); once it behaves, a label change is followed again."""
    src = configs(tmp_path)
    dst = tmp_path / "config.yaml"
    node_api.watch_mode = mode
    t = Tool(dirs.plugins, os.path.join(dirs.work, "cm"), None, args=cm_args(node_api, src, dst),
             binary=str(links / "config-manager")).start()
    try:
        wait_until(lambda: os.path.islink(dst) and os.readlink(dst) == f"{src}/default", 10,
                   "the default config")
        with node_api.cond:
            assert node_api.cond.wait_for(lambda: node_api.watches >= 1, 10), "no watch"
            watches, gets = node_api.watches, node_api.gets
            assert not node_api.cond.wait_for(
                lambda: node_api.watches > watches + 10 or node_api.gets > gets + 10, 5), \
                (node_api.watches - watches, node_api.gets - gets)
            assert node_api.watches > watches, "the watch was not tried again"
            node_api.watch_mode = None
        node_api.set_label("nvidia.com/device-plugin.config", "ts-4")
        # within one backoff (30 s at most)
        wait_until(lambda: os.readlink(dst) == f"{src}/ts-4", 40, "the labelled config")
        assert t.terminate() == 0
    finally:
        t.kill()
