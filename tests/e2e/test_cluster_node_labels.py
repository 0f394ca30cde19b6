"""devlet's labels on the Node itself (--labels-output node, AMD's node
labeller's way) on the real cluster: the real API server applies devlet's
merge patches with the RBAC the amd-only overlay grants (nodes get and
patch), and the Node object is what every assertion reads.

The module grants that role, switches the running devlet to node labels
with a config reload (the ConfigMap, as an operator edits it), and at the
end switches back, takes the role away and removes what devlet put on the
Node, so the rest of the suite sees the cluster as it was.
"""

import os

import pytest
import yaml

from kube import REPO

OWNED = "devlet.io/owned-labels"
RBAC = os.path.join(REPO, "deploy", "overlays", "amd-only", "rbac.yaml")
FOREIGN = "example.com/kept-by-someone-else"


def reloads(cluster):
    return cluster.devlet_log().count("daemon: reloaded")


def reconfigure(cluster, text):
    before = reloads(cluster)
    cluster.set_config(text)
    cluster.wait("devlet to reload its config", lambda: reloads(cluster) > before, timeout=120)


def with_node_labels(text):
    # devlet writes the Node only when its labels change, and reads it again
    # at each re-sync (30 min and more by default): 5 s here, so a label
    # someone removed comes back within the test's wait
    return text.replace("  failOnInitError: false\n", "  failOnInitError: false\n"
                        "  labelsOutput: node\n  labelsResyncInterval: 5s\n")


def node_meta(cluster):
    return cluster.get("node", cluster.node)["metadata"]


def rbac_objects():
    with open(RBAC) as f:
        return [o for o in yaml.safe_load_all(f) if o]


@pytest.fixture(scope="module")
def node_labels(cluster):
    original = cluster.get("configmap", "-n", "devlet", "devlet-config")["data"]["config.yaml"]
    for o in rbac_objects():
        cluster.apply(o)
    cluster.kubectl("label", "node", cluster.node, f"{FOREIGN}=yes", "--overwrite")
    reconfigure(cluster, with_node_labels(original))
    cluster.original_config = original
    yield cluster
    reconfigure(cluster, original)
    for o in rbac_objects():
        cluster.kubectl("delete", o["kind"].lower(), o["metadata"]["name"], "--ignore-not-found")
    owned = (node_meta(cluster).get("annotations") or {}).get(OWNED, "")
    keys = [k for k in owned.split(",") if k] + [FOREIGN]
    cluster.kubectl("label", "node", cluster.node, *[f"{k}-" for k in keys], check=False)
    cluster.kubectl("annotate", "node", cluster.node, f"{OWNED}-", check=False)


def test_node_gets_the_labels(node_labels):
    """GFD's and the host devices' labels appear on the Node, the keys are
    listed in devlet's annotation, and a label devlet never wrote stays."""
    c = node_labels
    meta = c.wait("devlet's labels on the Node",
                  lambda: (m := node_meta(c)) and (m.get("labels") or {}).get("nvidia.com/gpu.count") == "8"
                  and (m.get("labels") or {}).get("devlet.io/fuse.count") == "2" and m)
    labels = meta["labels"]
    assert labels["nvidia.com/gpu.product"].startswith("NVIDIA-H100")
    assert labels[FOREIGN] == "yes"
    owned = meta["annotations"][OWNED].split(",")
    assert owned == sorted(owned)
    assert {"nvidia.com/gpu.count", "devlet.io/fuse.count", "devlet.io/zero.count"} <= set(owned)
    assert FOREIGN not in owned and "kubernetes.io/hostname" not in owned
    assert all(k in labels for k in owned)


def test_labels_devlet_stops_producing_are_removed(node_labels):
    """devlet.io/zero leaves the config: its count label leaves the Node,
    and nothing devlet did not write goes with it."""
    c = node_labels
    c.wait("devlet.io/zero.count on the Node",
           lambda: "devlet.io/zero.count" in (node_meta(c).get("labels") or {}))
    text = with_node_labels(c.original_config)
    start = text.index("  - name: zero\n")
    end = text.find("\n  - ", start + 1)
    reconfigure(c, text[:start] + (text[end + 1:] if end >= 0 else ""))
    try:
        meta = c.wait("devlet.io/zero.count gone",
                      lambda: (m := node_meta(c)) and "devlet.io/zero.count" not in (m.get("labels") or {}) and m)
        assert meta["labels"][FOREIGN] == "yes"
        assert meta["labels"]["devlet.io/fuse.count"] == "2"
        assert "devlet.io/zero.count" not in meta["annotations"][OWNED].split(",")
    finally:
        reconfigure(c, with_node_labels(c.original_config))


def test_a_removed_label_comes_back(node_labels):
    """Someone removes one of devlet's labels: devlet puts it back at its
    next re-sync (--labels-resync-interval, 5 s in this module's config)."""
    c = node_labels
    c.wait("devlet.io/fuse.count on the Node",
           lambda: (node_meta(c).get("labels") or {}).get("devlet.io/fuse.count") == "2")
    c.kubectl("label", "node", c.node, "devlet.io/fuse.count-")
    c.wait("devlet.io/fuse.count back",
           lambda: (node_meta(c).get("labels") or {}).get("devlet.io/fuse.count") == "2", timeout=180)
