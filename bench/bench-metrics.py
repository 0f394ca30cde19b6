#!/usr/bin/python3
"""`make bench`: the metrics endpoint's figures, printed as a table with
their targets.

Setup: `devlet run` on the mock NVML's DGX H100 profile (8 GPUs, GPM on,
so the DCGM_FI_PROF_* families are collected too) serving
nvidia.com/gpu and a host-devices plugin (both registered with the simulated
kubelet), once with metrics off and once on, collecting every second, with
100 attributed containers: 100 OCI specs in a
temporary state directory (NVIDIA_VISIBLE_DEVICES and CRI annotations), the
same 100 pods in a simulated pod-resources List (time-sliced replicas), and
100 real processes (sleep) in the mock's process lists, whose
/proc/<pid>/cgroup the collector reads each time.

Measured:
  - the metrics' CPU at a 1 s interval: the CPU time of all devlet's threads
    (/proc/<pid>/task/*/schedstat) over --seconds without scrapes, with
    metrics on minus with metrics off (the mock NVML's event polling in the
    NVIDIA health thread costs CPU a real driver does not), also per
    collection, and the collector thread's own share;
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


def thread_ns(pid: int, name: str) -> int:
    """CPU time (ns) of pid's threads called name."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def run(root: str, nvml: MockNvml, state: str, podres: PodResourcesSim, sim: KubeletSim,
        metrics: bool, seconds: float, scrapes: int, n: int) -> dict:
    """One `devlet run` (plugins registered; metrics on or off): its CPU
    over seconds, then (metrics on) scrape latency, then its RSS."""
    plugins = sim.plugin_dir
    cfg = hostdev_config(domain="devlet.io", devices=[
        {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": os.path.join(root, "dev", "fuse")}]}]}])
    args = (["--metrics-address", "127.0.0.1:0", "--collect-interval", "1000",
             "--pod-resources-socket", podres.socket_path, "--container-state-dirs", state]
            if metrics else ["--metrics-address", ""])
    d = Devlet(plugins, os.path.join(root, "work", f"devlet{n}"), cfg, args=args, env=nvml.env())
    d.start()
    try:
        sim.wait_for_registration("devlet.io/fuse", count=n + 1, timeout=WAIT)
        sim.wait_for_registration("nvidia.com/gpu", count=n + 1, timeout=WAIT)
        out = {}
        if metrics:
            port = metrics_port(d)

            def attributed():
                s = parse(scrape(port))
                pods = {lab.get("pod") for lab, _ in select(s, "devlet_container_memory_used_bytes")}
                return len(pods - {None}) == CONTAINERS and len(select(s, "DCGM_FI_PROF_SM_ACTIVE")) == GPUS
            wait_until(attributed, WAIT, f"{CONTAINERS} attributed containers", interval=0.2)
            body = scrape(port)
            out["kib"] = len(body) / 1024
            out["series"] = sum(1 for line in body.splitlines() if line and not line.startswith("#"))

            def collections():
                return select(parse(scrape(port)), "devlet_collections_total")[0][1]
            c0 = collections()
        else:
            time.sleep(2)  # past start-up
        t0, k0, m0 = time.monotonic(), cpu_ns(d.pid), thread_ns(d.pid, "devlet-metrics")
        time.sleep(seconds)
        k1, t1, m1 = cpu_ns(d.pid), time.monotonic(), thread_ns(d.pid, "devlet-metrics")
        out.update(cpu_s=(k1 - k0) / 1e9, wall_s=t1 - t0, collector_s=(m1 - m0) / 1e9)
        if metrics:
            out["collections"] = collections() - c0
            out["duration"] = select(parse(scrape(port)), "devlet_collection_duration_seconds")[0][1]
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            lat = []
            for i in range(scrapes + 50):
                t = time.perf_counter()
                conn.request("GET", "/metrics")
                r = conn.getresponse()
                data = r.read()
                if i >= 50:  # warm-up
                    lat.append(time.perf_counter() - t)
                assert r.status == 200 and len(data) > 0
            conn.close()
            out["lat"] = lat
        out["rss"], out["hwm"] = status_kib(d.pid, "VmRSS"), status_kib(d.pid, "VmHWM")
        if d.terminate() != 0:
            raise RuntimeError(f"devlet exited with code {d.returncode}\n{d.log_text()}")
        return out
    finally:
        d.kill()


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
    sleepers, sim, podres = [], None, None
    try:
        nvml = MockNvml(work)
        write_specs(state, nvml)
        sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(CONTAINERS)]
        for g in range(GPUS):
            # GPM on every GPU (H100): the DCGM_FI_PROF_* families are collected too
            nvml.devices[g]["gpm"] = {"supported": True, "graphicsUtil": 80, "smUtil": 60, "smOccupancy": 30,
                                      "tensorUtil": 40, "dramBwUtil": 50, "pcieTxMiBps": 1000,
                                      "nvlinkTxMiBps": 20000}
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
        off = run(root, nvml, state, podres, sim, False, args.seconds, args.scrapes, 0)
        on = run(root, nvml, state, podres, sim, True, args.seconds, args.scrapes, 1)

        p50, p99 = percentile(on["lat"], 50) * 1000, percentile(on["lat"], 99) * 1000
        pct = lambda r: r["cpu_s"] / r["wall_s"] * 100  # noqa: E731
        delta_pct = pct(on) - pct(off)
        per_collection_ms = (on["cpu_s"] - off["cpu_s"] * on["wall_s"] / off["wall_s"]) / max(1, on["collections"]) * 1000
        rows = [
            (f"scrape p50 ({args.scrapes} GETs, {on['kib']:.0f} KiB, {on['series']} series)",
             f"{p50:.2f} ms", "-", None),
            (f"scrape p99 ({args.scrapes} GETs, keep-alive)", f"{p99:.2f} ms",
             f"< {TARGET_P99_MS:.0f} ms", p99 < TARGET_P99_MS),
            (f"metrics CPU at 1 s interval, GPM on (devlet with - without; {on['collections']:.0f} collections)",
             f"{delta_pct:.3f} % of a core", f"< {TARGET_CPU_PCT} %", delta_pct < TARGET_CPU_PCT),
            ("  of which the collector thread", f"{on['collector_s'] / on['wall_s'] * 100:.3f} % of a core", "-", None),
            ("  CPU per collection", f"{per_collection_ms:.2f} ms", "-", None),
            ("  collector's own last collection (wall)", f"{on['duration'] * 1000:.2f} ms", "-", None),
            ("devlet CPU, metrics off (plugins, NVML health thread)", f"{pct(off):.3f} % of a core", "-", None),
            ("RSS (VmRSS), plugins + metrics on", f"{on['rss'] / 1024:.2f} MiB",
             f"< {TARGET_RSS_KIB // 1024} MiB", on["rss"] < TARGET_RSS_KIB),
            ("peak RSS (VmHWM), plugins + metrics on", f"{on['hwm'] / 1024:.2f} MiB",
             f"< {TARGET_RSS_KIB // 1024} MiB", on["hwm"] < TARGET_RSS_KIB),
            ("RSS (VmRSS), plugins only (metrics off)", f"{off['rss'] / 1024:.2f} MiB", "-", None),
        ]
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        w2 = max(len(r[2]) for r in rows)
        print(f"\ndevlet metrics: {GPUS} GPUs (mock NVML, DGX H100, GPM), {CONTAINERS} attributed containers, "
              f"nvidia.com/gpu and devlet.io/fuse plugins registered, {args.seconds:.0f} s per CPU "
              f"window, {os.cpu_count()} CPUs ({BUILD_DIR})")
        print(f"  {'':<{w0}}  {'measured':>{w1}}  {'target':<{w2}}  result")
        for what, measured, target, ok in rows:
            res = "-" if ok is None else "PASS" if ok else "MISS"
            print(f"  {what:<{w0}}  {measured:>{w1}}  {target:<{w2}}  {res}")
        misses = sum(1 for r in rows if r[3] is False)
        print(f"\n{misses} target(s) missed" if misses else "\nall targets met")
        return 0
    finally:
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
