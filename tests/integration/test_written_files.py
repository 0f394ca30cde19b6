"""Files devlet writes as root (node labels, CDI specs; the MPS marker is in
test_mps.py) never go where a name planted beside them points.

The writer used to open "<file>.tmp.<pid>" without O_EXCL|O_NOFOLLOW, and
devlet is PID 1 in its container, so the name was known in advance: a
symlink there made devlet write into (and chmod) any file.  Run here as PID
1 of a new PID namespace (unshare -pf), so that name is "<file>.tmp.1": the
planted link and FIFO stay untouched, the victim keeps its content and
mode, and the file is written.  A directory on the way that is a link in a
directory others may write is refused: nothing lands in its target.  Nor
does anything land in a directory someone else owns or may write, or below
one (a parent owned by nobody): the refusal names it, its owner and mode."""

import os
import re
import stat
import subprocess

import pytest
import yaml

from devlet_harness import DEVLET_BIN, devlet_env, hostdev_config, make_node
from kubelet_sim import PluginClient

VICTIM = "root:x:0:0:root:/root:/bin/sh\n"


def as_pid1(args, env=None):
    """devlet ARGS as PID 1 of a new PID namespace; bounded."""
    return subprocess.run(["unshare", "--pid", "--fork", "--kill-child", DEVLET_BIN, *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
                          env=devlet_env(env))


def plant(dirs, planted):
    """A victim file (0600) and a symlink to it at planted."""
    victim = os.path.join(dirs.run, "victim")
    with open(victim, "w") as f:
        f.write(VICTIM)
    os.chmod(victim, 0o600)
    os.symlink(victim, planted)
    return victim


def assert_untouched(victim):
    with open(victim) as f:
        assert f.read() == VICTIM
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o600


def config(dirs):
    make_node(os.path.join(dirs.dev, "fuse"))
    path = os.path.join(dirs.work, "config.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(hostdev_config([{"name": "fuse", "groups": [
            {"paths": [{"path": os.path.join(dirs.dev, "fuse")}]}]}]), f)
    return path


def test_labels_file_never_written_through_a_planted_link(dirs):
    cfg = config(dirs)
    out = os.path.join(dirs.run, "features.d", "gfd")
    os.makedirs(os.path.dirname(out))
    victim = plant(dirs, out + ".tmp.1")
    res = as_pid1(["labels", "--config-file", cfg, "--backends", "hostdev", "-o", out])
    assert res.returncode == 0, res.stderr
    assert_untouched(victim)
    with open(out) as f:
        assert "devlet.io/fuse.count=1" in f.read()
    assert stat.S_ISREG(os.lstat(out).st_mode) and stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert sorted(os.listdir(os.path.dirname(out))) == ["gfd", "gfd.tmp.1"]


def test_cdi_spec_never_written_through_a_planted_link(dirs):
    cfg = config(dirs)
    spec_dir = os.path.join(dirs.run, "cdi")
    os.makedirs(spec_dir)
    spec = os.path.join(spec_dir, "devlet.io-fuse.yaml")
    victim = plant(dirs, spec + ".tmp.1")
    res = as_pid1(["cdi", "generate", "--config-file", cfg, "--backends", "hostdev",
                   "--output-dir", spec_dir])
    assert res.returncode == 0, res.stderr
    assert_untouched(victim)
    with open(spec) as f:
        assert "devlet.io/fuse" in f.read()
    # the single-file form, with a FIFO there (its open would block for ever)
    one = os.path.join(dirs.run, "one.yaml")
    os.mkfifo(one + ".tmp.1")
    res = as_pid1(["cdi", "generate", "--config-file", cfg, "--backends", "hostdev", "-o", one])
    assert res.returncode == 0, res.stderr
    assert stat.S_ISREG(os.lstat(one).st_mode)
    assert stat.S_ISFIFO(os.lstat(one + ".tmp.1").st_mode)


def test_devlet_run_refuses_a_planted_directory_link(dirs, kubelet, devlet):
    """The labels file and the CDI spec directory below a directory anyone
    may write (mode 1777, as /tmp), where a user (nobody) made the directory
    devlet would create a link to another: devlet logs the refusal, keeps
    serving, and writes nothing into the link's target."""
    cfg = config(dirs)
    shared = os.path.join(dirs.run, "shared")
    target = os.path.join(dirs.run, "target")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    os.mkdir(target)
    for name in ("features.d", "cdi"):
        os.symlink(target, os.path.join(shared, name))
        os.lchown(os.path.join(shared, name), 65534, 65534)
    with open(cfg) as f:
        d = devlet(f.read(), args=["--backends", "hostdev", "--device-list-strategy", "envvar,cdi-cri"],
                   env={"GFD_OUTPUT_FILE": os.path.join(shared, "features.d", "gfd"),
                        "DEVLET_CDI_SPEC_DIR": os.path.join(shared, "cdi")})
    kubelet.wait_for_snapshot("devlet.io/fuse")
    d.wait_log(r"write failed, retrying at the next interval error=\"[^\"]*"
               r"Too many levels of symbolic links")
    d.wait_log(r"spec not written kind=devlet.io/fuse file=\S+ "
               r"error=\"Too many levels of symbolic links\"")
    assert os.listdir(target) == []


# ---- directories someone else owns or may write (issue 28, item 5) ----
#
# Whoever owns (or may write) the directory devlet writes a CDI spec into
# can swap the spec for one with a createRuntime hook and a mount of /,
# which the container runtime obeys as root; the same for NFD's features.d.
# Each layout below is one a user (nobody) could have made first.

NOBODY = 65534


def mkdir_as(path, mode, uid):
    os.mkdir(path)
    os.chmod(path, mode)  # the umask aside
    os.chown(path, uid, uid)


def hostile_layout(dirs, kind):
    """The directory to write into, laid out as kind: (path, the directory
    the error must name, its owner and mode as the message shows them)."""
    base = os.path.join(dirs.run, kind)
    if kind == "nobodys":  # made by nobody, open to all
        mkdir_as(base, 0o777, NOBODY)
        return base, base, f"uid {NOBODY}"
    if kind == "open":  # root's, but anyone may write and it is not sticky
        mkdir_as(base, 0o777, 0)
        return base, base, "mode 0777"
    # root's and closed, below a parent nobody owns
    mkdir_as(base, 0o755, NOBODY)
    target = os.path.join(base, "target")
    mkdir_as(target, 0o755, 0)
    return target, base, f"uid {NOBODY}"


LAYOUTS = ["nobodys", "open", "parent"]


@pytest.mark.parametrize("kind", LAYOUTS)
def test_oneshot_writers_refuse_a_directory_of_others(dirs, kind):
    """`devlet cdi generate` and `devlet labels -o` exit non-zero with the
    directory, its owner and mode, and write nothing there."""
    cfg = config(dirs)
    where, offender, shown = hostile_layout(dirs, kind)
    for args in (["cdi", "generate", "--output-dir", where],
                 ["labels", "-o", os.path.join(where, "gfd")]):
        res = subprocess.run([DEVLET_BIN, *args, "--config-file", cfg, "--backends", "hostdev"],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
                             env=devlet_env())
        assert res.returncode != 0, res.stdout + res.stderr
        assert f"refusing to write" in res.stderr and offender in res.stderr, res.stderr
        assert shown in res.stderr, res.stderr
        assert os.listdir(where) == []


@pytest.mark.parametrize("kind", LAYOUTS)
def test_devlet_run_refuses_a_directory_of_others(dirs, kind, kubelet, devlet):
    """devlet run with its CDI spec directory and features.d in such a
    directory: each write is refused with a message naming the directory,
    nothing lands there, and the device plugin serves on."""
    cfg = config(dirs)
    where, offender, shown = hostile_layout(dirs, kind)
    with open(cfg) as f:
        d = devlet(f.read(), args=["--backends", "hostdev", "--device-list-strategy", "envvar,cdi-cri"],
                   env={"GFD_OUTPUT_FILE": os.path.join(where, "features.d", "gfd"),
                        "DEVLET_CDI_SPEC_DIR": os.path.join(where, "cdi")})
    kubelet.wait_for_snapshot("devlet.io/fuse")
    refusal = r"refusing to write (?:into|below) " + re.escape(offender) + r"[:,][^\"]*" + re.escape(shown)
    d.wait_log(r"write failed, retrying at the next interval error=\"[^\"]*" + refusal)
    d.wait_log(r"spec not written kind=devlet.io/fuse file=\S+ error=\"" + refusal)
    assert os.listdir(where) == []
    # still serving: a fresh ListAndWatch and an Allocate answer
    c = PluginClient(kubelet.endpoint("devlet.io/fuse").client.socket_path)
    try:
        first = next(c.list_and_watch())
        assert [dev.ID for dev in first.devices]
        assert c.allocate([[first.devices[0].ID]], timeout=5).container_responses
    finally:
        c.close()
    assert d.alive()
