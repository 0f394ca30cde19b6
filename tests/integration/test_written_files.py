"""Files devlet writes as root (node labels, CDI specs; the MPS marker is in
test_mps.py) never go where a name planted beside them points.

The writer used to open "<file>.tmp.<pid>" without O_EXCL|O_NOFOLLOW, and
devlet is PID 1 in its container, so the name was known in advance: a
symlink there made devlet write into (and chmod) any file.  Run here as PID
1 of a new PID namespace (unshare -pf), so that name is "<file>.tmp.1": the
planted link and FIFO stay untouched, the victim keeps its content and
mode, and the file is written.  A directory on the way that is a link in a
directory others may write is refused: nothing lands in its target."""

import os
import stat
import subprocess

import yaml

from devlet_harness import DEVLET_BIN, devlet_env, hostdev_config, make_node

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
