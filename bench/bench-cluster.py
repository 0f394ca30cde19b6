#!/usr/bin/python3
"""`make bench`: devlet on a real node (scripts/cluster.py: the real kubelet,
API server, scheduler and containerd; devlet's DaemonSet on mock hardware).

  - kubelet restart -> Register: the real kubelet is stopped and started
    again N times; from its kubelet.sock appearing (polled every ms) to the
    last `registered resource=` line devlet logs (millisecond timestamps on
    the same clock),
  - pod creation -> container start, as the kubelet calls Allocate: from
    `kubectl create` returning to the container's first command running
    (it creates a file in a hostPath directory, polled every 5 ms), for a
    pod asking for one mock GPU and for the same pod asking for nothing,
  - devlet's resident set in its DaemonSet pod (VmRSS of its host process),
    idle, after the measurements above.

Uses the cluster `make cluster` left running, or brings one up and takes it
down.  Figures are reported, never asserted.
Usage: bench-cluster.py [--restarts N] [--pods N]
"""

import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

from kube import Cluster, cl, cluster_running, devlet_host_pid, kubelet_restart, unique  # noqa: E402


def log_times(cluster, since_lines):
    """Timestamps (epoch seconds) of devlet's `registered` lines after the
    first since_lines lines of its log."""
    lines = cluster.devlet_log().splitlines()
    out = []
    for line in lines[since_lines:]:
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z .*registered resource=", line)
        if m:
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
            out.append(t.replace(tzinfo=datetime.timezone.utc).timestamp())
    return out, len(lines)


def bench_restarts(cluster, n):
    nres = len(set(re.findall(r"registered resource=(\S+)", cluster.devlet_log())))
    took = []
    for _ in range(n):
        _, seen = log_times(cluster, 0)
        sock_at = kubelet_restart(cluster)
        times = cluster.wait("every resource registered again",
                             lambda: (lambda t: t if len(t) >= nres else None)(log_times(cluster, seen)[0]))
        took.append(max(times[:nres]) - sock_at)
        cluster.wait("the node Ready", cl.node_ready)
    return took, nres


def bench_pods(cluster, n, resources):
    out = tempfile.mkdtemp(prefix="devlet-bench-", dir="/tmp")
    took = []
    try:
        for i in range(n):
            name = unique("bench")
            marker = os.path.join(out, name)
            cluster.apply({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                         "volumes": [{"name": "out", "hostPath": {"path": out}}],
                         "containers": [{"name": "main", "image": cluster.busybox, "imagePullPolicy": "Never",
                                         "command": ["/bin/sh", "-c", f"echo > /out/{name}"],
                                         "volumeMounts": [{"name": "out", "mountPath": "/out"}],
                                         "resources": {"limits": resources}}]}})
            t0 = time.monotonic()
            while not os.path.exists(marker):
                if time.monotonic() - t0 > 120:
                    raise TimeoutError(f"pod {name} did not start")
                time.sleep(0.005)
            took.append(time.monotonic() - t0)
            cluster.delete_pods(name)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return took


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--pods", type=int, default=5)
    a = ap.parse_args()
    own = not cluster_running()
    if own:
        subprocess.run([sys.executable, cl.__file__, "down"], check=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, cl.__file__, "up"], check=True, stdout=subprocess.DEVNULL)
        up_s = time.monotonic() - t0
    try:
        cluster = Cluster()
        restarts, nres = bench_restarts(cluster, a.restarts)
        with_gpu = bench_pods(cluster, a.pods, {"nvidia.com/gpu": "1"})
        without = bench_pods(cluster, a.pods, {})
        rss = rss_kib(devlet_host_pid(cluster))
    finally:
        if own:
            subprocess.run([sys.executable, cl.__file__, "down"], check=False)

    def ms(xs):
        return f"{statistics.median(xs) * 1000:.0f} ms (max {max(xs) * 1000:.0f})"

    print(f"\nreal cluster (kubelet {cl.peer_version('kubernetes')}, containerd "
          f"{cl.peer_version('containerd')}; devlet's DaemonSet on 8 mock H100s, 64 MI300X partitions, "
          f"host devices: {nres} resources)")
    rows = [("kubelet restart -> last Register", ms(restarts), f"median of {len(restarts)}"),
            ("pod created -> container runs, 1 GPU", ms(with_gpu), f"median of {len(with_gpu)}"),
            ("pod created -> container runs, no device", ms(without), f"median of {len(without)}"),
            ("devlet RSS in its pod", f"{rss / 1024:.1f} MiB", "target < 8 MiB")]
    if own:
        rows.append(("make cluster (peers cached)", f"{up_s:.0f} s", ""))
    w = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{w}}  {value:>22}  {note}")


if __name__ == "__main__":
    main()
