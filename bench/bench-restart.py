#!/usr/bin/python3
"""`make bench`: a kubelet restart -> every resource registered again.

devlet serves 8 mock H100 GPUs (nvidia.com/gpu) and 3 host-device
resources.  The simulated kubelet restarts N times (at least 50) the way a
kubelet does: it stops, deletes every file in the plugin directory (devlet's
sockets included) and serves a new kubelet.sock.  For each restart:
  - total: from the new kubelet starting (after the directory was wiped) to
    the last of the 4 Register calls arriving at it,
  - kubelet start: the simulator's own share of that (grpcio creating and
    starting its server), which no plugin can beat,
  - after the kubelet listens: total minus kubelet start, i.e. from the new
    kubelet.sock accepting connections to the last Register arriving, and
    to the first (the simulator's Register handlers share one Python
    interpreter: each dials back before answering, so later arrivals wait
    for the GIL),
  - devlet's own: from devlet seeing the new kubelet.sock to its last
    Register call started (devlet's debug line `seen_to_sent_us`; "n/a" for
    a devlet that does not log it).
Figures are reported, never asserted.
Usage: bench-restart.py [--restarts N]
"""

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from bench import percentile  # noqa: E402
from devlet_harness import Devlet, hostdev_config, make_node  # noqa: E402
from kubelet_sim import KubeletSim  # noqa: E402
from mock_gpus import GPU, MockNode  # noqa: E402

WAIT = 15.0
HOST_RESOURCES = ["devlet.io/fuse", "devlet.io/serial", "devlet.io/kvm"]
TARGET_P50_MS = 3.0
TARGET_P99_MS = 10.0
OWN = re.compile(r"registering again after a kubelet restart resources=\d+ seen_to_sent_us=(\d+)")


def prepare(root):
    dev = os.path.join(root, "dev")
    make_node(os.path.join(dev, "fuse"))
    make_node(os.path.join(dev, "kvm"))
    for i in range(2):
        make_node(os.path.join(dev, f"ttyUSB{i}"))
    config = hostdev_config(domain="devlet.io", devices=[
        {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": f"{dev}/fuse"}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": f"{dev}/ttyUSB*"}]}]},
        {"name": "kvm", "groups": [{"count": 4, "paths": [{"path": f"{dev}/kvm"}]}]},
    ])
    node = MockNode(os.path.join(root, "nvml.yaml"), "h100-8x-nvswitch")
    return config, node


def measure(restarts):
    root = tempfile.mkdtemp(prefix="devlet-bench-restart-", dir="/tmp")
    plugins = os.path.join(root, "plugins")
    os.mkdir(plugins)
    sim = KubeletSim(plugins)
    sim.start()
    d = None
    resources = [GPU] + HOST_RESOURCES
    try:
        config, node = prepare(root)
        d = Devlet(plugins, os.path.join(root, "work"), config, env=node.env(),
                   args=["--verbosity", "1"])
        d.start()
        for r in resources:
            sim.wait_for_registration(r, timeout=WAIT)
        total, kubelet_start, first = [], [], []
        for _ in range(restarts):
            sim.stop()
            for name in os.listdir(plugins):
                os.unlink(os.path.join(plugins, name))
            t0 = time.monotonic()
            sim.start()
            kubelet_start.append(time.monotonic() - t0)
            regs = [sim.wait_for_registration(r, generation=sim.generation, timeout=WAIT)
                    for r in resources]
            total.append(max(reg.time for reg in regs) - t0)
            first.append(min(reg.time for reg in regs) - t0)
        own = [int(m.group(1)) / 1e6 for m in OWN.finditer(d.log_text())]
        if d.terminate() != 0:
            raise RuntimeError(f"devlet exited with code {d.returncode}\n{d.log_text()}")
        d = None
        return total, kubelet_start, first, own
    finally:
        if d is not None:
            d.kill()
        sim.stop()
        shutil.rmtree(root, ignore_errors=True)


def ms(values, p):
    return f"{percentile(values, p) * 1e3:.2f} ms" if values else "n/a"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--restarts", type=int, default=60)
    a = ap.parse_args(argv)
    total, kubelet_start, first, own = measure(max(a.restarts, 1))
    listening = [t - k for t, k in zip(total, kubelet_start)]
    first_listening = [f - k for f, k in zip(first, kubelet_start)]
    rows = [
        ("kubelet restart -> 4 resources registered, p50", ms(total, 50), f"<= {TARGET_P50_MS:g} ms"),
        ("kubelet restart -> 4 resources registered, p99", ms(total, 99), f"<= {TARGET_P99_MS:g} ms"),
        ("  of which the kubelet simulator's start, p50", ms(kubelet_start, 50), ""),
        ("  after the kubelet listens -> 4 registered, p50", ms(listening, 50), ""),
        ("  after the kubelet listens -> 4 registered, p99", ms(listening, 99), ""),
        ("  after the kubelet listens -> first Register arrives, p50", ms(first_listening, 50), ""),
        ("  devlet's own (socket seen -> Register sent), p50", ms(own, 50), ""),
        ("  devlet's own (socket seen -> Register sent), p99", ms(own, 99), ""),
    ]
    print(f"\nkubelet restarts: {len(total)} with 8 mock H100 GPUs and 3 host-device resources "
          f"(mean {statistics.mean(total) * 1e3:.2f} ms)")
    w = max(len(r[0]) for r in rows)
    for name, value, target in rows:
        print(f"  {name:<{w}}  {value:>10}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
