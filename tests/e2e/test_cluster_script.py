"""`make cluster` refuses what it cannot do with one clear line and starts
nothing: a busy port, a leftover state directory, no root.  Run while the
session's cluster is up, so its ports are the busy ones."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from kube import cl


@pytest.fixture
def state():
    d = tempfile.mkdtemp(prefix="devlet-cluster-test-", dir="/tmp")
    os.rmdir(d)  # up refuses an existing state directory
    yield d
    shutil.rmtree(d, ignore_errors=True)


def up(state, user=None):
    cmd = [sys.executable, cl.__file__, "up"]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, env=dict(os.environ, DEVLET_CLUSTER_DIR=state), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


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


def test_without_root(state):
    r = up(state, user=65534)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "cluster: error: needs root: the kubelet and containerd manage mounts, cgroups and device nodes"]
    assert not os.path.exists(state)
