"""The metrics port against slow and abusive HTTP clients, from loopback
addresses only (127.0.0.0/8), each attack bounded in time: /health must be
answered under 1,000 slow connections from many addresses and under slow
connections from the prober's own address; a request must arrive whole
within a fixed deadline however it trickles in; pipelined requests each get
their answer; /ready tells readiness (every resource registered) apart from
liveness (/health).  Latency figures are `make soak`'s, not asserted here."""

import socket
import time

import pytest

from devlet_harness import hostdev_config, make_node, wait_until
from http_attack import SlowClients, get

FUSE = "devlet.io/fuse"


def fuse_config(dirs):
    make_node(f"{dirs.dev}/fuse")
    return hostdev_config([{"name": "fuse", "groups": [{"count": 2, "paths": [
        {"path": f"{dirs.dev}/fuse"}]}]}], domain="devlet.io")


def metrics_port(d):
    return int(d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1))


@pytest.fixture
def served(dirs, kubelet, devlet):
    d = devlet(fuse_config(dirs), args=["--metrics-address", "127.0.0.1:0"])
    kubelet.wait_for_registration(FUSE)
    port = metrics_port(d)
    wait_until(lambda: get(port, "/ready")[0] == 200, 10, "/ready to turn 200")
    return d, port


def split_responses(data, methods):
    """(status, headers, body) per response in a pipelined reply."""
    out = []
    for method in methods:
        head, sep, data = data.partition(b"\r\n\r\n")
        assert sep, f"truncated after {out}"
        lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        n = 0 if method == "HEAD" else int(headers["Content-Length"])
        out.append((int(lines[0].split(" ")[1]), headers, data[:n]))
        data = data[n:]
    assert data == b"", data
    return out


def test_health_under_slow_connections_from_the_probers_address(served):
    d, port = served
    slow = SlowClients(port, 40, source="127.0.0.1")
    try:
        for _ in range(10):
            assert get(port, "/health")[:2] == (200, "ok")
    finally:
        slow.close()


def test_health_under_1000_slow_connections_from_many_addresses(served):
    d, port = served
    slow = SlowClients(port, 1000, per_source=4)
    try:
        for i in range(20):
            assert get(port, "/health", timeout=2)[:2] == (200, "ok")
            assert get(port, "/ready", source=f"127.0.0.{10 + i}", timeout=2)[0] == 200
        status, body, _ = get(port, "/metrics", timeout=5)
        assert status == 200 and "devlet_devices" in body
    finally:
        slow.close()
    assert d.alive()


def test_request_deadline_is_fixed_not_per_byte(served):
    """A byte every 0.3 s keeps an inactivity timeout happy for ever; the
    whole request must still arrive within the deadline (5 s)."""
    d, port = served
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    t0 = time.monotonic()
    closed = False
    try:
        for b in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 200:
            s.send(bytes([b]))
            try:
                s.settimeout(0.3)
                if s.recv(4096) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            if time.monotonic() - t0 > 15:
                break
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    finally:
        s.close()
    assert closed, "a request trickling in was never cut off"
    assert time.monotonic() - t0 < 10


def test_pipelined_requests_each_answered(served):
    d, port = served
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
              b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    got = split_responses(data, ["GET", "HEAD", "GET", "GET"])
    assert [g[0] for g in got] == [200, 200, 404, 200], got
    assert got[0][2] == b"ok" and got[3][2] == b"ok"
    assert int(got[1][1]["Content-Length"]) > 0  # what GET /metrics would send
    assert [g[1].get("Connection") for g in got] == [None, None, None, "close"]


def test_ready_means_registered(dirs, kubelet_factory, devlet):
    """/ready is 503 until every resource is registered with the kubelet,
    while /health (liveness) is 200 throughout."""
    d = devlet(fuse_config(dirs), args=["--metrics-address", "127.0.0.1:0"])
    port = metrics_port(d)
    assert get(port, "/health")[:2] == (200, "ok")
    assert get(port, "/ready")[0] == 503
    kubelet = kubelet_factory()
    kubelet.start()
    kubelet.wait_for_registration(FUSE)
    wait_until(lambda: get(port, "/ready")[0] == 200, 10, "/ready to turn 200")
    assert get(port, "/health")[:2] == (200, "ok")


def test_ready_with_registration_disabled(dirs, devlet):
    """--kubelet-socket "" serves the sockets and never registers: ready
    then means serving metrics (it stayed 503 for ever)."""
    d = devlet(fuse_config(dirs), args=["--metrics-address", "127.0.0.1:0", "--kubelet-socket", ""])
    port = metrics_port(d)
    wait_until(lambda: get(port, "/ready")[0] == 200, 5, "/ready to turn 200")
    assert get(port, "/health")[:2] == (200, "ok")


def test_ready_with_more_than_64_resources(dirs, kubelet, devlet):
    """Readiness is judged over every resource, not the first 64 (a fixed
    array made /ready 503 for ever past 64)."""
    n = 70
    make_node(f"{dirs.dev}/fuse")
    d = devlet(hostdev_config([{"name": f"r{i:02}", "groups": [{"paths": [{"path": f"{dirs.dev}/fuse"}]}]}
                               for i in range(n)], domain="devlet.io"),
               args=["--metrics-address", "127.0.0.1:0"])
    port = metrics_port(d)
    for i in range(n):
        kubelet.wait_for_registration(f"devlet.io/r{i:02}")
    wait_until(lambda: get(port, "/ready")[0] == 200, 5, "/ready to turn 200")
