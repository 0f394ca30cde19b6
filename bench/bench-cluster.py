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
    idle, after the measurements above,
  - DRA (the GPUs and devlet.io/zero switched to DRA by a config reload):
    from a new devlet's first log line to its ResourceSlices complete in the
    API server (devlet's pod deleted with its slices); from an XID written
    to the mock NVML's event log to the GPU's taint in its slice;
    NodePrepareResources as the kubelet calls it for N pods with a host
    device's claim and N with a whole GPU's (devlet's `answered ... ms=`
    lines: p50, p99; the kubelet's own mean from its
    dra_grpc_operations_duration_seconds); devlet's RSS, idle, in
    a fresh pod with DRA on and with it off.

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


def log_stamp(line):
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z ", line)
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


def set_config(cluster, text):
    if cluster.get("configmap", "-n", "devlet", "devlet-config")["data"]["config.yaml"] == text:
        return
    before = cluster.devlet_log().count("daemon: reloaded")
    cluster.set_config(text)
    cluster.wait("devlet to reload", lambda: cluster.devlet_log().count("daemon: reloaded") > before,
                 timeout=120)


def fresh_devlet(cluster):
    """Deletes devlet's pod; returns once the DaemonSet's new one is ready."""
    old = cluster.devlet_pod()["metadata"]["name"]
    cluster.kubectl("-n", "devlet", "delete", "pod", old, "--wait=true")
    cluster.wait("a new devlet", lambda: cluster.devlet_pod()["metadata"]["name"] != old and cluster.devlet_ready())


WANT_SLICES = {"gpu.nvidia.com": 8, "gpu.amd.com": 64, "hostdev.devlet.io": 1}


def kubelet_dra_mean(driver):
    """The kubelet's mean NodePrepareResources time for driver (its metrics
    endpoint, with the cluster admin's certificate)."""
    pki = cl.path("pki")
    out = subprocess.run(["curl", "-s", "--cacert", f"{pki}/ca.crt", "--cert", f"{pki}/admin.crt",
                          "--key", f"{pki}/admin.key", "https://127.0.0.1:10250/metrics"],
                         stdout=subprocess.PIPE, text=True, timeout=30).stdout
    vals = {}
    for kind in ("sum", "count"):
        m = re.search(rf'dra_grpc_operations_duration_seconds_{kind}{{driver_name="{re.escape(driver)}",'
                      rf'grpc_status_code="OK",method_name="[^"]*NodePrepareResources"}} (\S+)', out)
        vals[kind] = float(m.group(1)) if m else 0.0
    return vals["sum"] / vals["count"] if vals["count"] else float("nan")


def prepare_times(cluster, device_class, n):
    """n pods one after the other, each with a claim of device_class (the
    DeviceClass named as its driver); devlet's NodePrepareResources times
    (ms, sorted) from its log."""
    name = unique("bench-dra")
    cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"spec": {"devices": {"requests": [
                       {"name": "dev", "exactly": {"deviceClassName": device_class}}]}}}})
    seen = len(cluster.devlet_log().splitlines())
    for i in range(n):
        pod = f"{name}-{i}"
        cluster.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "default"},
                       "spec": {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": name}],
                                "containers": [{"name": "main", "image": cluster.busybox,
                                                "imagePullPolicy": "Never", "command": ["/bin/sh", "-c", "true"],
                                                "resources": {"claims": [{"name": "dev"}]}}]}})
        cluster.wait_phase(pod, ("Succeeded",))
        cluster.delete_pods(pod)
    lines = cluster.devlet_log().splitlines()[seen:]
    return sorted(float(m.group(1)) for m in (re.search(
        rf"answered method=NodePrepareResources driver={re.escape(device_class)} claims=1 ms=(\S+)", x)
        for x in lines) if m)


def bench_dra(cluster, n):
    set_config(cluster, cl.config_text(True))
    cluster.wait("the slices", lambda: cl.resource_slices() == WANT_SLICES)
    # start -> slices: with --dra-cleanup the old devlet deletes its slices
    # on the way out; the new one's log says when each driver's write
    # returned (the API server's 201)
    set_config(cluster, cl.config_text(True).replace("  failOnInitError: false\n",
                                                     "  failOnInitError: false\n  draCleanup: true\n"))
    fresh_devlet(cluster)

    def published():
        lines = [x for x in cluster.devlet_log().splitlines() if "dra: published ResourceSlices" in x]
        return len(lines) >= 3 and lines[:3]
    lines = cluster.wait("the new devlet's slices", published)
    start_to_slices = max(log_stamp(x) for x in lines) - log_stamp(cluster.devlet_log().splitlines()[0])
    assert cl.resource_slices() == WANT_SLICES
    cluster.wait("devlet ready", cluster.devlet_ready)
    rss_on = rss_kib(devlet_host_pid(cluster))

    # health change -> slice update
    set_config(cluster, cl.config_text(True) + "health:\n  recovery:\n    enabled: true\n    quietPeriod: 5s\n")
    from test_cluster import append_event, use_gpus  # noqa: E402
    from test_cluster_dra import gpu_taints  # noqa: E402
    t0 = time.time()
    append_event({"device": 3, "type": "xid", "xid": 79})
    cluster.wait("the GPU tainted in its slice", lambda: gpu_taints(cluster), interval=0.01)
    health_to_slice = time.time() - t0
    cluster.wait("the taint gone", lambda: not gpu_taints(cluster), timeout=60)
    use_gpus(f"{cl.NVML_PROFILE}.yaml")

    # NodePrepareResources, n pods with a host-device claim, then n with a
    # whole GPU's
    prep, kubelet_mean = {}, {}
    for driver in ("hostdev.devlet.io", "gpu.nvidia.com"):
        prep[driver] = prepare_times(cluster, driver, n)
        kubelet_mean[driver] = kubelet_dra_mean(driver)

    # RSS with DRA off, in a fresh pod
    set_config(cluster, cl.CONFIG)
    fresh_devlet(cluster)
    time.sleep(2)  # a figure, not a test: let start-up settle before sampling
    rss_off = rss_kib(devlet_host_pid(cluster))
    return {"start_to_slices": start_to_slices, "health_to_slice": health_to_slice, "prepare_ms": prep,
            "kubelet_mean": kubelet_mean, "rss_on": rss_on, "rss_off": rss_off}


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
        dra = bench_dra(cluster, a.pods * 4)
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
    def pct(p, q):
        return p[min(len(p) - 1, int(q * len(p)))] if p else float("nan")
    rows += [("DRA: devlet start -> ResourceSlices complete", f"{dra['start_to_slices'] * 1000:.0f} ms",
              "73 devices, 3 drivers"),
             ("DRA: XID -> taint in the GPU's slice", f"{dra['health_to_slice'] * 1000:.0f} ms", "target <= 1200 ms")]
    for driver, what, target in (("hostdev.devlet.io", "a host device", ""),
                                 ("gpu.nvidia.com", "a whole GPU", "target p99 <= 10 ms")):
        p = dra["prepare_ms"][driver]
        rows += [(f"DRA: NodePrepareResources in devlet, {what}",
                  f"p50 {pct(p, 0.5):.1f} ms, p99 {pct(p, 0.99):.1f} ms", f"{len(p)} claims {target}"),
                 (f"DRA: NodePrepareResources, kubelet's mean, {what}",
                  f"{dra['kubelet_mean'][driver] * 1000:.1f} ms", "")]
    rows += [
             ("devlet RSS, fresh pod, DRA on", f"{dra['rss_on'] / 1024:.1f} MiB", "target <= 8 MiB"),
             ("devlet RSS, fresh pod, DRA off", f"{dra['rss_off'] / 1024:.1f} MiB", "")]
    if own:
        rows.append(("make cluster (peers cached)", f"{up_s:.0f} s", ""))
    w = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{w}}  {value:>22}  {note}")


if __name__ == "__main__":
    main()
