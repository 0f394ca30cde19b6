"""A kubelet from before v1.26 (tests/cluster/versions.env: KUBELET_OLD_VERSION)
in place of the current one, on the same node, API server and containerd.
Such kubelets send the plugin socket's path as the HTTP/2 `:authority`;
nghttp2 rejects a `/` there by default, and a devlet that let it would
register and then see every ListAndWatch reset: the Node would show 0
devices.  Here the old kubelet's own Node status must show every device,
and a pod must get its devices through it.  Runs last (the file name sorts
after test_cluster*), and puts the current kubelet back."""

import os

import pytest

from kube import DEVICES, cl, kubelet_args, kubelet_swap, unique


@pytest.fixture
def old_kubelet(cluster):
    old_bin = os.path.join(cl.peers_dir("kubelet-old"), "bin", "kubelet")
    args = kubelet_args()[1]
    # the same configuration less what v1.25 does not know: the runtime
    # endpoint was a flag then, cgroup v1 was not yet refused, and DRA's
    # feature gates did not exist
    with open(cl.path("kubelet.yaml")) as f:
        conf = [line for line in f
                if not line.startswith(("containerRuntimeEndpoint:", "failCgroupV1:", "featureGates:"))]
    with open(cl.path("kubelet-old.yaml"), "w") as f:
        f.writelines(conf)
    old_args = [old_bin, "--container-runtime-endpoint", f"unix://{cl.CONTAINERD_SOCK}"]
    it = iter(args[1:])
    for a in it:
        value = next(it)
        old_args += [a, cl.path("kubelet-old.yaml") if a == "--config" else value]
    kubelet_swap(cluster, old_args, cl.peer_version("kubelet-old"), DEVICES)
    try:
        yield cluster.kubelet_version()
    finally:
        kubelet_swap(cluster, args, cl.peer_version("kubernetes"), DEVICES)
        cluster.wait("the current kubelet's Node Ready with every device", lambda: cl.node_ready() and all(
            cluster.allocatable().get(r) == n for r, n in DEVICES.items()))


def test_old_kubelet_gets_every_device(cluster, old_kubelet, pods):
    assert old_kubelet == cl.peer_version("kubelet-old")
    cluster.wait("the old kubelet to report devlet's devices", lambda: all(
        cluster.allocatable().get(r) == n for r, n in DEVICES.items()))
    out = cluster.run_pod(pods.append(unique("old-kubelet")) or pods[-1], {"nvidia.com/gpu": 1, "devlet.io/fuse": 1},
                          "echo $NVIDIA_VISIBLE_DEVICES; test -c /dev/fuse && echo fuse")
    lines = out.split()
    assert lines[0].startswith("GPU-") and lines[1] == "fuse", out
    # the kubelet that ran it is the old one
    assert cluster.kubelet_version() == old_kubelet
