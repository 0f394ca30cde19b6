#!/usr/bin/python3
"""`make demo`: devlet's main job, end to end, printed as a transcript.

In a temporary directory it makes fake device nodes, writes a hostDevices
config (fuse x10, a ttyUSB* glob with two nodes, a bind-mounted socket),
puts 8 H100 GPUs on the mock NVML (build/mock-nvml, the profile
tests/mock-nvml/profiles/h100-8x-nvswitch.yaml), starts the simulated
kubelet (tests/integration/kubelet_sim.py) and `build/devlet run`, then
walks through registration, the device lists from ListAndWatch (GPUs with
their NUMA nodes), Allocate of host devices and of 2 GPUs, a preferred
allocation of 4 GPUs, an XID turning a GPU Unhealthy, a hot-plug, a kubelet
restart and SIGTERM.  DEMO_NVML_PROFILE names another 8-GPU profile
(v100-dgx1: NVLink decides the preferred set), or `none` for host devices
alone.  Then a second node, an AMD one: a fake amdgpu/KFD sysfs tree from
tests/mock-amd (8 MI300X in CPX/NPS4, 64 partitions; DEMO_AMD_PROFILE names
another profile, or `none`), its own simulated kubelet and `devlet run
--backends amd`: AMD's resource names and IDs, Allocate of a partition, a
preferred set of 16 partitions, an uncorrectable RAS error taking a GPU's
partitions Unhealthy, and `devlet list`'s AMD section.

Each step is one function in STEPS; a step reads and extends the Demo state.
With DEMO_KEEP=1 everything stays up until Ctrl-C so that `devlet probe` can
be tried against the sockets.  Exit status: 0, or 1 when a step failed.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from devlet_harness import DEVLET_BIN, Devlet, hostdev_config, make_node  # noqa: E402
from kubelet_sim import KubeletSim  # noqa: E402
from mock_gpus import GPU, MOCK_LIB, MockNode  # noqa: E402

WAIT = 10.0  # seconds any one step may wait for devlet
PROFILE = os.environ.get("DEMO_NVML_PROFILE", "h100-8x-nvswitch")
AMD_PROFILE = os.environ.get("DEMO_AMD_PROFILE", "mi300x-8x-cpx")


class Demo:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="devlet-demo-", dir="/tmp")
        self.plugins = os.path.join(self.root, "device-plugins")
        self.dev = os.path.join(self.root, "dev")
        self.run = os.path.join(self.root, "run")
        for p in (self.plugins, self.dev, self.run):
            os.mkdir(p)
        self.keep = os.environ.get("DEMO_KEEP") == "1"
        self.resources = []  # resource names, in config order
        self.gpus = None     # the mock NVML's node (MockNode), unless PROFILE is none
        self.sim = None
        self.devlet = None
        self.t0 = time.monotonic()
        self.log_seen = 0  # bytes of devlet's log already shown
        self.amd = None          # the AMD node: SimpleNamespace(sys, manifest, sim, devlet, resource)

    # ------------------------------------------------ output

    def step(self, title):
        print(f"\n[{time.monotonic() - self.t0:5.2f}s] == {title}", flush=True)

    def say(self, text="", indent=2):
        for line in str(text).splitlines() or [""]:
            print(" " * indent + line, flush=True)

    def devlet_said(self, count):
        """Shows devlet's new `registered resource=...` log lines (the only
        log lines the transcript quotes; the rest is observed over gRPC),
        once each resource has logged count of them."""
        for r in self.resources:
            try:
                self.devlet.wait_registered(r, count, timeout=2.0)
            except TimeoutError:
                pass  # the transcript quotes what there is
        text = self.devlet.log_text()
        new, self.log_seen = text[self.log_seen:], len(text)
        for line in new.splitlines():
            if "registered resource=" in line:
                self.say("devlet log: " + line.split(" ", 1)[1].strip(), indent=4)

    def device_line(self, d):
        numa = "-" if d.numa is None else d.numa
        return f"{d.id:<16} {d.health:<10} numa={numa}"

    def gpu(self, uuid):
        """"GPU 3" for a UUID of the mock node."""
        return f"GPU {self.gpus.uuids().index(uuid)}"

    def show_response(self, resp):
        for c in resp.container_responses:
            for s in c.devices:
                self.say(f"device {s.host_path} -> {s.container_path} ({s.permissions})", indent=6)
            for m in c.mounts:
                self.say(f"mount  {m.host_path} -> {m.container_path}{' (ro)' if m.read_only else ''}", indent=6)
            for k, v in sorted(c.envs.items()):
                self.say(f"env    {k}={v}", indent=6)

    def show_snapshot(self, resource, snap):
        self.say(f"{resource}: {len(snap.devices)} devices (ListAndWatch message #{snap.seq + 1})")
        for d in snap.devices:
            self.say(self.device_line(d), indent=6)

    # ------------------------------------------------ cleanup

    def close(self):
        if self.devlet is not None:
            self.devlet.kill()
        if self.sim is not None:
            self.sim.stop()
        if self.amd is not None:
            if self.amd.devlet is not None:
                self.amd.devlet.kill()
            if self.amd.sim is not None:
                self.amd.sim.stop()
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------- steps

def make_devices(demo):
    demo.step("fake device nodes")
    root = os.geteuid() == 0
    for name in ("fuse", "ttyUSB0", "ttyUSB1"):
        make_node(os.path.join(demo.dev, name))
    open(os.path.join(demo.run, "foo.sock"), "w").close()
    if root:
        demo.say(f"mknod (char 1:3) {demo.dev}/{{fuse,ttyUSB0,ttyUSB1}}")
    else:
        demo.say(f"not root: {demo.dev}/{{fuse,ttyUSB0,ttyUSB1}} are regular files standing in for nodes")
    demo.say(f"{demo.run}/foo.sock stands in for a runtime socket")


def mock_gpus(demo):
    if PROFILE == "none":
        return
    demo.step("GPUs: the mock NVML")
    demo.gpus = MockNode(os.path.join(demo.run, "nvml.yaml"), PROFILE)
    demo.say(f"{MOCK_LIB}: libnvidia-ml.so.1 with the real ABI, driven by")
    demo.say(f"{demo.gpus.path} (a copy of tests/mock-nvml/profiles/{PROFILE}.yaml):")
    for i, g in enumerate(demo.gpus.devices):
        demo.say(f"GPU {i}  {g['name']}  {g['pciBusId']}  numa {g.get('numaNode', '-')}  {g['uuid']}", indent=4)


def write_config(demo):
    demo.step("config")
    cfg = hostdev_config(domain="devlet.io", devices=[
        {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": f"{demo.dev}/fuse"}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": f"{demo.dev}/ttyUSB*", "permissions": "rw"}]}]},
        {"name": "runtime-socket", "groups": [{"paths": [
            {"path": f"{demo.run}/foo.sock", "mountPath": "/run/foo.sock", "type": "Mount", "readOnly": True}]}]},
    ])
    demo.resources = [f"devlet.io/{d['name']}" for d in cfg["hostDevices"]["devices"]]
    env = {}
    if demo.gpus is not None:
        demo.resources.insert(0, GPU)
        env = demo.gpus.env()
    # its own session: Ctrl-C (DEMO_KEEP=1) stops the demo, which stops devlet
    demo.devlet = Devlet(demo.plugins, os.path.join(demo.root, "work"), cfg, env=env, new_session=True)
    with open(demo.devlet.config_path) as f:
        demo.say(f.read().rstrip(), indent=4)


def start_kubelet(demo):
    demo.step("simulated kubelet")
    demo.sim = KubeletSim(demo.plugins)
    demo.sim.start()
    demo.say(f"serving Registration on {demo.sim.socket_path}")


def start_devlet(demo):
    demo.step("devlet run")
    demo.devlet.start()
    env = "".join(f"{k}={v} " for k, v in demo.devlet.extra_env.items())
    demo.say("$ " + env + " ".join(demo.devlet.command()))
    for r in demo.resources:
        reg = demo.sim.wait_for_registration(r, timeout=WAIT)
        o = reg.options
        demo.say(f"Register: resource_name={reg.resource_name} endpoint={reg.endpoint} version={reg.version}")
        demo.say(f"options: pre_start_required={o.pre_start_required} "
                 f"get_preferred_allocation_available={o.get_preferred_allocation_available} "
                 f"(the kubelet asked GetDevicePluginOptions before answering: "
                 f"{'same' if reg.dialed_options == o else 'DIFFERENT'})", indent=4)
        demo.say(f"registered {(reg.time - demo.devlet.start_time) * 1000:.1f} ms after start", indent=4)
    demo.devlet_said(1)


def list_devices(demo):
    demo.step("devices, from ListAndWatch")
    for r in demo.resources:
        demo.show_snapshot(r, demo.sim.wait_for_snapshot(r, timeout=WAIT))


def allocate(demo):
    demo.step("Allocate")
    for resource, ids in (("devlet.io/fuse", ["fuse-0", "fuse-1"]),
                          ("devlet.io/serial", ["ttyUSB1"]),
                          ("devlet.io/runtime-socket", ["runtime-socket"])):
        resp = demo.sim.allocate(resource, [ids])
        demo.say(f"{resource} {ids} ->")
        demo.show_response(resp)
    try:
        demo.sim.allocate("devlet.io/serial", [["ttyUSB7"]])
    except Exception as e:  # grpc.RpcError
        demo.say(f"devlet.io/serial ['ttyUSB7'] -> {e.code().name}: {e.details()}")


def allocate_gpus(demo):
    if demo.gpus is None:
        return
    demo.step("Allocate 2 GPUs (device list strategy envvar, NVIDIA's default)")
    ids = [demo.gpus.uuids()[1], demo.gpus.uuids()[6]]
    resp = demo.sim.allocate(GPU, [ids])
    demo.say(f"{GPU} [{demo.gpu(ids[0])}, {demo.gpu(ids[1])}] ->")
    demo.show_response(resp)


def preferred_gpus(demo):
    if demo.gpus is None:
        return
    demo.step("GetPreferredAllocation: 4 of the 8 GPUs")
    uuids = demo.gpus.uuids()
    snap = demo.sim.wait_for_snapshot(GPU, timeout=WAIT)
    numa = {d.id: d.numa for d in snap.devices}
    for must in ([], [uuids[5]]):
        t = time.monotonic()
        got = demo.sim.preferred(GPU, uuids, must, 4)
        ms = (time.monotonic() - t) * 1000
        what = f"must include {demo.gpu(must[0])}" if must else "nothing required"
        demo.say(f"available: all 8, {what} -> {', '.join(demo.gpu(u) for u in got)} "
                 f"(NUMA {sorted({numa[u] for u in got})}; {ms:.1f} ms round trip)")
    if PROFILE == "h100-8x-nvswitch":
        demo.say("every pair has 18 NVLinks through the NVSwitches, so the PCIe/NUMA distance decides")


def xid(demo):
    if demo.gpus is None:
        return
    demo.step("health: NVML reports XID 79 (GPU fallen off the bus) on GPU 3")
    uuid = demo.gpus.uuids()[3]
    t = time.monotonic()
    demo.gpus.xid(3, 79)
    demo.say(f"appended {{device: 3, type: xid, xid: 79}} to {demo.gpus.path}")
    snap = demo.sim.wait_for_snapshot(GPU, lambda s: s.health(uuid) == "Unhealthy", timeout=WAIT)
    demo.say(f"ListAndWatch had GPU 3 Unhealthy {(time.monotonic() - t) * 1000:.1f} ms later "
             f"(the mock re-reads its file every 20 ms)")
    demo.show_snapshot(GPU, snap)
    try:
        demo.sim.allocate(GPU, [[uuid]])
    except Exception as e:  # grpc.RpcError
        demo.say(f"Allocate GPU 3 -> {e.code().name}: {e.details()}")


def hotplug(demo):
    demo.step("hot-plug: a third ttyUSB appears")
    node = os.path.join(demo.dev, "ttyUSB2")
    make_node(node)
    demo.say(f"created {node}")
    snap = demo.sim.wait_for_snapshot("devlet.io/serial", lambda s: "ttyUSB2" in s, timeout=WAIT)
    demo.show_snapshot("devlet.io/serial", snap)
    os.unlink(os.path.join(demo.dev, "ttyUSB0"))
    demo.say(f"removed {demo.dev}/ttyUSB0")
    snap = demo.sim.wait_for_snapshot("devlet.io/serial", lambda s: s.health("ttyUSB0") == "Unhealthy",
                                      timeout=WAIT)
    demo.show_snapshot("devlet.io/serial", snap)


def kubelet_restart(demo):
    demo.step("kubelet restart (it deletes every file in its plugin directory)")
    t = time.monotonic()
    demo.sim.restart()
    gen = demo.sim.generation
    regs = [demo.sim.wait_for_registration(r, generation=gen, timeout=WAIT) for r in demo.resources]
    for reg in sorted(regs, key=lambda x: x.time):
        demo.say(f"re-registered {reg.resource_name} endpoint={reg.endpoint} "
                 f"{(reg.time - t) * 1000:.1f} ms after the restart began")
    demo.devlet_said(2)
    demo.say(f"plugin dir: {sorted(os.listdir(demo.plugins))}")
    resp = demo.sim.allocate("devlet.io/fuse", [["fuse-9"]])
    demo.say(f"Allocate fuse-9 after the restart -> {resp.container_responses[0].devices[0].host_path}")


def keep_running(demo):
    if not demo.keep:
        return
    demo.step("DEMO_KEEP=1: everything stays up until Ctrl-C")
    demo.say(f"devlet pid {demo.devlet.pid}, log {demo.devlet.log_path}")
    demo.say(f"config {demo.devlet.config_path} (edit it, or `kill -HUP {demo.devlet.pid}`, to reload)")
    demo.say(f"device nodes in {demo.dev} (create or remove ttyUSB* to hot-plug)")
    if demo.gpus is not None:
        demo.say(f"GPUs in {demo.gpus.path} (add `- {{device: 0, type: xid, xid: 48}}` under events:, "
                 f"or set `lost: true` on a GPU, and watch ListAndWatch)")
    for r in demo.resources:
        demo.say(f"socket {demo.devlet.socket_path(r)}")
    demo.say("try:")
    demo.say(f"{DEVLET_BIN} probe --socket {demo.devlet.socket_path('devlet.io/fuse')} "
             f"--allocate fuse-0,fuse-1 --preferred 2", indent=4)
    if demo.gpus is not None:
        env = " ".join(f"{k}={v}" for k, v in demo.gpus.env().items())
        demo.say(f"{DEVLET_BIN} probe --socket {demo.devlet.socket_path(GPU)} "
                 f"--allocate {demo.gpus.uuids()[0]} --preferred 4", indent=4)
        demo.say(f"{env} {DEVLET_BIN} list --config-file {demo.devlet.config_path}", indent=4)
    else:
        demo.say(f"{DEVLET_BIN} list --config-file {demo.devlet.config_path} -o json", indent=4)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    while not stop.is_set() and demo.devlet.alive():
        stop.wait(1.0)
    print()


def sigterm(demo):
    demo.step("SIGTERM")
    rc = demo.devlet.terminate()
    left = demo.devlet.own_sockets()
    demo.say(f"devlet exited with code {rc}; its sockets left behind: {left if left else 'none'}")
    demo.say(f"plugin dir: {sorted(os.listdir(demo.plugins))}")
    if rc != 0 or left:
        raise RuntimeError("devlet did not stop cleanly")


# ---------------------------------------------------------------- the AMD node

def amd_node(demo):
    if AMD_PROFILE == "none":
        return
    sys.path.insert(0, os.path.join(REPO, "tests", "mock-amd"))
    import gen_sysfs
    import yaml
    demo.step(f"a second node, AMD: fake sysfs from tests/mock-amd/profiles/{AMD_PROFILE}.yaml")
    root = os.path.join(demo.root, "amd")
    with open(os.path.join(REPO, "tests", "mock-amd", "profiles", f"{AMD_PROFILE}.yaml")) as f:
        profile = yaml.safe_load(f)
    m = gen_sysfs.generate(profile, os.path.join(root, "sys"), root, mknod=os.geteuid() == 0)
    for i, g in enumerate(m["gpus"]):
        mode = f"{g['compute']}/{g['memory']}" if g["compute"] else "no partitions"
        demo.say(f"GPU {i}  {g['model']}  {g['bdf']}  numa {g['numa']}  {mode}  "
                 f"{len(g['devices'])} device(s)", indent=4)
    demo.say(f"amdgpu PCI devices, amdgpu_xcp_* partitions and KFD topology under {root}/sys; "
             f"/dev/kfd and /dev/dri/* under {root}/dev")
    plugins = os.path.join(root, "device-plugins")
    os.mkdir(plugins)
    sim = KubeletSim(plugins)
    sim.start()
    types = {f"{g['compute']}_{g['memory']}" for g in m["gpus"] if g["compute"]}
    resource = f"amd.com/{types.pop()}" if len(types) == 1 else "amd.com/gpu"
    args = ["--backends", "amd", "--sysfs-root", os.path.join(root, "sys"), "--dev-root", root,
            "--resource-naming-strategy", "mixed", "--amd-health-interval", "100ms"]
    d = Devlet(plugins, os.path.join(root, "work"), None, args=args, new_session=True)
    demo.amd = type("AmdNode", (), {})()
    demo.amd.sys, demo.amd.m, demo.amd.sim, demo.amd.devlet, demo.amd.resource = (
        os.path.join(root, "sys"), m, sim, d, resource)
    d.start()
    demo.say("$ " + " ".join(d.command()))
    reg = sim.wait_for_registration(resource, timeout=WAIT)
    demo.say(f"Register: resource_name={reg.resource_name} (AMD's mixed strategy: "
             f"amd.com/<compute>_<memory>) get_preferred_allocation_available="
             f"{reg.options.get_preferred_allocation_available}")
    snap = sim.wait_for_snapshot(resource, timeout=WAIT)
    demo.say(f"{resource}: {len(snap.devices)} devices; the first GPU's (AMD's IDs: the PCI "
             f"address, then amdgpu_xcp_<N>):")
    for dv in snap.devices[:8]:
        demo.say(demo.device_line(dv), indent=6)


def amd_allocate(demo):
    if demo.amd is None:
        return
    a = demo.amd
    ids = [dv["id"] for g in a.m["gpus"] for dv in g["devices"]]
    demo.step("AMD: Allocate one partition, then a preferred set of 16")
    resp = a.sim.allocate(a.resource, [[ids[1]]])
    demo.say(f"{a.resource} [{ids[1]}] ->")
    demo.show_response(resp)
    avail = ids[3:]  # the first GPU has 5 partitions free
    got = a.sim.preferred(a.resource, avail, [], 16)
    gpus = sorted({i for i, g in enumerate(a.m["gpus"]) for dv in g["devices"] if dv["id"] in got})
    demo.say(f"available: {len(avail)} (GPU 0 has 5 free); 16 wanted -> GPUs {gpus}: whole GPUs "
             f"kept together, the partly used one left alone")
    got = a.sim.preferred(a.resource, avail, [], 2)
    demo.say(f"2 wanted -> {got}: the GPU with the fewest free partitions first (AMD's rule)")


def amd_list(demo):
    if demo.amd is None:
        return
    a = demo.amd
    demo.step("AMD: devlet list (the AMD section)")
    res = subprocess.run([DEVLET_BIN, "list", "--backends", "amd", "--sysfs-root", a.sys,
                          "--resource-naming-strategy", "mixed"],
                         capture_output=True, text=True, timeout=30)
    text = res.stdout[res.stdout.index("AMD GPUs"):] if "AMD GPUs" in res.stdout else res.stdout
    lines = text.splitlines()
    cut = next((i for i, line in enumerate(lines) if line.strip() == "partitions:"), len(lines))
    links = next((i for i, line in enumerate(lines) if "links (KFD)" in line), len(lines))
    for line in lines[:cut] + lines[links:]:
        demo.say(line, indent=2)


def amd_health(demo):
    if demo.amd is None:
        return
    a = demo.amd
    g = a.m["gpus"][2]
    demo.step("AMD health: an uncorrectable memory error on GPU 2 (ras/umc_err_count ue: 1)")
    t = time.monotonic()
    with open(os.path.join(g["sysfs"], "ras", "umc_err_count"), "w") as f:
        f.write("ue: 1\nce: 0\n")
    bad = {dv["id"] for dv in g["devices"]}
    snap = a.sim.wait_for_snapshot(a.resource, lambda s: bad <= set(s.ids()) - set(s.healthy_ids()),
                                   timeout=WAIT)
    demo.say(f"ListAndWatch had GPU 2's {len(bad)} partitions Unhealthy "
             f"{(time.monotonic() - t) * 1000:.0f} ms later (polled every 100 ms here, 5 s by default); "
             f"{len(snap.healthy_ids())} of {len(snap.ids())} healthy")
    rc = a.devlet.terminate()
    demo.say(f"AMD node's devlet stopped with code {rc}")
    a.sim.stop()
    a.sim = None
    if rc != 0:
        raise RuntimeError("the AMD node's devlet did not stop cleanly")


STEPS = [make_devices, mock_gpus, write_config, start_kubelet, start_devlet, list_devices, allocate,
         allocate_gpus, preferred_gpus, xid, hotplug, kubelet_restart, keep_running, sigterm,
         amd_node, amd_allocate, amd_list, amd_health]


def main():
    if not os.path.exists(DEVLET_BIN):
        print(f"demo: {DEVLET_BIN} is missing: run `make`", file=sys.stderr)
        return 1
    demo = Demo()
    print(f"devlet demo in {demo.root}")
    try:
        for step in STEPS:
            step(demo)
    except Exception as e:
        print(f"\ndemo: step failed: {type(e).__name__}: {e}", file=sys.stderr)
        if demo.devlet is not None and demo.devlet.proc is not None:
            tail = demo.devlet.log_text()[-3000:]
            print(f"--- devlet's log (tail) ---\n{tail}", file=sys.stderr)
        return 1
    finally:
        demo.close()
    print(f"\ndone in {time.monotonic() - demo.t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
