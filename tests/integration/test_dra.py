"""devlet as a DRA driver (src/dra/) against a fake API server that is
hostile on demand (fake_apiserver.ApiServer) and a simulated kubelet: the
kubelet's plugin watcher and DRA manager are played by grpcio clients on
the registration and DRA sockets, its device manager by kubelet_sim.

devlet serves two host-device resources: devlet.io/a (ttyA0, ttyA1)
through DRA (hostdev.devlet.io), devlet.io/b (ttyB0) through the device
plugin, so every test can also see that the device plugin never waits on
the API server.  Every directory is the test's own (the registration and
plugins directories, CDI specs): nothing touches /var/lib/kubelet or
/var/run/cdi.  Every wait is on an event with a deadline (a request the
server saw, a slice, a file, a gRPC answer), never a bare sleep.
"""

import copy
import json
import os
import pathlib
import re
import shutil
import stat
import struct
import time
import uuid
from types import SimpleNamespace

import grpc
import pytest

import dra_pb2
import drahealth_pb2
import pluginregistration_pb2 as regpb
from devlet_harness import (DEVLET_BIN, closed_by_peer, devlet_cli, hostdev_config, make_node,
                            raw_connect, send_quietly, wait_until)
from fake_apiserver import b64, write_kubeconfig
from kubelet_sim import CHANNEL_OPTIONS, PluginClient, unix_target

NODE = "node-a"
DRIVER = "hostdev.devlet.io"
A, B = "devlet.io/a", "devlet.io/b"
KIND = f"k8s.{DRIVER}/claim"
DRA_SERVICE = {"v1": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/",
               "v1beta1": "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"}
PROMPT = 1.0  # seconds the device plugin may take to answer, whatever the API server does
# Memory, whatever the server sends: the peak below one 64 MiB body (the API
# client keeps at most 16 MiB per call, and two threads may call at once),
# nothing kept after.  ASan's allocator keeps freed blocks in quarantine.
ASAN = os.environ.get("DEVLET_ASAN") == "1"
HWM_MAX_KIB = (256 if ASAN else 64) * 1024
RSS_MAX_KIB = (256 if ASAN else 24) * 1024


# ------------------------------------------------------------ the peers

class DraKubelet:
    """The kubelet's side of one DRA driver: GetInfo and
    NotifyRegistrationStatus on the registration socket, prepare and
    unprepare on the DRA socket."""

    def __init__(self, reg_socket, dra_socket):
        self.reg = grpc.insecure_channel(unix_target(reg_socket), options=CHANNEL_OPTIONS)
        self.dra = grpc.insecure_channel(unix_target(dra_socket), options=CHANNEL_OPTIONS)

    def get_info(self, timeout=5):
        call = self.reg.unary_unary("/pluginregistration.Registration/GetInfo",
                                    request_serializer=regpb.InfoRequest.SerializeToString,
                                    response_deserializer=regpb.PluginInfo.FromString)
        return call(regpb.InfoRequest(), timeout=timeout)

    def notify(self, registered, error="", timeout=5):
        call = self.reg.unary_unary("/pluginregistration.Registration/NotifyRegistrationStatus",
                                    request_serializer=regpb.RegistrationStatus.SerializeToString,
                                    response_deserializer=regpb.RegistrationStatusResponse.FromString)
        return call(regpb.RegistrationStatus(plugin_registered=registered, error=error), timeout=timeout)

    def _method(self, version, name, resp):
        return self.dra.unary_unary(DRA_SERVICE[version] + name,
                                    request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=resp.FromString)

    def watch_health(self, version="v1", timeout=30):
        """NodeWatchResources of the health service (KEP-4680): an iterator
        of NodeWatchResourcesResponse."""
        call = self.dra.unary_stream(f"/{version}.DRAResourceHealth/NodeWatchResources",
                                     request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=drahealth_pb2.NodeWatchResourcesResponse.FromString)
        return call(drahealth_pb2.NodeWatchResourcesRequest(), timeout=timeout)

    def prepare_future(self, claims, version="v1", timeout=10):
        """claims: [(namespace, uid, name)]; the future's result maps uid to
        NodePrepareResourceResponse (devices, error)."""
        req = dra_pb2.NodePrepareResourcesRequest(
            claims=[dra_pb2.Claim(namespace=ns, uid=u, name=n) for ns, u, n in claims])
        return self._method(version, "NodePrepareResources",
                            dra_pb2.NodePrepareResourcesResponse).future(req, timeout=timeout)

    def prepare(self, claims, version="v1", timeout=10):
        return dict(self.prepare_future(claims, version, timeout).result().claims)

    def unprepare(self, claims, version="v1", timeout=10):
        req = dra_pb2.NodeUnprepareResourcesRequest(
            claims=[dra_pb2.Claim(namespace=ns, uid=u, name=n) for ns, u, n in claims])
        resp = self._method(version, "NodeUnprepareResources",
                            dra_pb2.NodeUnprepareResourcesResponse)(req, timeout=timeout)
        return {k: v.error for k, v in resp.claims.items()}

    def close(self):
        self.reg.close()
        self.dra.close()


def claim_ref(name, uid=None):
    return ("default", uid or str(uuid.uuid4()), name)


@pytest.fixture
def dra(dirs, api, certs, kubelet, devlet):
    """Starts devlet on the fake server (node NODE) with devlet.io/a through
    DRA and devlet.io/b through the device plugin; start() returns a
    namespace with the paths, the Devlet and its DRA kubelet."""
    make_node(f"{dirs.dev}/ttyA0", major=4, minor=64)
    make_node(f"{dirs.dev}/ttyA1", major=4, minor=65)
    make_node(f"{dirs.dev}/ttyB0", major=4, minor=66)
    kc = write_kubeconfig(pathlib.Path(dirs.work, "kubeconfig"), api.url,
                          f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                          "    token: dra-token")
    ns = SimpleNamespace(api=api, kubelet=kubelet, dirs=dirs, kubeconfig=str(kc),
                         registry=os.path.join(dirs.root, "reg"),
                         plugins=os.path.join(dirs.root, "draplug"),
                         cdi=os.path.join(dirs.root, "cdi"))
    ns.driver_dir = os.path.join(ns.plugins, DRIVER)
    ns.reg_socket = os.path.join(ns.registry, f"{DRIVER}-reg.sock")
    ns.dra_socket = os.path.join(ns.driver_dir, "dra.sock")
    ns.checkpoint = os.path.join(ns.driver_dir, "checkpoint.json")
    ns.config = hostdev_config([
        {"name": "a", "groups": [{"paths": [{"path": f"{dirs.dev}/ttyA*"}]}]},
        {"name": "b", "groups": [{"paths": [{"path": f"{dirs.dev}/ttyB*"}]}]},
    ], domain="devlet.io")
    ns.clients = []

    def start(extra=(), env=None, served=True):
        ns.d = devlet(ns.config, env=env, args=[
            "--backends", "hostdev", "--metrics-address", "", "--kubeconfig", ns.kubeconfig,
            "--node-name", NODE, "--kubelet-registrar-directory-path", ns.registry,
            "--kubelet-plugins-directory-path", ns.plugins, "--cdi-spec-dir", ns.cdi,
            "--dra-resources", A, *extra])
        if not served:
            return ns
        wait_until(lambda: os.path.exists(ns.dra_socket) and os.path.exists(ns.reg_socket),
                   10, "the DRA sockets")
        ns.k = DraKubelet(ns.reg_socket, ns.dra_socket)
        ns.clients.append(ns.k)
        return ns

    ns.start = start
    ns.spec = lambda uid: os.path.join(ns.cdi, f"k8s.{DRIVER}-claim_{uid}.json")
    yield ns
    for c in ns.clients:
        c.close()


def device_names(s):
    return [d["name"] for d in s["spec"]["devices"]]


def wait_slices(api, names, timeout=10.0, generation=None):
    """Waits until the node's hostdev pool is one slice holding exactly
    names (and generation, if given); returns that slice."""
    def check():
        got = [s for s in api.slices.values()
               if s["spec"]["nodeName"] == NODE and s["spec"]["driver"] == DRIVER]
        if len(got) == 1 and device_names(got[0]) == names and \
                generation in (None, got[0]["spec"]["pool"]["generation"]):
            return copy.deepcopy(got[0])
        return None
    return api.wait_for(check, timeout, f"the slice to hold {names} (generation {generation})")


def attrs(dev):
    return {k: next(iter(v.items())) for k, v in dev["attributes"].items()}


def device_plugin_prompt(kubelet):
    """The device plugin answers a new ListAndWatch and an Allocate for
    devlet.io/b within PROMPT seconds.  Returns the time they took."""
    start = time.monotonic()
    c = PluginClient(kubelet.endpoint(B).client.socket_path)
    try:
        stream = c.list_and_watch()
        first = next(stream)
        assert [d.ID for d in first.devices] == ["ttyB0"]
        stream.cancel()
        r = c.allocate([["ttyB0"]], timeout=PROMPT * 5)
        assert r.container_responses[0].devices[0].host_path.endswith("/ttyB0")
    finally:
        c.close()
    took = time.monotonic() - start
    assert took < PROMPT, f"the device plugin took {took:.2f}s"
    return took


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# devlet/<version> (linux/<GOARCH>) <component>
USER_AGENT = r"devlet/[^ /]+ \(linux/[a-z0-9]+\) "


# ------------------------------------------------------------ slices

def test_slices_published(dra):
    s = dra.start()
    sl = wait_slices(s.api, ["a-0", "a-1"])
    assert sl["metadata"]["name"] == f"{NODE}-hostdev-devlet-io-0"
    assert sl["spec"]["driver"] == DRIVER and sl["spec"]["nodeName"] == NODE
    assert sl["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    a0, a1 = sl["spec"]["devices"]
    assert attrs(a0)["path"] == ("string", f"{s.dirs.dev}/ttyA0")
    assert attrs(a1)["path"] == ("string", f"{s.dirs.dev}/ttyA1")
    assert attrs(a0)["resource"] == ("string", A)
    if os.geteuid() == 0:
        assert (attrs(a0)["major"], attrs(a0)["minor"]) == (("int", 4), ("int", 64))
        assert attrs(a1)["minor"] == ("int", 65)
    # the informer reads only this node's slices of its driver
    lists = [p for m, p in s.api.requests_since(0, "GET") if "resourceslices" in p]
    assert lists and all("fieldSelector=spec.nodeName%3Dnode-a%2Cspec.driver%3Dhostdev.devlet.io" in p
                         for p in lists), lists
    # devlet.io/a is DRA's alone; devlet.io/b the device plugin's alone
    s.kubelet.wait_for_registration(B)
    assert s.kubelet.wait_for_snapshot(B).ids() == ["ttyB0"]
    assert [r.resource_name for r in s.kubelet.accepted()] == [B]
    # a slice of another node or driver is left alone
    other = copy.deepcopy(sl)
    other["metadata"] = {"name": "node-b-hostdev-devlet-io-0"}
    other["spec"]["nodeName"] = other["spec"]["pool"]["name"] = "node-b"
    s.api.add_slice(other)
    s.kubelet.wait_for_snapshot(B)
    assert "node-b-hostdev-devlet-io-0" in s.api.slices_of()


def test_requests_name_devlet_and_dra(dra):
    """The API server's audit log and Priority and Fairness tell devlet's
    DRA driver from its other parts by the User-Agent."""
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    with s.api.lock:
        agents = set(s.api.agents)
    assert agents and all(re.fullmatch(USER_AGENT + "dra", a or "") for a in agents), agents


def test_kube_api_qps_paces_prepare(dra):
    """--kube-api-qps 2 --kube-api-burst 2: a prepare of 8 claims reads
    them at most 2 at once and then 2 a second (all of the client's
    requests counted), and still prepares every one."""
    s = dra.start(["--kube-api-qps", "2", "--kube-api-burst", "2"])
    wait_slices(s.api, ["a-0", "a-1"])
    refs = [claim_ref(f"q{i}") for i in range(8)]
    for i, (ns, uid, name) in enumerate(refs):
        s.api.put_claim(ns, name, uid, [("dev", DRIVER, NODE, f"a-{i % 2}")])
    n = len(s.api.requests)
    got = s.k.prepare(refs, timeout=30)
    assert all(got[uid].error == "" for _, uid, _ in refs), got
    with s.api.lock:
        times = s.api.times[n:]
    t0 = times[0]
    # 2 at once, then at 0.5, 1.0, 1.5 (and 2.0, at the window's edge)
    assert sum(1 for t in times if t < t0 + 2.0) <= 6, [round(t - t0, 2) for t in times]


def taints(sl):
    return {d["name"]: d.get("taints") for d in sl["spec"]["devices"] if d.get("taints")}


def test_hot_unplug_taints_the_device(dra):
    """A device that goes (unplugged: unhealthy) stays in its slice with a
    NoSchedule taint, so the scheduler allocates it no more and everyone
    sees why; its return removes the taint.  Each change is a new
    generation of the pool."""
    s = dra.start()
    sl = wait_slices(s.api, ["a-0", "a-1"], generation=1)
    assert taints(sl) == {}
    os.unlink(f"{s.dirs.dev}/ttyA1")
    sl = wait_slices(s.api, ["a-0", "a-1"], generation=2)
    assert sl["spec"]["pool"]["resourceSliceCount"] == 1
    assert taints(sl) == {"a-1": [{"key": f"{DRIVER}/unhealthy", "effect": "NoSchedule"}]}
    # a claim the scheduler made before it saw the change fails, saying why
    ref = claim_ref("late")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-1")])
    assert s.k.prepare([ref])[ref[1]].error == "claim default/late: device a-1 is unhealthy"
    # an admin-access claim (monitoring, debugging) gets it all the same
    admin = claim_ref("admin")
    s.api.put_claim(admin[0], admin[2], admin[1], [("dev", DRIVER, NODE, "a-1")], admin_access=True)
    assert s.k.prepare([admin])[admin[1]].error == ""
    assert s.k.unprepare([admin])[admin[1]] == ""
    make_node(f"{s.dirs.dev}/ttyA1", major=4, minor=65)
    sl = wait_slices(s.api, ["a-0", "a-1"], generation=3)
    assert taints(sl) == {}


def health_of(resp):
    return {d.device.device_name: (drahealth_pb2.HealthStatus.Name(d.health), d.message)
            for d in resp.devices}


@pytest.mark.parametrize("version", ["v1", "v1alpha1"])
def test_health_reaches_the_kubelet(dra, version):
    """The DRA health service (KEP-4680), as the kubelet uses it to fill
    each pod's allocatedResourcesStatus: a stream's first message lists
    every device of the driver with its health; an unplugged device comes
    as UNHEALTHY with its taint as the message, its return as HEALTHY
    again, each as a new full list."""
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    stream = s.k.watch_health(version)
    first = next(stream)
    assert health_of(first) == {"a-0": ("HEALTHY", ""), "a-1": ("HEALTHY", "")}
    d = first.devices[0]
    assert d.device.pool_name == NODE and abs(d.last_updated_time - time.time()) < 60
    assert d.health_check_timeout_seconds == 90
    os.unlink(f"{s.dirs.dev}/ttyA1")
    msg = next(stream)
    while health_of(msg)["a-1"][0] == "HEALTHY":
        msg = next(stream)
    assert health_of(msg) == {"a-0": ("HEALTHY", ""), "a-1": ("UNHEALTHY", f"{DRIVER}/unhealthy")}
    make_node(f"{s.dirs.dev}/ttyA1", major=4, minor=65)
    msg = next(stream)
    while health_of(msg)["a-1"][0] != "HEALTHY":
        msg = next(stream)
    stream.cancel()


def test_driver_metrics(dra):
    """The driver's families on devlet's endpoint (issue 29): prepare and
    unprepare durations as histograms, the claims refused, the requests in
    flight and the devices prepared claims hold, by driver; promtool reads
    them."""
    from metrics_sim import metrics_port, parse, promtool_check, scrape
    s = dra.start(extra=["--metrics-address", "127.0.0.1:0", "--collect-interval", "100"])
    port = metrics_port(s.d)
    wait_slices(s.api, ["a-0", "a-1"])
    ok, bad = claim_ref("m1"), claim_ref("m2")
    s.api.put_claim(ok[0], ok[2], ok[1], [("dev", DRIVER, NODE, "a-0")])
    assert s.k.prepare([ok])[ok[1]].error == ""
    assert s.k.prepare([bad])[bad[1]].error != ""  # no such claim on the server

    def sample(name, **labels):
        got = [v for n, lab, v in parse(scrape(port)) if n == name and all(lab.get(k) == w for k, w in labels.items())]
        return got[0] if got else None

    prep = dict(driver=DRIVER, method="NodePrepareResources")
    wait_until(lambda: sample("devlet_dra_operation_duration_seconds_count", **prep) == 2, 10,
               "the prepares counted", interval=0.1)
    assert sample("devlet_dra_operation_duration_seconds_bucket", le="+Inf", **prep) == 2
    assert sample("devlet_dra_claim_errors_total", **prep) == 1
    assert sample("devlet_dra_prepared_devices", driver=DRIVER) == 1
    assert sample("devlet_dra_requests_in_flight", driver=DRIVER) == 0
    assert s.k.unprepare([ok])[ok[1]] == ""
    wait_until(lambda: sample("devlet_dra_prepared_devices", driver=DRIVER) == 0, 10,
               "the unprepare counted", interval=0.1)
    unprep = dict(driver=DRIVER, method="NodeUnprepareResources")
    assert sample("devlet_dra_operation_duration_seconds_count", **unprep) == 1
    text = scrape(port)
    assert "# TYPE devlet_dra_operation_duration_seconds histogram" in text
    rc, out = promtool_check(text)
    assert rc in (0, 3), out


def test_amd_failures_taint_by_kind_evicting_those_named(dirs, api, certs, devlet):
    """An AMD GPU's failure taints its device gpu.amd.com/<kind>: uncorrectable
    RAS errors (ras), a KFD node gone (kfd); --amd-dra-no-execute ras makes
    the RAS taint NoExecute (the pods holding the GPU are evicted), the
    others stay NoSchedule; recovery removes them."""
    from test_amd import AmdNode
    n = AmdNode(dirs.run, "mi210-pair")
    kc = write_kubeconfig(pathlib.Path(dirs.work, "kubeconfig"), api.url,
                          f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                          "    token: dra-token")
    cfg = {"version": "v1", "health": {"recovery": {"enabled": True, "quietPeriod": "3s"}}}
    devlet(cfg, args=n.args(
        "--amd-health-interval", "50ms", "--metrics-address", "", "--kubeconfig", str(kc),
        "--node-name", NODE, "--kubelet-registrar-directory-path", os.path.join(dirs.root, "reg"),
        "--kubelet-plugins-directory-path", os.path.join(dirs.root, "draplug"),
        "--cdi-spec-dir", os.path.join(dirs.root, "cdi"), "--dra-resources", "amd.com/gpu",
        "--amd-dra-no-execute", "ras"))
    names = [f"gpu-{g['devices'][0]['card']}-{g['devices'][0]['render']}" for g in n.m["gpus"]]

    def amd_taints(want):
        def check():
            got = [sl for sl in api.slices.values()
                   if sl["spec"]["nodeName"] == NODE and sl["spec"]["driver"] == "gpu.amd.com"]
            if len(got) != 1 or sorted(device_names(got[0])) != sorted(names):
                return None
            t = {name: [(x["key"], x["effect"]) for x in v]
                 for name, v in taints(got[0]).items()}
            return got[0] if t == want else None
        return api.wait_for(check, 15, f"the AMD slice's taints to be {want}")

    amd_taints({})
    n.write(os.path.relpath(n.gpu_dir(2), n.sys) + "/ras/umc_err_count", "ue: 2\nce: 0\n")
    sl = amd_taints({names[2]: [("gpu.amd.com/ras", "NoExecute")]})
    added = taints(sl)[names[2]][0]["timeAdded"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", added), added
    amd_taints({})  # no new errors for the quiet period: recovered
    node = n.m["gpus"][1]["devices"][0]["kfd_node"]
    kfd = os.path.join(n.sys, "class/kfd/kfd/topology/nodes", str(node))
    saved = os.path.join(dirs.work, "kfd-node")
    shutil.move(kfd, saved)
    amd_taints({names[1]: [("gpu.amd.com/kfd", "NoSchedule")]})
    shutil.move(saved, kfd)
    amd_taints({})


def test_a_server_that_drops_taints_gets_no_unhealthy_device(dra):
    """An API server without device taints (DRADeviceTaints off: alpha
    before 1.36) drops them on write, which would publish an unhealthy
    device as schedulable: devlet sees its taint gone from the answer,
    says so once, and leaves unhealthy devices out of the slice instead."""
    s = dra.start()
    s.api.drop_taints = True
    wait_slices(s.api, ["a-0", "a-1"], generation=1)
    os.unlink(f"{s.dirs.dev}/ttyA1")
    sl = wait_slices(s.api, ["a-0"])
    assert taints(sl) == {}
    s.d.wait_log(r"the API server drops device taints \(DRADeviceTaints off\)")
    make_node(f"{s.dirs.dev}/ttyA1", major=4, minor=65)
    wait_slices(s.api, ["a-0", "a-1"])


def test_deleted_slice_comes_back(dra):
    s = dra.start()
    sl = wait_slices(s.api, ["a-0", "a-1"])
    s.api.wait_for(lambda: s.api.watchers == 1, what="devlet's watch")
    n = len(s.api.requests)
    assert s.api.delete(sl["metadata"]["name"]) == 200  # the kubelet wipes the node's slices
    back = wait_slices(s.api, ["a-0", "a-1"], timeout=5)
    assert back["metadata"]["uid"] != sl["metadata"]["uid"]
    assert ("POST", "/apis/resource.k8s.io/v1/resourceslices") in s.api.requests_since(n)
    # a slice changed behind devlet's back is put right too
    s.api.wait_for(lambda: s.api.watchers == 1, what="devlet's watch")
    with s.api.lock:
        changed = copy.deepcopy(s.api.slices[back["metadata"]["name"]])
        changed["spec"]["devices"] = changed["spec"]["devices"][:1]
        del changed["metadata"]["annotations"]
        assert s.api.update_slice(changed["metadata"]["name"], changed)[0] == 200
    wait_slices(s.api, ["a-0", "a-1"], timeout=5)


def test_slice_deleted_while_the_watch_is_away(dra):
    s = dra.start()
    api = s.api
    sl = wait_slices(api, ["a-0", "a-1"])
    api.wait_for(lambda: api.watchers == 1, what="devlet's watch")
    api.set_mode("gone", ("watch",))
    n = api.hit_count("watch")
    api.end_watches()
    api.wait_for(lambda: api.hits.get("watch", 0) > n and api.watchers == 0, what="a refused watch")
    assert api.delete(sl["metadata"]["name"]) == 200  # no watch to see it
    api.set_mode(None, ("watch",))
    # within one backoff (30 s at most)
    api.wait_for(lambda: api.watchers == 1, timeout=40, what="the watch back")
    # its first events are what exists: the slice's absence says nothing
    wait_slices(api, ["a-0", "a-1"], timeout=5)


def test_a_writer_undoing_our_slice_gets_a_paced_fight(dra):
    """Someone who takes devlet's content hash off its slice each time
    devlet writes it (another writer, a hostile server) gets a paced fight,
    not a loop: at most 8 of devlet's writes undone in 6 s (before, each
    came at once, hundreds of them); once they stop, the slice is devlet's
    again."""
    import threading
    s = dra.start()
    api = s.api
    name = wait_slices(api, ["a-0", "a-1"])["metadata"]["name"]
    done = threading.Event()
    undone = []  # one entry per write of devlet's taken back

    def ours():
        cur = api.slices.get(name)
        return cur if cur and (cur["metadata"].get("annotations") or {}).get(
            "devlet.io/content-hash") else None

    def undo():
        with api.lock:
            while not done.is_set():
                cur = ours()
                if cur:
                    new = copy.deepcopy(cur)
                    del new["metadata"]["annotations"]["devlet.io/content-hash"]
                    api.update_slice(name, new)
                    undone.append(1)
                api.lock.wait(1)  # woken by devlet's write (or by done)

    t = threading.Thread(target=undo, daemon=True)
    t.start()
    try:
        with pytest.raises(TimeoutError):
            api.wait_for(lambda: len(undone) > 8, timeout=6, what="more than 8 writes")
        assert len(undone) >= 2, "the publisher did not write the slice again"
    finally:
        done.set()
        with api.lock:
            api.lock.notify_all()
        t.join()
    api.wait_for(ours, timeout=40, what="the slice devlet's again")


def test_threads_that_cannot_start_leave_the_device_plugin_and_dra_serving(dra, build_dir):
    """pthread_create failing for every thread devlet's own code starts (an
    injected failure: tests/preload/fail-threads.c; libuv's pool is spared),
    with every feature that has a thread on (labels to the Node, metrics,
    pod labels): the labels publisher and the metrics endpoint each say what
    is lost; the DRA driver has no thread of its own (its informer and
    publisher run on the loop, its claims in libuv's pool), so it is served
    and prepares; the device plugin still registers and allocates; and a
    SIGTERM ends it cleanly (the fixture's check)."""
    env = {"LD_PRELOAD": os.path.join(build_dir, "preload", "fail-threads.so"),
           "DEVLET_TEST_FAIL_THREADS": "1"}
    if ASAN:  # the preloaded library comes before ASan's runtime
        env["ASAN_OPTIONS"] = "detect_leaks=1:exitcode=86:verify_asan_link_order=0"
    s = dra.start(env=env, extra=["--metrics-address", "127.0.0.1:0", "--labels-output", "node",
                                  "--kubernetes-enable-pod-labels"])
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("t1")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    assert s.k.prepare([ref])[ref[1]].error == ""
    s.kubelet.wait_for_registration(B)
    assert s.kubelet.wait_for_snapshot(B).ids() == ["ttyB0"]
    device_plugin_prompt(s.kubelet)
    s.d.wait_log(r"cannot start the publisher thread, labels are not published")
    s.d.wait_log(r"cannot serve metrics error=\"cannot start the HTTP thread")
    assert s.d.proc.poll() is None


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def test_dra_adds_no_thread(dra, devlet):
    """DRA on costs at most one thread over DRA off (it costs none: the
    informer and the publisher run on the loop, the claims in libuv's
    pool); before, three per driver."""
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("th")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    assert s.k.prepare([ref])[ref[1]].error == ""
    on = threads(s.d.pid)
    assert s.d.terminate() == 0
    d = devlet(s.config, args=[
        "--backends", "hostdev", "--metrics-address", "", "--kubeconfig", s.kubeconfig,
        "--node-name", NODE, "--cdi-spec-dir", s.cdi])
    s.kubelet.wait_for_registration(A)
    s.kubelet.wait_for_registration(B)
    off = threads(d.pid)
    assert on <= off + 1, (on, off)


def library_text_kib(pid, names):
    """Resident KiB of the executable mappings of the named libraries."""
    kib, cur = 0, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            p = line.split()
            if "-" in p[0] and len(p) >= 5 and ":" in p[3]:
                cur = p[1] == "r-xp" and len(p) > 5 and any(n in p[5] for n in names)
            elif cur and p[0] == "Rss:":
                kib += int(p[1])
    return kib


def test_openssl_pages_go_back_once_tls_is_quiet(dra):
    """The record layer's reads and writes (the slice watch, a claim's
    read) fault in OpenSSL's code 64 KiB at a time; once TLS has been quiet
    for a second or two devlet gives those pages back to the page cache,
    instead of holding them until the next handshake (2 MiB of its 8)."""
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("trim")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    assert s.k.prepare([ref])[ref[1]].error == ""
    libs = ("libcrypto.so", "libssl.so")
    deadline = time.monotonic() + 15
    seen = []
    while time.monotonic() < deadline:
        seen.append(library_text_kib(s.d.pid, libs))
        if seen[-1] == 0:
            break
        time.sleep(0.2)
    assert seen[-1] == 0, seen
    # and used again: the next claim's read maps them back and works
    ref2 = claim_ref("trim2")
    s.api.put_claim(ref2[0], ref2[2], ref2[1], [("dev", DRIVER, NODE, "a-1")])
    assert s.k.prepare([ref2])[ref2[1]].error == ""


def static_tls_bytes(path):
    """The PT_TLS segment's memory size of an ELF64 file: what glibc copies
    and zeroes at the top of every thread's stack when it starts."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from("<I", data, phoff + i * phentsize)
        if p_type == 7:  # PT_TLS
            return struct.unpack_from("<Q", data, phoff + i * phentsize + 0x28)[0]
    return 0


def test_threads_start_without_large_thread_locals():
    """Every thread devlet starts gets its own zeroed copy of the binary's
    thread-local data, touched whether the thread uses it or not: a read
    buffer there (64 KiB for HTTP/2, 8 KiB for the metrics endpoint) made
    each of a node's ten threads hold 80 KiB of stack."""
    assert static_tls_bytes(DEVLET_BIN) <= 1024


def test_a_moved_watch_cache_costs_one_relist(dra):
    """After the API server's watch cache moves on (a restart), the slice
    watch resyncs once and goes on: its watches start from a list's
    resourceVersion (bookmarks asked for), not from the slices' own, older
    ones, which the server refuses with 410 at every watch's end (a 410 and
    a list every 20 s, for ever)."""
    s = dra.start()
    api = s.api
    wait_slices(api, ["a-0", "a-1"])
    api.wait_for(lambda: api.watchers == 1, what="devlet's watch")
    api.compact_watch_cache()
    for i in range(4):  # four watches end, as at their timeoutSeconds
        n = api.hit_count("watch")
        api.end_watches()
        api.wait_for(lambda: api.hits.get("watch", 0) > n and api.watchers == 1, timeout=40,
                     what=f"watch {i + 1} back")
    with api.lock:
        assert api.gone_answers <= 1, api.gone_answers
    assert any("allowWatchBookmarks=true" in p for m, p in api.requests if "watch=1" in p)


def test_an_api_server_restart_costs_one_request(dra):
    """An API server that goes away, comes back with its watch cache moved
    on (a restart) and turns requests away with 429 for a while: the
    informer resyncs with one streaming list not older than what it had
    (never 410 + LIST + WATCH: no LIST, no 410), waits out Retry-After, and
    writes nothing, since nothing changed."""
    s = dra.start()
    api = s.api
    wait_slices(api, ["a-0", "a-1"])
    api.wait_for(lambda: api.watchers == 1, what="devlet's watch")
    n = len(api.requests)
    api.set_mode("busy", ("slices", "watch"), after=2)
    api.down()
    api.compact_watch_cache()
    api.up()
    api.wait_for(lambda: api.hits.get("watch", 0) >= 1 and len(api.requests) > n,
                 timeout=40, what="a request after the restart")
    api.set_mode(None, ("slices", "watch"))
    api.wait_for(lambda: api.watchers == 1, timeout=40, what="the watch back")
    # a while more: nothing else comes
    with pytest.raises(TimeoutError):
        api.wait_for(lambda: len([p for _, p in api.requests_since(n) if "resourceslices" in p])
                     > 4, timeout=3, what="more requests")
    after = [(m, p) for m, p in api.requests_since(n) if "resourceslices" in p]
    assert all(m == "GET" for m, _ in after), after  # no write
    assert not [p for _, p in after if "watch=" not in p], after  # no LIST
    assert all("sendInitialEvents=true" in p for _, p in after), after
    with api.lock:
        assert api.gone_answers == 0


def test_a_server_by_name(dra, certs):
    """A kubeconfig that names the server (localhost) rather than giving its
    address: the loop's calls resolve it in libuv's pool, never on the
    loop, and the slices are published and watched as by address."""
    s = dra
    s.kubeconfig = str(write_kubeconfig(
        pathlib.Path(s.dirs.work, "kubeconfig-name"), s.api.url.replace("127.0.0.1", "localhost"),
        f"    certificate-authority-data: {b64(certs / 'ca.crt')}", "    token: dra-token"))
    s.start()
    wait_slices(s.api, ["a-0", "a-1"])
    s.api.wait_for(lambda: s.api.watchers == 1, what="devlet's watch")


def test_a_quiet_watch_lives_its_timeout(dra):
    """A watch the server keeps open without an event for longer than the
    client's low-speed limit (30 s) is not cut: its silence limit is its
    timeoutSeconds plus a margin (here 40 s, through
    DEVLET_KAPI_WATCH_TIMEOUT; 5 to 10 minutes in production)."""
    s = dra.start(env={"DEVLET_KAPI_WATCH_TIMEOUT": "40-40"})
    api = s.api
    wait_slices(api, ["a-0", "a-1"])
    api.wait_for(lambda: api.watchers == 1, what="devlet's watch")
    n = api.hit_count("watch")
    assert any("timeoutSeconds=40" in p for _, p in api.requests if "watch=1" in p)
    with pytest.raises(TimeoutError):
        api.wait_for(lambda: api.hits.get("watch", 0) > n or api.watchers != 1, timeout=34,
                     what="the quiet watch cut")


@pytest.mark.parametrize("mode", ["gone", "gone-event", "ends"])
def test_refused_watches_are_paced(dra, mode):
    """A server that answers every slice watch with 410 (a status, or an
    ERROR event in a 200 stream) or ends it at once gets a backoff, never a
    loop: at most 10 watches and 10 lists in 5 s (a loop made 26 a second
    and more); after a 410 the informer resyncs with a streaming list (a
    watch with sendInitialEvents), after the backoff, and with a LIST only
    when that fails too; once the server behaves, the watch comes back."""
    s = dra.start()
    api = s.api
    wait_slices(api, ["a-0", "a-1"])
    api.wait_for(lambda: api.watchers == 1, what="devlet's watch")
    api.set_mode(mode, ("watch",))
    api.end_watches()
    api.wait_for(lambda: api.watchers == 0, what="the watch to end")
    watches, lists = api.hit_count("watch"), api.hit_count("slices")
    n = len(api.requests)
    with pytest.raises(TimeoutError):
        api.wait_for(lambda: api.hits.get("watch", 0) > watches + 10 or
                     api.hits.get("slices", 0) > lists + 10, timeout=5,
                     what="more than 10 watches or lists")
    assert api.hit_count("watch") > watches, "the watch was not tried again"
    # the first resync is a streaming list; a LIST only where that too failed
    after = [p for _, p in api.requests_since(n, "GET") if "resourceslices" in p]
    first = next(p for p in after if "sendInitialEvents=true" in p or "watch=" not in p)
    assert "sendInitialEvents=true" in first, after
    api.set_mode(None, ("watch",))
    api.wait_for(lambda: api.watchers == 1, timeout=40, what="the watch back")


# ------------------------------------------------------------ registration

def test_get_info(dra):
    s = dra.start()
    info = s.k.get_info()
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == s.dra_socket
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                             "v1alpha1.DRAResourceHealth"]
    assert stat.S_ISSOCK(os.stat(s.reg_socket).st_mode)
    s.k.notify(True)
    s.k.notify(False, "a test refused it")
    assert s.k.get_info().name == DRIVER


# ------------------------------------------------------------ prepare

def test_prepare_and_unprepare(dra):
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("c1")
    ns, uid, name = ref
    s.api.put_claim(ns, name, uid, [("dev", DRIVER, NODE, "a-1")])
    got = s.k.prepare([ref])
    assert list(got) == [uid] and got[uid].error == ""
    (dev,) = got[uid].devices
    assert (list(dev.request_names), dev.pool_name, dev.device_name) == (["dev"], NODE, "a-1")
    assert list(dev.cdi_device_ids) == [f"{KIND}={uid}-a-1"]

    with open(s.spec(uid)) as f:
        spec = json.load(f)
    assert spec["kind"] == KIND
    (cd,) = spec["devices"]
    assert cd["name"] == f"{uid}-a-1"
    assert [n["path"] for n in cd["containerEdits"]["deviceNodes"]] == [f"{s.dirs.dev}/ttyA1"]

    st = os.lstat(s.checkpoint)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    with open(s.checkpoint) as f:
        ck = json.load(f)
    assert ck["claims"][uid]["name"] == name

    # again, even with the claim gone from the API server: the same answer
    s.api.remove_claim(ns, name)
    n = len(s.api.requests)
    again = s.k.prepare([ref])
    assert again[uid] == got[uid]
    # the v1beta1 service answers the same
    assert s.k.prepare([ref], version="v1beta1")[uid] == got[uid]
    # from the checkpoint alone: no claim read, and no slice listed either
    assert [r for r in s.api.requests_since(n) if "watch=" not in r[1]] == []

    assert s.k.unprepare([ref]) == {uid: ""}
    assert not os.path.exists(s.spec(uid))
    with open(s.checkpoint) as f:
        assert uid not in json.load(f)["claims"]
    # unknown claims (and a second unprepare) succeed
    unknown = claim_ref("never-prepared")
    assert s.k.unprepare([ref, unknown], version="v1beta1") == {uid: "", unknown[1]: ""}

    # v1beta1 prepares too, two devices for one request in one CDI device
    ref2 = claim_ref("c2")
    s.api.put_claim(ref2[0], ref2[2], ref2[1], [("dev", DRIVER, NODE, "a-0"), ("dev", DRIVER, NODE, "a-1")])
    got = s.k.prepare([ref2], version="v1beta1")[ref2[1]]
    assert got.error == "" and [d.device_name for d in got.devices] == ["a-0", "a-1"]
    with open(s.spec(ref2[1])) as f:
        (cd,) = json.load(f)["devices"]
    assert sorted(n["path"] for n in cd["containerEdits"]["deviceNodes"]) == \
        [f"{s.dirs.dev}/ttyA0", f"{s.dirs.dev}/ttyA1"]
    assert s.k.unprepare([ref2], version="v1beta1") == {ref2[1]: ""}
    assert os.listdir(s.cdi) == []


def started_with_a_claim(dra):
    """devlet started, its slice published, claim c1 on a-0 prepared:
    (the namespace, the claim's ref, the kubelet's answer)."""
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("c1")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    first = s.k.prepare([ref])[ref[1]]
    assert first.error == ""
    return s, ref, first


def test_restart_between_prepare_and_unprepare(dra):
    s, ref, first = started_with_a_claim(dra)
    assert s.d.terminate() == 0
    s.api.remove_claim(ref[0], ref[2])

    s.start()
    # answered from the checkpoint: the claim is no longer in the API server
    assert s.k.prepare([ref])[ref[1]] == first
    assert s.k.unprepare([ref]) == {ref[1]: ""}
    assert not os.path.exists(s.spec(ref[1]))
    with open(s.checkpoint) as f:
        assert json.load(f)["claims"] == {}


@pytest.mark.parametrize("damage", ["empty", "torn"])
def test_a_spec_a_crash_damaged_is_made_again(dra, damage):
    """Claims' CDI specs are written without fsync (the checkpoint's is the
    one that counts): after a crash one may be empty or cut short, and the
    kubelet's next prepare of that claim writes it again rather than
    answering CDI IDs the runtime cannot resolve."""
    s, ref, first = started_with_a_claim(dra)
    with open(s.spec(ref[1])) as f:
        whole = f.read()
    assert s.d.terminate() == 0
    with open(s.spec(ref[1]), "w") as f:
        f.write("" if damage == "empty" else whole[:len(whole) // 2])
    s.start()
    assert s.k.prepare([ref])[ref[1]] == first
    with open(s.spec(ref[1])) as f:
        assert json.load(f) == json.loads(whole)


def test_prepare_errors(dra):
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    good, gone, replaced, unallocated, foreign, missing = (
        claim_ref(n) for n in ("good", "gone", "replaced", "unallocated", "foreign", "missing"))
    s.api.put_claim(good[0], good[2], good[1], [("dev", DRIVER, NODE, "a-0")])
    s.api.put_claim(gone[0], gone[2], gone[1], [("dev", DRIVER, NODE, "a-7")])
    s.api.put_claim(replaced[0], replaced[2], str(uuid.uuid4()), [("dev", DRIVER, NODE, "a-0")])
    s.api.put_claim(unallocated[0], unallocated[2], unallocated[1], allocated=False)
    s.api.put_claim(foreign[0], foreign[2], foreign[1], [("dev", DRIVER, "node-b", "a-0")])
    n = len(s.api.requests)
    got = s.k.prepare([good, gone, replaced, unallocated, foreign, missing])
    # each claim read once: asking again would only get the same answer
    reads = [p.rsplit("/", 1)[1] for _, p in s.api.requests_since(n, "GET") if "resourceclaims" in p]
    assert sorted(reads) == sorted(r[2] for r in (good, gone, replaced, unallocated, foreign, missing))
    assert got[good[1]].error == "" and len(got[good[1]].devices) == 1
    errors = {r[2]: got[r[1]].error for r in (gone, replaced, unallocated, foreign, missing)}
    assert "a-7" in errors["gone"] and "not on this node" in errors["gone"], errors
    assert "UID" in errors["replaced"] and replaced[1] in errors["replaced"], errors
    assert "not allocated" in errors["unallocated"], errors
    assert "node-b" in errors["foreign"] and NODE in errors["foreign"], errors
    assert "404" in errors["missing"] and "not found" in errors["missing"], errors
    for r in (gone, replaced, unallocated, foreign, missing):
        assert errors[r[2]].startswith(f"claim default/{r[2]}: "), errors
        assert errors[r[2]].count("claim default/") == 1, errors  # said once
        assert not got[r[1]].devices
        assert not os.path.exists(s.spec(r[1]))
    with open(s.checkpoint) as f:
        assert list(json.load(f)["claims"]) == [good[1]]


@pytest.mark.parametrize("bad", [("default", "NOT-A-UID", "c"), ("Bad_NS", str(uuid.uuid4()), "c"),
                                 ("default", str(uuid.uuid4()), ""), ("", "", "")])
def test_invalid_claim_reference(dra, bad):
    s = dra.start()
    for version in ("v1", "v1beta1"):
        with pytest.raises(grpc.RpcError) as e:
            s.k.prepare([claim_ref("ok"), bad], version=version)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
        assert "claim 1: invalid namespace, name or UID" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            s.k.unprepare([bad], version=version)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert not os.path.exists(s.checkpoint) or json.load(open(s.checkpoint))["claims"] == {}


def test_garbage_on_the_sockets(dra):
    s = dra.start()
    for path in (s.dra_socket, s.reg_socket):
        sock = raw_connect(path)
        send_quietly(sock, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
        assert closed_by_peer(sock, timeout=5)
        sock.close()
    # a gRPC message that is not a request
    bad = s.k.dra.unary_unary(DRA_SERVICE["v1"] + "NodePrepareResources",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        bad(b"\xff\xff\xff\xff\x0f", timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert s.k.get_info().name == DRIVER
    assert s.k.unprepare([claim_ref("x")]) != {}


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7f | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def raw_call(channel, path):
    return channel.unary_unary(path, request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)


def test_huge_requests_refused_before_decoding(dra):
    """4 MiB of empty entries (2 bytes each on the wire, some 100 once
    decoded) are counted on the wire and refused before anything is decoded:
    a clear RESOURCE_EXHAUSTED, and devlet's peak memory grows by less than
    32 MiB (decoding them took it from 10 to over 200 MiB).  The device
    plugin's requests are counted the same way; bytes that are not protobuf
    are INVALID_ARGUMENT, saying why."""
    s = dra.start()
    s.kubelet.wait_for_registration(B)
    wait_slices(s.api, ["a-0", "a-1"])
    flood = b"\x0a\x00" * ((4 << 20) // 2 - 16)  # field 1, length 0: an empty entry
    before = s.d.vm_hwm_kib()
    for version in ("v1", "v1beta1"):
        for method, message in (("NodePrepareResources", "NodePrepareResourcesRequest"),
                                ("NodeUnprepareResources", "NodeUnprepareResourcesRequest")):
            with pytest.raises(grpc.RpcError) as e:
                raw_call(s.k.dra, DRA_SERVICE[version] + method)(flood, timeout=20)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
            assert e.value.details() == f"{message}.claims: more than 1024 entries"
    plugin = grpc.insecure_channel(unix_target(s.kubelet.endpoint(B).client.socket_path),
                                   options=CHANNEL_OPTIONS)
    try:
        for method, message in (("Allocate", "AllocateRequest"),
                                ("GetPreferredAllocation", "PreferredAllocationRequest")):
            with pytest.raises(grpc.RpcError) as e:
                raw_call(plugin, f"/v1beta1.DevicePlugin/{method}")(flood, timeout=20)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
            assert e.value.details() == f"{message}.container_requests: more than 65536 entries"
        # one ID in each of two containers, then a container of empty IDs
        many = b"\x0a\x00" * ((1 << 20) + 1)
        ids = b"\x0a\x02\x0a\x00" * 2 + b"\x0a" + varint(len(many)) + many
        with pytest.raises(grpc.RpcError) as e:
            raw_call(plugin, "/v1beta1.DevicePlugin/Allocate")(ids, timeout=20)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
        assert e.value.details() == "ContainerAllocateRequest.devices_ids: more than 65536 entries"
    finally:
        plugin.close()
    grown = s.d.vm_hwm_kib() - before
    assert grown < (96 if ASAN else 32) * 1024, f"devlet's peak grew by {grown} KiB"
    # malformed: a claim whose length runs past the end
    with pytest.raises(grpc.RpcError) as e:
        raw_call(s.k.dra, DRA_SERVICE["v1"] + "NodePrepareResources")(b"\x0a\x00" * 4 + b"\x0a\x05",
                                                                     timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert e.value.details() == "malformed NodePrepareResourcesRequest: field 1: 5 bytes, past the end"
    # and it still serves
    ref = claim_ref("after")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    assert s.k.prepare([ref])[ref[1]].error == ""
    device_plugin_prompt(s.kubelet)


def test_checkpoint_write_failure(dra):
    """A checkpoint that cannot be written fails the claim and leaves nothing
    behind (no entry in memory, no CDI spec): the kubelet's retry gets the
    same error, not a success from memory, and once the disk is repaired the
    retry prepares afresh and the checkpoint names the claim.  An unprepare
    whose checkpoint cannot be written keeps the claim prepared, in memory as
    on disk, and fails until it can."""
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("c1")
    ns, uid, name = ref
    s.api.put_claim(ns, name, uid, [("dev", DRIVER, NODE, "a-1")])
    # a directory where the checkpoint goes: its rename fails (EISDIR), root or not
    os.mkdir(s.checkpoint)
    for attempt in range(2):
        got = s.k.prepare([ref])[uid]
        assert got.error.startswith(f"claim default/c1: cannot write the checkpoint {s.checkpoint}: "), \
            (attempt, got)
        assert not got.devices
        assert not os.path.exists(s.spec(uid))
    os.rmdir(s.checkpoint)
    got = s.k.prepare([ref])[uid]
    assert got.error == "" and [d.device_name for d in got.devices] == ["a-1"]
    with open(s.checkpoint) as f:
        assert json.load(f)["claims"][uid]["name"] == name
    assert os.path.exists(s.spec(uid))

    os.unlink(s.checkpoint)
    os.mkdir(s.checkpoint)
    for attempt in range(2):
        err = s.k.unprepare([ref])[uid]
        assert err.startswith(f"claim default/c1: cannot write the checkpoint {s.checkpoint}: "), \
            (attempt, err)
    os.rmdir(s.checkpoint)
    assert s.k.unprepare([ref]) == {uid: ""}
    with open(s.checkpoint) as f:
        assert json.load(f)["claims"] == {}
    assert not os.path.exists(s.spec(uid))


@pytest.mark.parametrize("kind", ["symlink", "fifo", "garbage", "not-devlets"])
def test_checkpoint_not_trusted(dra, kind):
    s = dra
    os.makedirs(s.driver_dir)
    ref = claim_ref("c1")
    target = os.path.join(s.dirs.run, "elsewhere.json")
    planted = json.dumps({"version": 1, "driver": DRIVER, "claims": {ref[1]: {
        "namespace": ref[0], "name": ref[2], "devices": [
            {"requests": ["dev"], "pool": NODE, "device": "a-0", "cdiDeviceIDs": ["evil.com/x=y"]}]}}})
    if kind == "symlink":
        with open(target, "w") as f:
            f.write(planted)
        os.symlink(target, s.checkpoint)
    elif kind == "fifo":
        os.mkfifo(s.checkpoint, 0o600)
    elif kind == "garbage":
        with open(s.checkpoint, "wb") as f:
            f.write(b"\x00{not json" + os.urandom(100))
    else:
        with open(s.checkpoint, "w") as f:
            json.dump({"claims": ["a list"]}, f)
    # what a followed link would answer from: the claim's spec present
    os.makedirs(s.cdi)
    with open(s.spec(ref[1]), "w") as f:
        f.write("{}")
    s.start()
    s.d.wait_log(r"(?i)warn.*checkpoint", timeout=5)
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-1")])
    got = s.k.prepare([ref])[ref[1]]
    assert got.error == ""
    assert [d.device_name for d in got.devices] == ["a-1"]
    assert list(got.devices[0].cdi_device_ids) == [f"{KIND}={ref[1]}-a-1"]
    st = os.lstat(s.checkpoint)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    if kind == "symlink":
        with open(target) as f:
            assert f.read() == planted  # written around, not through


# ------------------------------------------------------------ a hostile API server

HOSTILE = {
    # mode: (routes, params, what a failed prepare says; None: it succeeds)
    "down": ((), {}, "connect"),
    "hangup": (("slices", "watch", "claims"), {}, "the connection closed before a response came"),
    "slow": (("slices", "watch", "claims"), {"delay": 1.5}, None),
    "huge": (("watch", "claims"), {}, "over the limit (16777216 bytes)"),
    "malformed": (("watch", "claims"), {}, "not JSON"),
    "gone": (("slices", "watch", "claims"), {}, "410"),
    "error": (("slices", "watch", "claims"), {}, "500 Internal Server Error: etcdserver: request timed out"),
    "silent": (("slices", "watch", "claims"), {}, "DEADLINE"),
}


@pytest.mark.parametrize("mode", list(HOSTILE))
def test_hostile_api_server(dra, mode):
    routes, params, expect = HOSTILE[mode]
    s = dra
    api = s.api
    ref = claim_ref("c1")
    api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    if mode == "down":
        api.down()
    else:
        api.set_mode(mode, routes, **params)
    s.start()
    s.kubelet.wait_for_registration(B)
    s.kubelet.wait_for_snapshot(B)
    if mode != "down":
        api.wait_for(lambda: api.hits.get("watch", 0) >= 1, what="the informer's first call")

    # the kubelet's prepare, with its own deadline (the real one's is 45 s)
    start = time.monotonic()
    fut = s.k.prepare_future([ref], timeout=3 if mode == "silent" else 40)
    device_plugin_prompt(s.kubelet)  # while the prepare waits on the API server
    if mode == "silent":
        with pytest.raises(grpc.RpcError) as e:
            fut.result()
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    else:
        got = fut.result().claims[ref[1]]
        took = time.monotonic() - start
        if expect is None:
            assert got.error == "" and got.devices[0].device_name == "a-0"
        else:
            assert got.error.startswith(f"claim default/c1: ") and expect in got.error, got.error
            assert not got.devices
            assert took < 15, f"prepare failed after {took:.1f}s"
    device_plugin_prompt(s.kubelet)
    # nothing the server sent is kept: the 64 MiB bodies were cut at 16 MiB
    # (a claim) and 4 MiB (a watch's line)
    if mode == "huge":
        api.wait_for(lambda: api.hits.get("watch", 0) >= 2, what="a second watch")
    hwm, rss = s.d.vm_hwm_kib(), vm_rss_kib(s.d.pid)
    assert hwm < HWM_MAX_KIB, f"devlet peaked at {hwm} KiB"
    assert rss < RSS_MAX_KIB, f"devlet holds {rss} KiB"

    if mode == "silent":
        # every call hangs: devlet still stops at once
        t0 = time.monotonic()
        assert s.d.terminate() == 0
        assert time.monotonic() - t0 < 3
        return
    # back to normal: the slices come (the publisher's backoff is short yet)
    if mode == "down":
        api.up()
    api.set_mode(None)
    wait_slices(api, ["a-0", "a-1"], timeout=10)
    if expect is not None:
        assert s.k.prepare([ref])[ref[1]].error == ""


# ------------------------------------------------------------ cleanup

def test_cleanup_on_sigterm(dra):
    s = dra.start(["--dra-cleanup"])
    sl = wait_slices(s.api, ["a-0", "a-1"])
    other = copy.deepcopy(sl)
    other["metadata"] = {"name": "node-b-hostdev-devlet-io-0"}
    other["spec"]["nodeName"] = other["spec"]["pool"]["name"] = "node-b"
    s.api.add_slice(other)
    assert s.d.terminate() == 0
    assert list(s.api.slices_of()) == ["node-b-hostdev-devlet-io-0"]
    assert not os.path.exists(s.dra_socket) and not os.path.exists(s.reg_socket)

    # an API server that never answers holds the way out up for a second at most
    s.start(["--dra-cleanup"])
    wait_slices(s.api, ["a-0", "a-1"])
    s.api.set_mode("silent", ("slices",))
    n = len(s.api.requests)
    t0 = time.monotonic()
    assert s.d.terminate() == 0
    assert time.monotonic() - t0 < 3
    assert len(s.api.requests_since(n, "DELETE")) == 1


def test_no_cleanup_by_default(dra):
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    assert s.d.terminate() == 0
    assert len(s.api.slices_of(NODE, DRIVER)) == 1


def test_cleanup_command(dra):
    s = dra.start()
    sl = wait_slices(s.api, ["a-0", "a-1"])
    assert s.d.terminate() == 0
    other = copy.deepcopy(sl)
    other["metadata"] = {"name": "node-b-x"}
    other["spec"]["nodeName"] = "node-b"
    s.api.add_slice(other)
    n = len(s.api.requests)
    r = devlet_cli("dra", "cleanup", "--kubeconfig", s.kubeconfig, "--node-name", NODE)
    assert r.returncode == 0, r.stderr
    assert f"deleted the ResourceSlices of {DRIVER}" in r.stdout
    assert list(s.api.slices_of()) == ["node-b-x"]
    deletes = s.api.requests_since(n, "DELETE")
    assert len(deletes) == 3 and all("spec.nodeName%3Dnode-a" in p for _, p in deletes), deletes
    # the API server down: a clear error, non-zero
    s.api.down()
    r = devlet_cli("dra", "cleanup", "--kubeconfig", s.kubeconfig, "--node-name", NODE, DRIVER)
    assert r.returncode == 1
    assert f"driver {DRIVER}" in r.stderr and s.api.url in r.stderr, r.stderr


# ------------------------------------------------------------ TLS files

@pytest.mark.parametrize("field", ["certificate-authority", "client-key"])
def test_fifo_as_a_tls_file_of_the_kubeconfig(dra, certs, field):
    """A FIFO that never gets a writer as the kubeconfig's CA or client key:
    OpenSSL's blocking fopen of it used to hang the call that built the TLS
    context, with the API client's lock held, so every later call (and
    prepare) waited for ever.  Now each call fails at once naming the file,
    prepare answers with that error, the device plugin answers all along,
    and a real file put in its place is read by the next call."""
    s = dra
    fifo = os.path.join(s.dirs.work, "tls-file")
    os.mkfifo(fifo)
    cert = os.path.join(s.dirs.work, "client.crt")
    with open(cert, "wb") as f:
        f.write((certs / "client.crt").read_bytes())
    if field == "certificate-authority":
        cluster, user, real = f"    certificate-authority: {fifo}", "    token: dra-token", "ca.crt"
    else:
        cluster = f"    certificate-authority-data: {b64(certs / 'ca.crt')}"
        user, real = f"    client-certificate: {cert}\n    client-key: {fifo}", "client.key"
    s.kubeconfig = str(write_kubeconfig(pathlib.Path(s.dirs.work, "kubeconfig-fifo"), s.api.url,
                                        cluster, user))
    ref = claim_ref("c1")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")])
    s.start()
    s.kubelet.wait_for_registration(B)
    what = "CA file" if field == "certificate-authority" else "client key"
    s.d.wait_log(r"cannot watch ResourceSlices, retrying driver=\S+ error=\"[^\"]*"
                 + re.escape(f"{what} {fifo}: not a regular file"))
    got = s.k.prepare([ref], timeout=10)[ref[1]]
    assert got.error.startswith("claim default/c1: "), got.error
    assert f"{what} {fifo}: not a regular file" in got.error, got.error
    assert not got.devices
    device_plugin_prompt(s.kubelet)
    assert not [p for _, p in s.api.requests if "resourceclaims" in p]

    os.unlink(fifo)
    with open(fifo + ".new", "wb") as f:
        f.write((certs / real).read_bytes())
    os.rename(fifo + ".new", fifo)
    wait_slices(s.api, ["a-0", "a-1"], timeout=15)
    assert s.k.prepare([ref])[ref[1]].error == ""


def test_an_opaque_config_for_a_driver_that_takes_none_is_refused(dra):
    s = dra.start()
    wait_slices(s.api, ["a-0", "a-1"])
    ref = claim_ref("configured")
    s.api.put_claim(ref[0], ref[2], ref[1], [("dev", DRIVER, NODE, "a-0")], config=[
        {"source": "FromClaim", "opaque": {"driver": "other.example.com", "parameters": {}}},
        {"source": "FromClaim", "requests": ["dev"],
         "opaque": {"driver": DRIVER, "parameters": {"kind": "Anything"}}}])
    got = s.k.prepare([ref])[ref[1]]
    assert got.error == (f"claim default/configured: the claim's config[1]: driver {DRIVER} takes "
                         f"no opaque configuration for {A} (device a-0)"), got.error
    assert not os.path.exists(s.spec(ref[1]))
