"""SIGTERM ends `devlet run` within 2 s whatever its threads are doing.

The metrics collector samples the GPUs on a thread of its own, and stopping
metrics joins that thread; with an NVML call that hangs (the mock's
temperatureStallMs: a driver stuck mid-reset), the join would hold the
shutdown for as long as the call.  A deadline armed at the signal ends the
process instead, after removing the kubelet sockets and logging why."""

import time

from mock_gpus import GPU

STALL_MS = 60000


def test_sigterm_exits_within_2s_while_a_worker_is_stuck(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    n.devices[0]["temperatureStallMs"] = STALL_MS
    n.write()
    d = devlet(args=["--metrics-address", "127.0.0.1:0", "--collect-interval", "100"],
               env=n.env(DP_DISABLE_HEALTHCHECKS="all"))
    kubelet.wait_for_snapshot(GPU)
    # the collector thread is inside the hanging call now
    d.wait_log(r"mock-nvml: nvmlDeviceGetTemperature stalls for 60000 ms", timeout=20)
    start = time.monotonic()
    rc = d.terminate(timeout=10)
    took = time.monotonic() - start
    print(f"SIGTERM to exit: {took:.2f} s")
    assert rc == 0
    assert took < 2.0, f"SIGTERM to exit took {took:.2f} s"
    assert d.own_sockets() == []
    d.wait_log(r"shutdown did not finish within 1500 ms, exiting without waiting for a stuck worker")
