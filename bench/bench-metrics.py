#!/usr/bin/python3
"""`make bench`: the metrics endpoint's figures, printed as a table with
their targets.

Setup: `devlet run` serving a host-devices plugin (registered with the
simulated kubelet) and metrics on the mock NVML's DGX H100 profile (8 GPUs),
collecting every second, with 100 attributed containers: 100 OCI specs in a
temporary state directory (NVIDIA_VISIBLE_DEVICES and CRI annotations), the
same 100 pods in a simulated pod-resources List (time-sliced replicas), and
100 real processes (sleep) in the mock's process lists, whose
/proc/<pid>/cgroup the collector reads each time.

Measured:
  - CPU per collection at a 1 s interval: the CPU time of all devlet's
    threads (/proc/<pid>/task/*/schedstat) over --seconds, without scrapes,
    divided by the collections done (and as a share of one core);
  - scrape latency p50/p99 over --scrapes sequential GETs of /metrics on one
    keep-alive connection (client-side, Python's http.client);
  - devlet's RSS (VmRSS) and peak RSS (VmHWM) with the plugin and metrics on.
Figures are reported, never asserted.
Usage: bench-metrics.py [--scrapes N] [--seconds S]
"""

import argparse
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from devlet_harness import DEVLET_BIN, Devlet, hostdev_config, make_node, wait_until  # noqa: E402
from kubelet_sim import BUILD_DIR, KubeletSim  # noqa: E402
from metrics_sim import MockNvml, PodResourcesSim, metrics_port, parse, scrape, select  # noqa: E402

CONTAINERS = 100
GPUS = 8
TARGET_P99_MS = 5.0
TARGET_CPU_PCT = 0.5
TARGET_RSS_KIB = 8 * 1024
WAIT = 30.0


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))]


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of pid, in ns (schedstat: time on CPU),
    finer than utime+stime's clock ticks."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that just ended
    return total


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


def write_specs(state: str, nvml: MockNvml):
    for i in range(CONTAINERS):
        cid = f"{i:064x}"
        os.makedirs(os.path.join(state, cid))
        spec = ('{"ociVersion":"1.1.0","process":{"env":["PATH=/bin","NVIDIA_VISIBLE_DEVICES=%s"],'
                '"capabilities":{"bounding":["CAP_CHOWN","CAP_KILL"]}},'
                '"mounts":[{"destination":"/proc","type":"proc","source":"proc"}],'
                '"annotations":{"io.kubernetes.cri.sandbox-name":"pod-%d",'
                '"io.kubernetes.cri.sandbox-namespace":"bench","io.kubernetes.cri.container-name":"main",'
                '"io.kubernetes.cri.container-type":"container"}}') % (nvml.uuid(i % GPUS), i)
        with open(os.path.join(state, cid, "config.json"), "w") as f:
            f.write(spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="devlet metrics benchmark")
    ap.add_argument("--scrapes", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args(argv)
    if not os.path.exists(DEVLET_BIN):
        print(f"bench-metrics: {DEVLET_BIN} is missing: run `make`", file=sys.stderr)
        return 1

    root = tempfile.mkdtemp(prefix="devlet-bench-metrics-", dir="/tmp")
    plugins, work, state = (os.path.join(root, d) for d in ("plugins", "work", "state"))
    for d in (plugins, work, state):
        os.mkdir(d)
    sleepers, sim, podres, d = [], None, None, None
    try:
        nvml = MockNvml(work)
        write_specs(state, nvml)
        sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(CONTAINERS)]
        for g in range(GPUS):
            nvml.devices[g]["processes"] = [
                {"pid": p.pid, "usedMemoryMiB": 100 + i, "smUtil": i % 7}
                for i, p in enumerate(sleepers) if i % GPUS == g]
        nvml.write()
        podres = PodResourcesSim(os.path.join(root, "pod-resources.sock"))
        podres.pods = [("bench", f"pod-{i}", [("main", [("nvidia.com/gpu", [f"{nvml.uuid(i % GPUS)}::{i // GPUS}"])])])
                       for i in range(CONTAINERS)]
        podres.start()
        sim = KubeletSim(plugins)
        sim.start()
        make_node(os.path.join(root, "dev", "fuse"))
        cfg = hostdev_config(domain="devlet.io", devices=[
            {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": os.path.join(root, "dev", "fuse")}]}]}])
        d = Devlet(plugins, os.path.join(work, "devlet"), cfg,
                   args=["--metrics-address", "127.0.0.1:0", "--collect-interval", "1000",
                         "--pod-resources-socket", podres.socket_path, "--container-state-dirs", state],
                   env=nvml.env())
        d.start()
        sim.wait_for_registration("devlet.io/fuse", timeout=WAIT)
        port = metrics_port(d)

        def attributed():
            s = parse(scrape(port))
            pods = {lab.get("pod") for lab, _ in select(s, "DCGM_FI_DEV_FB_USED")}
            return s if len(pods - {None}) == CONTAINERS else None
        wait_until(attributed, WAIT, f"{CONTAINERS} attributed containers", interval=0.2)
        body = scrape(port)
        n_series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))

        # CPU at a 1 s interval, nobody scraping
        def collections():
            return select(parse(scrape(port)), "devlet_collections_total")[0][1]
        c0, t0, k0 = collections(), time.monotonic(), cpu_ns(d.pid)
        time.sleep(args.seconds)
        k1, t1 = cpu_ns(d.pid), time.monotonic()
        c1 = collections()
        cpu_s = (k1 - k0) / 1e9
        cpu_pct = cpu_s / (t1 - t0) * 100
        per_collection_ms = cpu_s / max(1, c1 - c0) * 1000
        duration = select(parse(scrape(port)), "devlet_collection_duration_seconds")[0][1]

        # scrape latency on one keep-alive connection
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        lat = []
        for i in range(args.scrapes + 50):
            t = time.perf_counter()
            conn.request("GET", "/metrics")
            r = conn.getresponse()
            data = r.read()
            if i >= 50:  # warm-up
                lat.append(time.perf_counter() - t)
            assert r.status == 200 and len(data) > 0
        conn.close()
        rss, hwm = status_kib(d.pid, "VmRSS"), status_kib(d.pid, "VmHWM")
        if d.terminate() != 0:
            raise RuntimeError(f"devlet exited with code {d.returncode}\n{d.log_text()}")
        d = None

        p50, p99 = percentile(lat, 50) * 1000, percentile(lat, 99) * 1000
        rows = [
            (f"scrape p50 ({args.scrapes} GETs, {len(body) / 1024:.0f} KiB, {n_series} series)",
             f"{p50:.2f} ms", "-", None),
            (f"scrape p99 ({args.scrapes} GETs, keep-alive)", f"{p99:.2f} ms",
             f"< {TARGET_P99_MS:.0f} ms", p99 < TARGET_P99_MS),
            (f"CPU at 1 s interval ({c1 - c0:.0f} collections in {t1 - t0:.0f} s)",
             f"{cpu_pct:.3f} % of a core", f"< {TARGET_CPU_PCT} %", cpu_pct < TARGET_CPU_PCT),
            ("CPU per collection (process total / collections)", f"{per_collection_ms:.2f} ms", "-", None),
            ("collector's own last collection (wall)", f"{duration * 1000:.2f} ms", "-", None),
            ("RSS (VmRSS), plugin + metrics on", f"{rss / 1024:.2f} MiB",
             f"< {TARGET_RSS_KIB // 1024} MiB", rss < TARGET_RSS_KIB),
            ("peak RSS (VmHWM)", f"{hwm / 1024:.2f} MiB", f"< {TARGET_RSS_KIB // 1024} MiB", hwm < TARGET_RSS_KIB),
        ]
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        w2 = max(len(r[2]) for r in rows)
        print(f"\ndevlet metrics: {GPUS} GPUs (mock NVML, DGX H100), {CONTAINERS} attributed containers, "
              f"{os.cpu_count()} CPUs ({BUILD_DIR})")
        print(f"  {'':<{w0}}  {'measured':>{w1}}  {'target':<{w2}}  result")
        for what, measured, target, ok in rows:
            res = "-" if ok is None else "PASS" if ok else "MISS"
            print(f"  {what:<{w0}}  {measured:>{w1}}  {target:<{w2}}  {res}")
        misses = sum(1 for r in rows if r[3] is False)
        print(f"\n{misses} target(s) missed" if misses else "\nall targets met")
        return 0
    finally:
        if d is not None:
            d.kill()
        if sim:
            sim.stop()
        if podres:
            podres.stop()
        for p in sleepers:
            p.kill()
            p.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # something broke: say what, exit non-zero
        print(f"bench-metrics: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
