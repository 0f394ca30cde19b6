"""GPU health as the kubelet sees it in ListAndWatch, over the mock NVML:
an XID makes its GPU Unhealthy together with all its MIG devices (and their
replicas) across resources; the XIDs ignored by default are ignored;
DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS (all, xids, a list, and
DISABLE=all with ENABLE=<list>); a GPU that NVML reports lost goes Unhealthy
at once and GetPreferredAllocation still answers without it (also after a
SIGHUP re-enumeration that finds it lost); health.recovery brings GPUs back
after a quiet period; SIGHUP re-enumerates a node whose GPUs changed; an
unhealthy GPU stays unhealthy across reloads (SIGHUP, config change, kubelet
restart) and still recovers after one; a reload never waits for the old
health thread to leave its NVML event wait.

Nothing here sleeps to see that something did not happen: an event that
must change nothing is followed, in the same NVML event log, by one that
must (a sentinel), and the sentinel's snapshot is checked for both; the
monitor handles events in order and devlet sends the kubelet every change
in order.  Where the sentinel cannot be an XID (all XIDs ignored), devlet's
log line for the ignored XID says the event was handled before the
sentinel is written."""

import json
import os
import re

from devlet_harness import hostdev_config, make_node, run_devlet, wait_until
from mock_gpus import GPU, V100, start

IGNORED_BY_DEFAULT = (13, 31, 43, 45, 68, 109)
# the reload line (a reload keeps each resource's registration and stream)
RELOADED = r"daemon: reloaded resources=\d+"


def unhealthy(*ids):
    return lambda s: all(s.health(i) == "Unhealthy" for i in ids)


def healthy(*ids):
    return lambda s: all(s.health(i) == "Healthy" for i in ids)


def wait_ignored(d, gpu, xid):
    """Waits for devlet's log to say the monitor handled (and ignored) an XID."""
    d.wait_log(rf"ignored XID gpu={gpu} uuid=\S+ xid={xid}\b")


# ------------------------------------------------------------ XIDs

def test_xid_marks_mig_devices_and_their_replicas(kubelet, devlet, node):
    n = node("a100-mig-mixed")
    small, mid, big = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"
    config = {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
        "resources": [{"name": small, "replicas": 2}]}}}
    start(devlet, kubelet, n, config=config, resources=[GPU, small, mid, big])
    gpu0, gpu1 = n.mig_uuids(0), n.mig_uuids(1)
    reps = lambda uuids: [f"{u}::{k}" for u in uuids for k in range(2)]  # noqa: E731
    assert kubelet.wait_for_snapshot(small).ids() == reps(gpu0[2:] + gpu1)

    # an XID on GPU 1: its seven 1g.10gb devices, both replicas of each
    n.xid(1, 79)
    snap = kubelet.wait_for_snapshot(small, unhealthy(*reps(gpu1)))
    assert snap.healthy_ids() == reps(gpu0[2:])

    # an XID in one MIG instance of GPU 0 (gi 5: its 2g.20gb) takes the whole
    # board: the 3g.40gb and both 1g.10gb beside it too
    n.xid(0, 94, gi=5, ci=0)
    kubelet.wait_for_snapshot(mid, unhealthy(gpu0[0]))
    snap = kubelet.wait_for_snapshot(big, unhealthy(gpu0[1]))
    assert snap.healthy_ids() == n.mig_uuids(2)[1:] + n.mig_uuids(3)[:1]  # GPUs 2 and 3's (3g.40gb only)
    assert kubelet.wait_for_snapshot(small, unhealthy(*reps(gpu0[2:]))).healthy_ids() == []
    assert kubelet.wait_for_snapshot(GPU).healthy_ids() == n.uuids()[4:]


def test_default_ignored_xids(kubelet, devlet, node):
    n = node("v100-dgx1")
    d = start(devlet, kubelet, n)
    # GPU 0 gets every ignored XID, then GPU 1 a critical one
    n.xids([(0, x) for x in IGNORED_BY_DEFAULT] + [(1, 79)])
    snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[1]))
    assert snap.healthy_ids() == [u for u in V100 if u != V100[1]]
    for x in IGNORED_BY_DEFAULT:
        wait_ignored(d, 0, x)


def run_with(devlet, kubelet, node, disable=None, enable=None):
    env = {}
    if disable is not None:
        env["DP_DISABLE_HEALTHCHECKS"] = disable
    if enable is not None:
        env["DP_ENABLE_HEALTHCHECKS"] = enable
    n = node("v100-dgx1")
    return n, start(devlet, kubelet, n, env=env)


def test_disable_a_list_enable_a_list(kubelet, devlet, node):
    n, d = run_with(devlet, kubelet, node, disable="48, 79", enable="43")
    # 79 and 48 ignored on top of the defaults; 43 made critical again
    n.xids([(0, 79), (2, 48), (3, 13), (1, 43)])
    snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[1]))
    assert snap.healthy_ids() == [u for u in V100 if u != V100[1]]
    n.xid(0, 94)
    kubelet.wait_for_snapshot(GPU, unhealthy(V100[0]))


def test_enable_all(kubelet, devlet, node):
    n, d = run_with(devlet, kubelet, node, enable="all")
    n.xid(5, 13)
    snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[5]))
    assert len(snap.healthy_ids()) == 7


def test_disable_xids_still_sees_lost_gpus(kubelet, devlet, node):
    n, d = run_with(devlet, kubelet, node, disable="xids")
    n.xid(0, 79)
    wait_ignored(d, 0, 79)
    n.set_device(1, lost=True)
    snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[1]))
    assert snap.healthy_ids() == [u for u in V100 if u != V100[1]]


def test_disable_all_with_an_enable_list(kubelet, devlet, node):
    # NVIDIA documents this as "only these XIDs", but its code checks nothing
    n, d = run_with(devlet, kubelet, node, disable="all", enable="48,94")
    n.xids([(0, 79), (2, 13), (1, 48)])
    snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[1]))
    assert snap.healthy_ids() == [u for u in V100 if u != V100[1]]
    n.xid(3, 94)
    kubelet.wait_for_snapshot(GPU, unhealthy(V100[3]))


def test_disable_all(kubelet, devlet, node):
    n, d = run_with(devlet, kubelet, node, disable="ALL")
    # no monitor at all: nothing could ever react to an event, so there is
    # no event to wait for; devlet says so, and so does `devlet list`
    assert "health checks disabled (DP_DISABLE_HEALTHCHECKS=all)" in d.log_text()
    assert "health monitoring started" not in d.log_text()
    assert kubelet.wait_for_snapshot(GPU).healthy_ids() == V100
    r = run_devlet(["list", "-o", "json", "--backends", "nvidia"],
                   env=n.env(DP_DISABLE_HEALTHCHECKS="all"))
    assert json.loads(r.stdout)["backends"]["nvidia"]["health"] == "disabled (DP_DISABLE_HEALTHCHECKS=all)"


def test_policy_as_devlet_list_shows_it(node):
    n = node("v100-dgx1")
    cases = [({}, "13,31,43,45,68,109"),
             ({"DP_DISABLE_HEALTHCHECKS": "48,79", "DP_ENABLE_HEALTHCHECKS": "43"}, "13,31,45,68,109,48,79"),
             ({"DP_DISABLE_HEALTHCHECKS": "xids"}, "all"),
             ({"DP_DISABLE_HEALTHCHECKS": "all", "DP_ENABLE_HEALTHCHECKS": "48,94"}, "all except 48,94"),
             ({"DP_ENABLE_HEALTHCHECKS": "all"}, "none")]
    for env, ignored in cases:
        r = run_devlet(["list", "-o", "json", "--backends", "nvidia"], env=n.env(**env))
        assert r.returncode == 0, r.stderr
        health = json.loads(r.stdout)["backends"]["nvidia"]["health"]
        assert health == f"not monitored (one-shot); XIDs ignored: {ignored}", env


# ------------------------------------------------------------ lost GPUs

def test_lost_gpu_and_preferred_allocation(kubelet, devlet, node):
    n = node("v100-dgx1")
    d = start(devlet, kubelet, n)
    n.set_device(0, lost=True)
    snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[0]))
    assert snap.healthy_ids() == V100[1:]
    # NVIDIA's plugin fails every allocation on the node now; devlet answers
    # from the topology it read at start, without the lost GPU: of the quads
    # left, 4-7 has as many NVLinks as 0-3 had
    assert kubelet.preferred(GPU, V100, [], 4) == V100[4:]
    assert kubelet.preferred(GPU, V100, [], 2) == [V100[2], V100[3]]

    # re-enumerated while lost: NVML cannot say who GPU 0 is any more.  A
    # reload keeps the resource's registration and its stream (a kubelet
    # since 1.37 refuses a second one while connected): the new devices come
    # down the open ListAndWatch
    since = d.log_size()
    d.sighup()
    d.wait_log(RELOADED, since=since)
    snap = kubelet.wait_for_snapshot(GPU, lambda s: "lost-gpu-0" in s)
    assert len(kubelet.accepted(GPU)) == 1
    assert snap.ids() == ["lost-gpu-0"] + V100[1:]
    assert snap.health("lost-gpu-0") == "Unhealthy" and snap.healthy_ids() == V100[1:]
    assert kubelet.preferred(GPU, snap.ids(), [], 4) == V100[4:]
    assert kubelet.preferred(GPU, snap.ids(), [V100[1]], 2) == [V100[1], V100[2]]


# ------------------------------------------------------------ recovery

def test_recovery_after_a_quiet_period(kubelet, devlet, node):
    n = node("v100-dgx1")
    config = {"version": "v1", "health": {"recovery": {"enabled": True, "quietPeriod": "300ms"}},
              "sharing": {"timeSlicing": {"resources": [{"name": GPU, "replicas": 2}]}}}
    d = start(devlet, kubelet, n, config=config)
    reps = [f"{V100[2]}::0", f"{V100[2]}::1"]
    n.xid(2, 79)
    kubelet.wait_for_snapshot(GPU, unhealthy(*reps))
    snap = kubelet.wait_for_snapshot(GPU, healthy(*reps))
    assert len(snap.healthy_ids()) == 16
    assert re.search(r"GPU healthy again gpu=2 .*no critical event for \d+ ms", d.log_text())

    # a lost GPU comes back once NVML answers for it again
    n.set_device(6, lost=True)
    lost = [f"{V100[6]}::0", f"{V100[6]}::1"]
    kubelet.wait_for_snapshot(GPU, unhealthy(*lost))
    n.set_device(6, lost=False)
    kubelet.wait_for_snapshot(GPU, lambda s: len(s.healthy_ids()) == 16)
    # and an XID after recovery counts again
    n.xid(2, 48)
    kubelet.wait_for_snapshot(GPU, unhealthy(*reps))


# ------------------------------------------------------------ re-enumeration

def test_sighup_reenumerates_changed_gpus(kubelet, devlet, node):
    n = node("h100-8x-nvswitch")
    eighth = n.devices.pop()
    n.write()
    d = start(devlet, kubelet, n)
    uuids = n.uuids()
    assert kubelet.wait_for_snapshot(GPU).ids() == uuids
    n.devices.append(eighth)
    n.write()
    d.sighup()
    snap = kubelet.wait_for_snapshot(GPU, lambda s: len(s.ids()) == 8)
    assert snap.ids() == uuids + [eighth["uuid"]] and snap.devices[7].numa == 1
    assert len(kubelet.preferred(GPU, snap.ids(), [eighth["uuid"]], 8)) == 8
    # the new GPU is watched too
    n.xid(7, 79)
    kubelet.wait_for_snapshot(GPU, unhealthy(eighth["uuid"]))


# ------------------------------------------------------------ reloads

def new_stream_snapshots(kubelet, resource, **registration):
    """The snapshots of the ListAndWatch stream the kubelet opened after the
    registration named (count=N or generation=G), once it is current."""
    ep = kubelet.wait_for_registration(resource, **registration).endpoint_obj
    assert kubelet.endpoint(resource) is ep
    return lambda: ep.snapshots


def snapshots_after_reload(kubelet, resource, d, reload):
    """reload() (a config reload), then the snapshots the open
    ListAndWatch stream got since: a reload keeps the registration and its
    stream."""
    ep = kubelet.endpoint(resource)
    first = len(ep.snapshots)
    since = d.log_size()
    reload()
    d.wait_log(RELOADED, since=since)
    assert kubelet.endpoint(resource) is ep
    return lambda: ep.snapshots[first:]


def test_unhealthy_gpu_stays_unhealthy_across_reloads(kubelet, devlet, node):
    n = node("v100-dgx1")
    d = start(devlet, kubelet, n, config={"version": "v1"})
    n.xid(3, 79)
    kubelet.wait_for_snapshot(GPU, unhealthy(V100[3]))
    bad = [V100[3]]

    # each reload scans afresh, and NVML reports an XID once, to the event
    # set that was registered when it happened; after each, an XID on one
    # more GPU (seen by the new monitor) is the sentinel, and no snapshot of
    # the stream the kubelet opened after the reload ever showed the older
    # ones healthy
    def check(sentinel, snapshots):
        n.xid(sentinel, 79)
        bad.append(V100[sentinel])
        snap = kubelet.wait_for_snapshot(GPU, unhealthy(V100[sentinel]))
        assert snap.healthy_ids() == [u for u in V100 if u not in bad]
        got = snapshots()
        assert got and all(s.health(u) == "Unhealthy" for s in got for u in bad[:-1])

    check(5, snapshots_after_reload(kubelet, GPU, d, d.sighup))
    # content changed: reload
    check(6, snapshots_after_reload(kubelet, GPU, d, lambda: d.write_config(
        {"version": "v1", "flags": {"migStrategy": "none"}})))
    kubelet.restart()  # only a re-registration: the running monitor sees the sentinel
    check(0, new_stream_snapshots(kubelet, GPU, generation=2))
    assert len(re.findall(r"GPU still unhealthy after re-enumeration gpu=3 ", d.log_text())) == 2


def test_recovery_after_a_reload(kubelet, devlet, node):
    n = node("v100-dgx1")
    recovery = lambda quiet: {"version": "v1", "health": {"recovery": {  # noqa: E731
        "enabled": True, "quietPeriod": quiet}}}
    d = start(devlet, kubelet, n, config=recovery("1h"))
    n.xid(2, 79)
    kubelet.wait_for_snapshot(GPU, unhealthy(V100[2]))
    since = d.log_size()
    # the new monitor never sees that XID: it brings the GPU back because it
    # took over the XID's time, and the shorter quiet period has passed
    d.write_config(recovery("300ms"))
    d.wait_log(RELOADED, since=since)
    kubelet.wait_for_snapshot(GPU, healthy(V100[2]))
    d.wait_log(r"GPU healthy again gpu=2 .*no critical event for \d+ ms", since=since)


def test_reload_does_not_wait_for_the_health_thread(kubelet, devlet, node, dirs):
    """nvmlEventSetWait blocks its thread for up to its timeout; the mock
    holds every wait for as long as a file exists (and says so in it), so
    the old health thread is provably still inside NVML while the reload
    completes and the resources serve on."""
    fuse = "devlet.io/fuse"
    n = node("v100-dgx1")
    make_node(f"{dirs.dev}/fuse")
    hold = os.path.join(dirs.run, "hold")
    open(hold, "w").close()
    config = hostdev_config([{"name": "fuse", "groups": [{"paths": [{"path": f"{dirs.dev}/fuse"}]}]}],
                            domain="devlet.io")
    d = start(devlet, kubelet, n, config=config, resources=[GPU, fuse], args=["--verbosity", "1"],
              env={"MOCK_NVML_EVENT_HOLD": hold})

    def held():
        with open(hold) as f:
            return f.read().count("held")
    wait_until(held, 10, "the health thread held in nvmlEventSetWait")
    since = d.log_size()
    d.sighup()
    d.wait_log(RELOADED, since=since)
    resp = kubelet.allocate(fuse, [["fuse"]])
    assert resp.container_responses[0].devices[0].host_path.endswith("/fuse")
    assert "health monitor stopped" not in d.log_text()
    os.unlink(hold)
    d.wait_log(r"health monitor stopped")
