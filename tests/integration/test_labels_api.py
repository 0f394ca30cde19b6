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
    """The publisher's requests say devlet and its version in the User-Agent
    (client-go's form: devlet/<version> (linux/<arch>))."""
    p = loop(env, "--use-node-feature-api", "--namespace", "gpu-operator")
    try:
        api.wait_for(lambda: api.nodefeatures.get(("gpu-operator", NF_NAME)), 10,
                     "the NodeFeature")
    finally:
        stop(p)
    with api.lock:
        agents = set(api.agents)
    assert agents and all(re.match(r"devlet/[^ /]+ \(linux/[a-z0-9]+\)", a or "")
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
        writes = api.writes_count()
        # several intervals pass: the same labels are never written again
        n = len(api.requests)
        api.wait_for(lambda: sum(1 for m, path in api.requests[n:] if m == "GET") >= 5, 10,
                     "five more reads")
        assert api.writes_count() == writes
        # a device comes: replaced, with the resourceVersion read
        with api.lock:  # what someone else keeps on the object survives an update
            api.nodefeatures[("gpu-operator", NF_NAME)]["metadata"]["annotations"] = {"x": "y"}
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
    p = loop(env, "--labels-output", "node", "--sleep-interval", "200ms")
    try:
        api.wait_for(lambda: node_labels(api).get("devlet.io/fuse.count") == "3", 10, "labels")
        labels = node_labels(api)
        assert labels == {"kubernetes.io/hostname": NODE, "team": "ml",
                          "devlet.io/fuse.count": "3", "devlet.io/serial.count": "1"}
        assert api.node_meta(NODE)["annotations"][OWNED] == \
            "devlet.io/fuse.count,devlet.io/serial.count"
        # unchanged: read, never patched again
        writes = api.writes_count()
        n = len(api.requests)
        api.wait_for(lambda: sum(1 for m, _ in api.requests[n:] if m == "GET") >= 5, 10, "reads")
        assert api.writes_count() == writes
        # someone removes one of devlet's labels: it comes back at the next pass
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
        assert set(patch["metadata"].get("annotations", {})) == {OWNED}
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
