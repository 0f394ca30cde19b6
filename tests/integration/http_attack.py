"""Slow HTTP clients for the metrics port's attack tests and `make soak`:
connections from many loopback addresses (127.0.0.0/8 only) that send a
request a byte at a time and never finish it, and a prober that measures
how long /health takes meanwhile."""

import socket
import threading
import time

from h2_attack import raise_fd_limit


def loopback_source(i):
    """The i-th address of 127.0.1.1 .. 127.0.255.254 (never outside 127/8)."""
    i %= 254 * 255
    return f"127.0.{1 + i // 254}.{1 + i % 254}"


class SlowClients:
    """n connections, each from loopback_source(first + i // per_source) (or
    all from source), each
    sending one byte of a never-ending request every `every` seconds (so an
    inactivity timeout would never fire).  A connection the server closes is
    opened again, as an attacker would."""

    def __init__(self, port, n, per_source=4, first=0, every=0.5, host="127.0.0.1", source=None):
        self.port, self.host, self.every = port, host, every
        n = raise_fd_limit(n)
        self.sources = [source or loopback_source(first + i // per_source) for i in range(n)]
        self.socks = [None] * n
        self.reconnects = 0
        self.stop = threading.Event()
        for i in range(n):
            self.socks[i] = self._open(i)
        self.thread = threading.Thread(target=self._drip, daemon=True)
        self.thread.start()

    def _open(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(1.0)
        try:
            if self.sources[i] != "127.0.0.1":
                s.bind((self.sources[i], 0))
            s.connect((self.host, self.port))
        except OSError:
            s.close()
            return None
        s.setblocking(False)
        return s

    def _drip(self):
        msg = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 4096
        pos = 0
        while not self.stop.wait(self.every):
            byte = msg[pos % len(msg):pos % len(msg) + 1]
            pos += 1
            for i, s in enumerate(self.socks):
                if self.stop.is_set():
                    return
                try:
                    if s is None:
                        raise OSError
                    s.send(byte)
                except BlockingIOError:
                    pass
                except OSError:
                    if s is not None:
                        s.close()
                    self.socks[i] = self._open(i)
                    self.reconnects += 1

    def close(self):
        self.stop.set()
        self.thread.join(10)
        for s in self.socks:
            if s is not None:
                s.close()


def get(port, path, source="127.0.0.1", timeout=2.0, host="127.0.0.1"):
    """One request on a new connection: (status, body, seconds)."""
    t0 = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        if source != "127.0.0.1":
            s.bind((source, 0))
        s.connect((host, port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.") else 0
    return status, body.decode(errors="replace"), time.monotonic() - t0
