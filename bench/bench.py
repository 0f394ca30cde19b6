#!/usr/bin/python3
"""`make bench`: devlet's figures, printed as a table with their targets.

For each scenario (today: host devices; GPU scenarios are added to SCENARIOS
the same way) it measures
  - start-up: from spawning `devlet run` to the simulated kubelet receiving
    Register (median over several runs),
  - Allocate latency p50/p99 over N sequential calls, 1 ID each, from one
    grpcio channel,
  - devlet's peak RSS (VmHWM) after those calls,
and once, the same client's round trip to an empty grpcio server in another
process (the floor that devlet's Allocate is compared with).

Figures are reported, never asserted: the exit status is 0 unless something
broke (devlet missing, a call failing, a timeout).
Usage: bench.py [--calls N] [--starts N]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import grpc  # noqa: E402

from devlet_harness import DEVLET_BIN, Devlet, hostdev_config, make_node, wait_until  # noqa: E402
from kubelet_sim import BUILD_DIR, KubeletSim, PluginClient, pb, unix_target  # noqa: E402

TARGET_STARTUP_MS = 20.0
TARGET_ALLOC_RATIO = 1.5
TARGET_RSS_KIB = 4 * 1024
WAIT = 15.0


# ---------------------------------------------------------------- scenarios

@dataclass
class Scenario:
    """What devlet serves in one benchmark: make(root) prepares the host
    (device nodes, mock libraries) and returns the config; resource and ids
    say what Allocate asks for; env is added to devlet's environment."""
    name: str
    make: Callable[[str], dict]
    resource: str
    alloc_ids: List[str]
    env: Dict[str, str] = field(default_factory=dict)


def hostdev_scenario(root: str) -> dict:
    dev = os.path.join(root, "dev")
    make_node(os.path.join(dev, "fuse"))
    for i in range(2):
        make_node(os.path.join(dev, f"ttyUSB{i}"))
    return hostdev_config(domain="devlet.io", devices=[
        {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": f"{dev}/fuse"}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": f"{dev}/ttyUSB*"}]}]},
    ])


SCENARIOS = [
    Scenario("hostdev (fuse x10, 2 ttyUSB)", hostdev_scenario, "devlet.io/fuse", ["fuse-0"]),
]


# ---------------------------------------------------------------- measuring

def percentile(values: List[float], p: float) -> float:
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def time_allocate(socket_path: str, ids: List[str], calls: int, warmup: int = 200) -> List[float]:
    """Seconds per Allocate round trip, sequential, on one channel."""
    client = PluginClient(socket_path)
    try:
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
        call = client._allocate
        for _ in range(warmup):
            call(req, timeout=10)
        out = []
        clock = time.perf_counter
        for _ in range(calls):
            t = clock()
            call(req, timeout=10)
            out.append(clock() - t)
        return out
    finally:
        client.close()


class Workspace:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="devlet-bench-", dir="/tmp")
        self.plugins = os.path.join(self.root, "plugins")
        os.mkdir(self.plugins)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def measure_scenario(sc: Scenario, calls: int, starts: int) -> dict:
    ws = Workspace()
    sim = KubeletSim(ws.plugins)
    sim.start()
    running: Optional[Devlet] = None
    try:
        cfg = sc.make(ws.root)
        startup = []
        for i in range(starts):
            d = Devlet(ws.plugins, os.path.join(ws.root, f"work{i}"), cfg, env=sc.env)
            d.start()
            reg = sim.wait_for_registration(sc.resource, count=i + 1, timeout=WAIT)
            startup.append(reg.time - d.start_time)
            if i < starts - 1:
                if d.terminate() != 0:
                    raise RuntimeError(f"devlet exited with code {d.returncode}\n{d.log_text()}")
            else:
                running = d
        sim.wait_for_snapshot(sc.resource, timeout=WAIT)
        lat = time_allocate(running.socket_path(sc.resource), sc.alloc_ids, calls)
        hwm = running.vm_hwm_kib()
        if running.terminate() != 0:
            raise RuntimeError(f"devlet exited with code {running.returncode}\n{running.log_text()}")
        running = None
        return {"startup": startup, "lat": lat, "hwm_kib": hwm}
    finally:
        if running is not None:
            running.kill()
        sim.stop()
        ws.close()


def serve_floor(socket_path: str):
    """The floor: a grpcio server answering Allocate with an empty response.
    Runs until stdin closes."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", {
        "Allocate": grpc.unary_unary_rpc_method_handler(
            lambda req, ctx: pb.AllocateResponse(),
            request_deserializer=pb.AllocateRequest.FromString,
            response_serializer=pb.AllocateResponse.SerializeToString)}),))
    server.add_insecure_port(unix_target(socket_path))
    server.start()
    sys.stdin.read()
    server.stop(None).wait(5)


def measure_floor(calls: int) -> List[float]:
    ws = Workspace()
    sock = os.path.join(ws.root, "floor.sock")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-floor", sock],
                            stdin=subprocess.PIPE)
    try:
        wait_until(lambda: os.path.exists(sock) or proc.poll() is not None, WAIT, "the floor server")
        if proc.poll() is not None:
            raise RuntimeError("the floor server exited")
        return time_allocate(sock, ["fuse-0"], calls)
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        ws.close()


# ---------------------------------------------------------------- report

@dataclass
class Row:
    what: str
    measured: str
    target: str
    ok: Optional[bool]  # None: no target


def us(s: float) -> str:
    return f"{s * 1e6:.0f} us"


def rows_for(sc: Scenario, m: dict, floor: List[float], calls: int) -> List[Row]:
    med = statistics.median(m["startup"]) * 1000
    p50, p99 = percentile(m["lat"], 50), percentile(m["lat"], 99)
    f50, f99 = percentile(floor, 50), percentile(floor, 99)
    return [
        Row(f"start -> registered (median of {len(m['startup'])}; "
            f"min {min(m['startup']) * 1000:.1f}, max {max(m['startup']) * 1000:.1f} ms)",
            f"{med:.1f} ms", f"<= {TARGET_STARTUP_MS:.0f} ms", med <= TARGET_STARTUP_MS),
        Row(f"Allocate p50 ({calls} calls, 1 ID)", us(p50),
            f"<= {TARGET_ALLOC_RATIO}x floor = {us(f50 * TARGET_ALLOC_RATIO)}", p50 <= f50 * TARGET_ALLOC_RATIO),
        Row(f"Allocate p99 ({calls} calls, 1 ID)", us(p99),
            f"<= {TARGET_ALLOC_RATIO}x floor = {us(f99 * TARGET_ALLOC_RATIO)}", p99 <= f99 * TARGET_ALLOC_RATIO),
        Row("peak RSS (VmHWM) after the calls", f"{m['hwm_kib'] / 1024:.2f} MiB",
            f"< {TARGET_RSS_KIB / 1024:.0f} MiB", m["hwm_kib"] < TARGET_RSS_KIB),
    ]


def print_table(title: str, rows: List[Row]):
    w0 = max(len(r.what) for r in rows)
    w1 = max(max(len(r.measured) for r in rows), len("measured"))
    w2 = max(max(len(r.target) for r in rows), len("target"))
    print(f"\n{title}")
    print(f"  {'':<{w0}}  {'measured':>{w1}}  {'target':<{w2}}  result")
    for r in rows:
        print(f"  {r.what:<{w0}}  {r.measured:>{w1}}  {r.target:<{w2}}  {'-' if r.ok is None else 'PASS' if r.ok else 'MISS'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="devlet benchmark")
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--starts", type=int, default=7)
    ap.add_argument("--serve-floor", metavar="SOCKET", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_floor:
        serve_floor(args.serve_floor)
        return 0
    if not os.path.exists(DEVLET_BIN):
        print(f"bench: {DEVLET_BIN} is missing: run `make`", file=sys.stderr)
        return 1

    print(f"devlet bench: {DEVLET_BIN} ({BUILD_DIR}), {os.cpu_count()} CPUs, "
          f"grpcio {grpc.__version__} client")
    floor = measure_floor(args.calls)
    print_table("floor: grpcio client -> empty grpcio server (other process)", [
        Row(f"round trip p50 ({args.calls} calls)", us(percentile(floor, 50)), "-", None),
        Row(f"round trip p99 ({args.calls} calls)", us(percentile(floor, 99)), "-", None),
    ])
    misses = 0
    for sc in SCENARIOS:
        m = measure_scenario(sc, args.calls, args.starts)
        rows = rows_for(sc, m, floor, args.calls)
        misses += sum(r.ok is False for r in rows)
        print_table(f"devlet: {sc.name}", rows)
    print(f"\n{misses} target(s) missed" if misses else "\nall targets met")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # something broke: say what, exit non-zero
        print(f"bench: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
