"""gRPC layer (src/grpc/) against real grpcio peers.

The C server is tests/tools/grpc-testserver (see its header for the test.Echo
methods); the C client is tests/tools/grpc-testclient, run against a grpcio
server defined here.  One test repeats a mixed workload with the ASan+UBSan
build of the server and the client and checks they exit cleanly.
"""

import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from concurrent import futures

import grpc
import pytest

from devlet_harness import (BUILD_DIR, PREFACE, frame, frame_types, hpack, raw_connect,
                            read_frames_until, read_until_eof, wait_until)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = BUILD_DIR
ASAN_BUILD = os.environ.get("DEVLET_ASAN_BUILD") or os.path.join(REPO, "build-asan")

MiB = 1 << 20
LIMIT = 4 * MiB
OPTS = [
    ("grpc.max_send_message_length", 8 * MiB),
    ("grpc.max_receive_message_length", 8 * MiB),
]
FAIL_MESSAGE = "bad request: caf\u00e9 \u2713 100% done %41 tab\there"


def ident(x):
    return x


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return f"{h:08x}"


def pattern(n):
    return bytes(i * 7 % 251 for i in range(n))


def sanitizer_env():
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=66"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:exitcode=67"
    return env


class CServer:
    """grpc-testserver as a subprocess; stop() sends SIGTERM and returns (rc, stderr)."""

    def __init__(self, binary, path, env=None):
        self.path = path
        self.proc = subprocess.Popen(
            [binary, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        deadline = time.monotonic() + 20
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                self.proc.kill()
                raise AssertionError("grpc-testserver did not become ready")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                _, err = self.proc.communicate()
                raise AssertionError(f"grpc-testserver exited: {err.decode()}")
            line += chunk
        assert line == b"ready\n"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"grpc-testserver ignored SIGTERM: {err.decode()}")
        return self.proc.returncode, err.decode(errors="replace")


class Echo:
    """Typed helpers over one grpcio channel to the test server."""

    def __init__(self, path, own_connection=False, authority=None):
        # grpcio shares connections between channels unless told otherwise
        opts = OPTS + [("grpc.use_local_subchannel_pool", 1)] if own_connection else OPTS
        if authority:
            opts = opts + [("grpc.default_authority", authority)]
        self.channel = grpc.insecure_channel("unix:" + path, options=opts)

    def unary(self, method, req, timeout=10):
        rpc = self.channel.unary_unary(
            method, request_serializer=ident, response_deserializer=ident
        )
        return rpc(req, timeout=timeout)

    def future(self, method, req, timeout=20):
        rpc = self.channel.unary_unary(
            method, request_serializer=ident, response_deserializer=ident
        )
        return rpc.future(req, timeout=timeout)

    def stream(self, method, req, timeout=10):
        rpc = self.channel.unary_stream(
            method, request_serializer=ident, response_deserializer=ident
        )
        return rpc(req, timeout=timeout)

    def stats(self):
        text = self.unary("/test.Echo/Stats", b"").decode()
        return {k: int(v) for k, v in (kv.split("=") for kv in text.split())}

    def close(self):
        self.channel.close()


@pytest.fixture(scope="module")
def tmpdir_short():
    # sun_path is 108 bytes: keep socket paths short
    d = tempfile.mkdtemp(prefix="devlet-grpc-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def server(tmpdir_short):
    srv = CServer(os.path.join(BUILD, "tools", "grpc-testserver"),
                     os.path.join(tmpdir_short, "echo.sock"))
    echo = Echo(srv.path)
    yield srv, echo
    echo.close()
    rc, err = srv.stop()
    assert rc == 0, err
    assert not os.path.exists(srv.path), "socket not unlinked"


@pytest.fixture
def echo(server):
    _, e = server
    # every test starts with no call left open by the previous one
    wait_until(lambda: e.stats()["open_calls"] == 0, what="no open calls")
    return e


def stats_are(echo, **want):
    got = echo.stats()
    return all(got[k] == v for k, v in want.items())


def status_of(excinfo):
    return excinfo.value.code()


# ---- the C server, grpcio client ----


def test_unary_echo(echo):
    assert echo.unary("/test.Echo/Unary", b"hello") == b"hello"
    everything = bytes(range(256))
    assert echo.unary("/test.Echo/Unary", everything) == everything


@pytest.mark.parametrize("size", [0, 1, 16384 + 3, MiB, LIMIT])
def test_message_sizes(echo, size):
    payload = random.Random(size).randbytes(size)
    assert echo.unary("/test.Echo/Unary", payload, timeout=20) == payload


def test_message_over_limit_is_refused(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("/test.Echo/Unary", b"\0" * (LIMIT + 1), timeout=20)
    assert status_of(e) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in e.value.details()
    # the connection is still good
    assert echo.unary("/test.Echo/Unary", b"after") == b"after"


def test_unknown_method(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("/test.Echo/Nope", b"x")
    assert status_of(e) == grpc.StatusCode.UNIMPLEMENTED
    assert "/test.Echo/Nope" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        list(echo.stream("/other.Service/Stream", b"x"))
    assert status_of(e) == grpc.StatusCode.UNIMPLEMENTED


def test_error_message_is_percent_encoded_exactly(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("/test.Echo/Fail", b"")
    assert status_of(e) == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == FAIL_MESSAGE


def test_unary_needs_exactly_one_request_message(echo):
    rpc = echo.channel.stream_unary("/test.Echo/Unary", request_serializer=ident,
                                    response_deserializer=ident)
    with pytest.raises(grpc.RpcError) as e:
        rpc(iter([]), timeout=10)
    assert status_of(e) == grpc.StatusCode.INTERNAL
    assert "no request message" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        rpc(iter([b"a", b"b"]), timeout=10)
    assert status_of(e) == grpc.StatusCode.INTERNAL
    assert "more than one" in e.value.details()
    assert rpc(iter([b"one"]), timeout=10) == b"one"


def test_asynchronous_unary_reply(echo):
    assert echo.unary("/test.Echo/Late", b"x") == b"late"


def test_server_streaming(echo):
    req = bytes([5]) + b"abc"
    assert list(echo.stream("/test.Echo/Stream", req)) == [req] * 5
    assert list(echo.stream("/test.Echo/Stream", b"\0")) == []


def test_200_concurrent_streams_on_one_channel(echo):
    calls = []
    for i in range(200):
        payload = f"msg-{i}-".encode() * (i + 1)
        method = "/test.Echo/Late" if i % 4 == 0 else "/test.Echo/Unary"
        calls.append((method, payload, echo.future(method, payload)))
    streams = []
    with futures.ThreadPoolExecutor(max_workers=20) as pool:
        for i in range(20):
            req = bytes([3]) + f"stream-{i}".encode()
            streams.append((req, pool.submit(lambda r: list(echo.stream("/test.Echo/Stream", r, 20)), req)))
        for method, payload, fut in calls:
            expected = b"late" if method.endswith("Late") else payload
            assert fut.result(timeout=30) == expected
        for req, fut in streams:
            assert fut.result(timeout=30) == [req] * 3
    wait_until(lambda: echo.stats()["open_calls"] == 0, what="all calls finished")


def test_cancelled_streaming_call_is_freed_promptly(echo):
    before = echo.stats()["cancels"]
    held = []
    for _ in range(10):
        it = echo.stream("/test.Echo/Hold", b"x", timeout=60)
        assert next(it) == b"held"
        held.append(it)
    assert echo.stats()["open_calls"] == 10
    for it in held:
        it.cancel()
    wait_until(lambda: stats_are(echo, open_calls=0, cancels=before + 10),
               what="cancelled calls freed")

    # a stream cancelled half-way
    it = echo.stream("/test.Echo/Stream", bytes([200]) + b"y", timeout=60)
    assert next(it) == bytes([200]) + b"y"
    it.cancel()
    wait_until(lambda: echo.stats()["open_calls"] == 0, what="half-way stream freed")


def test_dropped_connection_cancels_its_calls(server, echo):
    srv, _ = server
    base = echo.stats()
    other = Echo(srv.path, own_connection=True)
    its = [other.stream("/test.Echo/Hold", b"x", timeout=60) for _ in range(3)]
    for it in its:
        assert next(it) == b"held"
    assert echo.stats()["open_calls"] == 3
    assert echo.stats()["connections"] == base["connections"] + 1
    other.close()
    wait_until(lambda: stats_are(echo, open_calls=0, connections=base["connections"],
                                 cancels=base["cancels"] + 3),
               what="calls of the dropped connection cancelled")


SETTINGS = frame(4, 0, 0, b"")
GOAWAY, SETTINGS_TYPE = 7, 4


def test_garbage_peers_do_not_disturb_others(server, echo):
    srv, _ = server
    base = echo.stats()["connections"]
    rnd = random.Random(1)

    # a connection that never sends, and one that stops inside the preface
    silent = raw_connect(srv.path)
    half = raw_connect(srv.path)
    half.sendall(PREFACE[:11])
    assert echo.unary("/test.Echo/Unary", b"ok1") == b"ok1"

    # random bytes: dropped without a GOAWAY (the peer is not HTTP/2)
    s = raw_connect(srv.path)
    s.sendall(b"\0" + rnd.randbytes(8191))
    types = frame_types(read_until_eof(s))
    assert types[0] == SETTINGS_TYPE and GOAWAY not in types, types
    s.close()
    assert echo.unary("/test.Echo/Unary", b"ok2") == b"ok2"

    # a valid preface, then junk frames: GOAWAY, then closed
    for junk in (
        b"\xff" * 64,                                  # frame over max size
        frame(0, 0, 0, b"data on stream 0"),           # DATA on the connection stream
        frame(1, 4 | 1, 1, b"\xff\xff\xff\xff\xff"),   # HEADERS with broken HPACK
        frame(8, 0, 0, b"\0\0\0\0"),                   # zero WINDOW_UPDATE on stream 0
        rnd.randbytes(4096),
    ):
        s = raw_connect(srv.path)
        s.sendall(PREFACE + SETTINGS + junk)
        got = read_until_eof(s)
        assert GOAWAY in frame_types(got), junk[:16]
        s.close()
        assert echo.unary("/test.Echo/Unary", b"ok3") == b"ok3"

    # requests a gRPC server must refuse, then a good one, on one connection
    s = raw_connect(srv.path)
    grpc_req = [(":method", "POST"), (":scheme", "http"), (":path", "/test.Echo/Unary"),
                (":authority", "x"), ("content-type", "application/grpc")]
    s.sendall(PREFACE + SETTINGS
              + frame(1, 4, 1, hpack(grpc_req[:4] + [("content-type", "text/plain")]))
              + frame(0, 1, 1, b"\0\0\0\0\1z")
              + frame(1, 4 | 1, 3, hpack([(":method", "GET")] + grpc_req[1:]))
              + frame(1, 4, 5, hpack(grpc_req))
              + frame(0, 1, 5, b"\0\0\0\0\2ok"))
    frames = read_frames_until(s, lambda fs: any(f[0] == 0 and f[2] == 5 for f in fs)
                               and any(f[0] == 3 and f[2] == 3 for f in fs))
    s.close()
    by_stream = {}
    for ftype, flags, stream, payload in frames:
        by_stream.setdefault(stream, []).append((ftype, flags, payload))
    # stream 1, bad content-type: one HEADERS (Trailers-Only) with HTTP 415
    assert by_stream[1][0][0] == 1 and by_stream[1][0][1] & 1, by_stream[1]
    assert b"415" in by_stream[1][0][2]
    assert all(t != 0 for t, _, _ in by_stream[1])
    # stream 3, GET: RST_STREAM PROTOCOL_ERROR
    assert (3, 0, struct.pack(">I", 1)) in by_stream[3]
    # stream 5 answered normally
    assert (0, 0, b"\0\0\0\0\2ok") in by_stream[5]
    assert echo.unary("/test.Echo/Unary", b"ok4") == b"ok4"

    # the silent and half-open connections are still there, and harmless
    wait_until(lambda: echo.stats()["connections"] == base + 2, what="two idle connections")
    assert echo.unary("/test.Echo/Unary", b"ok5") == b"ok5"
    silent.close()
    half.close()
    wait_until(lambda: echo.stats()["connections"] == base, what="idle connections closed")


def test_any_authority_is_accepted(server, echo):
    """Kubelets before v1.26 send the socket's path as :authority, which is
    not URI authority syntax (nghttp2 refuses it by default); grpc-go
    servers ignore :authority, and so does ours."""
    srv, _ = server
    for authority in (srv.path, "unix:" + srv.path, "x y"):
        other = Echo(srv.path, own_connection=True, authority=authority)
        try:
            assert other.unary("/test.Echo/Unary", b"hi") == b"hi"
            req = bytes([3]) + b"s"
            assert list(other.stream("/test.Echo/Stream", req)) == [req] * 3
        finally:
            other.close()


def test_other_header_rules_still_reset_the_stream(server, echo):
    """Every HTTP/2 rule on request headers but :authority's syntax still
    holds (RFC 9113 §8.1.1, §8.2, §8.3): a malformed request gets
    RST_STREAM PROTOCOL_ERROR and nothing else, and the connection goes on
    serving the well-formed one after it."""
    srv, _ = server
    good = [(":method", "POST"), (":scheme", "http"), (":path", "/test.Echo/Unary"),
            (":authority", srv.path), ("content-type", "application/grpc"), ("te", "trailers")]
    bad = [
        good + [("connection", "close")],                    # connection-specific
        good + [("transfer-encoding", "chunked")],
        good[:4] + [("Content-Type", "application/grpc")],    # upper case in a name
        good[:4] + [("content-type", "application/grpc\x01")],  # control character
        good[:4] + [("content type", "application/grpc")],    # not a token
        good[:3] + good[4:] + [good[3]],                      # pseudo after regular
        good[:4] + [good[2]] + good[4:],                      # :path twice
        good[:4] + [(":protocol", "x")] + good[4:],           # unknown to a server
        good[:5] + [("te", "gzip")],
        [good[0]] + good[2:],                                 # no :scheme
        good[:2] + [(":path", "test.Echo/Unary")] + good[3:],  # not absolute
        good[:3] + [(":authority", "a\x01b")] + good[4:],     # not a field value
        good + [("content-length", "99")],                    # not what DATA carries
    ]
    body = b"\0\0\0\0\2ok"
    s = raw_connect(srv.path)
    wire = PREFACE + SETTINGS
    for i, headers in enumerate(bad + [good]):
        wire += frame(1, 4, 2 * i + 1, hpack(headers)) + frame(0, 1, 2 * i + 1, body)
    s.sendall(wire)
    good_id = 2 * len(bad) + 1
    frames = read_frames_until(s, lambda fs: any(f[0] == 1 and f[1] & 1 and f[2] == good_id
                                                 for f in fs))
    s.close()
    by_stream = {}
    for ftype, flags, stream, payload in frames:
        by_stream.setdefault(stream, []).append((ftype, payload))
    for i, headers in enumerate(bad):
        got = by_stream.get(2 * i + 1)
        assert got and got[0] == (3, struct.pack(">I", 1)), (headers, got)
        assert all(t == 3 for t, _ in got), (headers, got)
    assert (0, body) in by_stream[good_id], by_stream[good_id]
    assert echo.unary("/test.Echo/Unary", b"after") == b"after"


def flood_without_reading(path, n, size):
    """A peer that opens a huge window, sends n echo requests of size bytes
    and never reads.  Returns (socket, sender thread) once the server has
    stopped reading from it or taken every request."""
    s = raw_connect(path)
    req = [(":method", "POST"), (":scheme", "http"), (":path", "/test.Echo/Unary"),
           (":authority", "x"), ("content-type", "application/grpc")]
    parts = [PREFACE, frame(4, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF)),
             frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535))]
    for i in range(n):
        stream = 2 * i + 1
        body = bytes([0]) + struct.pack(">I", size) + bytes([i]) * size
        parts.append(frame(1, 4, stream, hpack(req)))
        for off in range(0, len(body), 16384):
            last = off + 16384 >= len(body)
            parts.append(frame(0, 1 if last else 0, stream, body[off:off + 16384]))
    data = b"".join(parts)

    def send():
        try:
            s.sendall(data)
        except OSError:
            pass  # the test hung up on a blocked send

    t = threading.Thread(target=send)
    t.start()
    return s, t


def test_peer_that_does_not_read(server, echo):
    srv, _ = server
    base = echo.stats()["connections"]
    # 24 MiB of responses: the server stops reading this peer at 8 MiB of
    # unwritten output, and serves everyone else meanwhile
    s, t = flood_without_reading(srv.path, 48, MiB // 2)
    wait_until(lambda: echo.stats()["connections"] == base + 1, what="flooding peer connected")
    for i in range(20):
        assert echo.unary("/test.Echo/Unary", b"meanwhile") == b"meanwhile"
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    t.join(10)
    assert not t.is_alive()
    wait_until(lambda: echo.stats()["connections"] == base, what="flooding peer dropped")


# ---- the C client, grpcio server ----


class PyService:
    def __init__(self):
        self.release = threading.Event()

    def echo(self, req, ctx):
        return req

    def fail(self, req, ctx):
        ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, "nope: \u00fc\u00f1\u00ee 100% %zz")

    def big(self, req, ctx):
        return b"b" * int(req.decode())

    def two(self, req, ctx):
        yield b"one"
        yield b"two"

    def stream(self, req, ctx):
        for _ in range(req[0]):
            yield req
            time.sleep(0.002)

    def forever(self, req, ctx):
        self.release.wait(30)
        return b"late"


@pytest.fixture(scope="module")
def py_server(tmpdir_short):
    svc = PyService()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=OPTS)
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(svc.echo),
        "Fail": grpc.unary_unary_rpc_method_handler(svc.fail),
        "Big": grpc.unary_unary_rpc_method_handler(svc.big),
        "Two": grpc.unary_stream_rpc_method_handler(svc.two),
        "Stream": grpc.unary_stream_rpc_method_handler(svc.stream),
        "Forever": grpc.unary_unary_rpc_method_handler(svc.forever),
    }
    srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Py", handlers),))
    path = os.path.join(tmpdir_short, "py.sock")
    srv.add_insecure_port("unix:" + path)
    srv.start()
    yield path
    svc.release.set()
    srv.stop(0).wait()


def run_client(*args, build=BUILD, env=None, timeout=30):
    p = subprocess.run(
        [os.path.join(build, "tools", "grpc-testclient"), *map(str, args)],
        capture_output=True, timeout=timeout, env=env,
    )
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    res = {"msgs": [], "stderr": p.stderr.decode()}
    for line in out.splitlines():
        if line.startswith("msg "):
            res["msgs"].append(dict(kv.split("=", 1) for kv in line[4:].split(" ", 2)))
        else:
            k, _, v = line.partition("=")
            res[k] = v
    return res


def test_client_unary(py_server):
    r = run_client(py_server, "/test.Py/Echo", "hello")
    assert r["status"] == "OK"
    assert [m["text"] for m in r["msgs"]] == ["hello"]


@pytest.mark.parametrize("size", [0, MiB, LIMIT])
def test_client_sizes(py_server, size):
    r = run_client("--size", size, py_server, "/test.Py/Echo")
    assert r["status"] == "OK"
    assert r["msgs"][0]["len"] == str(size)
    assert r["msgs"][0]["fnv"] == fnv1a(pattern(size))


def test_client_refuses_oversize_reply(py_server):
    r = run_client(py_server, "/test.Py/Big", str(LIMIT))
    assert r["status"] == "OK" and r["msgs"][0]["len"] == str(LIMIT)
    r = run_client(py_server, "/test.Py/Big", str(LIMIT + 1))
    assert r["status"] == "RESOURCE_EXHAUSTED"


def test_client_errors(py_server):
    r = run_client(py_server, "/test.Py/Fail")
    assert r["status"] == "FAILED_PRECONDITION"
    assert r["message"] == "nope: \u00fc\u00f1\u00ee 100% %zz"
    r = run_client(py_server, "/test.Py/Nope", "x")
    assert r["status"] == "UNIMPLEMENTED"
    # two messages to a unary call
    r = run_client(py_server, "/test.Py/Two")
    assert r["status"] == "INTERNAL"


def test_client_streaming_and_cancel(py_server):
    r = run_client("--stream", py_server, "/test.Py/Stream", "\x04abc")
    assert r["status"] == "OK"
    assert [m["text"] for m in r["msgs"]] == [".abc"] * 4
    r = run_client("--stream", "--cancel-after", 2, py_server, "/test.Py/Stream", "\x64abc")
    assert r["status"] == "CANCELLED"
    assert len(r["msgs"]) == 2


def test_client_many_calls_on_one_loop(py_server):
    r = run_client("--repeat", 50, py_server, "/test.Py/Echo", "same")
    assert r["ok"] == "50"


def test_client_unavailable(tmpdir_short):
    missing = os.path.join(tmpdir_short, "missing.sock")
    r = run_client(missing, "/test.Py/Echo", "x")
    assert r["status"] == "UNAVAILABLE"
    assert missing in r["message"]

    # a socket file nobody listens on
    dead = os.path.join(tmpdir_short, "dead.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(dead)
    s.close()
    r = run_client(dead, "/test.Py/Echo", "x")
    assert r["status"] == "UNAVAILABLE"
    assert dead in r["message"]

    # a peer that speaks no HTTP/2 and hangs up
    bogus = os.path.join(tmpdir_short, "bogus.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(bogus)
    ls.listen(1)

    def answer():
        c, _ = ls.accept()
        c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        c.close()

    t = threading.Thread(target=answer)
    t.start()
    r = run_client("--timeout", 10000, bogus, "/test.Py/Echo", "x")
    t.join()
    ls.close()
    assert r["status"] in ("INTERNAL", "UNAVAILABLE"), r


def test_client_deadline(py_server, tmpdir_short):
    # a listener that never accepts: the connection completes from the backlog
    path = os.path.join(tmpdir_short, "mute.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(4)
    try:
        r = run_client("--timeout", 300, path, "/test.Py/Echo", "x")
        assert r["status"] == "DEADLINE_EXCEEDED"
        r = run_client("--timeout", 300, "--stream", path, "/test.Py/Echo", "x")
        assert r["status"] == "DEADLINE_EXCEEDED"
    finally:
        ls.close()
    # a grpcio handler that does not answer in time
    r = run_client("--timeout", 300, py_server, "/test.Py/Forever", "x")
    assert r["status"] == "DEADLINE_EXCEEDED"


def test_client_against_c_server(server):
    srv, _ = server
    r = run_client(srv.path, "/test.Echo/Unary", "c-to-c")
    assert r["status"] == "OK" and r["msgs"][0]["text"] == "c-to-c"
    r = run_client(srv.path, "/test.Echo/Fail")
    assert r["status"] == "INVALID_ARGUMENT" and r["message"] == FAIL_MESSAGE
    r = run_client("--stream", srv.path, "/test.Echo/Stream", "\x03z")
    assert r["status"] == "OK" and len(r["msgs"]) == 3
    r = run_client("--size", LIMIT + 1, srv.path, "/test.Echo/Unary")
    assert r["status"] == "RESOURCE_EXHAUSTED"


# ---- sanitizers ----


def asan_binary(name):
    """The ASan+UBSan build of a tool, brought up to date (a no-op after `make asan`)."""
    path = os.path.join(ASAN_BUILD, "tools", name)
    build = os.path.relpath(ASAN_BUILD, REPO) if ASAN_BUILD.startswith(REPO + os.sep) else ASAN_BUILD
    p = subprocess.run(["make", f"BUILD={build}", "SAN=1", "OPT=-O1", os.path.join(build, "tools", name)],
                       cwd=REPO, capture_output=True, timeout=600)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    return path


def test_asan_server_and_client_exit_clean(tmpdir_short, py_server):
    env = sanitizer_env()
    asan_binary("grpc-testclient")  # run_client(build=ASAN_BUILD) runs it
    srv = CServer(asan_binary("grpc-testserver"), os.path.join(tmpdir_short, "asan.sock"), env=env)
    echo = Echo(srv.path)
    try:
        assert echo.unary("/test.Echo/Unary", b"a" * LIMIT, timeout=30) == b"a" * LIMIT
        with pytest.raises(grpc.RpcError) as e:
            echo.unary("/test.Echo/Unary", b"a" * (LIMIT + 1), timeout=30)
        assert status_of(e) == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(grpc.RpcError):
            echo.unary("/test.Echo/Fail", b"")
        assert list(echo.stream("/test.Echo/Stream", b"\x03s")) == [b"\x03s"] * 3
        futs = [echo.future("/test.Echo/Unary", str(i).encode()) for i in range(100)]
        assert [f.result(timeout=30) for f in futs] == [str(i).encode() for i in range(100)]

        it = echo.stream("/test.Echo/Hold", b"x", timeout=60)
        assert next(it) == b"held"
        it.cancel()
        wait_until(lambda: echo.stats()["open_calls"] == 0, what="hold cancelled")

        for junk in (b"\0garbage", PREFACE + SETTINGS + b"\xff" * 32):
            s = raw_connect(srv.path)
            s.sendall(junk)
            read_until_eof(s)
            s.close()

        fs, ft = flood_without_reading(srv.path, 24, MiB // 2)
        assert echo.unary("/test.Echo/Unary", b"meanwhile") == b"meanwhile"
        fs.shutdown(socket.SHUT_RDWR)
        fs.close()
        ft.join(10)

        # left open across shutdown: a held call and a half-open connection
        kept = echo.stream("/test.Echo/Hold", b"x", timeout=60)
        assert next(kept) == b"held"
        half = raw_connect(srv.path)
        half.sendall(PREFACE[:5])

        r = run_client(srv.path, "/test.Echo/Stream", "\x02q", build=ASAN_BUILD, env=env)
        assert r["status"] == "INTERNAL", r  # two messages to a unary helper
        assert "Sanitizer" not in r["stderr"], r["stderr"]
        for args in (
            (py_server, "/test.Py/Echo", "x"),
            ("--stream", "--cancel-after", 1, py_server, "/test.Py/Stream", "\x05s"),
            ("--timeout", 200, py_server, "/test.Py/Forever", "x"),
            (os.path.join(tmpdir_short, "nothing.sock"), "/x/y"),
        ):
            r = run_client(*args, build=ASAN_BUILD, env=env)
            assert "Sanitizer" not in r["stderr"], r["stderr"]
    finally:
        rc, err = srv.stop()
        echo.close()
    half.close()
    assert "Sanitizer" not in err and "runtime error" not in err, err
    assert rc == 0, err
