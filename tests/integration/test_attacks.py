"""Local clients of a plugin socket that try to bloat devlet or lock others
out, each bounded in time: ListAndWatch streams that cannot receive (zero
flow-control window) while snapshots keep coming, and idle HTTP/2
connections up to and past the connection cap.  devlet must stay under
32 MiB of RSS, keep the kubelet's stream, and let a new client through.
Figures (RSS before/after) are `make soak`'s business, not asserted here
beyond the bound."""

import contextlib
import os

import pytest

from devlet_harness import hostdev_config, make_node, run_devlet, wait_until
from h2_attack import closed_by_peer, handshake, open_streams, raise_fd_limit, vm_rss_kib
from kubelet_sim import PluginClient

FUSE = "devlet.io/fuse"
LAW = "/v1beta1.DevicePlugin/ListAndWatch"
RSS_LIMIT_KIB = 32 * 1024


def fuse_config(dirs, count):
    if not os.path.exists(f"{dirs.dev}/fuse"):
        make_node(f"{dirs.dev}/fuse")
    return hostdev_config([{"name": "fuse", "groups": [{"count": count, "paths": [
        {"path": f"{dirs.dev}/fuse"}]}]}], domain="devlet.io")


@pytest.fixture
def served(dirs, kubelet, devlet):
    """devlet serving 200 fuse IDs (a ~4 KiB snapshot) to the simulated
    kubelet, metrics off (no port to share with other tests)."""
    d = devlet(fuse_config(dirs, 200), args=["--metrics-address", ""])
    kubelet.wait_for_snapshot(FUSE, lambda s: len(s.ids()) == 200)
    return d


def test_streams_that_cannot_receive_stay_bounded(dirs, kubelet, served):
    """(Each reload also re-registers: the simulated kubelet then opens a
    new ListAndWatch stream, which must get every snapshot.)"""
    d = served
    sock = d.socket_path(FUSE)
    conns = []
    try:
        # 1,000 streams per connection: past the concurrency devlet announces,
        # it may close the connection; 100 per connection are served (and the
        # server's cap on calls in all may reset the busiest's oldest)
        for n in (1000, 100):
            for _ in range(12):
                s = handshake(sock, window=0)
                assert s is not None, "handshake failed"
                conns.append(s)
                if n == 100:
                    assert open_streams(s, LAW, n), "100 streams refused"
                else:
                    open_streams(s, LAW, n)
                assert vm_rss_kib(d.pid) < RSS_LIMIT_KIB
        # every change is a full snapshot for every stream
        for i in range(6):
            count = 199 if i % 2 == 0 else 200
            d.write_config(fuse_config(dirs, count))
            d.sighup()
            kubelet.wait_for_snapshot(FUSE, lambda s, n=count: len(s.ids()) == n)
            rss = vm_rss_kib(d.pid)
            assert rss < RSS_LIMIT_KIB, f"RSS {rss} KiB after {i + 1} snapshots"
        assert d.vm_hwm_kib() < RSS_LIMIT_KIB
        with contextlib.closing(PluginClient(sock)) as c:
            assert len(c.allocate([["fuse-3"]], timeout=10).container_responses) == 1
    finally:
        for s in conns:
            s.close()


def test_idle_connections_do_not_lock_out_new_clients(dirs, kubelet, served):
    """Handshakes that are never followed by a request, more than the cap:
    the longest idle ones are closed for newcomers, the kubelet's connection
    (it holds ListAndWatch) is not, and a new client's Allocate and `devlet
    probe` get through."""
    d = served
    ep = kubelet.endpoint(FUSE)
    sock = d.socket_path(FUSE)
    idle = []
    try:
        for _ in range(raise_fd_limit(1100)):
            s = handshake(sock, timeout=2)
            if s is None:
                break  # the server stopped accepting
            idle.append(s)
        with contextlib.closing(PluginClient(sock)) as c:
            assert len(c.allocate([["fuse-1"]], timeout=10).container_responses) == 1
        p = run_devlet(["probe", "--socket", sock, "--allocate", "fuse-2", "--timeout", "10s"],
                       timeout=20)
        assert p.returncode == 0, p.stderr
        assert not ep.stream_done
        assert closed_by_peer(idle[0], timeout=5), "the oldest idle connection is still open"
        assert vm_rss_kib(d.pid) < RSS_LIMIT_KIB
    finally:
        for s in idle:
            s.close()
    with contextlib.closing(PluginClient(sock)) as c:
        assert len(c.allocate([["fuse-4"]], timeout=10).container_responses) == 1


def test_memory_returns_after_attackers_leave(dirs, kubelet, served):
    d = served
    sock = d.socket_path(FUSE)
    before = vm_rss_kib(d.pid)
    conns = []
    for _ in range(12):
        s = handshake(sock, window=0)
        assert s is not None
        open_streams(s, LAW, 100)
        conns.append(s)
    during = vm_rss_kib(d.pid)
    for s in conns:
        s.close()
    # memory freed by closed connections goes back within about a second
    wait_until(lambda: vm_rss_kib(d.pid) < before + max(2048, (during - before) // 2), 10,
               f"RSS to fall back towards {before} KiB from {during} KiB")
    assert os.path.exists(sock)
