"""The end-to-end suite's one fixture: a real one-node cluster (scripts/cluster.py)
with devlet installed from its image by `kubectl apply -k`.

The session brings the cluster up (building the peers on a fresh machine) and
takes it down at the end, unless one was already up (`make cluster`), which is
then used as it is and left running.  Every assertion reads what the cluster
reports: kubectl, the kubelet's pod-resources socket, what a container sees.
"""

import subprocess
import sys
import time

import pytest

from kube import Cluster, cl, cluster_running


UP_FAILED = []  # a failed start is not retried for every test


@pytest.fixture(scope="session")
def cluster():
    if UP_FAILED:
        pytest.fail(UP_FAILED[0])
    reuse = cluster_running()
    if not reuse:
        subprocess.run([sys.executable, cl.__file__, "down"], check=True)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, cl.__file__, "up"], stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            UP_FAILED.append(f"make cluster failed (exit {r.returncode}); logs in /tmp/devlet-cluster-logs")
            pytest.fail(UP_FAILED[0])
        print(f"\ncluster up in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    c = Cluster()
    yield c
    if not reuse:
        subprocess.run([sys.executable, cl.__file__, "down"], check=False)


@pytest.fixture
def pods(cluster):
    """Names of pods a test made; deleted after it."""
    made = []
    yield made
    cluster.delete_pods(*made)
