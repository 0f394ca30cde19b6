"""Config paths a user or a ConfigMap controls, and config values the config
check and the backends must agree on: a FIFO never blocks devlet (at start-up
it exits 2 at once; on reload the running config stays and the plugin keeps
answering), a directory exits 2, a count the backend cannot serve is refused
by the check with its position (exit 2), never by the backend later (exit 1).
"""

import contextlib
import os
import re

import pytest

from devlet_harness import hostdev_config, make_node, run_devlet
from kubelet_sim import PluginClient

FUSE = "devlet.io/fuse"


def fuse_config(dirs, count=2):
    make_node(f"{dirs.dev}/fuse")
    return hostdev_config([{"name": "fuse", "groups": [{"count": count, "paths": [
        {"path": f"{dirs.dev}/fuse"}]}]}], domain="devlet.io")


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket-like-missing"])
def test_config_path_not_a_regular_file_exits_2(dirs, build_dir, kind):
    path = os.path.join(dirs.work, "config.yaml")
    if kind == "fifo":
        os.mkfifo(path)
        want = "not a regular file"
    elif kind == "directory":
        os.mkdir(path)
        want = "is a directory"
    else:
        want = "No such file"
    for args in (["run", "--config-file", path, "--plugin-directory", dirs.plugins],
                 ["list", "--config-file", path]):
        # a FIFO with no writer used to block open(2) for ever: bounded here
        p = run_devlet(args, timeout=15)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert path in p.stderr and want.lower() in p.stderr.lower(), p.stderr
    assert os.listdir(dirs.plugins) == []


def test_count_beyond_backend_bound_is_a_config_error(dirs, build_dir):
    path = os.path.join(dirs.work, "config.yaml")
    with open(path, "w") as f:
        f.write("version: v1\nhostDevices:\n  devices:\n    - name: fuse\n      groups:\n"
                "        - count: 70000\n          paths:\n            - path: /dev/null\n")
    for args in (["run", "--config-file", path, "--plugin-directory", dirs.plugins],
                 ["list", "--config-file", path]):
        p = run_devlet(args, timeout=15)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert re.search(re.escape(path) + r":6:\d+: .*65536", p.stderr), p.stderr
    # the bound itself is served
    with open(path, "w") as f:
        f.write("version: v1\nhostDevices:\n  devices:\n    - name: fuse\n      groups:\n"
                "        - count: 65536\n          paths:\n            - path: /dev/null\n")
    p = run_devlet(["list", "--config-file", path, "-o", "json"], timeout=30)
    assert p.returncode == 0, p.stderr


def test_config_swapped_for_fifo_keeps_serving(dirs, kubelet, devlet):
    """The config file replaced by a FIFO (no writer) while devlet runs: the
    reload refuses it and keeps the running config, Allocate is answered,
    and SIGTERM still stops devlet (the fixture checks exit 0 within 10 s)."""
    d = devlet(fuse_config(dirs))
    kubelet.wait_for_registration(FUSE)
    fifo = d.config_path + ".fifo"
    os.mkfifo(fifo)
    mark = d.log_size()
    os.replace(fifo, d.config_path)  # the file watch notices too
    d.sighup()
    d.wait_log(r"reload failed.*" + re.escape(d.config_path) + r".*not a regular file", since=mark)
    with contextlib.closing(PluginClient(d.socket_path(FUSE))) as c:
        assert len(c.allocate([["fuse-1"]], timeout=5).container_responses) == 1
    assert d.alive()


def test_refused_config_is_tried_once(dirs, kubelet, devlet):
    """A config file edited into one devlet refuses is tried once: neither
    devlet's own log lines in the same directory nor further events on
    the unchanged file make it read and refuse it again (each refusal is a
    log line, which was an event: a loop at the debounce's pace)."""
    d = devlet(fuse_config(dirs), args=["-v", "1"])
    kubelet.wait_for_registration(FUSE)
    mark = d.log_size()
    with open(d.config_path, "a") as f:
        f.write("hostDevices: [\n")
    d.wait_log(r"reload failed", since=mark)
    after = d.log_size()
    os.utime(d.config_path)  # an event on the file itself, the content as it was
    d.wait_log(r"config file event, content loaded or refused already", since=after)
    assert d.log_text()[mark:].count("reload failed") == 1, d.log_text()[mark:]
    assert d.alive()


def test_nvml_library_path_that_is_a_fifo(dirs, build_dir):
    """dlopen of a FIFO would block in open(2): refused with the reason."""
    fifo = os.path.join(dirs.run, "libnvidia-ml.so.1")
    os.mkfifo(fifo)
    p = run_devlet(["list", "--backends", "nvidia"], timeout=15, env={"DEVLET_NVML_LIBRARY": fifo})
    assert p.returncode == 1, p.stderr
    assert f"{fifo}: not a regular file" in p.stderr, p.stderr


def test_backend_option_checked_like_devlets_own(dirs, build_dir):
    """A family's own option (AMD's, from src/devices/amd/) is a flag, an env
    var and a config key like devlet's own: a bad value exits 2 naming its
    source, a typo gets the flag as a hint, and the help lists it."""
    allowed = '"bogus" (allowed: single, mixed)'
    path = os.path.join(dirs.work, "config.yaml")
    with open(path, "w") as f:
        f.write("version: v1\nflags:\n  amd:\n    resourceNamingStrategy: bogus\n")
    for args, env, want in (
            (["--resource-naming-strategy", "bogus"], None,
             "--resource-naming-strategy: invalid value " + allowed),
            ([], {"RESOURCE_NAMING_STRATEGY": "bogus"},
             "RESOURCE_NAMING_STRATEGY: invalid value " + allowed),
            (["--config-file", path], None,
             path + ":4:29: flags.amd.resourceNamingStrategy: invalid value " + allowed),
            (["--resource-naming-stratgy=mixed"], None,
             "did you mean --resource-naming-strategy?")):
        p = run_devlet(["list", "--backends", "hostdev"] + args, timeout=15, env=env)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert want in p.stderr, p.stderr
    p = run_devlet(["help", "flags"], timeout=15)
    assert p.returncode == 0, p.stderr
    assert "--amd-health-interval DURATION  (also --pulse)" in p.stdout, p.stdout


@pytest.mark.parametrize("kind", ["malformed", "fifo"])
def test_collectors_file_is_config(dirs, build_dir, kind):
    """dcgm-exporter's counters CSV (--collectors) is part of the config: a
    malformed line exits 2 with its file and line, a FIFO exits 2 at once,
    before anything is served."""
    path = os.path.join(dirs.work, "counters.csv")
    if kind == "fifo":
        os.mkfifo(path)
        want = f"{path}: cannot read"
    else:
        with open(path, "w") as f:
            f.write("# DCGM FIELD, type, help\nDCGM_FI_DEV_SM_CLOCK, gauge, SM clock\n"
                    "DCGM_FI_DEV_GPU_TEMP, summary, GPU temperature\n")
        want = f'{path}:3:1: unknown type "summary"'
    for args in (["run", "--collectors", path, "--plugin-directory", dirs.plugins,
                  "--backends", "hostdev"],
                 ["metrics", "--collectors", path]):
        p = run_devlet(args, timeout=15)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert want in p.stderr, p.stderr
    assert os.listdir(dirs.plugins) == []
