"""gpu.nvidia.com claims written for NVIDIA's DRA driver, unchanged: their
opaque GpuConfig / MigDeviceConfig (resource.nvidia.com/v1beta1) through
devlet's DRA driver on the mock NVML's 8 V100s, against the fake API server
and the kubelet's DRA calls (grpcio).

Time-slicing runs nvidia-smi compute-policy, a stand-in under a fake driver
root that logs its arguments; MPS per claim runs through devlet's MPS
sidecar (`devlet mps-control-daemon`) and the stand-in control program of
tests/tools, as the MPS tests do.  A wrong config is refused with the
field's path, the message the kubelet puts into the pod's events."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import uuid
from types import SimpleNamespace

import pytest

from devlet_harness import DEVLET_BIN, SANITIZER_ERRORS, devlet_env, wait_until
from fake_apiserver import b64, write_kubeconfig
from test_dra import DraKubelet, claim_ref

NODE = "node-a"
DRIVER = "gpu.nvidia.com"
KIND = f"k8s.{DRIVER}/claim"
API = "resource.nvidia.com/v1beta1"
TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"
QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}

SMI = """#!/bin/sh
# nvidia-smi's stand-in: logs its arguments; a GPU named in refuse is "not supported"
echo "$@" >> "$(dirname "$0")/smi.log"
case " $* " in *" $(cat "$(dirname "$0")/refuse" 2>/dev/null) "*)
    echo "Setting compute policy is not supported for GPU $3"; exit 3 ;; esac
exit 0
"""


@pytest.fixture
def gpus(dirs, api, certs, devlet, node):
    """devlet with nvidia.com/gpu through DRA on the mock V100s, a fake
    driver root (nvidia-smi and nvidia-cuda-mps-control stand-ins) and an
    MPS root; start() returns the namespace."""
    n = node("v100-dgx1")
    kc = write_kubeconfig(pathlib.Path(dirs.work, "kubeconfig"), api.url,
                          f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                          "    token: dra-token")
    driver = pathlib.Path(dirs.root, "driver")
    (driver / "usr" / "bin").mkdir(parents=True)
    smi = driver / "usr" / "bin" / "nvidia-smi"
    smi.write_text(SMI)
    smi.chmod(0o755)
    shutil.copy(TOOLS / "nvidia-cuda-mps-control", driver / "usr" / "bin" / "nvidia-cuda-mps-control")
    ns = SimpleNamespace(api=api, node=n, dirs=dirs, driver=str(driver),
                         smi_log=driver / "usr" / "bin" / "smi.log",
                         refuse=driver / "usr" / "bin" / "refuse",
                         mps=os.path.join(dirs.run, "mps"),
                         registry=os.path.join(dirs.root, "reg"),
                         plugins=os.path.join(dirs.root, "draplug"),
                         cdi=os.path.join(dirs.root, "cdi"), sidecar=None)
    ns.flags = ["--mps-root", ns.mps, "--nvidia-driver-root", ns.driver,
                "--driver-root-ctr-path", "/nowhere"]
    ns.dra_socket = os.path.join(ns.plugins, DRIVER, "dra.sock")
    ns.reg_socket = os.path.join(ns.registry, f"{DRIVER}-reg.sock")

    def start(extra=(), env=QUIET):
        ns.d = devlet(None, env=n.env(**env), args=[
            "--backends", "nvidia", "--metrics-address", "", "--kubeconfig", str(kc),
            "--node-name", NODE, "--kubelet-registrar-directory-path", ns.registry,
            "--kubelet-plugins-directory-path", ns.plugins, "--cdi-spec-dir", ns.cdi,
            "--dra-resources", "nvidia.com/gpu", *ns.flags, *extra])
        wait_until(lambda: os.path.exists(ns.dra_socket) and os.path.exists(ns.reg_socket),
                   10, "the DRA sockets")
        ns.k = DraKubelet(ns.reg_socket, ns.dra_socket)
        return ns

    def sidecar():
        log = open(os.path.join(dirs.work, "sidecar.log"), "ab")
        ns.sidecar = subprocess.Popen([DEVLET_BIN, "mps-control-daemon", *ns.flags],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      env=devlet_env({**n.env(**QUIET), "DEVLET_MPS_SHM": "dir"}),
                                      start_new_session=True)
        log.close()
        return ns.sidecar

    ns.start, ns.start_sidecar = start, sidecar
    ns.spec = lambda uid: os.path.join(ns.cdi, f"k8s.{DRIVER}-claim_{uid}.json")
    yield ns
    if getattr(ns, "k", None):
        ns.k.close()
    if ns.sidecar:
        if ns.sidecar.poll() is None:
            ns.sidecar.send_signal(signal.SIGTERM)
            try:
                ns.sidecar.wait(timeout=10)
            except subprocess.TimeoutExpired:
                ns.sidecar.kill()
                ns.sidecar.wait()
        # whatever the session left (a failed test's stand-in daemons)
        subprocess.run(["pkill", "-KILL", "-s", str(ns.sidecar.pid)], check=False)
        with open(os.path.join(dirs.work, "sidecar.log"), errors="replace") as f:
            text = f.read()
        print(text)
        assert not any(m in text for m in SANITIZER_ERRORS), text


def gpu_config(sharing, kind="GpuConfig"):
    return {"apiVersion": API, "kind": kind, "sharing": sharing}


def config(params, source="FromClaim", requests=None, driver=DRIVER):
    c = {"source": source, "opaque": {"driver": driver, "parameters": params}}
    if requests is not None:
        c["requests"] = requests
    return c


def put(s, devices, configs, request="gpu"):
    ref = claim_ref("shared")
    s.api.put_claim(ref[0], ref[2], ref[1], [(request, DRIVER, NODE, d) for d in devices],
                    config=configs)
    return ref


def smi_calls(s):
    return s.smi_log.read_text().splitlines() if s.smi_log.exists() else []


def test_time_slicing_sets_each_gpus_interval(gpus):
    s = gpus.start()
    uuids = s.node.uuids()
    # the class says Short, the claim Long: the claim's comes last and wins
    ref = put(s, ["gpu-0", "gpu-3"], [
        config(gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}),
               source="FromClass"),
        config(gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
               requests=["gpu"]),
    ])
    got = s.k.prepare([ref])[ref[1]]
    assert got.error == "", got.error
    assert smi_calls(s) == [f"compute-policy -i {uuids[0]} --set-timeslice 3",
                            f"compute-policy -i {uuids[3]} --set-timeslice 3"]
    s.d.wait_log(f"time-slice applied claim_uid={ref[1]} device={uuids[3]} interval=3")
    # nothing for the containers: no CDI device of the config's
    assert [list(d.cdi_device_ids) for d in got.devices][0] == [f"{KIND}={ref[1]}-gpu-0"]
    assert s.k.unprepare([ref]) == {ref[1]: ""}


def test_time_slicing_a_gpu_refuses_is_said_and_prepared(gpus):
    s = gpus.start()
    uuids = s.node.uuids()
    s.refuse.write_text(uuids[1])
    ref = put(s, ["gpu-1"], [config(gpu_config({"strategy": "TimeSlicing"}))])
    assert s.k.prepare([ref])[ref[1]].error == ""
    assert smi_calls(s) == [f"compute-policy -i {uuids[1]} --set-timeslice 0"]
    s.d.wait_log(f"time-slice not applied claim_uid={ref[1]} device={uuids[1]} interval=0 "
                 f"reason=\"Setting compute policy is not supported for GPU {uuids[1]}\"")


def test_mps_per_claim_runs_a_daemon_with_the_claims_limits(gpus):
    s = gpus.start()
    sc = s.start_sidecar()
    uuids = s.node.uuids()
    ref = put(s, ["gpu-2", "gpu-5"], [config(gpu_config({
        "strategy": "MPS", "mpsConfig": {
            "defaultActiveThreadPercentage": 40, "defaultPinnedDeviceMemoryLimit": "10Gi",
            "defaultPerDevicePinnedMemoryLimit": {"1": "5Gi"}}}))])
    got = s.k.prepare([ref], timeout=30)[ref[1]]
    assert got.error == "", got.error
    uid = ref[1]
    home = os.path.join(s.mps, f"claim-{uid}")
    pipe, logdir = os.path.join(home, "pipe"), os.path.join(home, "log")
    # the daemon on the claim's GPUs, with its limits, before prepare answered
    control = open(os.path.join(logdir, "control.log")).read()
    assert f"CUDA_VISIBLE_DEVICES={uuids[2]},{uuids[5]}" in control
    assert open(os.path.join(pipe, "thread_percentage")).read().strip() == "40"
    assert open(os.path.join(pipe, "pinned_mem_limits")).read().splitlines() == \
        ["0 10240M", "1 5120M"]
    # the containers: the claim's pipe directory and the shared shm
    ids = [list(d.cdi_device_ids) for d in got.devices]
    assert ids[0] == [f"{KIND}={uid}-gpu-2", f"{KIND}={uid}-config-0"], ids
    with open(s.spec(uid)) as f:
        devs = {d["name"]: d["containerEdits"] for d in json.load(f)["devices"]}
    edits = devs[f"{uid}-config-0"]
    assert edits["env"] == [f"CUDA_MPS_PIPE_DIRECTORY=/mps/claim-{uid}/pipe"]
    assert [(m["hostPath"], m["containerPath"]) for m in edits["mounts"]] == [
        (pipe, f"/mps/claim-{uid}/pipe"), (os.path.join(s.mps, "shm"), "/dev/shm")]

    # unprepared: the request goes, the daemon quits, its directory goes
    pid = int(open(os.path.join(pipe, "nvidia-cuda-mps-control.pid")).read())
    assert s.k.unprepare([ref]) == {uid: ""}
    assert not os.path.exists(os.path.join(s.mps, "claims", f"{uid}.json"))
    wait_until(lambda: not os.path.exists(home), 10, "the claim's MPS directory gone")
    wait_until(lambda: not os.path.exists(f"/proc/{pid}") or
               open(f"/proc/{pid}/stat").read().split()[2] == "Z", 10, "the daemon gone")
    assert sc.poll() is None


def test_mps_without_the_sidecar_is_refused_in_time(gpus):
    s = gpus.start()
    ref = put(s, ["gpu-0"], [config(gpu_config({"strategy": "MPS"}))])
    got = s.k.prepare([ref], timeout=40)[ref[1]]
    assert "MPS control daemon was not ready within 20 s" in got.error, got.error
    assert "mps-control-daemon" in got.error
    # nothing left asking for a daemon
    assert not os.path.exists(os.path.join(s.mps, "claims", f"{ref[1]}.json"))
    assert not os.path.exists(s.spec(ref[1]))


BAD = [
    (gpu_config({"strategy": "Sliced"}),
     ".sharing.strategy: unknown GPU sharing strategy \"Sliced\" (TimeSlicing or MPS)"),
    (gpu_config({"strategy": "Fabric"}), ".sharing.strategy: the Fabric strategy is not enabled"),
    (gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}}),
     ".sharing.timeSlicingConfig.interval: unknown time-slice interval \"Forever\""),
    (gpu_config({"strategy": "TimeSlicing", "mpsConfig": {}}),
     ".sharing.mpsConfig: cannot be used with the TimeSlicing strategy"),
    (gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}}),
     "active thread percentage must not be greater than 100"),
    (gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": -1}}),
     "active thread percentage must not be negative"),
    (gpu_config({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "ten gigs"}}),
     ".sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: not a quantity (such as 10Gi)"),
    (gpu_config({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "512Ki"}}),
     "512Ki is below 1Mi"),
    (gpu_config({"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"3": "1Gi"}}}),
     ".defaultPerDevicePinnedMemoryLimit.3: invalid device index: 3 (the config applies to 1 devices)"),
    (gpu_config({"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"GPU-x": "1Gi"}}}),
     ".defaultPerDevicePinnedMemoryLimit.GPU-x: invalid device"),
    (gpu_config({"strategy": "TimeSlicing", "timeSlicingConfg": {}}),
     ".sharing.timeSlicingConfg: unknown field"),
    ({"apiVersion": "resource.nvidia.com/v1alpha1", "kind": "GpuConfig"},
     ".apiVersion: \"resource.nvidia.com/v1alpha1\", not resource.nvidia.com/v1beta1"),
    ({"apiVersion": API, "kind": "ComputeDomainChannelConfig"},
     ".kind: \"ComputeDomainChannelConfig\" is not served by devlet"),
    (gpu_config({"strategy": "MPS"}, kind="MigDeviceConfig"),
     ".kind: a MigDeviceConfig cannot configure GPU"),
    ("not an object", "parameters: not an object"),
]


@pytest.mark.parametrize("params,message", BAD, ids=[m[:40] for _, m in BAD])
def test_a_wrong_config_is_refused_with_the_fields_path(gpus, params, message):
    s = gpus.start()
    ref = put(s, ["gpu-0"], [config(gpu_config({"strategy": "TimeSlicing"}), source="FromClass"),
                             config(params, requests=["gpu"])])
    got = s.k.prepare([ref])[ref[1]]
    assert got.error.startswith(f"claim default/{ref[2]}: the claim's config[0]: "), got.error
    assert message in got.error, got.error
    assert not got.devices and not os.path.exists(s.spec(ref[1]))
    assert smi_calls(s) == []  # nothing applied before the refusal


def test_configs_of_other_drivers_and_requests_are_left_alone(gpus):
    s = gpus.start()
    # another driver's (even a broken one) and another request's are not ours
    ref = put(s, ["gpu-4"], [
        config("whatever", driver="other.example.com"),
        config(gpu_config({"strategy": "Sliced"}), requests=["other"]),
        config(gpu_config({"strategy": "MPS"}, kind="MigDeviceConfig")),  # no request: skips GPUs
    ])
    got = s.k.prepare([ref])[ref[1]]
    assert got.error == "", got.error
    assert smi_calls(s) == []


def gpu_taints(api):
    """{device: [(key, value, effect)]} over the node's gpu.nvidia.com slices."""
    out = {}
    for sl in list(api.slices.values()):
        if sl["spec"]["nodeName"] == NODE and sl["spec"]["driver"] == DRIVER:
            for d in sl["spec"]["devices"]:
                if d.get("taints"):
                    out[d["name"]] = [(t["key"], t.get("value"), t["effect"]) for t in d["taints"]]
    return out


def test_the_xids_named_taint_noexecute_the_others_noschedule(gpus):
    """--nvidia-dra-no-execute 79: an XID 79 evicts (NoExecute), an XID 48
    only keeps new claims off (NoSchedule, the default)."""
    s = gpus.start(["--nvidia-dra-no-execute", "79"], env={})
    s.api.wait_for(lambda: len([1 for sl in s.api.slices.values() if sl["spec"]["driver"] == DRIVER]) == 1,
                   10, "the slice")
    s.node.xids([(1, 79), (2, 48)])
    got = s.api.wait_for(lambda: len(gpu_taints(s.api)) == 2 and gpu_taints(s.api), 10, "two taints")
    assert got == {"gpu-1": [("gpu.nvidia.com/xid", "79", "NoExecute")],
                   "gpu-2": [("gpu.nvidia.com/xid", "48", "NoSchedule")]}


def test_a_wrong_no_execute_entry_is_refused_at_start(gpus, node):
    from devlet_harness import run_devlet
    r = run_devlet(["run", "--backends", "nvidia", "--nvidia-dra-no-execute", "79,lost"],
                   env=gpus.node.env(**QUIET))
    assert r.returncode == 2, r.stderr
    assert 'invalid --nvidia-dra-no-execute entry "lost": an XID number, gpu-lost or all' in r.stderr
