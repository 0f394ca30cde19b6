"""`make cluster` refuses what it cannot do with one clear line and starts
nothing: a busy port, a leftover state directory, no root.  Run while the
session's cluster is up, so its ports are the busy ones.  And `make
cluster-down` leaves the host as `up` found it, even where `up` found a
kubelet directory (that test takes the host to itself, and puts the
session's cluster back after it)."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from kube import cl, cluster_running

KUBELET_DIR = "/var/lib/kubelet"
UP_TIMEOUT = 900  # a whole start: certificates, images, the Node Ready


@pytest.fixture
def state():
    d = tempfile.mkdtemp(prefix="devlet-cluster-test-", dir="/tmp")
    os.rmdir(d)  # up refuses an existing state directory
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def readable_script():
    """A copy of the cluster script that any user can read: the checkout may
    be where only root can (a clone under root's 0700 home, in `mktemp -d`)."""
    d = tempfile.mkdtemp(prefix="devlet-cluster-script-", dir="/tmp")
    os.chmod(d, 0o755)
    script = os.path.join(d, "cluster.py")
    shutil.copyfile(cl.__file__, script)
    os.chmod(script, 0o644)
    yield script
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def host_alone():
    """No cluster on the host: one that is up (the session's, or `make
    cluster`'s) is taken down for the test and brought up again after it,
    as the tests after this one expect."""
    was_up = cluster_running()
    if was_up:
        subprocess.run([sys.executable, cl.__file__, "down"], check=True)
    yield
    if was_up:
        r = subprocess.run([sys.executable, cl.__file__, "up"], stdout=subprocess.PIPE, text=True,
                           timeout=UP_TIMEOUT)
        assert r.returncode == 0, "the session's cluster did not come back up; logs in /tmp/devlet-cluster-logs"


def run_script(state, *args, user=None, script=cl.__file__, timeout=60):
    cmd = [sys.executable, script, *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, env=dict(os.environ, DEVLET_CLUSTER_DIR=state), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, cwd="/")


def up(state, user=None, script=cl.__file__):
    return run_script(state, "up", user=user, script=script)


def test_down_empties_a_kubelet_dir_it_found(host_alone, state):
    made = not os.path.lexists(KUBELET_DIR)
    os.makedirs(KUBELET_DIR, exist_ok=True)
    keep = os.path.join(KUBELET_DIR, "devlet-test-keep")
    with open(keep, "w") as f:
        f.write("not the cluster's\n")
    before = sorted(os.listdir(KUBELET_DIR))
    try:
        # the second up is the one a leftover pods/ made refuse
        for _ in range(2):
            r = run_script(state, "up", "--no-devlet", timeout=UP_TIMEOUT)
            assert r.returncode == 0, r.stderr[-3000:]
            made_by_kubelet = set(os.listdir(KUBELET_DIR)) - set(before)
            assert {"pods", "plugins_registry", "cpu_manager_state", "memory_manager_state"} <= made_by_kubelet
            r = run_script(state, "down")
            assert r.returncode == 0, r.stderr
            assert sorted(os.listdir(KUBELET_DIR)) == before
            with open(keep) as f:
                assert f.read() == "not the cluster's\n"
    finally:
        run_script(state, "down")
        os.unlink(keep)
        if made:
            shutil.rmtree(KUBELET_DIR, ignore_errors=True)


def test_busy_port_is_one_line_and_starts_nothing(cluster, state):
    r = up(state)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "cluster: error: port 2379 (etcd) is busy: Address already in use; "
        "stop what holds it (or run `make cluster-down`)"]
    assert r.stdout == ""
    assert not os.path.exists(state)


def test_leftover_state_is_named(cluster):
    r = up(cl.STATE)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"cluster: error: {cl.STATE} exists: a cluster is up, or an earlier one left it; "
        "run `make cluster-down` first"]


def test_without_root(state, readable_script):
    r = up(state, user=65534, script=readable_script)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "cluster: error: needs root: the kubelet and containerd manage mounts, cgroups and device nodes"]
    assert not os.path.exists(state)
