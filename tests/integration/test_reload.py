"""A reload applies every option: `devlet help options-json` lists each row
of the option and section tables with what a change needs (apply flags);
each option that a config file can set is changed through a reload, and
the reload line names it and what it needed (metrics restarted exactly when
a metrics row changed).  Then the effects themselves: the metrics settings
on /metrics, sharing and resources through ListAndWatch and Allocate, the
labels file and the CDI specs.

devlet runs here with only --config-file, so that every option comes from
the file (a flag or env var would win over it)."""

import json
import os
import re
import socket

import pytest

from devlet_harness import devlet_env, make_node, run_devlet, wait_until
from metrics_sim import MockNvml, PodResourcesSim, free_port, select, wait_samples

WAIT = 20.0
RELOADED = r"reloaded resources=\d+ metrics=(\w+) changed=(\S+) needs=(\S+)"


def table():
    p = run_devlet(["help", "options-json"])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def set_key(cfg: dict, key: str, value):
    parts = key.split(".")
    for p in parts[:-1]:
        cfg = cfg.setdefault(p, {})
    cfg[parts[-1]] = value


@pytest.fixture
def nvml(dirs):
    return MockNvml(dirs.work)


class Node:
    """devlet run with the mock NVML, every option from its config file."""

    def __init__(self, devlet, nvml, dirs, base=()):
        self.dirs = dirs
        self.port = free_port()
        self.base = {"version": "v1"}
        # the kubelet socket and the dev root given, not derived from the
        # plugin directory and the driver root: a change names one option
        for key, value in (("flags.pluginDirectory", dirs.plugins),
                           ("flags.kubeletSocket", os.path.join(dirs.plugins, "kubelet.sock")),
                           ("flags.nvidiaDevRoot", "/"),
                           ("flags.metricsAddress", f"127.0.0.1:{self.port}"),
                           ("flags.collectInterval", 100),
                           ("flags.podResourcesSocket", os.path.join(dirs.run, "pod-resources.sock")),
                           ("flags.containerStateDirs", [os.path.join(dirs.run, "state")]),
                           ("flags.cdiSpecDir", os.path.join(dirs.work, "cdi")),
                           ("flags.gfd.outputFile", os.path.join(dirs.work, "gfd")),
                           ("flags.gfd.machineTypeFile", os.path.join(dirs.run, "product_name")),
                           *base):
            set_key(self.base, key, value)
        with open(os.path.join(dirs.run, "product_name"), "w") as f:
            f.write("DGX H100\n")
        self.d = devlet(self.base, start=False)
        env = devlet_env({**nvml.env(), "NODE_NAME": "node-a"})
        self.d.command = lambda: [self.d.binary, "run", "--config-file", self.d.config_path]
        self.d.environment = lambda: env
        self.d.start()
        self.d.wait_log(r"serving metrics")
        self.cfg = self.base

    def reload(self, cfg: dict, sighup: bool = False):
        """Writes cfg (a reload through the file watch, or SIGHUP when the file
        does not change); returns the reload line's (metrics, changed, needs)."""
        since = self.d.log_size()
        self.cfg = cfg
        if sighup:
            self.d.sighup()
        else:
            self.d.write_config(cfg)
        m = self.d.wait_log(RELOADED, since=since, timeout=WAIT)
        return m.group(1), m.group(2), m.group(3)

    def change(self, key: str, value):
        cfg = json.loads(json.dumps(self.cfg))
        set_key(cfg, key, value)
        return self.reload(cfg)


def new_value(opt, dirs, port):
    """A valid value other than the base config's for opt."""
    special = {
        "plugin-directory": os.path.join(dirs.root, "plugins2"),
        "kubelet-socket": os.path.join(dirs.plugins, "other-kubelet.sock"),
        "verbosity": 1,
        "log-format": "klog",  # its reload line is klog's: the message as in text
        "backends": ["nvidia"],
        "collect-interval": 250,
        "metrics-address": f"127.0.0.1:{port}",
        "imex-channel-ids": ["0"],
        "nvidia-dra-no-execute": ["79", "gpu-lost"],
        "cdi-feature-flags": ["enable-explicit-driver-libraries"],
        "cdi-disable-hooks": ["update-ldcache"],
        "container-state-dirs": [dirs.run],
        "collectors": os.path.join(dirs.run, "counters.csv"),
        "dev-root": dirs.dev,
        "web-config-file": os.path.join(dirs.run, "web.yml"),
    }
    if opt["flag"] in special:
        return special[opt["flag"]]
    t, default, choices = opt["type"], opt["default"], opt["choices"]
    if choices:
        other = [c for c in choices if c not in (default, "auto")][0]
        return [other] if t == "list" else other
    if t == "bool":
        return default != "true"
    if t == "int":
        return int(default) + 1
    if t == "duration":
        return "7s" if default != "7s" else "8s"
    if t == "list":
        return [os.path.join(dirs.run, "changed-" + opt["flag"])]
    return os.path.join(dirs.run, "changed-" + opt["flag"])


SECTIONS = {
    "hostDevices": lambda dirs: {"devices": [{"name": "null", "groups": [{"paths": [
        {"path": os.path.join(dirs.dev, "null0")}]}]}]},
    "resources": lambda dirs: {"gpus": [{"pattern": "*H100*", "name": "h100"}]},
    "sharing": lambda dirs: {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}},
    "health": lambda dirs: {"recovery": {"enabled": True, "quietPeriod": "5s"}},
}


def test_every_row_says_what_a_change_needs():
    t = table()
    names = {"none", "reserve", "sockets", "metrics", "outputs", "restart"}
    for row in t["options"] + t["sections"]:
        assert row["apply"] and set(row["apply"]) <= names, row
    for opt in t["options"]:
        # only an option no config file can set needs a restart
        assert ("restart" in opt["apply"]) == (opt["key"] is None), opt
    assert {s["key"] for s in t["sections"]} >= set(SECTIONS)


def test_every_option_through_a_reload(devlet, nvml, dirs, kubelet):
    """Each option a config file can set, and each section, changed and
    changed back: the reload line names it and what it needs, and metrics
    restart exactly when a metrics row changed."""
    t = table()
    os.makedirs(os.path.join(dirs.root, "plugins2"))
    with open(os.path.join(dirs.dev, "null0"), "w"):
        pass
    with open(os.path.join(dirs.run, "counters.csv"), "w") as f:
        f.write("DCGM_FI_DEV_GPU_TEMP, gauge, temperature\n")
    with open(os.path.join(dirs.run, "web.yml"), "w") as f:
        f.write("http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
    node = Node(devlet, nvml, dirs)
    changes = [(o["flag"], o["key"], new_value(o, dirs, free_port()), o["apply"])
               for o in t["options"] if o["key"]]
    changes += [(s["key"], s["key"], SECTIONS[s["key"]](dirs), s["apply"]) for s in t["sections"]]
    assert len(changes) > 40
    for name, key, value, apply in changes:
        for cfg in ("changed", "back"):
            if cfg == "changed":
                metrics, changed, needs = node.change(key, value)
            else:
                metrics, changed, needs = node.reload(node.base)
            what = f"{name} {cfg}"
            assert changed == name, what
            assert needs == ",".join(apply), what
            assert metrics == ("restarted" if "metrics" in apply else "kept"), what
    # nothing changed: nothing needed, metrics kept
    assert node.reload(node.base, sighup=True) == ("kept", "none", "none")
    assert "a reload cannot apply" not in node.d.log_text()


# ---------------------------------------------------------------- the effects


def dcgm_names(samples):
    return {name for name, _, _ in samples if name.startswith("DCGM_FI_")}


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def test_metrics_settings_are_live(devlet, nvml, dirs):
    uuid = nvml.uuid(3)
    podres = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    podres.pods = [("ns", "pod-a", [("a", [("nvidia.com/gpu.shared", [f"{uuid}::0"])])]),
                   ("ns", "pod-b", [("b", [("nvidia.com/gpu.shared", [f"{uuid}::1"])])])]
    podres.start()
    try:
        node = Node(devlet, nvml, dirs)
        port = node.port
        util3 = lambda s: select(s, "DCGM_FI_DEV_GPU_UTIL", gpu="3")  # noqa: E731
        wait_samples(port, lambda s: len(util3(s)) == 1 and select(s, "devlet_pod_resources_up"), WAIT,
                     "GPU 3's one GPU_UTIL series")

        # kubernetesVirtualGPUs: one series per pod on the shared GPU
        assert node.change("flags.kubernetesVirtualGPUs", True)[0] == "restarted"
        wait_samples(port, lambda s: len(util3(s)) == 3, WAIT, "GPU 3's series and one per pod")

        # collectors: the CSV's families only; the same path with other content too
        csv = os.path.join(dirs.run, "counters.csv")
        with open(csv, "w") as f:
            f.write("DCGM_FI_DEV_GPU_TEMP, gauge, temperature\n")
        assert node.change("flags.collectors", csv)[0] == "restarted"
        wait_samples(port, lambda s: dcgm_names(s) == {"DCGM_FI_DEV_GPU_TEMP"}, WAIT, "GPU_TEMP only")
        with open(csv, "w") as f:
            f.write("DCGM_FI_DEV_POWER_USAGE, gauge, power\n")
        assert node.reload(node.cfg, sighup=True)[:2] == ("restarted", "collectors")
        wait_samples(port, lambda s: dcgm_names(s) == {"DCGM_FI_DEV_POWER_USAGE"}, WAIT, "POWER_USAGE only")

        # hostnameLabel: the node's name under the other label
        wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_POWER_USAGE", Hostname="node-a"), WAIT, "Hostname")
        assert node.change("flags.hostnameLabel", "hostname")[0] == "restarted"
        samples = wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_POWER_USAGE", hostname="node-a") and s,
                               WAIT, "hostname")
        assert not select(samples, "DCGM_FI_DEV_POWER_USAGE", Hostname="node-a")

        # metricsAddress: the new port serves, the old one is closed
        new_port = free_port()
        assert node.change("flags.metricsAddress", f"127.0.0.1:{new_port}")[0] == "restarted"
        wait_samples(new_port, lambda s: select(s, "DCGM_FI_DEV_POWER_USAGE"), WAIT, "the new port")
        assert refused(port)

        # collectInterval: an hour, then 100 ms again: collections climb again
        total = lambda s: int(select(s, "devlet_collections_total")[0][1]) if select(  # noqa: E731
            s, "devlet_collections_total") else 0
        assert node.change("flags.collectInterval", 3600000)[0] == "restarted"
        node.d.wait_log(r"serving metrics .*interval_ms=3600000")
        assert node.change("flags.collectInterval", 100)[0] == "restarted"
        wait_samples(new_port, lambda s: total(s) >= 5, WAIT, "collections every 100 ms")
    finally:
        podres.stop()


def test_sharing_and_resources_are_live(devlet, nvml, dirs, kubelet):
    node = Node(devlet, nvml, dirs)
    kubelet.wait_for_snapshot("nvidia.com/gpu", lambda s: len(s.ids()) == 8, timeout=WAIT)

    # sharing: two replicas of each GPU, down the open ListAndWatch; no
    # registration again (a kubelet since 1.37 refuses one from a socket it
    # is connected to: "device plugin already connected")
    attempts = len(kubelet.attempts("nvidia.com/gpu"))
    cfg = dict(node.base, sharing={"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}})
    assert node.reload(cfg)[1:] == ("sharing", "reserve,outputs")
    kubelet.wait_for_snapshot("nvidia.com/gpu", lambda s: len(s.ids()) == 16, timeout=WAIT)
    assert len(kubelet.attempts("nvidia.com/gpu")) == attempts

    # resources: the GPUs served under the pattern's name
    cfg = dict(node.base, resources={"gpus": [{"pattern": "*H100*", "name": "h100"}]})
    assert node.reload(cfg)[1:] == ("sharing,resources", "reserve,outputs")
    kubelet.wait_for_snapshot("nvidia.com/h100", lambda s: len(s.ids()) == 8, timeout=WAIT)

    # a plugin flag: Allocate names GPUs by index
    cfg = json.loads(json.dumps(node.base))
    set_key(cfg, "flags.plugin.deviceIDStrategy", "index")
    registered = len(kubelet.accepted("nvidia.com/gpu"))
    node.reload(cfg)
    kubelet.wait_for_registration("nvidia.com/gpu", count=registered + 1, timeout=WAIT)
    snap = kubelet.wait_for_snapshot("nvidia.com/gpu", lambda s: len(s.ids()) == 8, timeout=WAIT)
    resp = kubelet.allocate("nvidia.com/gpu", [[sorted(snap.ids())[0]]])
    envs = dict(resp.container_responses[0].envs)
    assert re.fullmatch(r"\d", envs["NVIDIA_VISIBLE_DEVICES"]), envs
    assert not [r for r in kubelet.attempts() if r.error], kubelet.attempts()


def read_labels(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def test_labels_and_cdi_are_live(devlet, nvml, dirs):
    for name in ["nvidiactl"] + [f"nvidia{i}" for i in range(8)]:
        make_node(os.path.join(dirs.dev, name))
    node = Node(devlet, nvml, dirs, base=[("flags.nvidiaDevRoot", dirs.root)])
    gfd = os.path.join(dirs.work, "gfd")
    wait_until(lambda: os.path.exists(gfd) and "nvidia.com/gfd.timestamp" in read_labels(gfd), WAIT,
               "the labels file")

    # noTimestamp: the file is written again without it
    assert node.change("flags.gfd.noTimestamp", True)[1:] == ("no-timestamp", "outputs")
    wait_until(lambda: "nvidia.com/gfd.timestamp" not in read_labels(gfd), WAIT, "no timestamp label")

    # outputFile: the labels go to the new file
    other = os.path.join(dirs.work, "gfd2")
    node.change("flags.gfd.outputFile", other)
    wait_until(lambda: os.path.exists(other) and "nvidia.com/gpu.count" in read_labels(other), WAIT,
               "the new labels file")

    # a CDI device-list strategy: specs written; cdiSpecDir: to the new directory
    cdi = os.path.join(dirs.work, "cdi")
    assert not os.path.exists(cdi) or not os.listdir(cdi)
    node.change("flags.plugin.deviceListStrategy", ["cdi-cri"])
    wait_until(lambda: os.path.isdir(cdi) and os.listdir(cdi), WAIT, "CDI specs")
    cdi2 = os.path.join(dirs.work, "cdi2")
    assert node.change("flags.cdiSpecDir", cdi2)[1:] == ("cdi-spec-dir", "outputs")
    wait_until(lambda: os.path.isdir(cdi2) and os.listdir(cdi2), WAIT, "CDI specs in the new directory")

    # a section: host devices appear in the CDI specs
    with open(os.path.join(dirs.dev, "null0"), "w"):
        pass
    cfg = json.loads(json.dumps(node.cfg))
    cfg["hostDevices"] = SECTIONS["hostDevices"](dirs)
    assert node.reload(cfg)[1:] == ("hostDevices", "reserve,outputs")
    wait_until(lambda: any("null" in n for n in os.listdir(cdi2)), WAIT, "the host device's spec")
