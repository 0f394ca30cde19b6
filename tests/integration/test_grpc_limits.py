"""The gRPC server's limits (struct grpc_server_limits), on the test server
with small values so each is reached in a bounded test: an idle connection
(no open stream) gets a GOAWAY and is closed while one holding a stream
stays; at the connection cap a newcomer closes the longest idle connection;
at the call cap a new stream resets the oldest stream of the busiest
connection, never the stream of a connection that holds one."""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from h2_attack import (GOAWAY, PING, RST_STREAM, closed_by_peer, frame, grpc_request, handshake,
                       read_frame)

BUILD = os.environ.get("DEVLET_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
HOLD = "/test.Echo/Hold"


@pytest.fixture
def limited_server():
    """start(max_conns, max_streams, max_calls, idle_ms) -> socket path."""
    tmp = tempfile.mkdtemp(prefix="devlet-lim-")
    procs = []

    def start(*limits):
        path = os.path.join(tmp, f"s{len(procs)}.sock")
        p = subprocess.Popen([os.path.join(BUILD, "tools", "grpc-testserver"), path,
                              *map(str, limits)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        ready, _, _ = select.select([p.stdout], [], [], 20)
        assert ready and p.stdout.readline() == b"ready\n", "grpc-testserver did not start"
        return path
    yield start
    for p in procs:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
        assert p.returncode == 0, err.decode()
    shutil.rmtree(tmp, ignore_errors=True)


def hold(s, stream):
    """Opens a Hold stream (the server keeps it, like ListAndWatch)."""
    s.sendall(frame(1, 4, stream, grpc_request(HOLD)) + frame(0, 1, stream, b"\0\0\0\0\0"))


def holding(path):
    """A connection holding one stream, answered (like the kubelet's)."""
    s = handshake(path)
    hold(s, 1)
    ping_frames(s)
    return s


def ping_frames(s, timeout=10):
    """Sends a PING; returns the frames read until its answer."""
    s.settimeout(timeout)
    s.sendall(frame(PING, 0, 0, b"12345678"))
    frames = []
    while True:
        f = read_frame(s)
        assert f is not None, "connection closed"
        if f[0] == PING and f[1] & 1:
            return frames
        frames.append(f)


def test_idle_connection_closed_busy_one_kept(limited_server):
    path = limited_server(0, 0, 0, 300)
    busy = holding(path)
    start = time.monotonic()
    idle = handshake(path)
    idle.settimeout(10)
    frames = []
    while (f := read_frame(idle)) is not None:
        frames.append(f)
    assert time.monotonic() - start >= 0.25
    assert any(f[0] == GOAWAY for f in frames), frames
    # the connection holding a stream saw the same time pass and is served
    assert not any(f[0] in (GOAWAY, RST_STREAM) for f in ping_frames(busy))
    busy.close()


def test_connection_cap_closes_longest_idle(limited_server):
    path = limited_server(4, 0, 0, 0)
    busy = holding(path)
    idle = [handshake(path) for _ in range(3)]
    assert all(idle)
    newcomer = handshake(path, timeout=5)
    assert newcomer is not None, "a newcomer at the cap was not accepted"
    assert closed_by_peer(idle[0], timeout=5)
    ping_frames(newcomer)
    assert not any(f[0] in (GOAWAY, RST_STREAM) for f in ping_frames(busy))
    for s in idle[1:] + [newcomer, busy]:
        s.close()


def test_call_cap_sheds_the_busiest_connection(limited_server):
    path = limited_server(0, 0, 10, 0)
    kubelet = holding(path)
    hog = handshake(path)
    for i in range(14):
        hold(hog, 1 + 2 * i)
    resets = []
    hog.settimeout(10)
    while len(resets) < 5:
        f = read_frame(hog)
        assert f is not None, "connection closed"
        if f[0] == RST_STREAM:
            resets.append(f[2])
    assert resets == [1, 3, 5, 7, 9], resets  # its oldest, in order
    assert not any(f[0] == RST_STREAM for f in ping_frames(kubelet))
    hog.close()
    kubelet.close()
