#!/usr/bin/python3
"""`make soak`: the long-running proofs, each bounded in time and printing
one line of figures (nothing asserted beyond "it still works"; the exit
status is 1 if devlet died, stopped answering or a step failed):

  restarts   N kubelet restarts (default 1,000): how many re-registered,
             p50/p99 from the restart to devlet's Register
  allocate   N Allocates (default 1,000,000) pipelined on one connection,
             100 at a time: rate, RSS and open fds before/after
  reload     a storm of SIGHUPs, config rewrites, XIDs and kubelet restarts
             together for S seconds: counts, then registrations, Allocate,
             RSS and fds before/after
  http       1,000 slow connections from many loopback addresses (127/8):
             /health p50/p99/max and answered/asked
  churn      connection churn from 250 loopback addresses for S seconds
             (one GET /health per connection, as fast as two processes
             go): connections/s, /health p50/p99/max and answered/asked,
             SYNs the kernel dropped, the HTTP thread's CPU and devlet's
  fifo       the config file swapped for a FIFO, SIGHUP: reload refused in,
             Allocate p99 meanwhile, SIGTERM to exit
  streams    12 connections x 1,000 zero-window ListAndWatch streams (and 12
             x 100), 20 snapshots: RSS before/peak/after close
  idle       1,100 idle HTTP/2 connections: a new client's Allocate, RSS

Usage: soak.py [--restarts N] [--allocates N] [--reload-seconds S] [--churn-seconds S]
               [--only NAME,...]
"""

import argparse
import contextlib
import os
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from devlet_harness import Devlet, hostdev_config, make_node, wait_until  # noqa: E402
from h2_attack import (DATA, HEADERS, PREFACE, RST_STREAM, SETTINGS, frame, grpc_request,  # noqa: E402
                       handshake, open_streams, raise_fd_limit, read_frame, vm_rss_kib, fd_count)
from http_attack import Churn, SlowClients, get, listen_drops, thread_cpu_seconds  # noqa: E402
from kubelet_sim import KubeletSim, PluginClient, pb  # noqa: E402
from mock_gpus import GPU, MockNode  # noqa: E402

FUSE = "devlet.io/fuse"
ALLOCATE = "/v1beta1.DevicePlugin/Allocate"
LAW = "/v1beta1.DevicePlugin/ListAndWatch"


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def ms(s):
    return f"{s * 1000:.1f} ms"


class Node:
    """A workspace, a simulated kubelet and devlet serving fuse IDs (and, with
    gpus, the mock NVML's 8 H100s)."""

    def __init__(self, count=8, gpus=False, metrics="127.0.0.1:0"):
        self.root = tempfile.mkdtemp(prefix="devlet-soak-", dir="/tmp")
        self.plugins = os.path.join(self.root, "p")
        os.mkdir(self.plugins)
        make_node(os.path.join(self.root, "dev", "fuse"))
        self.count = count
        self.sim = KubeletSim(self.plugins)
        self.sim.start()
        env = {}
        self.mock = None
        if gpus:
            self.mock = MockNode(os.path.join(self.root, "nvml.yaml"), "h100-8x-nvswitch")
            env = self.mock.env()
        self.d = Devlet(self.plugins, os.path.join(self.root, "w"), self.config(count), env=env,
                        args=["--metrics-address", metrics, "-v", "0"])
        self.d.start()
        self.sim.wait_for_registration(FUSE, timeout=20)

    def config(self, count):
        return hostdev_config([{"name": "fuse", "groups": [{"count": count, "paths": [
            {"path": os.path.join(self.root, "dev", "fuse")}]}]}], domain="devlet.io")

    @property
    def sock(self):
        return self.d.socket_path(FUSE)

    def metrics_port(self):
        return int(self.d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1))

    def allocate_ok(self, timeout=10):
        with contextlib.closing(PluginClient(self.sock)) as c:
            return len(c.allocate([["fuse-1"]], timeout=timeout).container_responses) == 1

    def close(self):
        try:
            rc = self.d.terminate()
            if rc != 0:
                raise RuntimeError(f"devlet exited {rc}")
        finally:
            self.sim.stop()
            shutil.rmtree(self.root, ignore_errors=True)


def soak_restarts(n, budget):
    node = Node()
    try:
        lat, done, t_end = [], 0, time.monotonic() + budget
        for _ in range(n):
            if time.monotonic() > t_end:
                break
            before = len(node.sim.accepted(FUSE))
            t0 = time.monotonic()
            node.sim.restart()
            node.sim.wait_for_registration(FUSE, count=before + 1, timeout=20)
            lat.append(time.monotonic() - t0)
            done += 1
        ok = node.allocate_ok()
        print(f"restarts: {done}/{n} kubelet restarts re-registered; restart -> Register p50 "
              f"{ms(pct(lat, 50))} p99 {ms(pct(lat, 99))} max {ms(max(lat))}; Allocate after: "
              f"{'ok' if ok else 'FAILED'}; RSS {vm_rss_kib(node.d.pid)} KiB")
        return ok and done == n
    finally:
        node.close()


def soak_allocate(n, budget):
    node = Node()
    try:
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["fuse-3"])])
        body = req.SerializeToString()
        msg = b"\0" + struct.pack(">I", len(body)) + body
        hdr = grpc_request(ALLOCATE)
        s = handshake(node.sock, window=1 << 30)
        s.sendall(frame(8, 0, 0, struct.pack(">I", (1 << 31) - 1 - 65535)))  # connection window
        s.settimeout(30)
        rss0, fds0 = vm_rss_kib(node.d.pid), fd_count(node.d.pid)
        sid, ok, failed, sent = 1, 0, 0, 0
        t0 = time.monotonic()
        t_end = t0 + budget
        buf = b""
        while sent < n and time.monotonic() < t_end:
            batch = min(100, n - sent)
            ids = list(range(sid, sid + 2 * batch, 2))
            sid += 2 * batch
            s.sendall(b"".join(frame(HEADERS, 4, i, hdr) + frame(DATA, 1, i, msg) for i in ids))
            sent += batch
            pending, got_data = set(ids), set()
            while pending:
                while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        raise RuntimeError("devlet closed the connection")
                    buf += chunk
                length = int.from_bytes(buf[:3], "big")
                ftype, flags = buf[3], buf[4]
                stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                buf = buf[9 + length:]
                if ftype == DATA and stream in pending:
                    got_data.add(stream)
                if stream in pending and ((ftype in (HEADERS, DATA) and flags & 1) or ftype == RST_STREAM):
                    pending.discard(stream)
                    if stream in got_data:
                        ok += 1
                    else:
                        failed += 1
        secs = time.monotonic() - t0
        s.close()
        wait_until(lambda: fd_count(node.d.pid) <= fds0, 10, "the connection's fd to go")
        rss1, fds1 = vm_rss_kib(node.d.pid), fd_count(node.d.pid)
        print(f"allocate: {ok}/{n} Allocates answered ({failed} errors) in {secs:.1f} s "
              f"({ok / secs:.0f}/s, one connection, 100 in flight); RSS {rss0} -> {rss1} KiB, "
              f"fds {fds0} -> {fds1}")
        return ok == n and node.allocate_ok()
    finally:
        node.close()


def soak_reload(seconds):
    node = Node(gpus=True)
    try:
        node.sim.wait_for_registration(GPU, timeout=20)
        rss0, fds0 = vm_rss_kib(node.d.pid), fd_count(node.d.pid)
        counts = {"sighup": 0, "rewrite": 0, "xid": 0, "restart": 0}
        t_end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < t_end:
            step = i % 4
            if step == 0:
                node.d.sighup()
                counts["sighup"] += 1
            elif step == 1:
                node.d.write_config(node.config(8 + (i // 4) % 3))
                counts["rewrite"] += 1
            elif step == 2:
                node.mock.xid((i // 4) % 8, 79)
                counts["xid"] += 1
            else:
                node.sim.restart()
                counts["restart"] += 1
            i += 1
            time.sleep(0.02)
        node.d.write_config(node.config(8))
        node.d.sighup()
        before = len(node.sim.accepted(FUSE))
        node.sim.restart()
        node.sim.wait_for_registration(FUSE, count=before + 1, timeout=20)
        node.sim.wait_for_registration(GPU, timeout=20)
        ok = node.d.alive() and node.allocate_ok()
        time.sleep(1.5)  # closed connections' memory goes back a second after
        rss1, fds1 = vm_rss_kib(node.d.pid), fd_count(node.d.pid)
        print(f"reload: {seconds} s storm of {counts['sighup']} SIGHUPs, {counts['rewrite']} config "
              f"rewrites, {counts['xid']} XIDs, {counts['restart']} kubelet restarts: both resources "
              f"registered after, Allocate {'ok' if ok else 'FAILED'}; RSS {rss0} -> {rss1} KiB, "
              f"fds {fds0} -> {fds1}")
        return ok
    finally:
        node.close()


def probe_health(port, timeout, lat):
    """One GET /health: appends its latency to lat (the timeout when it
    failed) and returns whether devlet answered 200 ok."""
    try:
        status, body, secs = get(port, "/health", timeout=timeout)
    except OSError:
        lat.append(float(timeout))
        return False
    lat.append(secs)
    return status == 200 and body == "ok"


def soak_http(n=1000, probes=50):
    node = Node()
    try:
        port = node.metrics_port()
        slow = SlowClients(port, n, per_source=4)
        lat, good = [], 0
        try:
            time.sleep(1)
            for i in range(probes):
                good += probe_health(port, 2, lat)
                time.sleep(0.02)
            rss = vm_rss_kib(node.d.pid)
        finally:
            slow.close()
        print(f"http: {n} slow connections from {len(set(slow.sources))} loopback addresses "
              f"({slow.reconnects} reconnects): /health {good}/{probes} answered, p50 "
              f"{ms(pct(lat, 50))} p99 {ms(pct(lat, 99))} max {ms(max(lat))}; RSS {rss} KiB")
        return good == probes
    finally:
        node.close()


def soak_churn(seconds=20, every=0.1):
    node = Node()
    try:
        port = node.metrics_port()
        raise_fd_limit(4096)
        drops0, cpu0 = listen_drops(), thread_cpu_seconds(node.d.pid, "devlet-http")
        all0 = thread_cpu_seconds(node.d.pid)
        churn = Churn(port, procs=2, n_sources=250, inflight=600)
        lat, good, asked = [], 0, 0
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < seconds:
                asked += 1
                good += probe_health(port, 3, lat)
                time.sleep(every)
        finally:
            answered = churn.close()
        wall = time.monotonic() - t0
        cpu = thread_cpu_seconds(node.d.pid, "devlet-http") - cpu0
        cpu_all = thread_cpu_seconds(node.d.pid) - all0
        drops = listen_drops() - drops0
        print(f"churn: {answered / wall:.0f} connections/s from 250 loopback addresses for "
              f"{wall:.0f} s: /health {good}/{asked} answered, p50 {ms(pct(lat, 50))} p99 "
              f"{ms(pct(lat, 99))} max {ms(max(lat))}; SYNs dropped {drops}; HTTP thread "
              f"{100 * cpu / wall:.0f}% of a core (devlet {100 * cpu_all / wall:.0f}%)")
        return good == asked
    finally:
        node.close()


def soak_fifo():
    node = Node()
    try:
        fifo = node.d.config_path + ".fifo"
        os.mkfifo(fifo)
        mark = node.d.log_size()
        os.replace(fifo, node.d.config_path)
        t0 = time.monotonic()
        node.d.sighup()
        node.d.wait_log(r"reload failed", since=mark)
        refused = time.monotonic() - t0
        lat = []
        with contextlib.closing(PluginClient(node.sock)) as c:
            for _ in range(200):
                t = time.monotonic()
                c.allocate([["fuse-2"]], timeout=5)
                lat.append(time.monotonic() - t)
        t = time.monotonic()
        node.d.signal(signal.SIGTERM)
        node.d.proc.wait(10)
        stop = time.monotonic() - t
        print(f"fifo: config swapped for a FIFO: reload refused in {ms(refused)}, 200 Allocates "
              f"meanwhile p99 {ms(pct(lat, 99))}, SIGTERM -> exit {ms(stop)} (code {node.d.proc.returncode})")
        return node.d.proc.returncode == 0
    finally:
        node.close()


def soak_streams():
    node = Node(count=200)
    try:
        rss0 = vm_rss_kib(node.d.pid)
        conns, peak, held = [], rss0, 0
        for n in (1000, 100):
            for _ in range(12):
                s = handshake(node.sock, window=0)
                conns.append(s)
                held += n if open_streams(s, LAW, n) else 0
                peak = max(peak, vm_rss_kib(node.d.pid))
        for i in range(20):
            node.d.write_config(node.config(199 + i % 2))
            node.d.sighup()
            node.sim.wait_for_snapshot(FUSE, lambda s, k=199 + i % 2: len(s.ids()) == k, timeout=20)
            peak = max(peak, vm_rss_kib(node.d.pid))
        ok = node.allocate_ok()
        for s in conns:
            s.close()
        time.sleep(2)
        rss1 = vm_rss_kib(node.d.pid)
        print(f"streams: 12 x 1,000 + 12 x 100 zero-window ListAndWatch streams ({held} held), 20 "
              f"snapshots of 200 devices: RSS {rss0} KiB before, peak {peak} KiB (VmHWM "
              f"{node.d.vm_hwm_kib()} KiB), {rss1} KiB after close; Allocate {'ok' if ok else 'FAILED'}")
        return ok and node.d.vm_hwm_kib() < 32 * 1024
    finally:
        node.close()


def soak_idle(n=1100):
    node = Node()
    try:
        rss0 = vm_rss_kib(node.d.pid)
        socks = []
        for _ in range(raise_fd_limit(n)):
            s = handshake(node.sock, timeout=2)
            if s is None:
                break
            socks.append(s)
        t = time.monotonic()
        ok = node.allocate_ok()
        lat = time.monotonic() - t
        rss1 = vm_rss_kib(node.d.pid)
        for s in socks:
            s.close()
        print(f"idle: {len(socks)}/{n} idle HTTP/2 handshakes accepted (the longest idle closed past "
              f"128); a new client's Allocate {'ok' if ok else 'FAILED'} in {ms(lat)}; RSS {rss0} -> "
              f"{rss1} KiB")
        return ok
    finally:
        node.close()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--restarts", type=int, default=1000)
    ap.add_argument("--allocates", type=int, default=1_000_000)
    ap.add_argument("--reload-seconds", type=int, default=20)
    ap.add_argument("--churn-seconds", type=int, default=20)
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    steps = {
        "restarts": lambda: soak_restarts(a.restarts, 600),
        "allocate": lambda: soak_allocate(a.allocates, 600),
        "reload": lambda: soak_reload(a.reload_seconds),
        "http": soak_http,
        "churn": lambda: soak_churn(a.churn_seconds),
        "fifo": soak_fifo,
        "streams": soak_streams,
        "idle": soak_idle,
    }
    only = [x for x in a.only.split(",") if x]
    failed = []
    for name, fn in steps.items():
        if only and name not in only:
            continue
        try:
            if not fn():
                failed.append(name)
        except Exception as e:  # one line, then the next step
            print(f"{name}: FAILED: {type(e).__name__}: {e}")
            failed.append(name)
        sys.stdout.flush()
    if failed:
        print("soak: failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
