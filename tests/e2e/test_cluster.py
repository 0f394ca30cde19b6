"""devlet on a real node: the kubelet, API server, scheduler and containerd
built from their sources (scripts/peers.sh), devlet installed from its image
with `kubectl apply -k` (scripts/cluster.py), on mock hardware: the mock
NVML's 8 H100s, a fake MI300X sysfs tree in CPX mode (64 partitions) and
/dev/fuse shared by two containers.

Each test asserts what the cluster reports (the Node's capacity and
allocatable, pod phases and the scheduler's events, what a container prints,
the kubelet's pod-resources through devlet's metrics), never devlet's word.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request

import yaml

from kube import (DEVICES, REPO, cl, devlet_host_pid, kubelet_log_count, kubelet_log_since, kubelet_log_size,
                  kubelet_restart, unique)

H100 = os.path.join(REPO, "tests", "mock-nvml", "profiles", f"{cl.NVML_PROFILE}.yaml")


def gpu_uuids():
    with open(H100) as f:
        return [d["uuid"] for d in yaml.safe_load(f)["devices"]]


def amd_manifest():
    with open(cl.path("mock", "amd.json")) as f:
        return json.load(f)


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:9400/metrics", timeout=5) as r:
        return r.read().decode()


class Watch:
    """Samples the Node's capacity and allocatable in the background (the API
    server's answer, every 100 ms) so a test can assert a value never
    dropped: low_cap and low_alloc hold each resource's lowest value seen."""

    def __init__(self, cluster, resources):
        self.cluster, self.resources = cluster, resources
        self.low_cap, self.low_alloc = {}, {}
        self.samples = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            try:
                st = self.cluster.get("node", self.cluster.node)["status"]
            except (AssertionError, ValueError, subprocess.TimeoutExpired):
                continue
            self.samples += 1
            for r in self.resources:
                for low, now in ((self.low_cap, st["capacity"]), (self.low_alloc, st["allocatable"])):
                    v = int(now.get(r, "0"))
                    low[r] = min(low.get(r, v), v)
            self.stop.wait(0.1)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()


def test_node_shows_every_resource(cluster):
    cap = cluster.capacity()
    alloc = cluster.allocatable()
    for r, n in DEVICES.items():
        assert cap.get(r) == n, (r, cap)
        assert alloc.get(r) == n, (r, alloc)


def test_host_device_usable_in_container(cluster, pods):
    fuse = os.stat("/dev/fuse").st_rdev
    out = cluster.run_pod(pods.append(unique("fuse")) or pods[-1], {"devlet.io/fuse": 1},
                          "stat -c '%t:%T' /dev/fuse && exec 3<>/dev/fuse && echo opened")
    assert out.split() == [f"{os.major(fuse):x}:{os.minor(fuse):x}", "opened"]


def test_count_sharing_two_fit_third_pending(cluster, pods):
    a, b, c = unique("share-a"), unique("share-b"), unique("share-c")
    pods += [a, b, c]
    for p in (a, b):
        cluster.pod(p, {"devlet.io/fuse": 1}, "test -c /dev/fuse && sleep 3600")
    for p in (a, b):
        cluster.wait_phase(p, ("Running",))
    cluster.pod(c, {"devlet.io/fuse": 1}, "sleep 3600")
    ev = cluster.wait("the scheduler's reason for the third pod",
                      lambda: [m for r, m in cluster.events(c) if r == "FailedScheduling"])
    assert "Insufficient devlet.io/fuse" in ev[0]
    assert cluster.phase(c) == "Pending"
    cluster.delete_pods(a)
    cluster.wait_phase(c, ("Running",))


def test_gpus_by_envvar(cluster, pods):
    out = cluster.run_pod(pods.append(unique("gpu-env")) or pods[-1], {"nvidia.com/gpu": 2},
                          "echo $NVIDIA_VISIBLE_DEVICES")
    got = out.strip().split(",")
    assert len(got) == 2 and set(got) <= set(gpu_uuids()), out


def test_amd_partition_devices_in_container(cluster, pods):
    out = cluster.run_pod(pods.append(unique("amd")) or pods[-1], {"amd.com/gpu": 1},
                          "stat -c '%n %t' /dev/kfd /dev/dri/renderD*")
    lines = out.split()
    assert lines[0:2] == ["/dev/kfd", "eb"], out  # KFD's major, 235
    renders = [n for n in lines[::2] if n.startswith("/dev/dri/renderD")]
    assert len(renders) == 1, out


def test_preferred_allocation_used_by_kubelet(cluster, pods):
    """A pod takes 3 partitions; a second asks for 8.  The kubelet alone
    would fill the first GPU's other 5 and spill; devlet's preferred
    allocation gives one whole free GPU, and the kubelet uses it."""
    gpu_of = {}
    for g in amd_manifest()["gpus"]:
        for part in g["devices"]:
            gpu_of[f"/dev/dri/renderD{part['render']}"] = g["bdf"]
    first, second = unique("pref-a"), unique("pref-b")
    pods += [first, second]
    cluster.pod(first, {"amd.com/gpu": 3}, "ls /dev/dri/ && sleep 3600")
    cluster.wait_phase(first, ("Running",))
    out = cluster.run_pod(second, {"amd.com/gpu": 8}, "ls -1 /dev/dri/")
    renders = [f"/dev/dri/{n}" for n in out.split() if n.startswith("renderD")]
    assert len(renders) == 8, out
    assert len({gpu_of[r] for r in renders}) == 1, renders


def test_metrics_attributed_by_real_pod_resources(cluster, pods):
    name = unique("gpu-metrics")
    pods.append(name)
    cluster.pod(name, {"nvidia.com/gpu": 1}, "echo $NVIDIA_VISIBLE_DEVICES; sleep 3600")
    cluster.wait_phase(name, ("Running",))
    gpu = cluster.wait("the container's output", lambda: cluster.logs(name).strip())

    def attributed():
        for line in metrics().splitlines():
            if line.startswith("DCGM_FI_DEV_GPU_TEMP{") and f'UUID="{gpu}"' in line:
                return (f'pod="{name}"' in line and 'namespace="default"' in line
                        and 'container="main"' in line and line)
        return None

    assert cluster.wait("the GPU's series to carry the pod", attributed)


def test_kubelet_restart(cluster, pods, record_property):
    """A kubelet restart: devlet registers every resource again at once,
    running pods keep their devices, and the Node's capacity drops only
    where the kubelet itself drops it.  A kubelet starts every resource of
    its checkpoint at capacity 0 "till the corresponding device plugin
    re-registers" (its device manager's readCheckpoint), so a status update
    that falls between its start and devlet's first snapshot shows 0: that
    window is the kubelet's (tens of milliseconds; `make bench` times
    devlet's share of it), and our cluster's 1 s status updates fall in it
    now and then.  What devlet answers for: one registration per resource
    (a try at the old kubelet's socket, left behind while the new kubelet
    clears the directory, is refused and superseded), and no zero after its
    snapshot reached the kubelet."""
    name = unique("keeps-gpu")
    pods.append(name)
    cluster.pod(name, {"nvidia.com/gpu": 1, "devlet.io/fuse": 1},
                "echo $NVIDIA_VISIBLE_DEVICES; while test -c /dev/fuse; do sleep 1; done; echo lost")
    cluster.wait_phase(name, ("Running",))
    before = cluster.logs(name)
    pod_uid = cluster.get("pod", name)["metadata"]["uid"]
    log_before = cluster.devlet_log()
    n_registered = log_before.count("registered resource=")
    kubelet_at = kubelet_log_size()
    with Watch(cluster, list(DEVICES)) as w:
        sock_at = kubelet_restart(cluster)
        # every resource once more (the log may hold earlier reloads' too)
        cluster.wait("devlet to register again", lambda: cluster.devlet_log().count(
            "registered resource=") >= n_registered + len(DEVICES))
        cluster.wait("the node Ready again", cl.node_ready)
        cluster.wait("every resource's capacity and allocatable back", lambda: all(
            cluster.capacity().get(r) == n and cluster.allocatable().get(r) == n for r, n in DEVICES.items()))
    assert w.samples > 0
    log = cluster.devlet_log()
    assert log.count("registered resource=") == n_registered + len(DEVICES), log[len(log_before):]
    kubelet = kubelet_log_since(kubelet_at)
    for r, n in DEVICES.items():
        pushed = [t for t, line in kubelet if "State pushed for device plugin" in line
                  and f'resource="{r}"' in line]
        zeroed = [t for t, line in kubelet if "Updated capacity for device plugin" in line
                  and f'plugin="{r}" capacity=0' in line]
        assert pushed, r
        # a zero the kubelet computed from its checkpoint, before devlet's
        # first snapshot; never one after it
        assert all(t < pushed[0] for t in zeroed), (r, zeroed, pushed[0])
        # and the Node's capacity, as the API server reports it, dropped
        # only by such a zero
        assert w.low_cap[r] == int(n) or zeroed, (r, w.low_cap)
        record_property(f"kubelet_socket_to_snapshot_s[{r}]", round(pushed[0] - sock_at, 4))
        record_property(f"kubelet_zeroed[{r}]", len(zeroed))
    assert cluster.phase(name) == "Running"
    assert cluster.get("pod", name)["metadata"]["uid"] == pod_uid
    assert cluster.logs(name) == before  # no "lost": the container kept /dev/fuse


def test_devlet_killed_then_back(cluster):
    pid = devlet_host_pid(cluster)
    restarts = cluster.devlet_pod()["status"]["containerStatuses"][0]["restartCount"]
    ended = "\"ListAndWatch ended unexpectedly for device plugin\""
    before = {r: kubelet_log_count(ended, r) for r in DEVICES}
    os.kill(pid, signal.SIGKILL)
    # the kubelet notices each plugin's stream end (the Node's allocatable
    # shows it only when a status update falls before devlet is back)
    cluster.wait("the kubelet to see every stream end", lambda: all(
        kubelet_log_count(ended, r) > n for r, n in before.items()))
    cluster.wait("the DaemonSet's container to restart", lambda: cluster.devlet_pod()["status"][
        "containerStatuses"][0]["restartCount"] > restarts and cluster.devlet_ready(), timeout=180)
    cluster.wait("the kubelet to watch every resource of the new devlet's",
                 lambda: cluster.devlet_watched(DEVICES))
    cluster.wait("allocatable back", lambda: all(cluster.allocatable().get(r) == n for r, n in DEVICES.items()),
                 timeout=180)


def use_gpus(profile):
    """Puts a mock-NVML profile in place, atomically: the node's GPUs change
    (as after a MIG reconfiguration by the GPU operator), or go back to what
    `make cluster` wrote, with no events logged, so a devlet started later
    (the next test's) sees no old XID."""
    tmp = cl.path("mock", "nvml.yaml.new")
    shutil.copy(os.path.join(REPO, "tests", "mock-nvml", "profiles", profile), tmp)
    os.rename(tmp, cl.path("mock", "nvml.yaml"))


def append_event(event):
    """Appends an event to the mock NVML's log (the file devlet's pod reads
    through its hostPath), atomically, as the mock's README asks."""
    p = cl.path("mock", "nvml.yaml")
    with open(p) as f:
        doc = yaml.safe_load(f)
    doc.setdefault("events", []).append(event)
    tmp = p + ".new"
    with open(tmp, "w") as f:
        yaml.safe_dump(doc, f)
    os.rename(tmp, p)


def reloads(cluster):
    return cluster.devlet_log().count("daemon: reloaded")


def reconfigure(cluster, text):
    """Edits devlet's ConfigMap and waits for the kubelet to bring it into
    the pod and devlet to reload it (one more `reloaded` line)."""
    before = reloads(cluster)
    cluster.set_config(text)
    cluster.wait("devlet to reload its config", lambda: reloads(cluster) > before, timeout=120)


RECOVERY_CONFIG = cl.CONFIG + """health:
  recovery:
    enabled: true
    quietPeriod: 5s
"""


def test_gpu_unhealthy_then_recovers(cluster):
    reconfigure(cluster, RECOVERY_CONFIG)
    try:
        append_event({"device": 3, "type": "xid", "xid": 79})
        cluster.wait("allocatable to drop by one", lambda: cluster.allocatable().get("nvidia.com/gpu") == "7",
                     interval=0.05)
        cluster.wait("the GPU back after the quiet period",
                     lambda: cluster.allocatable().get("nvidia.com/gpu") == "8", timeout=60)
    finally:
        use_gpus(f"{cl.NVML_PROFILE}.yaml")
        reconfigure(cluster, cl.CONFIG)


def allocated_health(cluster, pod, resource):
    """{resourceID: health} the kubelet reports for resource in the pod's
    first container (allocatedResourcesStatus, KEP-4680)."""
    p = cluster.get("pod", pod)
    for cs in p.get("status", {}).get("containerStatuses", []):
        for st in cs.get("allocatedResourcesStatus") or []:
            if st["name"] == resource:
                return {r["resourceID"]: r.get("health") for r in st.get("resources") or []}
    return {}


def test_pod_sees_its_gpu_unhealthy(cluster, pods):
    """KEP-4680 with the device plugin: the real kubelet turns
    ListAndWatch health into the status of the pod holding the GPU
    (allocatedResourcesStatus Unhealthy after an XID on it, Healthy after
    recovery)."""
    with open(os.path.join(REPO, "tests", "mock-nvml", "profiles", f"{cl.NVML_PROFILE}.yaml")) as f:
        uuids = [d["uuid"] for d in yaml.safe_load(f)["devices"]]
    reconfigure(cluster, RECOVERY_CONFIG)
    name = unique("health")
    pods.append(name)
    try:
        cluster.pod(name, {"nvidia.com/gpu": 1}, "echo $NVIDIA_VISIBLE_DEVICES; sleep 3600")
        cluster.wait_phase(name, ("Running",))
        uuid = cluster.wait("the pod's GPU", lambda: cluster.logs(name).strip())
        cluster.wait("the GPU Healthy in the pod's status",
                     lambda: allocated_health(cluster, name, "nvidia.com/gpu") == {uuid: "Healthy"})
        append_event({"device": uuids.index(uuid), "type": "xid", "xid": 79})
        cluster.wait("the GPU Unhealthy in the pod's status",
                     lambda: allocated_health(cluster, name, "nvidia.com/gpu") == {uuid: "Unhealthy"})
        cluster.wait("the GPU Healthy again after the quiet period",
                     lambda: allocated_health(cluster, name, "nvidia.com/gpu") == {uuid: "Healthy"},
                     timeout=90)
    finally:
        cluster.delete_pods(name)
        use_gpus(f"{cl.NVML_PROFILE}.yaml")
        reconfigure(cluster, cl.CONFIG)


def test_cdi_strategy_through_containerd(cluster, pods):
    """With a CDI device-list strategy the kubelet hands containerd CDI names,
    and containerd injects the device nodes from devlet's spec."""
    reconfigure(cluster, cl.CONFIG.replace("migStrategy: none", "migStrategy: none\n  plugin:\n"
                                           "    deviceListStrategy: [cdi-cri]"))
    try:
        cluster.wait("the GPUs registered again", lambda: cluster.allocatable().get("nvidia.com/gpu") == "8")
        out = cluster.run_pod(pods.append(unique("gpu-cdi")) or pods[-1], {"nvidia.com/gpu": 1},
                              "stat -c '%n %t' /dev/nvidia[0-9]* /dev/nvidiactl; echo env=$NVIDIA_VISIBLE_DEVICES")
        lines = out.splitlines()
        assert len([x for x in lines if re.match(r"/dev/nvidia\d+ c3$", x)]) == 1, out
        assert "/dev/nvidiactl c3" in lines, out
    finally:
        reconfigure(cluster, cl.CONFIG)


def test_rollout_to_a_new_image(cluster, pods):
    name = unique("rollout")
    pods.append(name)
    cluster.pod(name, {"nvidia.com/gpu": 1, "devlet.io/fuse": 1},
                "while test -c /dev/fuse; do sleep 1; done; echo lost")
    cluster.wait_phase(name, ("Running",))
    old = cluster.devlet_pod()["metadata"]["name"]
    cl.ctr(["images", "tag", "--force", cl.DEVLET_IMAGE, "localhost/devlet:e2e-rollout"],
           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with Watch(cluster, ["nvidia.com/gpu", "amd.com/gpu"]) as w:
        cluster.kubectl("-n", "devlet", "set", "image", "ds/devlet", "devlet=localhost/devlet:e2e-rollout")
        cluster.kubectl("-n", "devlet", "rollout", "status", "ds/devlet", "--timeout=180s", timeout=200)
        cluster.wait("the new pod to serve", lambda: cluster.devlet_pod()["metadata"]["name"] != old
                     and cluster.devlet_ready() and cluster.allocatable().get("nvidia.com/gpu") == "8")
    try:
        assert cluster.phase(name) == "Running" and "lost" not in cluster.logs(name)
        assert w.samples > 0
        assert w.low_cap == {"nvidia.com/gpu": 8, "amd.com/gpu": 64}, w.low_cap
        print(f"lowest allocatable during the rollout: {w.low_alloc}")
    finally:
        cluster.kubectl("-n", "devlet", "set", "image", "ds/devlet", f"devlet={cl.DEVLET_IMAGE}")
        cluster.kubectl("-n", "devlet", "rollout", "status", "ds/devlet", "--timeout=180s", timeout=200)


def test_mig_mixed_resources_on_the_node(cluster, pods):
    """An A100 node with 4 GPUs in MIG mode: with migStrategy mixed every MIG
    profile is a resource of its own, with as many devices as the GPUs hold,
    and a pod asking for one gets that MIG device."""
    profile = os.path.join(REPO, "tests", "mock-nvml", "profiles", "a100-mig-mixed.yaml")
    with open(profile) as f:
        devices = yaml.safe_load(f)["devices"]
    want = {}
    for d in devices:
        for m in d.get("mig", []):
            want[f"nvidia.com/mig-{m['profile']}"] = want.get(f"nvidia.com/mig-{m['profile']}", 0) + 1
    mig_uuids = {m["uuid"] for d in devices for m in d.get("mig", []) if m["profile"] == "1g.10gb"}
    use_gpus("a100-mig-mixed.yaml")
    try:
        reconfigure(cluster, cl.CONFIG.replace("migStrategy: none", "migStrategy: mixed"))

        def served():
            a = cluster.allocatable()
            return a.get("nvidia.com/gpu") == "4" and all(a.get(r) == str(n) for r, n in want.items()) and a
        alloc = cluster.wait("the MIG resources on the Node", served)
        assert want["nvidia.com/mig-1g.10gb"] == 9, want
        out = cluster.run_pod(pods.append(unique("mig")) or pods[-1], {"nvidia.com/mig-1g.10gb": 1},
                              "echo $NVIDIA_VISIBLE_DEVICES")
        assert out.strip() in mig_uuids, (out, alloc)
    finally:
        use_gpus(f"{cl.NVML_PROFILE}.yaml")
        reconfigure(cluster, cl.CONFIG)
        cluster.wait("the H100s back", lambda: cluster.allocatable().get("nvidia.com/gpu") == "8")
