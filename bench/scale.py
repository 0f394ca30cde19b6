#!/usr/bin/python3
"""`make bench-scale`: what N devlet nodes cost one API server (issue 27).

N nodes (distinct node names, each with the mock NVML's 8 H100s), each a
`devlet run` with every API feature on (the GPUs through DRA, labels to
the Node, pod labels on the metrics) and a `devlet config-manager`
following its Node, are started against:
  fake  the tests' fake API server made a watch cache (bench/
        scale_servers.py: 410 as an ERROR event, bookmarks, streaming
        lists, 429 on demand) over TLS, for the restart and its 410s;
  real  etcd + kube-apiserver from the pinned peers, started here on free
        ports, requests counted from its audit log (level Metadata).
Requests are counted by User-Agent (those starting "devlet/"), whatever
the client inside devlet does, and divided by N.

Timeline per server: the first minute from start; then --warmup seconds;
then the steady window (--window); then, unless --no-restart, the
restart: down --down seconds (every connection cut, connections
refused), back with its watch cache window moved past every version
devlet holds, answering 429 with Retry-After for --throttle seconds; the
--after seconds from its return are the restart figures.  The real
server is restarted too (SIGTERM, etcd kept, started again: its new
watch cache begins at etcd's revision), without the 429s.  Threads and
memory (/proc/PID/status: Threads, VmRSS, VmHWM) are read at the end of
the steady window, VmHWM again at the end; one more `devlet run` with DRA
off (on its own fake server, not counted) is the threads reference.

Figures are reported, never asserted: the exit code is 0 whatever they
are (2 only when the harness itself cannot run).  Everything started
(processes, the temporary directory) goes on exit, Ctrl-C included.
Usage: scale.py [--nodes N] [--window S] [--servers fake,real] [--quick]
       [--no-restart] [--after S] [--down S] [--throttle S] [--keep]
"""

import argparse
import collections
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "bench"))

from devlet_harness import DEVLET_BIN, devlet_env  # noqa: E402
from fake_apiserver import b64, make_certs, write_kubeconfig  # noqa: E402
from mock_gpus import MockNode  # noqa: E402
from scale_servers import (RealApiServer, WatchCacheApi, real_available, remove_tree,  # noqa: E402
                           stop_process)

PROFILE = "h100-8x-nvswitch"
PROJECT_NODES = 5000
LEASE_PER_MIN = 6  # the kubelet renews its Lease every 10 s
WRITES = ("create", "update", "patch", "delete", "deletecollection")
# issue 27's targets, per node, devlet and its config-manager together
TARGET_STEADY_5MIN = 6
TARGET_RESTART = 6
TARGET_GONE = 2
TARGET_SLICE_LISTS = 2
TARGET_RSS_MIB = 8.0


def say(msg):
    print(f"[bench-scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Interrupted(Exception):
    pass


def on_signal(sig, frame):
    raise Interrupted(signal.Signals(sig).name)

# ---------------------------------------------------------------- processes


class Harness:
    """The temporary directory and every process started, stopped in
    reverse order by close()."""

    def __init__(self, keep):
        self.root = tempfile.mkdtemp(prefix="bench-scale-", dir="/tmp")
        self.keep = keep
        self.procs = []

    def spawn(self, name, args, env=None, cwd=None):
        log = os.path.join(self.root, "logs", f"{name}.log")
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "ab") as f:
            p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                 env=env, cwd=cwd or self.root, start_new_session=True)
        p.log, p.name = log, name
        self.procs.append(p)
        return p

    def stop(self, procs):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            stop_process(p)
            if p in self.procs:
                self.procs.remove(p)

    def close(self):
        self.stop(list(reversed(self.procs)))
        if self.keep:
            say(f"kept {self.root}")
        else:
            remove_tree(self.root)


def proc_status(pid):
    """{Threads, VmRSS, VmHWM} (kB for the memory) of a live process."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Threads", "VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


class Node:
    """One node: `devlet run` (DRA, labels to the Node, pod labels) and
    `devlet config-manager`, in their own directory."""

    def __init__(self, h, name, kubeconfig, dra=True, config_manager=True):
        self.name = name
        d = os.path.join(h.root, name)
        for sub in ("plugins", "reg", "draplug", "cdi", "run", "src"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(os.path.join(d, "src", "default"), "w") as f:
            f.write("version: v1\n")
        mock = MockNode(os.path.join(d, "nvml.yaml"), PROFILE)
        env = devlet_env(mock.env())
        args = [DEVLET_BIN, "run", "--backends", "nvidia", "--node-name", name,
                "--kubeconfig", kubeconfig, "--plugin-directory", os.path.join(d, "plugins"),
                "--kubelet-socket", "", "--kubelet-registrar-directory-path", os.path.join(d, "reg"),
                "--kubelet-plugins-directory-path", os.path.join(d, "draplug"),
                "--cdi-spec-dir", os.path.join(d, "cdi"), "--labels-output", "node",
                "--kubernetes-enable-pod-labels", "--metrics-address", "127.0.0.1:0",
                "--pod-resources-socket", os.path.join(d, "run", "pod-resources.sock")]
        if dra:
            args += ["--dra-resources", "nvidia.com/gpu"]
        self.devlet = h.spawn(f"{name}-devlet", args, env=env, cwd=d)
        self.cm = None
        if config_manager:
            self.cm = h.spawn(f"{name}-config-manager", [
                DEVLET_BIN, "config-manager", "--kubeconfig", kubeconfig, "--node-name", name,
                f"--config-file-srcdir={d}/src", f"--config-file-dst={d}/config.yaml",
                "--default-config=default", "--send-signal=false"], env=env, cwd=d)

    def procs(self):
        return [p for p in (self.devlet, self.cm) if p is not None]

    def status(self):
        return {"devlet": proc_status(self.devlet.pid),
                "cm": proc_status(self.cm.pid) if self.cm else {}}

# ---------------------------------------------------------------- counting


def component(agent):
    """devlet/<version> (linux/<arch>) <component> -> component."""
    return agent.rsplit(") ", 1)[1] if ") " in agent else agent


def devlet_only(reqs):
    return [r for r in reqs if r.agent.startswith("devlet/")]


def busiest_second(reqs):
    if not reqs:
        return 0, 0.0
    bins = collections.Counter(int(r.t) for r in reqs)
    sec, n = bins.most_common(1)[0]
    return n, sec


def by_key(reqs):
    return collections.Counter((component(r.agent), r.verb, r.resource) for r in reqs)


def wait_until_time(t, what):
    left = t - time.time()
    if left > 0:
        say(f"{what}: {left:.0f} s")
        time.sleep(left)


def measure(h, server_kind, args):
    """Runs one server's timeline; returns what report() prints."""
    res = {"server": server_kind, "n": args.nodes}
    certs = None
    if server_kind == "fake":
        certs = make_certs(_mkdir(os.path.join(h.root, "certs")))
        api = WatchCacheApi(certs)
        kubeconfig = str(write_kubeconfig(
            pathlib.Path(h.root, "fake.kubeconfig"), api.url,
            f"    certificate-authority-data: {b64(certs / 'ca.crt')}", "    token: scale"))
        res["url"] = api.url
    else:
        api = RealApiServer(os.path.join(h.root, "kube"), h.spawn)
        say(f"starting etcd and kube-apiserver on {api.url}")
        api.start()
        kubeconfig = api.kubeconfig(os.path.join(h.root, "real.kubeconfig"))
        res["url"] = api.url
    names = [f"scale-{server_kind}-{i:03d}" for i in range(args.nodes)]
    for n in names:
        api.add_node(n)
    # the threads reference: DRA off, on a server of its own (not counted)
    ref_certs = certs or make_certs(_mkdir(os.path.join(h.root, "ref-certs")))
    ref_api = WatchCacheApi(ref_certs)
    ref_api.add_node(f"ref-{server_kind}")
    ref_kc = str(write_kubeconfig(
        pathlib.Path(h.root, f"ref-{server_kind}.kubeconfig"), ref_api.url,
        f"    certificate-authority-data: {b64(ref_certs / 'ca.crt')}", "    token: ref"))
    try:
        say(f"{server_kind}: starting {args.nodes} nodes (devlet run + config-manager each)")
        t0 = time.time()
        nodes = [Node(h, n, kubeconfig) for n in names]
        ref = Node(h, f"ref-{server_kind}", ref_kc, dra=False, config_manager=False)
        wait_until_time(t0 + 60, f"{server_kind}: first minute")
        res["first"] = devlet_only(api.requests_between(t0, t0 + 60))
        ts = t0 + 60 + args.warmup
        wait_until_time(ts, f"{server_kind}: warm-up")
        wait_until_time(ts + args.window, f"{server_kind}: steady window ({args.window} s)")
        res["steady"] = devlet_only(api.requests_between(ts, ts + args.window))
        res["window"] = args.window
        res["status"] = [(n.name, n.status()) for n in nodes]
        res["ref"] = ref.status()
        res["died"] = [p.name for n in nodes for p in n.procs() if p.poll() is not None]
        if args.restart:
            say(f"{server_kind}: API server down for {args.down} s")
            api.down()
            time.sleep(args.down)
            if server_kind == "fake":
                api.compact_watch_cache()
                api.throttle(args.throttle, args.retry_after)
                api.up()
                tb = time.time()
                say(f"fake: back, 429 (Retry-After: {args.retry_after}) for {args.throttle} s")
            else:
                tb = time.time()  # counted from its start: what it answers is audited
                api.up()
                say(f"real: back after {time.time() - tb:.1f} s of start-up (no 429)")
            wait_until_time(tb + args.after, f"{server_kind}: after the restart ({args.after} s)")
            res["after"] = devlet_only(api.requests_between(tb, tb + args.after))
            res["after_s"] = args.after
            res["died"] += [p.name for n in nodes for p in n.procs()
                            if p.poll() is not None and p.name not in res["died"]]
        res["end_status"] = [(n.name, n.status()) for n in nodes]
    finally:
        h.stop([p for p in h.procs if p.name.startswith(("scale-", "ref-"))])
        ref_api.stop()
        if server_kind == "fake":
            api.stop()
        else:
            h.stop([p for p in h.procs if p.name in ("kube-apiserver", "etcd")])
    return res


def _mkdir(p):
    os.makedirs(p, exist_ok=True)
    return pathlib.Path(p)

# ---------------------------------------------------------------- the report


def table(headers, rows, align=None):
    cols = [len(h) for h in headers]
    for r in rows:
        cols = [max(c, len(str(v))) for c, v in zip(cols, r)]
    align = align or ["<"] + [">"] * (len(headers) - 1)
    fmt = "  ".join(f"{{:{a}{c}}}" for a, c in zip(align, cols))
    print(fmt.format(*headers))
    print("  ".join("-" * c for c in cols))
    for r in rows:
        print(fmt.format(*[str(v) for v in r]))


def f1(x):
    return f"{x:.1f}"


def f2(x):
    return f"{x:.2f}"


def met(ok):
    return "yes" if ok else "NO"


def mib(kib):
    return kib / 1024.0


def report(res):
    n = res["n"]
    steady_min = res["window"] / 60.0
    first, steady, after = res["first"], res["steady"], res.get("after")
    print()
    print(f"== {res['server']} API server ({res['url']}): {n} nodes, every API feature on "
          f"(DRA, labels to the Node, pod labels, config-manager) ==")
    if after is not None and res["server"] == "real":
        print("(real: restarted with SIGTERM, etcd kept; no 429; a watch's 410 ERROR event is a 200 "
              "to the audit log, so only 410 statuses count as answered 410)")
    if res["died"]:
        print(f"!! processes that exited on their own: {', '.join(res['died'])}")
    print()
    print("Requests per node, by component, verb and resource "
          f"(steady: per minute over {res['window']} s"
          + (f"; restart: in the {res['after_s']} s after it is back" if after is not None else "")
          + ")")
    kf, ks = by_key(first), by_key(steady)
    ka = by_key(after) if after is not None else collections.Counter()
    kg = by_key([r for r in after if r.gone]) if after is not None else collections.Counter()
    keys = sorted(set(kf) | set(ks) | set(ka))
    rows = []
    for k in keys:
        row = [k[0], k[1], k[2], f2(kf[k] / n), f2(ks[k] / n / steady_min)]
        if after is not None:
            row += [f2(ka[k] / n), f2(kg[k] / n)]
        rows.append(row)
    total = ["all", "", "", f2(len(first) / n), f2(len(steady) / n / steady_min)]
    if after is not None:
        total += [f2(len(after) / n), f2(sum(kg.values()) / n)]
    rows.append(total)
    headers = ["component", "verb", "resource", "first min", "steady /min"]
    if after is not None:
        headers += ["restart", "of them 410"]
    table(headers, rows, ["<", "<", "<"] + [">"] * (len(headers) - 3))

    # the summary beside issue 27's targets
    per_min = len(steady) / n / steady_min
    writes = sum(1 for r in steady if r.verb in WRITES) / n / steady_min
    lists = sum(1 for r in steady if r.verb == "list") / n / steady_min
    rows = [
        ["first-minute requests", f2(len(first) / n), "-", "-"],
        ["steady requests in 5 min", f2(per_min * 5), f"<= {TARGET_STEADY_5MIN}",
         met(per_min * 5 <= TARGET_STEADY_5MIN)],
        ["steady writes in 5 min", f2(writes * 5), "0", met(writes == 0)],
        ["steady LISTs in 5 min", f2(lists * 5), "0 (no watch lost)", met(lists == 0)],
    ]
    if after is not None:
        gone = sum(1 for r in after if r.gone) / n
        slist = sum(1 for r in after if r.verb == "list" and r.resource == "resourceslices") / n
        throttled = sum(1 for r in after if r.code == 429) / n
        peak, sec = busiest_second(after)
        rows += [
            [f"restart: requests in {res['after_s']} s", f2(len(after) / n), f"<= {TARGET_RESTART}",
             met(len(after) / n <= TARGET_RESTART)],
            ["restart: answered 410", f2(gone), f"<= {TARGET_GONE}",
             met(gone <= TARGET_GONE) if res["server"] == "fake" else "n/a (ERROR events unseen)"],
            ["restart: slice LISTs", f2(slist), f"<= {TARGET_SLICE_LISTS}",
             met(slist <= TARGET_SLICE_LISTS)],
            ["restart: answered 429", f2(throttled), "-", "-"],
            [f"restart: busiest second (all {n})", str(peak), "-", "-"],
        ]
    threads = [s["devlet"].get("Threads", 0) for _, s in res["status"]]
    rss = [s["devlet"].get("VmRSS", 0) for _, s in res["status"]]
    hwm = [s["devlet"].get("VmHWM", 0) for _, s in res["end_status"]]
    ref_threads = res["ref"]["devlet"].get("Threads", 0)
    rows += [
        ["devlet threads, DRA on (max)", str(max(threads, default=0)),
         f"<= {ref_threads + 1} (DRA off {ref_threads} + 1)",
         met(max(threads, default=0) <= ref_threads + 1)],
        ["devlet VmRSS MiB (max)", f1(mib(max(rss, default=0))), f"<= {TARGET_RSS_MIB:g}",
         met(mib(max(rss, default=0)) <= TARGET_RSS_MIB)],
        ["devlet VmHWM MiB (max)", f1(mib(max(hwm, default=0))), "-", "-"],
    ]
    print()
    print("Per node, devlet and its config-manager together, beside issue 27's targets")
    table(["figure", "measured", "target", "met"], rows, ["<", ">", "<", "<"])

    # 5,000 nodes
    rate = len(steady) / n / res["window"]  # requests/s per node
    lease = PROJECT_NODES * LEASE_PER_MIN / 60.0
    rows = [["devlet, steady", f1(rate * PROJECT_NODES), f1(rate * PROJECT_NODES / lease)],
            ["devlet, first minute (all starting)", f1(len(first) / n / 60 * PROJECT_NODES),
             f1(len(first) / n / 60 * PROJECT_NODES / lease)]]
    if after is not None:
        peak, _ = busiest_second(after)
        rows += [[f"devlet, {res['after_s']} s after a restart", f1(len(after) / n / res["after_s"]
                                                                    * PROJECT_NODES),
                  f1(len(after) / n / res["after_s"] * PROJECT_NODES / lease)],
                 ["devlet, busiest second after a restart", f1(peak / n * PROJECT_NODES),
                  f1(peak / n * PROJECT_NODES / lease)]]
    rows.append(["kubelet Lease renewals (6/min/node)", f1(lease), "1.0"])
    print()
    print(f"Projected to {PROJECT_NODES:,} nodes (per-node rate x {PROJECT_NODES:,}; the busiest "
          f"second scaled linearly)")
    table(["traffic", "requests/s", "x Lease"], rows)

    print()
    print("Per process at the end of the steady window (VmHWM at the end of the run; kB -> MiB)")
    rows = []
    ends = dict(res["end_status"])
    for name, s in res["status"]:
        d, c, e = s["devlet"], s["cm"], ends.get(name, {})
        rows.append([name, d.get("Threads", "-"), f1(mib(d.get("VmRSS", 0))),
                     f1(mib(e.get("devlet", {}).get("VmHWM", 0))), c.get("Threads", "-"),
                     f1(mib(c.get("VmRSS", 0))), f1(mib(e.get("cm", {}).get("VmHWM", 0)))])
    r = res["ref"]["devlet"]
    rows.append(["reference: DRA off", r.get("Threads", "-"), f1(mib(r.get("VmRSS", 0))),
                 f1(mib(r.get("VmHWM", 0))), "-", "-", "-"])
    table(["node", "threads", "VmRSS", "VmHWM", "cm threads", "cm VmRSS", "cm VmHWM"], rows)
    if threads:
        print(f"devlet run: threads median {statistics.median(threads):g}, VmRSS median "
              f"{mib(statistics.median(rss)):.1f} MiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=None, help="devlet nodes (default 20, quick 5)")
    ap.add_argument("--window", type=int, default=None,
                    help="steady window in seconds (default 300, quick 60)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="seconds between the first minute and the steady window (default 30, quick 15)")
    ap.add_argument("--servers", default=None,
                    help="fake,real (default: both when the peers are built, else fake)")
    ap.add_argument("--no-restart", dest="restart", action="store_false",
                    help="skip the fake server's restart")
    ap.add_argument("--after", type=int, default=None,
                    help="seconds counted after the restart (default 120, quick 60)")
    ap.add_argument("--down", type=int, default=20, help="seconds the fake server is down")
    ap.add_argument("--throttle", type=int, default=6, help="seconds of 429 once it is back")
    ap.add_argument("--retry-after", type=int, default=2, help="the 429s' Retry-After")
    ap.add_argument("--quick", action="store_true", help="5 nodes, 60 s windows")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    args = ap.parse_args()
    q = args.quick
    args.nodes = args.nodes or (5 if q else 20)
    args.window = args.window or (60 if q else 300)
    args.warmup = args.warmup if args.warmup is not None else (15 if q else 30)
    args.after = args.after or (60 if q else 120)
    why_not_real = real_available()
    servers = (args.servers or ("fake" if why_not_real else "fake,real")).split(",")
    if not os.access(DEVLET_BIN, os.X_OK):
        print(f"bench-scale: {DEVLET_BIN} is missing: run make", file=sys.stderr)
        return 2
    if "real" in servers and why_not_real:
        print(f"bench-scale: no real API server: {why_not_real}", file=sys.stderr)
        servers.remove("real")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    h = Harness(args.keep)
    results, failed = [], []
    try:
        for s in servers:
            try:
                results.append(measure(h, s, args))
            except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as e:
                say(f"{s}: the harness could not run: {e}")
                failed.append(f"{s}: {e}")
    except Interrupted as e:
        say(f"interrupted ({e}): stopping everything")
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        h.close()
    version = subprocess.run([DEVLET_BIN, "version"], capture_output=True, text=True).stdout.strip()
    print(f"bench-scale: {version}, {args.nodes} nodes, mock NVML {PROFILE}; figures are "
          f"reported, never asserted")
    for r in results:
        report(r)
    if "real" not in servers:
        print(f"\n(no real API server run: {why_not_real or 'not asked for'})")
    for f in failed:
        print(f"\n!! not measured: {f}")
    return 2 if failed and not results else 0


if __name__ == "__main__":
    sys.exit(main())
