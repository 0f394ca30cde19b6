#!/usr/bin/python3
"""Writes the seed corpus of fuzz-grpc-server: HTTP/2 client byte streams.

Each file is one byte (how the fuzz target cuts the input into reads: 0 for
one read) followed by what a gRPC client sends: the preface, SETTINGS,
HEADERS (HPACK literals) and length-prefixed DATA.
Run: fuzz/gen-corpus-grpc-server.py  (writes fuzz/corpus/fuzz-grpc-server/)
"""

import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz-grpc-server")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack(headers):
    out = b""
    for name, value in headers:
        n, v = name.encode(), value.encode()
        out += b"\0" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return out


def request_headers(path, content_type="application/grpc", extra=()):
    return hpack([(":method", "POST"), (":scheme", "http"), (":path", path),
                  (":authority", "localhost"), ("content-type", content_type),
                  ("te", "trailers"), *extra])


def msg(payload, flag=0):
    return bytes([flag]) + struct.pack(">I", len(payload)) + payload


def settings(*pairs):
    return frame(4, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def start():
    return PREFACE + settings((2, 0), (4, 1 << 20))


def unary(stream, path, payload, **kw):
    return (frame(1, END_HEADERS, stream, request_headers(path, **kw))
            + frame(0, END_STREAM, stream, msg(payload)))


SEEDS = {
    "unary": b"\0" + start() + unary(1, "/test.Echo/Unary", b"hello"),
    "unary-7-byte-reads": b"\7" + start() + unary(1, "/test.Echo/Unary", b"hello"),
    "unary-empty": b"\0" + start() + unary(1, "/test.Echo/Unary", b""),
    "fail": b"\0" + start() + unary(1, "/test.Echo/Fail", b"x"),
    "stream": b"\0" + start() + unary(1, "/test.Echo/Stream", b"\3abc"),
    "hold-then-reset": b"\0" + start() + unary(1, "/test.Echo/Hold", b"x")
    + frame(3, 0, 1, struct.pack(">I", 8)),
    "hold-then-goaway": b"\0" + start() + unary(1, "/test.Echo/Hold", b"x")
    + frame(7, 0, 0, struct.pack(">II", 0, 0)),
    "unknown-method": b"\0" + start() + unary(1, "/no.Such/Method", b"x"),
    "bad-content-type": b"\0" + start() + unary(1, "/test.Echo/Unary", b"x", content_type="text/plain"),
    "gzip": b"\0" + start() + frame(1, END_HEADERS, 1, request_headers(
        "/test.Echo/Unary", extra=[("grpc-encoding", "gzip")]))
    + frame(0, END_STREAM, 1, msg(b"x", flag=1)),
    "split-prefix": b"\0" + start() + frame(1, END_HEADERS, 1, request_headers("/test.Echo/Unary"))
    + frame(0, 0, 1, b"\0\0\0") + frame(0, 0, 1, b"\0\4ab") + frame(0, END_STREAM, 1, b"cd"),
    "two-messages": b"\0" + start() + frame(1, END_HEADERS, 1, request_headers("/test.Echo/Unary"))
    + frame(0, END_STREAM, 1, msg(b"a") + msg(b"b")),
    "oversize": b"\0" + start() + frame(1, END_HEADERS, 1, request_headers("/test.Echo/Unary"))
    + frame(0, END_STREAM, 1, b"\0\0\x40\0\1"),
    "no-message": b"\0" + start() + frame(1, END_HEADERS | END_STREAM, 1, request_headers("/test.Echo/Unary")),
    "many-streams": b"\0" + start() + b"".join(unary(2 * i + 1, "/test.Echo/Unary", bytes([i]) * i)
                                              for i in range(20))
    + frame(6, 0, 0, b"pingpong") + frame(8, 0, 0, struct.pack(">I", 1 << 20)),
    "trailers-from-client": b"\0" + start() + frame(1, END_HEADERS, 1, request_headers("/test.Echo/Unary"))
    + frame(0, 0, 1, msg(b"t")) + frame(1, END_HEADERS | END_STREAM, 1, hpack([("x-trailer", "1")])),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"wrote {len(SEEDS)} seeds to {OUT}")
