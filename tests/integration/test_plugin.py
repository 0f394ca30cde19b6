"""devlet as a device plugin, seen from a simulated kubelet: registration,
ListAndWatch, Allocate, GetPreferredAllocation, PreStartContainer, host-device
hot-plug, kubelet restarts and absence, SIGHUP reload, SIGTERM, hostile
clients on the plugin socket, and the one-shot `list` and `probe` commands.

Device nodes are fake (mknod 1:3 under a temp dir); every wait is on an event
(a registration, a snapshot, a file) with a deadline, never a bare sleep."""

import contextlib
import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import grpc
import pytest

from devlet_harness import (EMPTY_SETTINGS, PREFACE, closed_by_peer, hostdev_config, make_node,
                            raw_connect, run_devlet, send_quietly, wait_until, write_config)
from kubelet_sim import Device, PluginClient, PyPlugin, endpoint_name, pb

FUSE = "devlet.io/fuse"
SERIAL = "devlet.io/serial"
SOCK = "devlet.io/runtime-socket"
CUSTOM = "devlet.io/custom"
STD = (FUSE, SERIAL, SOCK, CUSTOM)
FUSE_IDS = [f"fuse-{i}" for i in range(10)]


# ------------------------------------------------------------ config pieces

def fuse_dev(dirs, count=10):
    make_node(f"{dirs.dev}/fuse")
    return {"name": "fuse", "groups": [{"count": count, "paths": [{"path": f"{dirs.dev}/fuse"}]}]}


def serial_dev(dirs, n=2):
    for i in range(n):
        make_node(f"{dirs.dev}/ttyUSB{i}")
    return {"name": "serial", "groups": [{"paths": [{"path": f"{dirs.dev}/ttyUSB*"}]}]}


def socket_dev(dirs):
    open(f"{dirs.run}/foo.sock", "w").close()
    return {"name": "runtime-socket", "groups": [{"paths": [
        {"path": f"{dirs.run}/foo.sock", "mountPath": "/run/foo.sock", "type": "Mount", "readOnly": True}]}]}


def custom_dev(dirs):
    make_node(f"{dirs.dev}/custom0")
    return {"name": "custom", "groups": [{"paths": [
        {"path": f"{dirs.dev}/custom0", "mountPath": "/dev/ctr-custom", "permissions": "rwm"}]}]}


def std_config(dirs):
    return hostdev_config([fuse_dev(dirs), serial_dev(dirs), socket_dev(dirs), custom_dev(dirs)],
                          domain="devlet.io")


@pytest.fixture
def std(dirs, kubelet, devlet):
    """devlet serving fuse x10, serial (ttyUSB0, ttyUSB1), a read-only Mount
    and a device with mountPath/permissions, registered with the simulator."""
    d = devlet(std_config(dirs))
    for r in STD:
        kubelet.wait_for_registration(r)
        kubelet.wait_for_snapshot(r)
    return SimpleNamespace(sim=kubelet, d=d, dirs=dirs)


@contextlib.contextmanager
def plugin_client(path, authority=None):
    c = PluginClient(path, authority)
    try:
        yield c
    finally:
        c.close()


def spec(container, host, perms="rw"):
    return pb.DeviceSpec(container_path=container, host_path=host, permissions=perms)


def assert_invalid_argument(call, dev_id):
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert dev_id in e.value.details(), e.value.details()


# ------------------------------------------------------------ registration

def test_registration_fields(std):
    sim, d = std.sim, std.d
    for r in STD:
        reg = sim.wait_for_registration(r)
        assert reg.version == "v1beta1"
        assert reg.endpoint == endpoint_name(r) == os.path.basename(d.socket_path(r))
        assert reg.resource_name == r
        assert reg.socket_existed, "Register arrived before the plugin socket existed"
        assert stat.S_ISSOCK(os.stat(d.socket_path(r)).st_mode)
        # the options sent in Register are what the plugin answers when asked
        assert reg.dialed_options == reg.options
        assert sim.options(r) == reg.options
    assert [a for a in sim.attempts() if not a.accepted] == []
    assert sorted(d.own_sockets()) == sorted(d.socket_path(r) for r in STD)


def test_first_snapshot(std):
    sim = std.sim
    first = {r: sim.endpoint(r).snapshots[0] for r in STD}
    assert sorted(first[FUSE].ids()) == sorted(FUSE_IDS)
    assert sorted(first[SERIAL].ids()) == ["ttyUSB0", "ttyUSB1"]
    assert first[SOCK].ids() == ["runtime-socket"]
    assert first[CUSTOM].ids() == ["custom"]
    for snap in first.values():
        for dev in snap.devices:
            assert dev.health == "Healthy" and dev.numa is None
        for raw in snap.raw.devices:
            assert not raw.HasField("topology"), f"{raw.ID}: unexpected topology {raw.topology}"


# ------------------------------------------------------------ Allocate

def test_allocate_device_specs(std):
    sim, dev = std.sim, std.dirs.dev
    fuse = spec(f"{dev}/fuse", f"{dev}/fuse")

    r = sim.allocate(FUSE, [["fuse-0"]])
    assert len(r.container_responses) == 1
    c = r.container_responses[0]
    assert list(c.devices) == [fuse] and list(c.mounts) == []

    # N instances of the same path are one DeviceSpec
    r = sim.allocate(FUSE, [["fuse-0", "fuse-1", "fuse-2"]])
    assert list(r.container_responses[0].devices) == [fuse]

    r = sim.allocate(SERIAL, [["ttyUSB0", "ttyUSB1"]])
    got = sorted(r.container_responses[0].devices, key=lambda s: s.host_path)
    assert got == [spec(f"{dev}/ttyUSB0", f"{dev}/ttyUSB0"), spec(f"{dev}/ttyUSB1", f"{dev}/ttyUSB1")]

    r = sim.allocate(CUSTOM, [["custom"]])
    assert list(r.container_responses[0].devices) == [spec("/dev/ctr-custom", f"{dev}/custom0", "rwm")]


def test_allocate_several_containers(std):
    dev = std.dirs.dev
    r = std.sim.allocate(FUSE, [["fuse-0"], ["fuse-1", "fuse-2"], ["fuse-9"]])
    assert len(r.container_responses) == 3
    for c in r.container_responses:
        assert list(c.devices) == [spec(f"{dev}/fuse", f"{dev}/fuse")]
    r = std.sim.allocate(SERIAL, [["ttyUSB1"], ["ttyUSB0"]])
    assert [c.devices[0].host_path for c in r.container_responses] == [f"{dev}/ttyUSB1", f"{dev}/ttyUSB0"]


def test_allocate_mount(std):
    r = std.sim.allocate(SOCK, [["runtime-socket"]])
    c = r.container_responses[0]
    assert list(c.devices) == []
    assert list(c.mounts) == [pb.Mount(container_path="/run/foo.sock", host_path=f"{std.dirs.run}/foo.sock",
                                       read_only=True)]


def test_allocate_unknown_and_unhealthy(std):
    sim, dev = std.sim, std.dirs.dev
    assert_invalid_argument(lambda: sim.allocate(FUSE, [["fuse-99"]]), "fuse-99")
    assert_invalid_argument(lambda: sim.allocate(FUSE, [["fuse-0"], ["fuse-1", "nope-7"]]), "nope-7")
    assert_invalid_argument(lambda: sim.allocate(FUSE, [["ttyUSB0"]]), "ttyUSB0")  # another resource's ID

    os.unlink(f"{dev}/ttyUSB1")
    sim.wait_for_snapshot(SERIAL, lambda s: s.health("ttyUSB1") == "Unhealthy")
    assert_invalid_argument(lambda: sim.allocate(SERIAL, [["ttyUSB1"]]), "ttyUSB1")
    assert_invalid_argument(lambda: sim.allocate(SERIAL, [["ttyUSB0", "ttyUSB1"]]), "ttyUSB1")
    r = sim.allocate(SERIAL, [["ttyUSB0"]])
    assert r.container_responses[0].devices[0].host_path == f"{dev}/ttyUSB0"
    # the plugin keeps answering after errors
    assert len(sim.allocate(FUSE, [["fuse-3"]]).container_responses) == 1


# ------------------------------------------------------------ preferred, prestart

def test_preferred_allocation(std):
    sim = std.sim
    got = sim.preferred(FUSE, FUSE_IDS, ["fuse-7", "fuse-2"], 4)
    assert len(got) == 4 and len(set(got)) == 4
    assert {"fuse-7", "fuse-2"} <= set(got) <= set(FUSE_IDS)

    assert sorted(sim.preferred(FUSE, FUSE_IDS, ["fuse-5", "fuse-1"], 2)) == ["fuse-1", "fuse-5"]

    got = sim.preferred(FUSE, FUSE_IDS[6:], [], 3)
    assert len(set(got)) == 3 and set(got) <= set(FUSE_IDS[6:])

    resp = sim.client(FUSE).preferred_request([(FUSE_IDS, [], 1), (FUSE_IDS[:4], ["fuse-3"], 2)])
    assert len(resp.container_responses) == 2
    a, b = (list(c.deviceIDs) for c in resp.container_responses)
    assert len(a) == 1 and a[0] in FUSE_IDS
    assert len(b) == 2 and "fuse-3" in b and set(b) <= set(FUSE_IDS[:4])


def test_prestart_container(std):
    for r in (FUSE, SERIAL):
        resp = std.sim.prestart(r, std.sim.endpoint(r).latest.ids()[:1])
        assert resp == pb.PreStartContainerResponse()


# ------------------------------------------------------------ old kubelets

def test_kubelet_that_sends_the_socket_path_as_authority(dirs, kubelet_factory, devlet):
    """Kubelets before v1.26 dial a plugin with its socket's path as
    :authority (/var/lib/kubelet/device-plugins/devlet-devlet.io_fuse.sock),
    which nghttp2's default checks refuse: each stream was reset, so the
    node showed no devices while devlet logged "registered".  Every call
    must be answered: the dial-back inside Register, ListAndWatch, Allocate
    and GetPreferredAllocation."""
    sim = kubelet_factory(old_authority=True)
    sim.start()
    d = devlet(std_config(dirs))
    path = d.socket_path(FUSE)
    for r in STD:
        reg = sim.wait_for_registration(r)
        assert reg.dialed_options == reg.options
    assert sim.client(FUSE).authority == path
    sim.wait_for_snapshot(FUSE, lambda s: sorted(s.ids()) == sorted(FUSE_IDS))
    fuse = spec(f"{dirs.dev}/fuse", f"{dirs.dev}/fuse")
    assert list(sim.allocate(FUSE, [["fuse-0"]]).container_responses[0].devices) == [fuse]
    got = sim.preferred(FUSE, FUSE_IDS, ["fuse-7"], 2)
    assert len(set(got)) == 2 and "fuse-7" in got

    # the same on a connection of its own, each call checked by itself
    with plugin_client(path, authority=path) as c:
        law = c.list_and_watch()
        assert sorted(dev.ID for dev in next(law).devices) == sorted(FUSE_IDS)
        law.cancel()
        assert list(c.allocate([["fuse-1"]]).container_responses[0].devices) == [fuse]
        assert sorted(c.preferred(FUSE_IDS, ["fuse-3"], 1)) == ["fuse-3"]
        assert c.prestart(["fuse-1"]) == pb.PreStartContainerResponse()
    assert not sim.endpoint(FUSE).stream_done, sim.events


# ------------------------------------------------------------ hot-plug

def test_hotplug_through_list_and_watch(dirs, kubelet, devlet):
    dev = dirs.dev
    cfg = hostdev_config([serial_dev(dirs, n=1), fuse_dev(dirs, count=3)])
    devlet(cfg)
    kubelet.wait_for_registration(SERIAL)
    ep = kubelet.endpoint(SERIAL)
    first = kubelet.wait_for_snapshot(SERIAL)
    assert [(x.id, x.health) for x in first.devices] == [("ttyUSB0", "Healthy")]

    make_node(f"{dev}/ttyUSB1")  # a new match: a new ID
    s = kubelet.wait_for_snapshot(SERIAL, lambda s: s.health("ttyUSB1") == "Healthy")
    assert s.health("ttyUSB0") == "Healthy" and len(s.devices) == 2

    os.unlink(f"{dev}/ttyUSB0")  # gone: the ID stays, Unhealthy
    s = kubelet.wait_for_snapshot(SERIAL, lambda s: s.health("ttyUSB0") == "Unhealthy")
    assert s.health("ttyUSB1") == "Healthy" and len(s.devices) == 2

    make_node(f"{dev}/ttyUSB0")  # back: Healthy again
    s = kubelet.wait_for_snapshot(SERIAL, lambda s: s.health("ttyUSB0") == "Healthy")
    assert sorted(s.ids()) == ["ttyUSB0", "ttyUSB1"] and s.healthy_ids() == s.ids()
    r = kubelet.allocate(SERIAL, [["ttyUSB1"]])
    assert r.container_responses[0].devices[0].host_path == f"{dev}/ttyUSB1"

    # a counted group follows its one path: all instances at once
    kubelet.wait_for_registration(FUSE)
    kubelet.wait_for_snapshot(FUSE, lambda s: len(s.healthy_ids()) == 3)
    os.unlink(f"{dev}/fuse")
    s = kubelet.wait_for_snapshot(FUSE, lambda s: s.healthy_ids() == [])
    assert sorted(s.ids()) == ["fuse-0", "fuse-1", "fuse-2"]
    make_node(f"{dev}/fuse")
    kubelet.wait_for_snapshot(FUSE, lambda s: len(s.healthy_ids()) == 3)

    # all of it on the stream opened at registration
    assert kubelet.endpoint(SERIAL) is ep and not ep.stream_done


def fake_sysfs_serial(dirs, numa_of):
    """ttyUSB<i> device nodes (char 188:i) and a sysfs tree under
    dirs.root/sys that places each on a PCI function with numa_of[i] in its
    numa_node file (None: a virtual device, no numa_node anywhere)."""
    sysfs = f"{dirs.root}/sys"
    os.makedirs(f"{sysfs}/dev/char")
    for i, numa in enumerate(numa_of):
        if numa is None:
            dev_dir = f"devices/virtual/tty/ttyUSB{i}"
        else:
            fn = f"devices/pci0000:00/0000:00:0{numa + 1}.0"
            os.makedirs(f"{sysfs}/{fn}", exist_ok=True)
            with open(f"{sysfs}/{fn}/numa_node", "w") as f:
                f.write(f"{numa}\n")
            dev_dir = f"{fn}/usb1/1-{i}/ttyUSB{i}"
        os.makedirs(f"{sysfs}/{dev_dir}")
        os.symlink(f"../../{dev_dir}", f"{sysfs}/dev/char/188:{i}")
        make_node(f"{dirs.dev}/ttyUSB{i}", major=188, minor=i)
    return sysfs


def test_numa_from_sysfs(dirs, kubelet, devlet):
    numa_of = [0, 0, 1, 1, None]
    sysfs = fake_sysfs_serial(dirs, numa_of)
    cfg = hostdev_config([{"name": "serial", "groups": [{"paths": [{"path": f"{dirs.dev}/ttyUSB*"}]}]}])
    d = devlet(cfg, args=["--sysfs-root", sysfs])
    kubelet.wait_for_registration(SERIAL)
    snap = kubelet.wait_for_snapshot(SERIAL)
    assert {x.id: x.numa for x in snap.devices} == {f"ttyUSB{i}": n for i, n in enumerate(numa_of)}
    for raw in snap.raw.devices:
        if raw.ID == "ttyUSB4":
            assert not raw.HasField("topology")
        else:
            assert [n.ID for n in raw.topology.nodes] == [numa_of[int(raw.ID[-1])]]

    # the generic preferred choice keeps to the must IDs' NUMA node
    ids = [f"ttyUSB{i}" for i in range(5)]
    assert sorted(kubelet.preferred(SERIAL, ids, ["ttyUSB2"], 2)) == ["ttyUSB2", "ttyUSB3"]
    assert sorted(kubelet.preferred(SERIAL, ids, ["ttyUSB1"], 2)) == ["ttyUSB0", "ttyUSB1"]

    p = run_devlet(["probe", "--socket", d.socket_path(SERIAL)])
    assert p.returncode == 0, p.stderr
    assert {x["id"]: x["numa"] for x in json.loads(p.stdout)["devices"]} == \
        {f"ttyUSB{i}": n for i, n in enumerate(numa_of)}
    p = run_devlet(["list", "--config-file", d.config_path, "--sysfs-root", sysfs, "-o", "json"])
    assert p.returncode == 0, p.stderr
    res = [r for r in json.loads(p.stdout)["resources"] if r["name"] == SERIAL][0]
    assert {x["id"]: x["numa"] for x in res["devices"]} == {f"ttyUSB{i}": n for i, n in enumerate(numa_of)}


# ------------------------------------------------------------ kubelet lifecycle

def test_fifty_kubelet_restarts(dirs, kubelet, devlet):
    d = devlet(hostdev_config([fuse_dev(dirs, count=2)]))
    kubelet.wait_for_registration(FUSE)
    for _ in range(50):
        kubelet.restart()
        kubelet.wait_for_registration(FUSE, generation=kubelet.generation)
    assert len(kubelet.accepted(FUSE)) >= 51
    assert {r.generation for r in kubelet.accepted(FUSE)} == set(range(1, 52))
    assert d.alive()
    s = kubelet.wait_for_snapshot(FUSE)
    assert sorted(s.ids()) == ["fuse-0", "fuse-1"]
    r = kubelet.allocate(FUSE, [["fuse-1"]])
    assert r.container_responses[0].devices[0].host_path == f"{dirs.dev}/fuse"
    assert d.own_sockets() == [d.socket_path(FUSE)]


def test_kubelet_absent_at_start(dirs, kubelet_factory, devlet):
    d = devlet(hostdev_config([fuse_dev(dirs, count=2)]))
    sock = d.socket_path(FUSE)
    # no kubelet yet: devlet serves its socket and waits
    wait_until(lambda: os.path.exists(sock) or not d.alive(), 10, "devlet's plugin socket")
    assert d.alive()
    with plugin_client(sock) as c:
        assert len(c.allocate([["fuse-0"]]).container_responses) == 1

    sim = kubelet_factory()
    sim.start()
    sim.wait_for_registration(FUSE)
    s = sim.wait_for_snapshot(FUSE, lambda s: len(s.ids()) == 2)
    assert s.healthy_ids() == s.ids()


def test_kubelet_socket_replaced_reregisters(dirs, kubelet, devlet):
    """A new kubelet.sock alone (devlet's socket left in place) means a new
    kubelet: devlet registers again.  The file system may give the new socket
    the old one's inode number."""
    d = devlet(hostdev_config([fuse_dev(dirs, count=2)]))
    sock = d.socket_path(FUSE)
    kubelet.wait_for_registration(FUSE)
    for i in range(10):
        # Wait until devlet has the Register answer, so that this round tests
        # noticing the new kubelet, not retrying a Register the stop cut off.
        d.wait_registered(FUSE, len(kubelet.accepted(FUSE)))
        kubelet.stop()  # grpcio removes kubelet.sock
        if os.path.exists(kubelet.socket_path):
            os.unlink(kubelet.socket_path)
        if i % 2 == 0:  # the kubelet is gone a while: devlet goes on serving
            with plugin_client(sock) as c:
                assert len(c.allocate([["fuse-1"]]).container_responses) == 1
            assert d.alive()
        kubelet.start()  # odd rounds: back to back, likely the same inode
        kubelet.wait_for_registration(FUSE, generation=kubelet.generation)
    r = kubelet.allocate(FUSE, [["fuse-0"]])
    assert r.container_responses[0].devices[0].host_path == f"{dirs.dev}/fuse"


def test_rejected_registration_is_retried(dirs, kubelet, devlet):
    kubelet.reject_next(2)
    devlet(hostdev_config([fuse_dev(dirs, count=1)]))
    kubelet.wait_for_registration(FUSE, timeout=20)
    assert [a.accepted for a in kubelet.attempts(FUSE)][:3] == [False, False, True]
    assert kubelet.wait_for_snapshot(FUSE).ids() == ["fuse"]


def test_custom_kubelet_socket_from_env(dirs, kubelet_factory, devlet):
    sim = kubelet_factory(kubelet_socket=f"{dirs.run}/kl.sock")
    sim.start()
    d = devlet(hostdev_config([fuse_dev(dirs, count=2)]), use_env=True, kubelet_socket=sim.socket_path)
    reg = sim.wait_for_registration(FUSE)
    assert reg.endpoint == endpoint_name(FUSE) and os.path.exists(d.socket_path(FUSE))


# ------------------------------------------------------------ signals

def test_sighup_adds_and_removes_resources(dirs, kubelet, devlet):
    fuse, serial = fuse_dev(dirs, count=2), serial_dev(dirs, n=1)
    d = devlet(hostdev_config([fuse]))
    kubelet.wait_for_registration(FUSE)

    d.write_config(hostdev_config([fuse, serial]))
    d.sighup()
    kubelet.wait_for_registration(SERIAL)
    assert kubelet.wait_for_snapshot(SERIAL).ids() == ["ttyUSB0"]
    with plugin_client(d.socket_path(FUSE)) as c:
        assert len(c.allocate([["fuse-0"]]).container_responses) == 1

    d.write_config(hostdev_config([serial]))
    d.sighup()
    wait_until(lambda: not os.path.exists(d.socket_path(FUSE)), 10, "the removed resource's socket to go")
    # the kubelet's stream for the removed resource ends
    kubelet.wait_for(lambda: kubelet.endpoints[FUSE].stream_done, 10, lambda: "fuse's ListAndWatch to end")
    assert d.own_sockets() == [d.socket_path(SERIAL)]
    with plugin_client(d.socket_path(SERIAL)) as c:
        assert len(c.allocate([["ttyUSB0"]]).container_responses) == 1


@pytest.mark.parametrize("bad", [
    "version: v1\nhostDevices:\n  devices:\n    - name: [oops\n",
    "version: v1\nhostDevices:\n  devices:\n    - name: fuse\n      groups:\n        - count: 0\n"
    "          paths:\n            - path: /dev/fuse\n",
], ids=["yaml-syntax", "bad-count"])
def test_sighup_with_invalid_config_keeps_serving(dirs, kubelet, devlet, bad):
    fuse = fuse_dev(dirs, count=2)
    d = devlet(hostdev_config([fuse]))
    kubelet.wait_for_registration(FUSE)
    ep = kubelet.endpoint(FUSE)

    mark = d.log_size()
    d.write_config(bad)
    d.sighup()
    d.wait_log(re.escape(d.config_path) + r":\d+:\d+:", since=mark)
    assert d.alive()
    with plugin_client(d.socket_path(FUSE)) as c:
        assert len(c.allocate([["fuse-1"]]).container_responses) == 1
    assert not ep.stream_done

    # and a later valid reload still works
    d.write_config(hostdev_config([fuse, serial_dev(dirs, n=1)]))
    d.sighup()
    kubelet.wait_for_registration(SERIAL)


def test_sigterm_removes_sockets_and_exits_zero(std):
    sim, d = std.sim, std.d
    eps = [sim.endpoint(r) for r in STD]
    assert d.terminate() == 0
    assert d.own_sockets() == []
    assert os.path.exists(sim.socket_path), "devlet must not touch the kubelet's socket"
    for ep in eps:
        sim.wait_for_stream_end(ep)


def test_second_signal_during_shutdown_still_exits_zero(dirs, kubelet, devlet):
    """An operator's Ctrl-C and a runtime's SIGTERM, or a SIGTERM sent twice,
    may both land while devlet is shutting down: it still exits 0."""
    fuse = fuse_dev(dirs, count=1)
    for i in range(16):
        first = signal.SIGINT if i % 2 else signal.SIGTERM
        d = devlet(hostdev_config([fuse]))
        kubelet.wait_for_registration(FUSE, count=i + 1)
        d.signal(first)
        # Not a wait: spreads the second signal over the ~0.2-3 ms devlet
        # spends shutting down (two signals sent at once arrive as one).
        time.sleep((i % 8 + 1) * 0.00025)
        d.proc.send_signal(signal.SIGTERM)
        assert d.terminate() == 0, f"{first.name} then SIGTERM: exit code {d.returncode}"
        assert d.own_sockets() == []


# ------------------------------------------------------------ hostile clients

def test_garbage_and_half_open_connections(std):
    sim, d, dev = std.sim, std.d, std.dirs.dev
    sock = d.socket_path(SERIAL)
    ep = sim.endpoint(SERIAL)
    rng = random.Random(20261121)
    held = []
    try:
        held += [raw_connect(sock) for _ in range(16)]  # connect, say nothing, stay open
        half = raw_connect(sock)
        half.sendall(PREFACE[:11])  # half a preface, stays open
        held.append(half)
        assert sim.allocate(SERIAL, [["ttyUSB0"]]).container_responses[0].devices[0].host_path \
            == f"{dev}/ttyUSB0"

        # junk that a conforming HTTP/2 server must answer by closing
        hostile = [
            rng.randbytes(3000),
            PREFACE + b"GARBAGE!" * 64,                                  # first frame not SETTINGS
            PREFACE + EMPTY_SETTINGS + b"\x00\x00\x08\x01\x04\x00\x00\x00\x01" + b"\xff" * 8,  # bad HPACK
            PREFACE + EMPTY_SETTINGS + b"\xff\xff\xff\x00\x00\x00\x00\x00\x00",  # 16 MiB DATA on stream 0
        ]
        for data in hostile:
            s = raw_connect(sock)
            send_quietly(s, data)
            assert closed_by_peer(s), f"devlet kept a connection open after {data[:40]!r}..."
            s.close()

        # random junk from another thread (300 connections) while the kubelet works
        errors = []

        def junk():
            try:
                for _ in range(300):
                    s = raw_connect(sock)
                    send_quietly(s, rng.randbytes(rng.randint(1, 8192)))
                    s.close()
            except Exception as e:
                errors.append(e)
        t = threading.Thread(target=junk)
        t.start()
        try:
            i = 0
            while t.is_alive() or i < 100:
                ids = ["ttyUSB0"] if i % 2 else ["ttyUSB0", "ttyUSB1"]
                r = sim.allocate(SERIAL, [ids])
                assert sorted(x.host_path for x in r.container_responses[0].devices) \
                    == sorted(f"{dev}/{x}" for x in ids)
                i += 1
        finally:
            t.join(30)
        assert errors == []

        # malformed messages on well-formed gRPC: errors, not crashes
        with plugin_client(sock) as c:
            bad = c.channel.unary_unary("/v1beta1.DevicePlugin/Allocate",
                                        request_serializer=lambda b: b, response_deserializer=lambda b: b)
            with pytest.raises(grpc.RpcError) as e:
                bad(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)
            assert e.value.code() != grpc.StatusCode.OK
            nope = c.channel.unary_unary("/v1beta1.DevicePlugin/Nope",
                                         request_serializer=lambda b: b, response_deserializer=lambda b: b)
            with pytest.raises(grpc.RpcError) as e:
                nope(b"", timeout=10)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED

        # ListAndWatch on the original stream still reports changes
        make_node(f"{dev}/ttyUSB2")
        sim.wait_for_snapshot(SERIAL, lambda s: s.health("ttyUSB2") == "Healthy")
        assert sim.endpoint(SERIAL) is ep and not ep.stream_done
    finally:
        for s in held:
            s.close()
    assert sim.allocate(SERIAL, [["ttyUSB2"]]).container_responses[0].devices[0].host_path == f"{dev}/ttyUSB2"
    assert d.alive()


FLOODER = """
import socket, sys
path = sys.argv[1]
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)  # blocking: waits for room in the backlog
        s.send(b"junk" * 1024)
    except OSError:
        pass
    s.close()
"""


def test_connection_flood_does_not_starve_the_kubelet(std):
    """A local client that reconnects as fast as it can (a buggy agent in a
    retry loop) must not take the plugin away from the kubelet: calls on the
    kubelet's established connection keep being answered."""
    sim, d, dev = std.sim, std.d, std.dirs.dev
    sock = d.socket_path(SERIAL)
    flooders = [subprocess.Popen([sys.executable, "-c", FLOODER, sock]) for _ in range(2)]
    try:
        for _ in range(100):
            r = sim.allocate(SERIAL, [["ttyUSB1"]], timeout=5)
            assert r.container_responses[0].devices[0].host_path == f"{dev}/ttyUSB1"
    finally:
        for f in flooders:
            f.kill()
            f.wait()
    assert sim.allocate(SERIAL, [["ttyUSB0"]]).container_responses[0].devices[0].host_path == f"{dev}/ttyUSB0"
    assert d.alive()


# ------------------------------------------------------------ devlet list

def test_list_json(dirs, build_dir):
    cfg = hostdev_config([fuse_dev(dirs, count=2), serial_dev(dirs), socket_dev(dirs)])  # default domain
    path = f"{dirs.work}/config.yaml"
    write_config(path, cfg)
    p = run_devlet(["list", "--config-file", path, "-o", "json"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    res = {r["name"]: r for r in out["resources"] if r["backend"] == "hostdev"}
    assert sorted(res) == [FUSE, SOCK, SERIAL]
    dev = dirs.dev
    fuse_node = {"container_path": f"{dev}/fuse", "host_path": f"{dev}/fuse", "permissions": "rw"}
    # what hostdev.devlet.io would publish: one DRA device for both IDs
    numbers = {"major": {"int": 1}, "minor": {"int": 3}} if os.geteuid() == 0 else {}
    fuse_dra = {"driver": "hostdev.devlet.io", "name": "fuse-0", "capacity": {}, "attributes": {
        "path": {"string": f"{dev}/fuse"}, **numbers, "resource": {"string": FUSE}}}
    assert res[FUSE]["devices"] == [
        {"id": f"fuse-{i}", "health": "Healthy", "numa": None, "devices": [fuse_node], "mounts": [],
         "dra": fuse_dra}
        for i in range(2)]
    assert sorted(x["id"] for x in res[SERIAL]["devices"]) == ["ttyUSB0", "ttyUSB1"]
    for x in res[SERIAL]["devices"]:
        p_ = f"{dev}/{x['id']}"
        assert x["devices"] == [{"container_path": p_, "host_path": p_, "permissions": "rw"}]
    assert res[SOCK]["devices"] == [{
        "id": "runtime-socket", "health": "Healthy", "numa": None, "devices": [],
        "mounts": [{"container_path": "/run/foo.sock", "host_path": f"{dirs.run}/foo.sock", "read_only": True}],
        "dra": {"driver": "hostdev.devlet.io", "name": "runtime-socket-0", "capacity": {},
                "attributes": {"resource": {"string": SOCK}}}}]

    # CONFIG_FILE works as --config-file does; the table names everything
    p2 = run_devlet(["list", "-o", "json"], env={"CONFIG_FILE": path})
    assert p2.returncode == 0 and json.loads(p2.stdout) == out
    p3 = run_devlet(["list", "--config-file", path])
    assert p3.returncode == 0, p3.stderr
    for word in (FUSE, SERIAL, SOCK, "fuse-1", "ttyUSB1", "runtime-socket"):
        assert word in p3.stdout


# ------------------------------------------------------------ devlet probe

def normalize_cdi(items):
    return [c["name"] if isinstance(c, dict) else c for c in items]


def test_probe_devlet_socket(std):
    sim, d, dev = std.sim, std.d, std.dirs.dev
    reg = sim.wait_for_registration(FUSE)
    p = run_devlet(["probe", "--socket", d.socket_path(FUSE), "--allocate", "fuse-0,fuse-1",
                    "--preferred", "3", "--timeout", "5s"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["options"] == {"pre_start_required": reg.options.pre_start_required,
                              "get_preferred_allocation_available":
                                  reg.options.get_preferred_allocation_available}
    snap = sim.endpoint(FUSE).latest
    assert sorted((x["id"], x["health"], x["numa"]) for x in out["devices"]) == \
        sorted((x.id, x.health, x.numa) for x in snap.devices)
    a = out["allocate"]
    assert a["devices"] == [{"container_path": f"{dev}/fuse", "host_path": f"{dev}/fuse", "permissions": "rw"}]
    assert a["mounts"] == []
    assert isinstance(a["envs"], dict) and isinstance(a["annotations"], dict)
    assert isinstance(a["cdi_devices"], list)
    assert len(out["preferred"]) == 3 and set(out["preferred"]) <= set(FUSE_IDS)

    p = run_devlet(["probe", "--socket", d.socket_path(SOCK), "--allocate", "runtime-socket"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["allocate"]["mounts"] == [
        {"container_path": "/run/foo.sock", "host_path": f"{std.dirs.run}/foo.sock", "read_only": True}]

    p = run_devlet(["probe", "--socket", d.socket_path(FUSE), "--allocate", "fuse-42"])
    assert p.returncode != 0
    assert re.search(r"invalid[_ ]?argument", p.stderr, re.I) and "fuse-42" in p.stderr, p.stderr

    p = run_devlet(["probe", "--socket", f"{std.dirs.run}/nobody.sock", "--timeout", "1s"])
    assert p.returncode != 0 and p.stderr.strip()


def test_probe_python_plugin(dirs):
    def allocate(req):
        resp = pb.AllocateResponse()
        for c in req.container_requests:
            cr = resp.container_responses.add()
            cr.envs["PY_IDS"] = ",".join(c.devices_ids)
            cr.annotations["example.com/ids"] = ";".join(c.devices_ids)
            cr.mounts.add(container_path="/ctr/lib", host_path="/host/lib", read_only=True)
            for i in c.devices_ids:
                cr.devices.add(container_path=f"/dev/{i}", host_path=f"/dev/py{i}", permissions="rwm")
            cr.cdi_devices.add(name="example.com/thing=" + c.devices_ids[0])
        return resp, None

    devs = [Device("a", "Healthy", 0), Device("b", "Unhealthy", 1), Device("c", "Healthy", None)]
    with PyPlugin(f"{dirs.plugins}/py.sock", devs, pre_start_required=True, allocate=allocate) as plug:
        p = run_devlet(["probe", "--socket", plug.socket_path, "--allocate", "a,c", "--preferred", "1"])
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out["options"] == {"pre_start_required": True, "get_preferred_allocation_available": True}
        assert out["devices"] == [{"id": "a", "health": "Healthy", "numa": 0},
                                  {"id": "b", "health": "Unhealthy", "numa": 1},
                                  {"id": "c", "health": "Healthy", "numa": None}]
        a = out["allocate"]
        assert a["envs"] == {"PY_IDS": "a,c"}
        assert a["annotations"] == {"example.com/ids": "a;c"}
        assert a["mounts"] == [{"container_path": "/ctr/lib", "host_path": "/host/lib", "read_only": True}]
        assert a["devices"] == [{"container_path": "/dev/a", "host_path": "/dev/pya", "permissions": "rwm"},
                                {"container_path": "/dev/c", "host_path": "/dev/pyc", "permissions": "rwm"}]
        assert normalize_cdi(a["cdi_devices"]) == ["example.com/thing=a"]
        assert len(out["preferred"]) == 1 and out["preferred"][0] in ("a", "c")

        plug.allocate_fn = lambda req: (None, "no such device zz-9")
        p = run_devlet(["probe", "--socket", plug.socket_path, "--allocate", "zz-9"])
        assert p.returncode != 0
        assert re.search(r"invalid[_ ]?argument", p.stderr, re.I) and "zz-9" in p.stderr, p.stderr


# ------------------------------------------------------------ command line

BAD_CONFIGS = {
    # name: (text, line of the error)
    "bad-count": ("version: v1\nhostDevices:\n  domain: devlet.io\n  devices:\n    - name: fuse\n"
                  "      groups:\n        - count: 0\n          paths:\n            - path: /dev/fuse\n", 7),
    "bad-permissions": ("version: v1\nhostDevices:\n  devices:\n    - name: tty\n      groups:\n"
                        "        - paths:\n            - path: /dev/tty0\n              permissions: rwx\n", 8),
    "relative-path": ("version: v1\nhostDevices:\n  devices:\n    - name: tty\n      groups:\n"
                      "        - paths:\n            - path: dev/tty0\n", 7),
    "yaml-syntax": ("version: v1\nhostDevices:\n  devices: [\n    {name: fuse,\n", None),
}


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_config_error_exit_code_and_position(dirs, build_dir, name):
    text, line = BAD_CONFIGS[name]
    path = f"{dirs.work}/bad.yaml"
    with open(path, "w") as f:
        f.write(text)
    where = re.escape(path) + (f":{line}:" if line else r":\d+:") + r"\d+: \S"
    for args in (["run", "--config-file", path, "--plugin-directory", dirs.plugins],
                 ["list", "--config-file", path]):
        p = run_devlet(args, timeout=20)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert re.search(where, p.stderr), p.stderr
    assert os.listdir(dirs.plugins) == []


def test_cli_basics(dirs, build_dir):
    p = run_devlet(["version"])
    assert p.returncode == 0 and re.match(r"devlet \S+", p.stdout), (p.stdout, p.stderr)
    p = run_devlet(["--help"])
    assert p.returncode == 0
    for word in ("run", "list", "probe", "version"):
        assert word in p.stdout + p.stderr
    p = run_devlet(["frobnicate"])
    assert p.returncode == 2 and p.stderr.strip()
    p = run_devlet(["run", "--no-such-flag"])
    assert p.returncode == 2 and "no-such-flag" in p.stderr
    p = run_devlet(["list", "--config-file", f"{dirs.work}/missing.yaml"])
    assert p.returncode != 0 and "missing.yaml" in p.stderr
