"""Hostile HTTP/2 peers for the attack tests and `make soak`: raw frames on
a Unix socket, so a peer can do what no well-behaved client library lets it
(a zero flow-control window, handshakes that are never followed by a
request, a thousand streams that are never read)."""

import os
import socket
import struct

from devlet_harness import PREFACE, frame, hpack  # noqa: F401 (re-exported)

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
SETTINGS_INITIAL_WINDOW_SIZE = 4


def grpc_request(path):
    return hpack([(":method", "POST"), (":scheme", "http"), (":path", path),
                  (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")])


def read_frame(s):
    """(type, flags, stream, payload), or None at EOF."""
    head = b""
    while len(head) < 9:
        chunk = s.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    length = int.from_bytes(head[:3], "big")
    payload = b""
    while len(payload) < length:
        chunk = s.recv(length - len(payload))
        if not chunk:
            return None
        payload += chunk
    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload


def handshake(path, window=65535, timeout=5.0):
    """A connection that has exchanged SETTINGS (ours announce window as the
    initial stream window) and acknowledged the server's.  Returns the socket,
    or None if the server did not complete the handshake in time."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, window)))
        while True:
            f = read_frame(s)
            if f is None:
                raise OSError("closed during the handshake")
            if f[0] == SETTINGS and not f[1] & 1:
                s.sendall(frame(SETTINGS, 1, 0))
                return s
    except OSError:
        s.close()
        return None


def open_streams(s, path, n, first=1):
    """Sends n requests of one empty gRPC message each on s, then a PING, and
    reads (dropping what the server sends: with a zero window that is
    headers, never a message) until the PING's answer: the server has taken
    every stream by then (True), or until the server closes the connection,
    as it may for streams past its SETTINGS_MAX_CONCURRENT_STREAMS (False)."""
    body = b"\0\0\0\0\0"
    data = b"".join(frame(HEADERS, 4, sid, grpc_request(path)) + frame(DATA, 1, sid, body)
                    for sid in range(first, first + 2 * n, 2))
    try:
        s.sendall(data + frame(PING, 0, 0, b"attack!!"))
        while True:
            f = read_frame(s)
            if f is None:
                return False
            if f[0] == PING and f[1] & 1:
                return True
    except ConnectionError:
        return False


def closed_by_peer(s, timeout=10.0):
    """Reads (and drops) frames until EOF; True if the peer closed in time."""
    s.settimeout(timeout)
    try:
        while read_frame(s) is not None:
            pass
        return True
    except (socket.timeout, TimeoutError):
        return False
    except OSError:
        return True


def raise_fd_limit(n):
    """Lets this process hold n more sockets if it can (the soft fd limit up
    to the hard one: a shell's `ulimit -Sn 1024` must not weaken an attack);
    returns how many it may open, n or fewer under a low hard limit."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256 if hard == resource.RLIM_INFINITY else min(hard, n + 256)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return n if soft == resource.RLIM_INFINITY else max(0, min(n, soft - 256))


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))
