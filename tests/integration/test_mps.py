"""MPS that really runs: `devlet mps-control-daemon` starts one control daemon
per MPS resource (a stand-in nvidia-cuda-mps-control, tests/tools/, under a
fake driver root) with NVIDIA's pipe/log layout and limits, restarts it when
it dies and quits it on SIGTERM; `devlet run` serves the resource (healthy
devices, nvidia.com/mps.capable=true) only while the daemon is ready, and
Allocate hands out NVIDIA's MPS env vars and mounts."""

import os
import shutil
import signal
import subprocess

from devlet_harness import DEVLET_BIN, devlet_env, wait_until
from mock_gpus import GPU

QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
STAND_IN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                        "nvidia-cuda-mps-control")
CONFIG = {"version": "v1", "sharing": {"mps": {"resources": [{"name": GPU, "replicas": 4}]}}}


def labels_of(d):
    path = os.path.join(d.workdir, "gfd")
    if not os.path.exists(path):
        return {}
    return dict(line.split("=", 1) for line in open(path).read().split())


def read(path):
    with open(path) as f:
        return f.read()


def test_mps_control_daemon_supervised_and_served(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    root = os.path.join(dirs.run, "mps")
    driver = os.path.join(dirs.root, "driver")
    os.makedirs(os.path.join(driver, "usr", "bin"))
    shutil.copy(STAND_IN, os.path.join(driver, "usr", "bin", "nvidia-cuda-mps-control"))
    flags = ["--mps-root", root, "--nvidia-driver-root", driver, "--driver-root-ctr-path", "/nowhere"]
    d = devlet(CONFIG, args=flags, env=n.env(**QUIET))
    ids = [f"{u}::{k}" for u in n.uuids() for k in range(4)]

    # no control daemon yet: advertised, but unhealthy, and not MPS-capable
    snap = kubelet.wait_for_snapshot(GPU)
    assert snap.ids() == ids and snap.healthy_ids() == []
    d.wait_log("MPS control daemon not ready, devices unhealthy until it is resource=nvidia.com/gpu")
    wait_until(lambda: labels_of(d).get("nvidia.com/mps.capable") == "false", 10, "mps.capable=false")

    sidecar = subprocess.Popen([DEVLET_BIN, "mps-control-daemon", "--config-file", d.config_path, *flags],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=devlet_env({**n.env(**QUIET), "DEVLET_MPS_SHM": "dir"}))
    try:
        assert kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == ids).ids() == ids
        wait_until(lambda: labels_of(d).get("nvidia.com/mps.capable") == "true", 10, "mps.capable=true")
        pipe = os.path.join(root, "nvidia.com/gpu", "pipe")
        logdir = os.path.join(root, "nvidia.com/gpu", "log")
        # NVIDIA's limits from 4 replicas: 25% of the threads, a quarter of 32 GiB
        assert read(os.path.join(pipe, "thread_percentage")).strip() == "25"
        assert read(os.path.join(pipe, "pinned_mem_limits")).split("\n")[:-1] == [
            f"{i} 8192M" for i in range(8)]
        assert f"CUDA_VISIBLE_DEVICES={','.join(n.uuids())}" in read(os.path.join(logdir, "control.log"))
        assert os.path.isdir(os.path.join(root, "shm"))

        c = kubelet.allocate(GPU, [[ids[5]]]).container_responses[0]
        assert dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": n.uuids()[1],
                                "CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe",
                                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
                                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8192M"}
        assert [(m.host_path, m.container_path) for m in c.mounts] == [
            (pipe, "/mps/nvidia.com/gpu/pipe"), (os.path.join(root, "shm"), "/dev/shm")]

        # the daemon dies: the supervisor starts it again
        pidfile = os.path.join(pipe, "nvidia-cuda-mps-control.pid")
        first = int(read(pidfile))
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: os.path.exists(pidfile) and read(pidfile).strip()
                   and int(read(pidfile)) != first, 15, "a new control daemon")
        wait_until(lambda: read(os.path.join(logdir, "control.log")).count("Startup") == 2, 10,
                   "the second start in control.log")
        wait_until(lambda: os.path.exists(os.path.join(root, "nvidia.com/gpu", ".started")), 10,
                   "the readiness marker again")
        assert kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == ids)

        # SIGTERM: every daemon quits, the marker goes, the resource stops serving
        second = int(read(pidfile))
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=10) == 0
        assert not os.path.exists(pidfile)
        assert not os.path.exists(os.path.join(root, "nvidia.com/gpu", ".started"))
        wait_until(lambda: not os.path.exists(f"/proc/{second}") or
                   read(f"/proc/{second}/stat").split()[2] == "Z", 10, "the daemon gone")
        kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == [])
        wait_until(lambda: labels_of(d).get("nvidia.com/mps.capable") == "false", 10,
                   "mps.capable=false again")
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()
        print(sidecar.stdout.read().decode())
        pidfile = os.path.join(root, "nvidia.com/gpu", "pipe", "nvidia-cuda-mps-control.pid")
        if os.path.exists(pidfile):  # a stand-in daemon left by a failure
            try:
                os.kill(int(read(pidfile)), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass


def test_mps_sidecar_without_mps_idles(node, dirs):
    n = node("v100-dgx1")
    p = subprocess.Popen([DEVLET_BIN, "mps-control-daemon"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=devlet_env(n.env()))
    line = p.stdout.readline().decode()
    assert "sharing strategy is not MPS: no control daemon to run" in line
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0


def test_mps_replicas_beyond_the_servers_clients_are_refused(node, dirs):
    """An MPS server takes 48 clients (16 before compute capability 7.5, as
    NVIDIA counts): more replicas than that are refused, as NVIDIA's."""
    n = node("v100-dgx1")  # 7.0
    cfg = os.path.join(dirs.work, "mps.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n"
                "        replicas: 17\n")
    res = subprocess.run([DEVLET_BIN, "mps-control-daemon", "--config-file", cfg,
                          "--mps-root", os.path.join(dirs.run, "mps")], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=30,
                         env=devlet_env({**n.env(**QUIET), "DEVLET_MPS_SHM": "dir"}))
    assert res.returncode == 1
    assert "invalid MPS configuration: maximum allowed replicas exceeded: 17 > 16" in res.stderr
