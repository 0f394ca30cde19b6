"""The metrics port against slow and abusive HTTP clients, from loopback
addresses only (127.0.0.0/8), each attack bounded in time: /health must be
answered under 1,000 slow connections from many addresses and under slow
connections from the prober's own address; a request must arrive whole
within a fixed deadline however it trickles in; pipelined requests each get
their answer, 500 of them too (past the 8 KiB request buffer); request
smuggling shapes (RFC 9112's) get a 400 and a close, never a second answer;
a burst of connections waits in the accept queue instead of losing its
SYNs; /ready tells readiness (every resource registered, however many; or
serving, without registration) apart from liveness (/health).  Latency
figures are `make soak`'s, not asserted here."""

import os
import selectors
import signal
import socket
import time

import pytest

from devlet_harness import hostdev_config, make_node, wait_until
from h2_attack import raise_fd_limit
from http_attack import SlowClients, get, loopback_source

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


def read_to_eof(s, limit=10.0):
    """Everything s sends until it closes; raises socket.timeout if it stays
    open (a connection kept alive) past the socket's timeout or limit."""
    data, t0 = b"", time.monotonic()
    while chunk := s.recv(65536):
        data += chunk
        if time.monotonic() - t0 > limit:
            raise socket.timeout("still sending")
    return data


def test_500_pipelined_requests_each_answered(served):
    """500 requests in one write (17 KiB, past the 8 KiB request buffer):
    what does not fit waits in the socket (the bytes past it were dropped:
    496 answers, then a 400 and a close)."""
    d, port = served
    n = 500
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * (n - 1) +
                  b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = split_responses(read_to_eof(s), ["GET"] * n)
    finally:
        s.close()
    assert [g[0] for g in got] == [200] * n
    assert all(g[2] == b"ok" for g in got)


FOLLOW = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
SMUGGLING = {
    "space before colon (Content-Length)": b"Content-Length : 5\r\n",
    "space before colon (Transfer-Encoding)": b"Transfer-Encoding : chunked\r\n",
    "tab before colon": b"Content-Length\t: 5\r\n",
    "NUL in a field name": b"Content\x00Length: 5\r\n",
    "NUL in a field value": b"X-A: a\x00b\r\n",
    "control byte in a field value": b"X-A: a\x01b\r\n",
    "non-token byte in a field name": b"Content-Length@: 5\r\n",
    "field line without a colon": b"Content-Length 5\r\n",
    "obs-fold": b"X-A: a\r\n Content-Length: 5\r\n",
    "bare CR": b"X-A: a\rContent-Length: 5\r\n",
    "signed Content-Length": b"Content-Length: +0\r\n",
    "negative Content-Length": b"Content-Length: -0\r\n",
    "non-digit Content-Length": b"Content-Length: 0x0\r\n",
    "Content-Length list": b"Content-Length: 0, 0\r\n",
    "conflicting Content-Length": b"Content-Length: 0\r\nContent-Length: 5\r\n",
    "Transfer-Encoding": b"Transfer-Encoding: chunked\r\n",
    "Transfer-Encoding identity": b"Transfer-Encoding: identity\r\n",
    "body on GET": b"Content-Length: 5\r\n",
}


@pytest.mark.parametrize("field", SMUGGLING.values(), ids=SMUGGLING.keys())
def test_request_smuggling_shapes_are_refused(served, field):
    """RFC 9112's strict parsing: each shape gets a 400 and a close; the
    bytes after it are never read as a request of their own."""
    d, port = served
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + field + b"\r\nhello" + FOLLOW)
        data = read_to_eof(s)
    finally:
        s.close()
    ((status, headers, _),) = split_responses(data, ["GET"])  # one answer, nothing after
    assert status == 400 and headers["Connection"] == "close"


@pytest.mark.parametrize("line", [b"GET  /health HTTP/1.1", b"GET /health  HTTP/1.1",
                                  b"GET /he\x00lth HTTP/1.1", b"G\x00T /health HTTP/1.1",
                                  b"GET /health HTTP/1.1\r", b" GET /health HTTP/1.1"],
                         ids=["two spaces after the method", "two spaces before the version",
                              "NUL in the target", "NUL in the method", "bare CR ending the line",
                              "space before the method"])
def test_malformed_request_lines_are_refused(served, line):
    d, port = served
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.sendall(line + b"\r\nHost: x\r\n\r\n" + FOLLOW)
        data = read_to_eof(s)
    finally:
        s.close()
    ((status, headers, _),) = split_responses(data, ["GET"])
    assert status == 400 and headers["Connection"] == "close"


def test_a_burst_of_connections_waits_in_the_accept_queue(served):
    """1,500 connections arriving while devlet cannot accept (stopped) all
    finish their handshake: the accept queue holds them (a backlog of 511
    dropped the SYNs past it, and each such client waited a second for its
    retransmission); once devlet runs again, /health is answered."""
    d, port = served
    with open("/proc/sys/net/core/somaxconn") as f:
        want = min(1500, int(f.read()))  # the kernel's cap on any backlog
    n = raise_fd_limit(want)
    assert n == want, "the fd limit is too low for the test"
    socks, connected = [], 0
    sel = selectors.DefaultSelector()
    os.kill(d.pid, signal.SIGSTOP)
    try:
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.setblocking(False)
            s.bind((loopback_source(i // 8), 0))
            s.connect_ex(("127.0.0.1", port))
            sel.register(s, selectors.EVENT_WRITE)
        # a dropped SYN is sent again after 1 s: wait for handshakes until just before
        deadline = time.monotonic() + 0.9
        while connected < n and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                sel.unregister(key.fileobj)
                connected += key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
    finally:
        os.kill(d.pid, signal.SIGCONT)
        sel.close()
    try:
        assert connected == n
        assert get(port, "/health", source="127.0.9.9", timeout=5)[:2] == (200, "ok")
    finally:
        for s in socks:
            s.close()


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
