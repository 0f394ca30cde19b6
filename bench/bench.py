#!/usr/bin/python3
"""`make bench`: devlet's figures, printed as a table with their targets.

For each scenario in SCENARIOS (host devices; GPUs on the mock NVML: the
DGX-1 V100 profile and a 16-GPU DGX-2 built here) it measures
  - start-up: from spawning `devlet run` to the simulated kubelet receiving
    Register (median over several runs),
  - Allocate latency p50/p99 over N sequential calls, 1 ID each, from one
    grpcio channel,
  - GPUs: GetPreferredAllocation latency p50/p99 over M sequential calls,
    every GPU available, for each size the scenario names,
  - devlet's peak RSS (VmHWM) after those calls,
  - GPUs: health event -> ListAndWatch: an XID 79 appended to the mock's
    file (atomically) for each GPU in turn, timed until the snapshot with
    that GPU Unhealthy arrives; once with the mock's event polling at its
    20 ms (what the tests see), once at 1 ms (MOCK_NVML_EVENT_POLL_MS), so
    that what remains is devlet's own path plus the mock's re-read of its
    file, which is timed apart (write -> the next NVML call of a client in
    this process returns),
and once, the same client's round trip to an empty grpcio server in another
process (the floor that devlet's Allocate and GetPreferredAllocation are
compared with).

Figures are reported, never asserted: the exit status is 0 unless something
broke (devlet missing, a call failing, a timeout).
Usage: bench.py [--calls N] [--starts N] [--preferred-calls N]
"""

import argparse
import ctypes
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import grpc  # noqa: E402

from devlet_harness import DEVLET_BIN, Devlet, hostdev_config, make_node, wait_until  # noqa: E402
from kubelet_sim import BUILD_DIR, KubeletSim, PluginClient, pb, unix_target  # noqa: E402
from mock_gpus import GPU, MOCK_LIB, MockNode  # noqa: E402

TARGET_STARTUP_MS = 20.0
TARGET_ALLOC_RATIO = 1.5
TARGET_RSS_KIB = 4 * 1024
TARGET_HEALTH_MS = 10.0  # "within milliseconds of the event", with the mock polling every 1 ms
WAIT = 15.0
MOCK_POLL_MS = 20  # the mock's nvmlEventSetWait re-checks its file this often by default
MOCK_POLL_FAST_MS = 1


# ---------------------------------------------------------------- scenarios

@dataclass
class Prepared:
    """A host made ready: devlet's config and environment, the IDs
    Allocate asks for, and the mock NVML's node when there are GPUs."""
    config: dict
    alloc_ids: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    node: Optional[MockNode] = None


@dataclass
class Scenario:
    """What devlet serves in one benchmark: make(root) prepares the host
    (device nodes, the mock NVML's file); resource is what is measured;
    preferred lists GetPreferredAllocation sizes (every device available);
    with health, each GPU gets an XID in turn."""
    name: str
    make: Callable[[str], Prepared]
    resource: str
    preferred: List[int] = field(default_factory=list)
    health: bool = False


def hostdev_scenario(root: str) -> Prepared:
    dev = os.path.join(root, "dev")
    make_node(os.path.join(dev, "fuse"))
    for i in range(2):
        make_node(os.path.join(dev, f"ttyUSB{i}"))
    return Prepared(hostdev_config(domain="devlet.io", devices=[
        {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": f"{dev}/fuse"}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": f"{dev}/ttyUSB*"}]}]},
    ]), ["fuse-0"])


def dgx2_node() -> dict:
    """A DGX-2: 16 V100-SXM3-32GB on two baseboards whose 12 NVSwitches are
    one fabric, so every pair of GPUs has 6 NVLinks (nvidia-smi topo -m shows
    NV6 everywhere; the mock models the fabric as 6 switches that every GPU
    reaches once).  PCIe: pairs share a switch, fours an upstream one, each
    baseboard hangs off one CPU (NUMA node)."""
    devices = []
    for i in range(16):
        board = i // 8
        devices.append({
            "uuid": f"GPU-{0xd9c20000 + i:08x}-4a27-8f02-6e1b-{0x5d0c00000000 + i:012x}",
            "name": "Tesla V100-SXM3-32GB",
            "memoryMiB": 32768,
            "pciBusId": f"00000000:{(0x34, 0x36, 0x39, 0x3b, 0x57, 0x59, 0x5c, 0x5e)[i % 8] + 0x80 * board:02x}:00.0",
            "pciDeviceId": 0x1db810de,
            "minor": i,
            "computeCapability": "7.0",
            "numaNode": board,
            "pcieSwitch": f"plx{i // 4}/{i // 2}",
            "hostBridge": f"cpu{board}",
            "nvlink": {"switch": 6},
            "temperatureC": 35,
            "powerMilliwatts": 50000,
        })
    switches = [{"pciBusId": f"00000000:{0xe1 + k:02x}:00.0", "pciDeviceId": 0x1ac110de} for k in range(6)]
    return {"driverVersion": "535.161.08", "cudaDriverVersion": 12020, "nvswitches": switches,
            "devices": devices}


def gpu_scenario(profile: Optional[str] = None, data: Optional[dict] = None):
    def make(root: str) -> Prepared:
        node = MockNode(os.path.join(root, "nvml.yaml"), profile, data)
        return Prepared({"version": "v1"}, node.uuids()[:1], node.env(), node)
    return make


SCENARIOS = [
    Scenario("hostdev (fuse x10, 2 ttyUSB)", hostdev_scenario, "devlet.io/fuse"),
    Scenario("8 GPUs: DGX-1 V100, hybrid cube-mesh (mock NVML)", gpu_scenario("v100-dgx1"), GPU,
             preferred=[4], health=True),
    Scenario("16 GPUs: DGX-2 V100, NVSwitch (mock NVML)", gpu_scenario(data=dgx2_node()), GPU,
             preferred=[4, 8], health=True),
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


def time_preferred(socket_path: str, ids: List[str], size: int, calls: int, warmup: int = 100) -> List[float]:
    """Seconds per GetPreferredAllocation round trip: every ID available,
    nothing required, one container."""
    client = PluginClient(socket_path)
    try:
        req = pb.PreferredAllocationRequest(container_requests=[pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=ids, must_include_deviceIDs=[], allocation_size=size)])
        call = client._preferred
        got = call(req, timeout=10)
        if len(got.container_responses[0].deviceIDs) != size:
            raise RuntimeError(f"GetPreferredAllocation of {size} answered {got}")
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


def time_health(sim: KubeletSim, node: MockNode, resource: str, poll_ms: float) -> List[float]:
    """Seconds from an XID 79 landing in the mock's file (the rename) to the
    ListAndWatch snapshot showing its GPU Unhealthy, for each GPU in turn.
    Each write waits a random part of the mock's polling period first, so
    the writes do not all land at the same point of its cycle (right after
    the poll that delivered the previous event)."""
    rng = random.Random(len(node.devices))
    out = []
    for i, uuid in enumerate(node.uuids()):
        time.sleep(rng.uniform(0, poll_ms / 1000.0))
        node.xid(i, 79)
        t = time.monotonic()
        snap = sim.wait_for_snapshot(resource, lambda s, u=uuid: s.health(u) == "Unhealthy", timeout=WAIT)
        out.append(snap.time - t)
    return out


def time_mock_reread(node: MockNode, rounds: int = 20) -> List[float]:
    """Seconds the mock takes to notice and re-read its file: a client in
    this process rewrites it, then times its next NVML call."""
    saved = os.environ.get("MOCK_NVML_CONFIG")
    os.environ["MOCK_NVML_CONFIG"] = node.path
    lib = ctypes.CDLL(MOCK_LIB)
    try:
        if lib.nvmlInit_v2() != 0:
            raise RuntimeError("the mock NVML did not initialise in the benchmark")
        count = ctypes.c_uint()
        out = []
        for _ in range(rounds):
            node.write()  # same content, new file: the mock re-reads it
            t = time.perf_counter()
            if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or count.value != len(node.devices):
                raise RuntimeError("nvmlDeviceGetCount_v2 failed on the mock")
            out.append(time.perf_counter() - t)
        lib.nvmlShutdown()
        return out
    finally:
        if saved is None:
            del os.environ["MOCK_NVML_CONFIG"]
        else:
            os.environ["MOCK_NVML_CONFIG"] = saved


class Workspace:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="devlet-bench-", dir="/tmp")
        self.plugins = os.path.join(self.root, "plugins")
        os.mkdir(self.plugins)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def stop(d: Devlet):
    if d.terminate() != 0:
        raise RuntimeError(f"devlet exited with code {d.returncode}\n{d.log_text()}")


def measure_scenario(sc: Scenario, calls: int, starts: int, preferred_calls: int) -> dict:
    ws = Workspace()
    sim = KubeletSim(ws.plugins)
    sim.start()
    running: Optional[Devlet] = None
    try:
        prep = sc.make(ws.root)
        startup = []
        for i in range(starts):
            d = Devlet(ws.plugins, os.path.join(ws.root, f"work{i}"), prep.config, env=prep.env)
            d.start()
            reg = sim.wait_for_registration(sc.resource, count=i + 1, timeout=WAIT)
            startup.append(reg.time - d.start_time)
            if i < starts - 1:
                stop(d)
            else:
                running = d
        ids = sim.wait_for_snapshot(sc.resource, timeout=WAIT).ids()
        sock = running.socket_path(sc.resource)
        m = {"startup": startup, "lat": time_allocate(sock, prep.alloc_ids, calls)}
        m["preferred"] = [(size, time_preferred(sock, ids, size, preferred_calls)) for size in sc.preferred]
        m["hwm_kib"] = running.vm_hwm_kib()
        m["gpus"] = len(ids)
        if sc.health:
            m["health"] = time_health(sim, prep.node, sc.resource, MOCK_POLL_MS)
        stop(running)
        running = None
        if sc.health:
            # again with the mock polling its file every 1 ms, on a fresh
            # event log (the file's events at start-up would happen again
            # in the new process)
            prep.node.data["events"] = []
            prep.node.write()
            running = Devlet(ws.plugins, os.path.join(ws.root, "work-fast"), prep.config,
                             env={**prep.env, "MOCK_NVML_EVENT_POLL_MS": str(MOCK_POLL_FAST_MS)})
            running.start()
            sim.wait_for_registration(sc.resource, count=starts + 1, timeout=WAIT)
            sim.wait_for_snapshot(sc.resource, lambda s: len(s.healthy_ids()) == len(ids), timeout=WAIT)
            m["health_fast"] = time_health(sim, prep.node, sc.resource, MOCK_POLL_FAST_MS)
            stop(running)
            running = None
            m["reread"] = time_mock_reread(prep.node)
        return m
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


def ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"


def vs_floor(what: str, lat: List[float], floor: List[float]) -> List[Row]:
    rows = []
    for p in (50, 99):
        v, f = percentile(lat, p), percentile(floor, p)
        rows.append(Row(f"{what} p{p}", us(v), f"<= {TARGET_ALLOC_RATIO}x floor = {us(f * TARGET_ALLOC_RATIO)}",
                        v <= f * TARGET_ALLOC_RATIO))
    return rows


def rows_for(sc: Scenario, m: dict, floor: List[float], calls: int) -> List[Row]:
    med = statistics.median(m["startup"]) * 1000
    rows = [
        Row(f"start -> registered (median of {len(m['startup'])}; "
            f"min {min(m['startup']) * 1000:.1f}, max {max(m['startup']) * 1000:.1f} ms)",
            f"{med:.1f} ms", f"<= {TARGET_STARTUP_MS:.0f} ms", med <= TARGET_STARTUP_MS),
    ]
    rows += vs_floor(f"Allocate ({calls} calls, 1 ID)", m["lat"], floor)
    for size, lat in m["preferred"]:
        rows += vs_floor(f"GetPreferredAllocation ({len(lat)} calls, {size} of {m['gpus']})", lat, floor)
    rows.append(Row("peak RSS (VmHWM) after the calls" + (" (mock NVML included)" if sc.health else ""),
                    f"{m['hwm_kib'] / 1024:.2f} MiB", f"< {TARGET_RSS_KIB / 1024:.0f} MiB",
                    m["hwm_kib"] < TARGET_RSS_KIB))
    return rows


def health_rows(results: List[Tuple[Scenario, dict]]) -> List[Row]:
    """Health event -> ListAndWatch, every GPU scenario's events together."""
    slow = [x for _, m in results for x in m.get("health", [])]
    fast = [x for _, m in results for x in m.get("health_fast", [])]
    if not slow:
        return []
    n = " + ".join(f"{len(m['health'])}" for _, m in results if "health" in m)
    reread = [x for _, m in results for x in m.get("reread", [])]
    f50 = statistics.median(fast)
    # an upper bound: the poll wait (0 to 1 ms) stays in
    own = f50 - statistics.median(reread)
    return [
        Row(f"XID -> Unhealthy, mock polling every {MOCK_POLL_MS} ms (as in the tests): median of {n} events "
            f"(p90 {ms(percentile(slow, 90))}, max {ms(max(slow))})", ms(statistics.median(slow)), "-", None),
        Row(f"XID -> Unhealthy, mock polling every {MOCK_POLL_FAST_MS} ms: median of {n} events "
            f"(p90 {ms(percentile(fast, 90))}, max {ms(max(fast))})",
            ms(f50), f"<= {TARGET_HEALTH_MS:.0f} ms", f50 <= TARGET_HEALTH_MS),
        Row(f"  of which the mock: polling (~{MOCK_POLL_FAST_MS / 2:.1f} ms on average) and re-reading "
            f"its file (median of {len(reread)})", ms(statistics.median(reread)) + " + poll", "-", None),
        Row("  so devlet's own path (NVML event -> thread -> loop -> gRPC -> client) takes at most",
            ms(max(own, 0.0)), "-", None),
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
    ap.add_argument("--preferred-calls", type=int, default=2000)
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
    results = []
    for sc in SCENARIOS:
        m = measure_scenario(sc, args.calls, args.starts, args.preferred_calls)
        results.append((sc, m))
        rows = rows_for(sc, m, floor, args.calls)
        misses += sum(r.ok is False for r in rows)
        print_table(f"devlet: {sc.name}", rows)
    rows = health_rows(results)
    if rows:
        misses += sum(r.ok is False for r in rows)
        print_table("devlet: GPU health event (XID appended to the mock's file) -> ListAndWatch", rows)
    print(f"\n{misses} target(s) missed" if misses else "\nall targets met")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # something broke: say what, exit non-zero
        print(f"bench: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
