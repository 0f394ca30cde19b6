"""The labels through the API server (src/labels/publish.c): --labels-output
node-feature (NFD's NodeFeature object, GFD's --use-node-feature-api) and
node (the Node's own labels, as AMD's k8s-node-labeller writes them),
against the fake API server (fake_apiserver.ApiServer: Nodes and
NodeFeatures), hostile on demand.

devlet serves host devices (devlet.io/fuse: 3, devlet.io/serial: the
test's tty files), so the labels are "<resource>.count".  Every wait is on
an event with a deadline (a write the server saw, an object's content, a
gRPC answer), never a bare sleep.
"""

import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

from devlet_harness import DEVLET_BIN as DEVLET, devlet_cli, hostdev_config, make_node, wait_until
from fake_apiserver import b64, write_kubeconfig
from kubelet_sim import PluginClient

NODE = "node-a"
NF_NAME = f"nvidia-features-for-{NODE}"
OWNED = "devlet.io/owned-labels"


@pytest.fixture
def env(tmp_path, api, certs):
    """A kubeconfig for the fake server, a host-devices config and its
    device files."""
    devs = tmp_path / "devs"
    devs.mkdir()
    (devs / "tty0").touch()
    import yaml
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"version": "v1", "hostDevices": {"devices": [
        {"name": "fuse", "groups": [{"count": 3, "paths": [{"path": "/dev/null"}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": str(devs / "tty*")}]}]},
    ]}}))
    kc = write_kubeconfig(tmp_path / "kubeconfig", api.url,
                          f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                          "    token: labels-token")
    return {"kubeconfig": str(kc), "config": str(cfg), "devs": devs, "tmp": tmp_path}


def loop(env, *extra):
    """`devlet labels --oneshot=false` on the fake server."""
    return subprocess.Popen(
        [str(DEVLET), "labels", "--oneshot=false", "--config-file", env["config"], "--backends",
         "hostdev", "--kubeconfig", env["kubeconfig"], "--node-name", NODE, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return err


def node_labels(api):
    return api.node_meta(NODE).get("labels", {})


# ------------------------------------------------------------ NodeFeature


def test_requests_name_devlet(api, env):
    """The publisher's requests say devlet, its version and the component in
    the User-Agent (client-go's form: devlet/<version> (linux/<arch>) labels)."""
    p = loop(env, "--use-node-feature-api", "--namespace", "gpu-operator")
    try:
        api.wait_for(lambda: api.nodefeatures.get(("gpu-operator", NF_NAME)), 10,
                     "the NodeFeature")
    finally:
        stop(p)
    with api.lock:
        agents = set(api.agents)
    assert agents and all(re.fullmatch(r"devlet/[^ /]+ \(linux/[a-z0-9]+\) labels", a or "")
                          for a in agents), agents


def test_node_feature_created_updated_unchanged(api, env):
    """GFD's object: created when missing, replaced when the labels change,
    left alone (no write) when they do not."""
    p = loop(env, "--use-node-feature-api", "--namespace", "gpu-operator", "--sleep-interval",
             "200ms")
    try:
        want = {"devlet.io/fuse.count": "3", "devlet.io/serial.count": "1"}
        got = api.wait_for(lambda: (o := api.nodefeatures.get(("gpu-operator", NF_NAME)))
                           and o["spec"]["labels"] == want and o, 10, "the NodeFeature")
        assert got["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1" and got["kind"] == "NodeFeature"
        assert got["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": NODE}
        assert set(got["spec"]["features"]) == {"flags", "attributes", "instances"}
        # a device comes: replaced, with the resourceVersion read
        with api.lock:  # what someone else keeps on the object survives an update
            o = api.nodefeatures[("gpu-operator", NF_NAME)]
            o["metadata"]["annotations"] = {"x": "y"}
            o["metadata"]["resourceVersion"] = api._next_rv()  # as a real server would
        (env["devs"] / "tty1").touch()
        api.wait_for(lambda: api.nodefeatures[("gpu-operator", NF_NAME)]["spec"]["labels"]
                     .get("devlet.io/serial.count") == "2", 10, "the update")
        assert api.nodefeature_of("gpu-operator", NF_NAME)["metadata"]["annotations"] == {"x": "y"}
        assert [w[0] for w in api.writes if w[1] == "nodefeature"] == ["POST", "PUT"]
    finally:
        err = stop(p)
    assert "use-node-feature-api: devlet does not write" not in err
    assert "output=node-feature" in err


def test_node_feature_flag_forms_and_file_untouched(api, env):
    """GFD's env vars select it as well; no features.d file is written."""
    out = env["tmp"] / "features.d" / "gfd"
    e = {**os.environ, "GFD_USE_NODE_FEATURE_API": "true", "NAMESPACE": "nfd"}
    res = devlet_cli("labels", "--config-file", env["config"], "--backends", "hostdev",
                     "--kubeconfig", env["kubeconfig"], "--node-name", NODE, "-o", str(out),
                     env=e)
    assert res.returncode == 0, res.stderr
    assert api.nodefeature_of("nfd", NF_NAME)["spec"]["labels"]["devlet.io/fuse.count"] == "3"
    assert not out.exists()
    # --labels-output wins over --use-node-feature-api, and says so
    p = loop(env, "--use-node-feature-api", "--labels-output", "features.d", "-o", str(out))
    try:
        wait_until(out.exists, 10, "the file")
    finally:
        err = stop(p)
    assert "overruled by --labels-output=features.d" in err


# ------------------------------------------------------------ Node labels


def test_node_labels_patched_and_stale_owned_removed(api, env):
    """node mode: devlet's labels are added, the ones it wrote before and no
    longer produces removed (after a restart too: the owned list lives on
    the Node), labels it never wrote untouched."""
    api.add_node(NODE, labels={"kubernetes.io/hostname": NODE, "team": "ml",
                               "devlet.io/gone.count": "9"},
                 annotations={OWNED: "devlet.io/gone.count,devlet.io/serial.count"})
    p = loop(env, "--labels-output", "node", "--sleep-interval", "200ms",
             "--labels-resync-interval", "1s")
    try:
        api.wait_for(lambda: node_labels(api).get("devlet.io/fuse.count") == "3", 10, "labels")
        labels = node_labels(api)
        assert labels == {"kubernetes.io/hostname": NODE, "team": "ml",
                          "devlet.io/fuse.count": "3", "devlet.io/serial.count": "1"}
        assert api.node_meta(NODE)["annotations"][OWNED] == \
            "devlet.io/fuse.count,devlet.io/serial.count"
        # someone removes one of devlet's labels: it comes back at the re-sync
        with api.lock:
            del api.nodes[NODE]["metadata"]["labels"]["devlet.io/fuse.count"]
        api.wait_for(lambda: "devlet.io/fuse.count" in api.nodes[NODE]["metadata"]["labels"],
                     10, "the label back")
    finally:
        stop(p)
    # the config changes: serial is no longer served; a new devlet removes its label
    import yaml
    cfg = yaml.safe_load(pathlib.Path(env["config"]).read_text())
    cfg["hostDevices"]["devices"] = cfg["hostDevices"]["devices"][:1]
    pathlib.Path(env["config"]).write_text(yaml.safe_dump(cfg))
    res = devlet_cli("labels", "--config-file", env["config"], "--backends", "hostdev",
                     "--kubeconfig", env["kubeconfig"], "--node-name", NODE,
                     "--labels-output", "node")
    assert res.returncode == 0, res.stderr
    assert node_labels(api) == {"kubernetes.io/hostname": NODE, "team": "ml",
                                "devlet.io/fuse.count": "3"}
    assert api.node_meta(NODE)["annotations"][OWNED] == "devlet.io/fuse.count"
    # every patch named only devlet's keys and its annotation
    for method, kind, _, patch in api.writes:
        assert (method, kind) == ("PATCH", "node")
        assert set(patch["metadata"]) <= {"labels", "annotations"}
        assert set(patch["metadata"].get("annotations", {})) <= {OWNED}
        assert not {"kubernetes.io/hostname", "team"} & set(patch["metadata"].get("labels", {}))


def test_node_label_someone_else_owns_is_never_removed(api, env):
    """A label devlet does not produce and never listed stays, even in
    devlet's domain."""
    api.add_node(NODE, labels={"devlet.io/other.count": "5"})
    res = devlet_cli("labels", "--config-file", env["config"], "--backends", "hostdev",
                     "--kubeconfig", env["kubeconfig"], "--node-name", NODE,
                     "--labels-output", "node")
    assert res.returncode == 0, res.stderr
    assert node_labels(api)["devlet.io/other.count"] == "5"


def test_oneshot_api_failure_exits_1(api, env):
    api.down()
    res = devlet_cli("labels", "--config-file", env["config"], "--backends", "hostdev",
                     "--kubeconfig", env["kubeconfig"], "--node-name", NODE,
                     "--labels-output", "node")
    assert res.returncode == 1
    assert "devlet labels:" in res.stderr


# ------------------------------------------------------------ writes only on change
#
# At 5,000 nodes a read or a write every labelling round is a storm for
# nothing: once published, an unchanged label set costs no request at all,
# and a change is one write of what changed.  Labelling rounds are counted
# by devlet's trace line for a round that sent nothing ("labels unchanged");
# the window also ends at the first request, so a build that calls the
# server every round fails at once instead of waiting.

ROUND = "labels unchanged, nothing sent"


def logged_loop(env, *extra, environ=None):
    """loop(), its standard error in a file that is read while it runs."""
    log = env["tmp"] / f"devlet-{len(list(env['tmp'].glob('devlet-*.log')))}.log"
    f = open(log, "w")
    p = subprocess.Popen(
        [str(DEVLET), "labels", "--oneshot=false", "--kubeconfig", env["kubeconfig"],
         "--node-name", NODE, "--sleep-interval", "200ms", "-v", "2", *extra],
        stdout=subprocess.DEVNULL, stderr=f, text=True, env=environ)
    f.close()
    return p, log


def stop_logged(p, log):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    assert p.returncode == 0, log.read_text()


def quiet_window(api, log, rounds=8):
    """Waits for `rounds` labelling rounds that sent nothing, or for any
    request to the server, whichever comes first; returns the requests."""
    n, seen = len(api.requests), log.read_text().count(ROUND)
    wait_until(lambda: log.read_text().count(ROUND) >= seen + rounds
               or api.requests_since(n), 15, f"{rounds} labelling rounds")
    return api.requests_since(n)


def hostdev_args(env):
    return ["--config-file", env["config"], "--backends", "hostdev"]


def test_node_unchanged_labels_cost_no_request(api, env):
    """Node mode: one read and one patch at start; then rounds with nothing
    changed send nothing (no GET, no PATCH); a device that comes is one
    PATCH, without a read, of the one label that changed."""
    api.add_node(NODE, labels={"team": "ml"})
    p, log = logged_loop(env, *hostdev_args(env), "--labels-output", "node")
    try:
        api.wait_for(lambda: node_labels(api).get("devlet.io/serial.count") == "1", 10,
                     "labels")
        assert quiet_window(api, log) == []
        path = f"/api/v1/nodes/{NODE}"
        assert api.requests == [("GET", path), ("PATCH", path)]
        n, writes = len(api.requests), api.writes_count()
        (env["devs"] / "tty1").touch()
        api.wait_for(lambda: node_labels(api).get("devlet.io/serial.count") == "2", 10,
                     "the change")
        assert quiet_window(api, log) == []  # and nothing after it
        assert api.requests_since(n) == [("PATCH", path)]
        assert api.writes[writes:] == [
            ("PATCH", "node", NODE, {"metadata": {"labels": {"devlet.io/serial.count": "2"}}})]
    finally:
        stop_logged(p, log)
    assert node_labels(api) == {"team": "ml", "devlet.io/fuse.count": "3",
                                "devlet.io/serial.count": "2"}


def test_node_feature_unchanged_labels_cost_no_request(api, env):
    """NodeFeature mode: one read and one create at start; then nothing while
    nothing changes; a change is one PUT of the object last answered (its
    resourceVersion), without a read."""
    p, log = logged_loop(env, *hostdev_args(env), "--use-node-feature-api", "--namespace", "nfd")
    try:
        api.wait_for(lambda: api.nodefeature_of("nfd", NF_NAME), 10, "the NodeFeature")
        assert quiet_window(api, log) == []
        coll = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/nfd/nodefeatures"
        assert api.requests == [("GET", f"{coll}/{NF_NAME}"), ("POST", coll)]
        n = len(api.requests)
        (env["devs"] / "tty1").touch()
        api.wait_for(lambda: api.nodefeature_of("nfd", NF_NAME)["spec"]["labels"]
                     .get("devlet.io/serial.count") == "2", 10, "the change")
        assert quiet_window(api, log) == []  # and nothing after it
        assert api.requests_since(n) == [("PUT", f"{coll}/{NF_NAME}")]
    finally:
        stop_logged(p, log)
    assert [w[0] for w in api.writes] == ["POST", "PUT"]


def test_nvidia_node_labels_no_timestamp_no_storm(api, env):
    """GFD's labels on the Node: no nvidia.com/gfd.timestamp there (it would
    change every round, and every round would be a write), so rounds over
    more than a second (the timestamp's step) send nothing."""
    from devlet_harness import MOCK_NVML_LIB
    from devlet_harness import devlet_env
    root = pathlib.Path(__file__).resolve().parents[2]
    environ = devlet_env({"DEVLET_NVML_LIBRARY": MOCK_NVML_LIB, "MOCK_NVML_CONFIG":
                          str(root / "tests" / "mock-nvml" / "profiles" / "h100-8x-nvswitch.yaml")})
    cfg = env["tmp"] / "nvidia.yaml"
    cfg.write_text("version: v1\n")
    api.add_node(NODE)
    p, log = logged_loop(env, "--config-file", cfg, "--backends", "nvidia", "--labels-output",
                         "node", "--machine-type-file", "", "--sysfs-root", env["tmp"],
                         environ=environ)
    try:
        api.wait_for(lambda: node_labels(api).get("nvidia.com/gpu.count") == "8", 10, "labels")
        assert "nvidia.com/gfd.timestamp" not in node_labels(api)
        assert quiet_window(api, log, rounds=8) == []  # 8 rounds of 200 ms: over a second
        assert [m for m, _ in api.requests] == ["GET", "PATCH"]
    finally:
        stop_logged(p, log)
    assert "nvidia.com/gfd.timestamp" not in node_labels(api)
    assert "nvidia.com/gfd.timestamp" not in api.node_meta(NODE)["annotations"][OWNED]


# ------------------------------------------------------------ a hostile server


@pytest.mark.parametrize("mode", ["down", "error", "malformed", "slow", "hangup"])
def test_retries_while_the_server_misbehaves(api, env, mode):
    """The server refuses, fails, sends garbage, hangs up or answers slowly:
    devlet warns once, keeps going, and publishes when the server is back."""
    api.add_node(NODE)
    if mode == "down":
        api.down()
    else:
        api.set_mode(mode, ("nodes",), delay=12)
    p = loop(env, "--labels-output", "node", "--sleep-interval", "200ms")
    try:
        if mode == "down":
            time.sleep(1.5)  # refused connections leave no trace on the server
        else:
            api.wait_for(lambda: api.hits.get("nodes", 0) >= (1 if mode == "slow" else 2), 15,
                         "attempts")
        assert p.poll() is None
        assert "devlet.io/fuse.count" not in node_labels(api)
        if mode == "down":
            api.up()
        else:
            api.set_mode(None, ("nodes",))
        api.wait_for(lambda: node_labels(api).get("devlet.io/fuse.count") == "3", 40,
                     "labels after the server came back")
    finally:
        err = stop(p)
    if mode != "slow":
        assert err.count("cannot publish the labels, retrying") == 1, err


@pytest.fixture
def served(dirs, api, env, kubelet, devlet):
    """`devlet run` with node labels, serving devlet.io/b to the kubelet."""
    make_node(f"{dirs.dev}/ttyB0", major=4, minor=66)
    config = hostdev_config([{"name": "b", "groups": [{"paths": [{"path": f"{dirs.dev}/ttyB*"}]}]}],
                            domain="devlet.io")
    return lambda *extra: devlet(config, args=[
        "--backends", "hostdev", "--metrics-address", "", "--kubeconfig", env["kubeconfig"],
        "--node-name", NODE, "--labels-output", "node", "--sleep-interval", "500ms", *extra])


def test_device_plugin_serves_while_the_server_hangs(api, served, kubelet):
    """The API server holds every call: the kubelet's Allocate is answered at
    once; labels arrive once the server answers."""
    api.add_node(NODE)
    api.set_mode("silent", ("nodes",))
    d = served()
    d.wait_registered("devlet.io/b", 1)
    api.wait_for(lambda: api.hits.get("nodes", 0) >= 1, 10, "a call")
    start = time.monotonic()
    c = PluginClient(kubelet.endpoint("devlet.io/b").client.socket_path)
    try:
        r = c.allocate([["ttyB0"]], timeout=5)
        assert r.container_responses[0].devices[0].host_path.endswith("/ttyB0")
    finally:
        c.close()
    assert time.monotonic() - start < 1.0
    api.set_mode(None, ("nodes",))
    # the silent call ends at the client's low-speed limit or the call bound (10 s)
    api.wait_for(lambda: node_labels(api).get("devlet.io/b.count") == "1", 45, "labels")
    t0 = time.monotonic()
    assert d.terminate() == 0
    assert time.monotonic() - t0 < 3
