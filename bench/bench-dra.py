#!/usr/bin/python3
"""`make bench`: DRA's NodePrepareResources for gpu.nvidia.com claims, as the
kubelet calls it (grpcio), on the mock NVML's 8 V100s, against the tests'
fake API server over TLS (the claim read from it at each prepare):

  - a whole GPU (no configuration),
  - an MPS claim (an opaque GpuConfig, sharing.strategy MPS, with an active
    thread percentage and a pinned memory limit): prepare asks devlet's MPS
    sidecar (`devlet mps-control-daemon`, on the same host) for the claim's
    control daemon and waits until it is up.  The control program is the
    tests' stand-in (tests/tools/nvidia-cuda-mps-control, a shell script):
    the figure holds devlet's and its sidecar's part and the stand-in's
    start, not a real nvidia-cuda-mps-control's.

Claims are prepared one at a time and unprepared before the next, spread
over the 8 GPUs; devlet's own time (its `answered ... ms=` lines, from the
call's arrival to its answer) and the kubelet side's round trip, p50 and
p99.  The claim's read is throttled by --kube-api-qps (client-go's 5/s by
default): the bench lifts it, as it measures devlet, not the limit.
Figures are reported, never asserted.
Usage: bench-dra.py [--claims N]
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from bench import percentile  # noqa: E402
from devlet_harness import DEVLET_BIN, Devlet, devlet_env, wait_until  # noqa: E402
from fake_apiserver import ApiServer, b64, make_certs, write_kubeconfig  # noqa: E402
from mock_gpus import MockNode  # noqa: E402
from test_dra import DraKubelet  # noqa: E402

NODE = "node-a"
DRIVER = "gpu.nvidia.com"
TARGET_WHOLE_P99_MS = 10.0
QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
ANSWERED = re.compile(r"answered method=NodePrepareResources driver=gpu\.nvidia\.com claims=1 ms=([\d.]+)")
MPS = {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {
        "defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi"}}}}}


def measure(claims):
    root = tempfile.mkdtemp(prefix="devlet-bench-dra-", dir="/tmp")
    api = sidecar = d = k = None
    try:
        for sub in ("plugins", "work", "run", "certs"):
            os.mkdir(os.path.join(root, sub))
        certs = make_certs(pathlib.Path(root, "certs"))
        api = ApiServer(certs)
        kc = write_kubeconfig(pathlib.Path(root, "kubeconfig"), api.url,
                              f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                              "    token: bench")
        node = MockNode(os.path.join(root, "run", "nvml.yaml"), "v100-dgx1")
        bindir = pathlib.Path(root, "driver", "usr", "bin")
        bindir.mkdir(parents=True)
        shutil.copy(os.path.join(REPO, "tests", "tools", "nvidia-cuda-mps-control"),
                    bindir / "nvidia-cuda-mps-control")
        mps = os.path.join(root, "run", "mps")
        flags = ["--mps-root", mps, "--nvidia-driver-root", os.path.join(root, "driver"),
                 "--driver-root-ctr-path", "/nowhere"]
        reg, plug = os.path.join(root, "reg"), os.path.join(root, "draplug")
        d = Devlet(os.path.join(root, "plugins"), os.path.join(root, "work", "devlet"), None,
                   env=node.env(**QUIET), args=[
                       "--backends", "nvidia", "--metrics-address", "", "--kubeconfig", str(kc),
                       "--node-name", NODE, "--kubelet-registrar-directory-path", reg,
                       "--kubelet-plugins-directory-path", plug,
                       "--cdi-spec-dir", os.path.join(root, "cdi"),
                       "--dra-resources", "nvidia.com/gpu", "--kube-api-qps", "1000",
                       "--kube-api-burst", "1000", *flags])
        d.start()
        log = open(os.path.join(root, "work", "sidecar.log"), "ab")
        sidecar = subprocess.Popen([DEVLET_BIN, "mps-control-daemon", *flags],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=devlet_env({**node.env(**QUIET), "DEVLET_MPS_SHM": "dir"}),
                                   start_new_session=True)
        log.close()
        dra_socket = os.path.join(plug, DRIVER, "dra.sock")
        reg_socket = os.path.join(reg, f"{DRIVER}-reg.sock")
        wait_until(lambda: os.path.exists(dra_socket) and os.path.exists(reg_socket), 10,
                   "the DRA sockets")
        k = DraKubelet(reg_socket, dra_socket)
        out = {}
        for kind, configs in (("whole", None), ("mps", [MPS])):
            seen = len(ANSWERED.findall(d.log_text()))
            trips = []
            for i in range(claims):
                uid = str(uuid.uuid4())
                ref = ("default", uid, f"{kind}-{i}")
                api.put_claim(ref[0], ref[2], uid, [("gpu", DRIVER, NODE, f"gpu-{i % 8}")],
                              config=configs)
                t0 = time.monotonic()
                got = k.prepare([ref], timeout=30)[uid]
                trips.append(time.monotonic() - t0)
                if got.error:
                    raise RuntimeError(f"{kind} claim {i}: {got.error}")
                bad = k.unprepare([ref])[uid]
                if bad:
                    raise RuntimeError(f"{kind} claim {i}: unprepare: {bad}")
            wait_until(lambda: len(ANSWERED.findall(d.log_text())) >= seen + claims, 10,
                       "devlet's answered lines")
            own = [float(x) / 1e3 for x in ANSWERED.findall(d.log_text())[seen:seen + claims]]
            out[kind] = (own, trips)
        return out
    finally:
        if k is not None:
            k.close()
        if d is not None and d.proc is not None and d.proc.poll() is None:
            d.terminate()
        if sidecar is not None:
            sidecar.send_signal(signal.SIGTERM)
            try:
                sidecar.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sidecar.kill()
                sidecar.wait()
            subprocess.run(["pkill", "-KILL", "-s", str(sidecar.pid)], check=False)
        if api is not None:
            api.stop()
        shutil.rmtree(root, ignore_errors=True)


def ms(values, p):
    return f"{percentile(values, p) * 1e3:.2f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=100)
    a = ap.parse_args(argv)
    res = measure(max(a.claims, 1))
    rows = []
    for kind, what, target in (("whole", "a whole GPU", f"target p99 <= {TARGET_WHOLE_P99_MS:g} ms"),
                               ("mps", "an MPS claim (the sidecar's daemon started)", "")):
        own, trips = res[kind]
        rows.append((f"NodePrepareResources in devlet, {what}",
                     f"p50 {ms(own, 50)}, p99 {ms(own, 99)}", target))
        rows.append((f"  the kubelet side's round trip, {what}",
                     f"p50 {ms(trips, 50)}, p99 {ms(trips, 99)}", ""))
    print(f"\nDRA prepare: {a.claims} claims of each kind, one at a time, on 8 mock V100s, "
          f"the fake API server over TLS")
    w = max(len(r[0]) for r in rows)
    for name, value, target in rows:
        print(f"  {name:<{w}}  {value:>28}  {target}")
    print(json.dumps({k: {"p50_ms": percentile(v[0], 50) * 1e3, "p99_ms": percentile(v[0], 99) * 1e3}
                      for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
