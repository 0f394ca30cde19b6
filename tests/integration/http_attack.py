"""HTTP attackers for the metrics port's attack tests and `make soak`:
slow clients from many loopback addresses (127.0.0.0/8 only) that send a
request a byte at a time and never finish it, connection churn (one short
request per connection, as fast as it goes), the kernel's accept-queue
drops and a thread's CPU time, and a prober that measures how long /health
takes meanwhile."""

import os
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


def _churn_worker(port, first, n_sources, inflight, stop, counts, slot, host):
    """One process of Churn: `inflight` connections at a time, each from the
    next source, asking /health with Connection: close and read to EOF;
    a finished one is replaced at once.  counts[slot] = answered."""
    import errno
    import selectors
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(10)  # the attackers share the CPUs with devlet and the prober, not the other way round
    req = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    sel = selectors.DefaultSelector()
    i, done = 0, 0

    def open_one():
        nonlocal i
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((loopback_source(first + i % n_sources), 0))
            i += 1
            err = s.connect_ex((host, port))
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, "connect")
        except OSError:
            s.close()
            return
        sel.register(s, selectors.EVENT_WRITE, [time.monotonic(), False])

    for _ in range(inflight):
        open_one()
    while not stop.is_set():
        now = time.monotonic()
        for key, events in sel.select(0.05):
            s, st = key.fileobj, key.data
            finished = False
            try:
                if not st[1]:
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        raise OSError("connect failed")
                    s.send(req)
                    st[1] = True
                    sel.modify(s, selectors.EVENT_READ, st)
                    continue
                if not s.recv(4096):
                    done += 1
                    finished = True
            except OSError:
                finished = True
            if finished:
                sel.unregister(s)
                s.close()
                open_one()
        for key in list(sel.get_map().values()):
            if now - key.data[0] > 3.0:  # stuck: count it as lost, replace it
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_one()
        counts[slot] = done
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    counts[slot] = done


class Churn:
    """Connection churn: `procs` processes, each keeping `inflight`
    connections open from n_sources loopback addresses (from
    loopback_source(first)), one GET /health each, replaced as soon as
    answered: as fast as they go.  answered() counts the responses read."""

    def __init__(self, port, procs=2, n_sources=250, inflight=64, first=1000, host="127.0.0.1"):
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        self.stop = ctx.Event()
        self.counts = ctx.Array("q", procs, lock=False)
        self.procs = [ctx.Process(target=_churn_worker, daemon=True,
                                  args=(port, first + k * (n_sources // procs), n_sources // procs,
                                        inflight, self.stop, self.counts, k, host))
                      for k in range(procs)]
        for p in self.procs:
            p.start()

    def answered(self):
        return sum(self.counts)

    def close(self):
        self.stop.set()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        return self.answered()


def listen_drops():
    """The kernel's TcpExt ListenDrops: SYNs and handshakes dropped by
    listeners (full accept queues included), in this network namespace."""
    with open("/proc/net/netstat") as f:
        lines = [line.split() for line in f if line.startswith("TcpExt:")]
    stats = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return stats.get("ListenDrops", 0)


def thread_cpu_seconds(pid, name=None):
    """CPU seconds (user + system) of pid's threads called name (None: all)."""
    import glob
    total = 0
    for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            with open(comm) as f:
                if name is not None and f.read().strip() != name:
                    continue
            with open(comm[:-4] + "stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")
