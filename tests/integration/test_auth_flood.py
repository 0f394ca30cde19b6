"""Basic authentication on the metrics port under a password-guessing
flood (issue 28): 24 keep-alive connections from one address (127.0.0.2)
loop wrong passwords for a real user, half one fixed wrong password, half
a fresh random one each time, while scrapers from 127.0.0.1 log in with
right passwords bcrypt has not verified yet.  Each right password is
accepted on its first try (the flood holds at most one of the two bcrypt
slots, and a slot goes to each address in turn), the flooding address gets
429 with Retry-After once over its failures, and devlet's CPU time while
the flood goes on stays far below what a bcrypt per request would cost (a
wrong password repeated is remembered, a fresh one costs one bcrypt a
second).  With 24 flooding addresses, more requests wait than the queue
holds: the longest waiters make room, and a scraper still gets its turn.
Latency and CPU figures are printed with -s (bench/bench-auth-flood.py
measures them as the issue did), never asserted beyond a generous
bound."""

import base64
import ctypes
import os
import socket
import threading
import time

import pytest

from devlet_harness import wait_until

ATTACKER = "127.0.0.2"
CONNECTIONS = 24
COST = 8  # bcrypt cost of the test's hashes: ~20-40 ms here, like cost 10 on a node's faster core
# a core's share devlet may use while flooded: without the limits it kept
# both bcrypt slots busy and answered a 503 per request (50-80% of a core
# measured); with them, about one bcrypt a second and a refusal a second
# per connection
CPU_BOUND = 0.25
STATUSES = (200, 401, 429, 503)


def bcrypt(password, cost=COST):
    """A bcrypt hash through libxcrypt, the library devlet loads."""
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2b$", cost, None, 0)
    assert salt, "libcrypt cannot make a bcrypt salt"
    return lib.crypt(password.encode(), salt).decode()


def cpu_seconds(pid):
    """utime + stime of the whole process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def read_response(s, buf):
    """(status, headers, rest of buf) of one response on s; ('', ...) at EOF."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    n = int(headers.get("Content-Length", "0"))
    while len(buf) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return int(lines[0].split(" ")[1]), headers, buf[n:]


def _attacker(port, source, kind, stop, counts, limited, retry_after, answered):
    """One keep-alive connection from source, reopened when closed: kind 0
    sends one fixed wrong password, kind 1 a fresh one each time."""
    s, buf = None, b""
    while not stop.is_set():
        try:
            if s is None:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(10)
                s.bind((source, 0))
                s.connect(("127.0.0.1", port))
                buf = b""
            password = "wrong" if kind == 0 else os.urandom(9).hex()
            s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {basic('alice', password)}"
                      "\r\n\r\n".encode())
            status, headers, buf = read_response(s, buf)
        except OSError:
            if s is not None:
                s.close()
            s = None
            continue
        i = STATUSES.index(status) if status in STATUSES else len(STATUSES)
        counts[kind * (len(STATUSES) + 1) + i] += 1
        if not answered[kind].is_set():
            answered[kind].set()
        if status == 429:
            retry_after.value = int(headers.get("Retry-After", "0"))
            limited[kind].set()
        if headers.get("Connection") == "close":
            s.close()
            s = None
    if s is not None:
        s.close()


def _attack_process(port, sources, connections, kinds, stop, counts, limited, retry_after, answered):
    os.nice(10)  # the attackers share the CPUs with devlet and the scraper, not the other way round
    threads = [threading.Thread(target=_attacker, daemon=True,
                                args=(port, sources[i % len(sources)], kinds[i // len(sources) % len(kinds)],
                                      stop, counts, limited, retry_after, answered))
               for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class Flood:
    """connections attackers spread over sources, in a process of their own
    (so that the scraper's thread does not queue behind them for Python's
    lock)."""

    def __init__(self, port, sources=(ATTACKER,), connections=CONNECTIONS, kinds=(0, 1)):
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        self.stop = ctx.Event()
        self.limited = [ctx.Event(), ctx.Event()]  # a 429 came, per kind
        self.answered = [ctx.Event(), ctx.Event()]  # an answer came, per kind
        self.counts = ctx.Array("q", 2 * (len(STATUSES) + 1))
        self.retry_after = ctx.Value("i", 0)
        self.proc = ctx.Process(target=_attack_process, daemon=True,
                                args=(port, list(sources), connections, list(kinds), self.stop, self.counts, self.limited,
                                      self.retry_after, self.answered))
        self.proc.start()

    def count(self, kind, status):
        return self.counts[kind * (len(STATUSES) + 1) + STATUSES.index(status)]

    def total(self):
        return sum(self.counts[:])

    def close(self):
        self.stop.set()
        self.proc.join(20)
        if self.proc.is_alive():
            self.proc.kill()


def scrape(port, user, password, timeout=10.0):
    """One GET /metrics from 127.0.0.1 on a new connection: (status, seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  f"Authorization: {basic(user, password)}\r\n\r\n".encode())
        status, _, _ = read_response(s, b"")
    return status, time.monotonic() - t0


def serve(devlet, dirs):
    """devlet with ten scrapers' users and alice, the attackers' target:
    (devlet, port, {scraper: password})."""
    scrapers = {f"scraper{i}": f"right-{i}-{os.urandom(6).hex()}" for i in range(10)}
    users = dict(scrapers, alice=f"alice-{os.urandom(6).hex()}")
    path = os.path.join(dirs.work, "web.yml")
    with open(path, "w") as f:
        f.write("basic_auth_users:\n" + "".join(f"  {u}: '{bcrypt(p)}'\n" for u, p in users.items()))
    d = devlet(args=["--metrics-address", "127.0.0.1:0", "--kubelet-socket", "",
                     "--web-config-file", path])
    return d, int(d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1)), scrapers


@pytest.fixture
def flooded(devlet, dirs):
    d, port, scrapers = serve(devlet, dirs)
    flood = Flood(port)
    try:
        yield d, port, flood, scrapers
    finally:
        flood.close()


def test_right_password_gets_through_a_wrong_password_flood(flooded):
    d, port, flood, scrapers = flooded
    for kind in (0, 1):
        assert flood.answered[kind].wait(30), f"the flood is not answered: {flood.counts[:]}"
    # from the flood's first answers (its burst of bcrypts queued) on, each
    # scraper's right password, new to devlet (a bcrypt each), is accepted
    # on the first try
    latencies = []
    for user, password in scrapers.items():
        status, secs = scrape(port, user, password)
        assert status == 200, (user, status, flood.counts[:])
        latencies.append(secs)
    # and remembered: the next request costs no bcrypt
    assert scrape(port, "scraper0", scrapers["scraper0"])[0] == 200
    print(f"\nright password under flood: first try 200 x{len(latencies)}, "
          f"max {max(latencies) * 1000:.0f} ms, mean {sum(latencies) / len(latencies) * 1000:.0f} ms "
          f"(attackers' answers 200/401/429/503/other: {flood.counts[:]})")
    assert flood.count(0, 200) == flood.count(1, 200) == 0
    assert d.alive()


def test_flooding_address_gets_429_and_costs_little_cpu(flooded):
    d, port, flood, scrapers = flooded
    # the flooding address is over its failures, with both kinds of guess
    for kind in (0, 1):
        assert flood.limited[kind].wait(30), f"no 429 for attacker kind {kind}: {flood.counts[:]}"
    assert flood.retry_after.value >= 1
    cpu0, t0, sent0 = cpu_seconds(d.pid), time.monotonic(), flood.total()
    # a right password still gets through meanwhile
    assert scrape(port, "scraper1", scrapers["scraper1"])[0] == 200
    # a measuring window of 10 s of flood (not a wait for an event)
    flood.stop.wait(10.0)
    cpu = (cpu_seconds(d.pid) - cpu0) / (time.monotonic() - t0)
    sent = flood.total() - sent0
    print(f"\ndevlet CPU under flood: {cpu * 100:.1f}% of a core; attackers' requests answered "
          f"in the window {sent} (200/401/429/503/other per kind: {flood.counts[:]})")
    assert sent > 0 and flood.proc.is_alive(), "the flood stopped"
    assert flood.count(0, 200) == flood.count(1, 200) == 0
    assert flood.count(0, 429) > 0 and flood.count(1, 429) > 0
    assert cpu < CPU_BOUND, f"devlet used {cpu * 100:.0f}% of a core under the flood"
    assert d.alive()


def test_many_flooding_addresses_fill_the_queue_yet_a_scraper_gets_its_turn(devlet, dirs):
    """24 addresses, 5 connections each (one running or waiting per
    connection: each address within its share of the queue), fresh wrong
    passwords: more requests wait than the queue holds, so newcomers push
    out the longest waiters' newest (a 503, the only one an address within
    its share gets), and a scraper still gets a slot within one turn of
    each address."""
    d, port, scrapers = serve(devlet, dirs)
    flood = Flood(port, sources=[f"127.0.3.{i}" for i in range(1, 25)], connections=120, kinds=(1,))
    try:
        assert flood.answered[1].wait(30), f"the flood is not answered: {flood.counts[:]}"
        for user, password in list(scrapers.items())[:5]:
            status, secs = scrape(port, user, password)
            assert status == 200, (user, status, flood.counts[:])
        assert flood.count(1, 200) == 0
        wait_until(lambda: flood.count(1, 503) > 0, 30,
                   "a waiting request pushed out of the full queue")
        assert d.alive()
    finally:
        flood.close()
