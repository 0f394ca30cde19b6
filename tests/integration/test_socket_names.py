"""One resource's socket is its own: under a plugin directory long enough
that devlet's socket names would pass the 108-byte Unix socket path limit,
names are shortened (the same at every start, one per resource) and every
resource registers; a socket that cannot be created fails its resource
only, with a clear error."""

import os

from mock_gpus import start


def start_in(devlet, kubelet, n, plugins):
    d = devlet(None, args=["--mig-strategy", "mixed"], env=n.env(**QUIET), plugin_dir=plugins)
    for r in MIG:
        kubelet.wait_for_registration(r, generation=kubelet.generation)
    return d

QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
MIG = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb",
       "nvidia.com/mig-4g.40gb", "nvidia.com/mig-1c.3g.40gb", "nvidia.com/mig-2c.3g.40gb"]


def long_dir(dirs, length):
    path = os.path.join(dirs.root, "p" * (length - len(dirs.root) - 1))
    os.mkdir(path)
    assert len(path) == length
    return path


def endpoints(kubelet, generation=None):
    return {r.resource_name: r.endpoint for r in kubelet.accepted(generation=generation)}


def test_long_plugin_dir_shortens_names(kubelet_factory, devlet, node, dirs):
    plugins = long_dir(dirs, 80)
    kubelet = kubelet_factory(plugin_dir=plugins)
    kubelet.start()
    n = node("a100-mig-mixed")
    d = start_in(devlet, kubelet, n, plugins)
    first = endpoints(kubelet)
    assert set(first) == set(MIG)
    assert len(set(first.values())) == len(MIG)  # unique
    for resource, ep in first.items():
        path = os.path.join(plugins, ep)
        assert len(path) < 108 and os.path.exists(path), path
        assert ep.startswith("devlet-") and ep.endswith(".sock")
    # names that fit are left alone; the others end with a hash
    assert first["nvidia.com/gpu"] == "devlet-nvidia.com_gpu.sock"
    assert first["nvidia.com/mig-2c.3g.40gb"] != "devlet-nvidia.com_mig-2c.3g.40gb.sock"
    d.wait_log("socket name shortened to fit a Unix socket path resource=nvidia.com/mig-2c.3g.40gb")
    # the same names at the next start
    assert d.terminate() == 0
    kubelet.restart()
    start_in(devlet, kubelet, n, plugins)
    assert endpoints(kubelet, kubelet.generation) == first


def test_socket_that_cannot_be_created_fails_its_resource_only(kubelet, devlet, node, dirs):
    # a non-empty directory where nvidia.com/gpu's socket goes
    blocker = os.path.join(dirs.plugins, "devlet-nvidia.com_gpu.sock")
    os.mkdir(blocker)
    open(os.path.join(blocker, "keep"), "w").close()
    n = node("a100-mig-mixed")
    d = start(devlet, kubelet, n, resources=MIG[1:], args=["--mig-strategy", "mixed"], env=QUIET)
    d.wait_log(r"cannot serve resource=nvidia.com/gpu, the others are served error=")
    assert "nvidia.com/gpu" not in endpoints(kubelet)
    assert d.alive()
    os.unlink(os.path.join(blocker, "keep"))
    os.rmdir(blocker)
