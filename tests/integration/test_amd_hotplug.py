"""AMD GPUs that come, go and change partition mode while devlet runs, and
the kernel's wedged-GPU uevent, seen from a simulated kubelet over fake
amdgpu/KFD sysfs trees (tests/mock-amd).

Hot-plug is found two ways: the fallback rescan (--rescan-interval; the
fake trees send no uevent, so the tests without one are the fallback's)
and a kernel uevent.  A GPU appears when its PCI address is bound to amdgpu
(module/amdgpu/drivers/pci:amdgpu/<BDF>), disappears when unbound; a
partition mode switch rewrites current_compute_partition and KFD's
topology.  Either way the devices are rebuilt and ListAndWatch tells the
kubelet, with no reload counted.

The uevent tests run devlet in a network namespace of its own (unshare -n)
and send the fake kernel messages from inside it (nsenter -n, a
NETLINK_KOBJECT_UEVENT socket, multicast group 1, as root), so no other
listener on the host sees them: the WEDGED uevent of Linux 6.14's DRM
(drm-uapi "Device wedging") fails the GPU its DEVPATH names at once and it
recovers by the health policy; WEDGED=none (the driver recovered it) fails
nothing; a malformed message, one whose credentials say a non-root
sender, and a non-root process's attempt are all ignored while devlet
keeps serving."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from devlet_harness import Devlet, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock-amd"))
import gen_sysfs  # noqa: E402

GPU = "amd.com/gpu"
FAST = ["--amd-health-interval", "50ms"]
NEVER = ["--rescan-interval", "infinite"]


class HotNode:
    """A generated tree (sysfs under <root>/sys, device nodes under
    <root>/dev) whose GPUs can be bound, unbound and re-partitioned."""

    def __init__(self, root, profile):
        self.root = root
        self.sys = os.path.join(root, "sys")
        if isinstance(profile, str):
            with open(ROOT / "tests" / "mock-amd" / "profiles" / f"{profile}.yaml") as f:
                profile = yaml.safe_load(f)
        self.m = gen_sysfs.generate(profile, self.sys, root, mknod=os.geteuid() == 0)
        self.drivers = os.path.join(self.sys, "module/amdgpu/drivers/pci:amdgpu")

    def args(self, *extra):
        return ["--sysfs-root", self.sys, "--dev-root", self.root, "--backends", "amd", *extra]

    def bdf(self, i):
        return self.m["gpus"][i]["bdf"]

    def ids(self, gpu=None):
        gpus = self.m["gpus"] if gpu is None else [self.m["gpus"][gpu]]
        return [d["id"] for g in gpus for d in g["devices"]]

    def unbind(self, i):
        os.unlink(os.path.join(self.drivers, self.bdf(i)))

    def bind(self, i):
        os.symlink(os.path.relpath(self.m["gpus"][i]["sysfs"], self.drivers),
                   os.path.join(self.drivers, self.bdf(i)))

    def devpath(self, i):
        card = self.m["gpus"][i]["devices"][0]["card"]
        return f"/devices/pci0000:00/{self.bdf(i)}/drm/card{card}"

    def to_spx(self, i):
        """GPU i from CPX to SPX/NPS1 as amdgpu does it: KFD keeps the PCI
        device's own node, drops the partitions', and counts a new
        topology generation; the mode files change last."""
        topo = os.path.join(self.sys, "class/kfd/kfd/topology")
        for dv in self.m["gpus"][i]["devices"][1:]:
            shutil.rmtree(os.path.join(topo, "nodes", str(dv["kfd_node"])))
        gen = int(open(os.path.join(topo, "generation_id")).read()) + 1
        with open(os.path.join(topo, "generation_id"), "w") as f:
            f.write(f"{gen}\n")
        g = self.m["gpus"][i]["sysfs"]
        with open(os.path.join(g, "current_memory_partition"), "w") as f:
            f.write("NPS1\n")
        with open(os.path.join(g, "current_compute_partition"), "w") as f:
            f.write("SPX\n")


@pytest.fixture
def hot(dirs):
    return lambda profile: HotNode(dirs.run, profile)


def start(devlet, kubelet, node, *args, resources=(GPU,), config=None, netns=False):
    d = devlet(config, args=node.args(*args), start=False)
    if netns:
        plain = d.command
        d.command = lambda: ["unshare", "--net", "--"] + plain()
    d.start()
    for r in resources:
        kubelet.wait_for_registration(r)
        kubelet.wait_for_snapshot(r)
    return d


def no_reload(d):
    text = d.log_text()
    assert "reloading configuration" not in text and "SIGHUP" not in text


# ------------------------------------------------------------ the fallback rescan

def test_rescan_finds_a_gpu_bound_and_one_unbound(kubelet, devlet, hot):
    n = hot("mi210-pair")
    n.unbind(3)  # not yet bound to amdgpu when devlet starts
    d = start(devlet, kubelet, n, *FAST, "--rescan-interval", "100ms")
    kubelet.wait_for_snapshot(GPU, lambda s: s.ids() == [n.bdf(0), n.bdf(1), n.bdf(2)])

    n.bind(3)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: len(s.ids()) == 4)
    assert snap.ids() == [n.bdf(i) for i in range(4)]
    assert snap.healthy_ids() == snap.ids()
    d.wait_log(r"devices changed: new AMD GPU 0000:5c:00\.0")
    c = kubelet.allocate(GPU, [[n.bdf(3)]]).container_responses[0]
    assert [x.container_path for x in c.devices] == ["/dev/kfd", "/dev/dri/card4",
                                                    "/dev/dri/renderD131"]

    n.unbind(1)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: n.bdf(1) not in s.ids())
    assert snap.ids() == [n.bdf(0), n.bdf(2), n.bdf(3)]
    d.wait_log(r"devices changed: AMD GPU 0000:22:00\.0 gone")
    d.wait_log(r"devices rebuilt resources=1")
    no_reload(d)


def test_health_carries_over_a_rebuild(kubelet, devlet, hot):
    """A GPU that failed stays failed, with its reason, when another GPU
    comes: the rebuild inherits what the running backend knew."""
    n = hot("mi210-pair")
    n.unbind(3)
    d = start(devlet, kubelet, n, *FAST, "--rescan-interval", "100ms")
    with open(os.path.join(n.m["gpus"][2]["sysfs"], "ras/umc_err_count"), "w") as f:
        f.write("ue: 3\nce: 0\n")
    kubelet.wait_for_snapshot(GPU, lambda s: s.health(n.bdf(2)) == "Unhealthy")
    n.bind(3)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: len(s.ids()) == 4)
    assert snap.health(n.bdf(2)) == "Unhealthy"
    assert snap.healthy_ids() == [n.bdf(0), n.bdf(1), n.bdf(3)]
    d.wait_log(r"devices rebuilt")


def test_last_gpu_unbound_stays_unhealthy_until_it_returns(kubelet, devlet, hot):
    """With no GPU left (unbound for a bus reset) nothing would be there to
    watch for its return: the device stays, failed as gone, and recovers
    when it is bound again; no rebuild."""
    n = hot({"name": "one-mi210", "cpus": 1, "gpus": [{"model": "mi210", "count": 1}]})
    cfg = {"version": "v1", "health": {"recovery": {"enabled": True, "quietPeriod": "1s"}}}
    d = start(devlet, kubelet, n, *FAST, "--rescan-interval", "100ms", config=cfg)
    n.unbind(0)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: s.health(n.bdf(0)) == "Unhealthy")
    assert snap.ids() == [n.bdf(0)]
    d.wait_log(r'GPU unhealthy gpu=0 pci=0000:0c:00\.0 reason="GPU gone from amdgpu')
    n.bind(0)
    kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == [n.bdf(0)])
    assert "devices rebuilt" not in d.log_text()


def test_partition_mode_change_rebuilds_resources(kubelet, devlet, hot):
    """GPU 1 of two CPX MI300X switches to SPX: under the mixed strategy its
    eight partitions leave amd.com/cpx_nps4 and it comes back as one
    amd.com/spx_nps1.  (Health polling off: the switch's half-written tree
    is not a failure to judge.)"""
    n = hot({"name": "mi300x-2x-cpx", "cpus": 1, "gpus": [
        {"model": "mi300x", "count": 2, "compute_partition": "CPX", "memory_partition": "NPS4"}]})
    d = start(devlet, kubelet, n, "--amd-health-interval", "0", "--rescan-interval", "100ms",
              "--resource-naming-strategy", "mixed", resources=["amd.com/cpx_nps4"])
    assert kubelet.wait_for_snapshot("amd.com/cpx_nps4").ids() == n.ids()
    n.to_spx(1)
    kubelet.wait_for_registration("amd.com/spx_nps1")
    assert kubelet.wait_for_snapshot("amd.com/spx_nps1").ids() == [n.bdf(1)]
    snap = kubelet.wait_for_snapshot("amd.com/cpx_nps4", lambda s: len(s.ids()) == 8)
    assert snap.ids() == n.ids(0)
    d.wait_log(r"devices changed: AMD GPU 0000:22:00\.0 partition mode cpx/nps4 -> spx/nps1")
    no_reload(d)


# ------------------------------------------------------------ kernel uevents

SENDER = r"""
import os, socket, struct, sys
NETLINK_KOBJECT_UEVENT = 15
msg = bytes.fromhex(sys.argv[1])
creds = sys.argv[2] if len(sys.argv) > 2 else ""
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_KOBJECT_UEVENT)
s.bind((0, 0))
anc = []
if creds:
    uid = int(creds)
    anc = [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("iII", os.getpid(), uid, uid))]
try:
    s.sendmsg([msg], anc, 0, (0, 1))
except PermissionError:
    sys.exit(13)
"""


def uevent(action, devpath, subsystem, **env):
    """The kernel's format: ACTION@DEVPATH, then KEY=VALUE, each NUL-ended."""
    kv = {"ACTION": action, "DEVPATH": devpath, "SUBSYSTEM": subsystem, **env, "SEQNUM": "4242"}
    return (f"{action}@{devpath}\0" + "".join(f"{k}={v}\0" for k, v in kv.items())).encode()


def send(d, msg, creds=None, user=None):
    """Sends msg to group 1 from inside devlet's network namespace; creds: a
    uid for SCM_CREDENTIALS (root may claim any); user: run the sender as
    that uid.  Returns the sender's exit code (13: the kernel refused)."""
    cmd = ["nsenter", "-t", str(d.pid), "-n", "--"]
    if user is not None:
        cmd += ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    cmd += [sys.executable, "-c", SENDER, msg.hex()] + ([str(creds)] if creds is not None else [])
    return subprocess.run(cmd, capture_output=True, timeout=30).returncode


@pytest.fixture
def as_root():
    if os.geteuid() != 0:
        pytest.fail("the uevent tests need root (a network namespace, netlink multicast)")


def test_wedged_uevent_fails_its_gpu_and_it_recovers(kubelet, devlet, hot, as_root):
    n = hot("mi210-pair")
    cfg = {"version": "v1", "health": {"recovery": {"enabled": True, "quietPeriod": "2s"}}}
    d = start(devlet, kubelet, n, *FAST, *NEVER, config=cfg, netns=True)
    kubelet.wait_for_snapshot(GPU, lambda s: len(s.healthy_ids()) == 4)

    # the driver hung and recovered GPU 0 itself: nothing to fail
    assert send(d, uevent("change", n.devpath(0), "drm", WEDGED="none", DEVNAME="dri/card1")) == 0
    # the kernel names recovery methods for GPU 1
    assert send(d, uevent("change", n.devpath(1), "drm", WEDGED="rebind,bus-reset",
                          DEVNAME="dri/card2")) == 0
    snap = kubelet.wait_for_snapshot(GPU, lambda s: s.health(n.bdf(1)) == "Unhealthy")
    assert snap.healthy_ids() == [n.bdf(0), n.bdf(2), n.bdf(3)]
    d.wait_log(r'GPU hung and its driver recovered it gpu=0 pci=0000:0c:00\.0')
    d.wait_log(r'GPU unhealthy gpu=1 pci=0000:22:00\.0 reason="wedged: the kernel asks for '
               r'recovery by rebind,bus-reset \(WEDGED=rebind,bus-reset\)"')
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate(GPU, [[n.bdf(1)]])
    assert "unhealthy" in e.value.details()
    # its reads succeed: healthy again after the quiet period
    kubelet.wait_for_snapshot(GPU, lambda s: len(s.healthy_ids()) == 4, timeout=15)
    d.wait_log(r"GPU healthy again gpu=1 pci=0000:22:00\.0")


def test_uevent_for_a_new_gpu_without_the_rescan(kubelet, devlet, hot, as_root):
    n = hot("mi210-pair")
    n.unbind(2)
    d = start(devlet, kubelet, n, *NEVER, netns=True)
    kubelet.wait_for_snapshot(GPU, lambda s: s.ids() == [n.bdf(0), n.bdf(1), n.bdf(3)])
    n.bind(2)
    assert send(d, uevent("add", n.devpath(2), "drm", DEVNAME="dri/card3", MAJOR="226",
                          MINOR="3")) == 0
    snap = kubelet.wait_for_snapshot(GPU, lambda s: len(s.ids()) == 4)
    assert snap.ids() == [n.bdf(i) for i in range(4)]
    d.wait_log(r"devices changed: new AMD GPU 0000:38:00\.0")
    no_reload(d)


def test_garbage_and_untrusted_uevents_are_ignored(kubelet, devlet, hot, as_root):
    n = hot("mi210-pair")
    d = start(devlet, kubelet, n, *FAST, *NEVER, netns=True)
    kubelet.wait_for_snapshot(GPU, lambda s: len(s.healthy_ids()) == 4)
    wedge0 = uevent("change", n.devpath(0), "drm", WEDGED="rebind")
    garbage = [
        b"\xff\xfe garbage without a header",
        b"change@/devices/x\0SUBSYSTEM=drm\0",                       # no ACTION, DEVPATH
        wedge0[:-1],                                                 # not NUL-ended
        wedge0.replace(b"WEDGED=rebind", b"WEDGED=rebind\x01"),      # a control character
        wedge0.replace(b"WEDGED=rebind", b"wedged=rebind"),          # a lower-case key
        wedge0 + b"WEDGED=bus-reset\0",                              # a key twice
        wedge0.replace(b"ACTION=change", b"ACTION=add"),             # header and ACTION differ
        uevent("change", n.devpath(0), "drm", WEDGED="rebind;reboot"),  # methods malformed
        b"".join(f"K{i}=v\0".encode() for i in range(100)),
        b"change@" + b"/" * 9000 + b"\0",                           # longer than the kernel's
        b"libudev\0" + b"\0" * 32,                                   # udevd's, not the kernel's
    ]
    for msg in garbage:
        assert send(d, msg) == 0
    # root claiming to be nobody in its credentials: not believed
    assert send(d, wedge0, creds=65534) == 0
    # a process that is not root: the kernel refuses it, or devlet ignores it
    assert send(d, wedge0, user=65534) in (0, 13)
    # then a good one, which is read after all the others
    assert send(d, uevent("change", n.devpath(3), "drm", WEDGED="unknown")) == 0
    snap = kubelet.wait_for_snapshot(GPU, lambda s: s.health(n.bdf(3)) == "Unhealthy")
    assert snap.healthy_ids() == [n.bdf(0), n.bdf(1), n.bdf(2)]
    d.wait_log(r'reason="wedged: the kernel asks for recovery by an unknown method '
               r'\(WEDGED=unknown\)"')
    d.wait_log(r"ignored a kernel uevent: malformed \(1 so far\)")
    d.wait_log(r"ignored a kernel uevent: sent by neither the kernel nor root \(1 so far\)")
    d.wait_log(r"ignored a kernel uevent: longer than the kernel sends \(1 so far\)")
    d.wait_log(r"ignored a kernel uevent: WEDGED with malformed recovery methods \(1 so far\)")
    # seven malformed ones: reported at the first only
    assert len(re.findall(r"ignored a kernel uevent: malformed", d.log_text())) == 1
    assert not re.search(r"GPU unhealthy gpu=0 ", d.log_text())
    c = kubelet.allocate(GPU, [[n.bdf(0)]]).container_responses[0]
    assert c.devices[0].container_path == "/dev/kfd"
    assert d.alive()

