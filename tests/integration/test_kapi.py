"""The Kubernetes API client (src/kapi/) against a fake API server that is
hostile on demand.

The client is tests/tools/kapi-get (see its header for its output and exit
codes).  The server is Python's http.server over TLS with a throwaway CA,
server and client certificates made by the openssl CLI; it answers correct
JSON, a Status for refusals, a 64 MiB body (with and without a length),
malformed JSON, a redirect, and watches that end, hang, send a line over
the limit, refuse with 410 or send 410 as an ERROR event.  Memory is the
kernel's high-water mark of the client (VmHWM, which kapi-get prints from
/proc/self/status as it exits; wait4's ru_maxrss would also carry the
high-water mark of the forking pytest process).
"""

import json
import os
import re
import ssl
import subprocess
import threading
import time

import pytest

from devlet_harness import BUILD_DIR
from fake_apiserver import (JSONHandler, TLSServer, b64, make_certs, server_context, status_object,
                            write_kubeconfig)

KAPI_GET = os.path.join(BUILD_DIR, "tools", "kapi-get")
MiB = 1 << 20
NOT_FOUND = 'resourceclaims.resource.k8s.io "x" not found'
RETRY_AFTER_S = 3
# devlet/<version> (linux/<GOARCH>)[ <component>]
USER_AGENT = r"devlet/[^ /]+ \(linux/[a-z0-9]+\)"


def event(kind, name):
    return json.dumps({"type": kind, "object": {"kind": "ResourceSlice",
                                               "metadata": {"name": name}}}).encode() + b"\n"


class Handler(JSONHandler):
    # ---- routes (JSONHandler: send_json, chunked streams) ----
    def do_GET(self):
        self.route()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def route(self):
        api = self.server.api
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with api.lock:
            api.requests.append((self.command, self.path))
            api.times.append(time.monotonic())
            api.lock.notify_all()
        try:
            getattr(self, "r_" + path.strip("/").replace("/", "_").replace("-", "_"))(body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    def r_echo(self, body):
        auth = self.headers.get("Authorization") or ""
        self.send_json(200, {
            "kind": "Echo", "metadata": {"name": "echo"},
            "method": self.command, "path": self.path,
            "body": json.loads(body) if body else None,
            "content_type": self.headers.get("Content-Type"),
            "accept": self.headers.get("Accept"),
            "user_agent": self.headers.get("User-Agent"),
            "token": auth[len("Bearer "):] if auth.startswith("Bearer ") else None,
            "client_cn": self.client_cn(),
        })

    def r_missing(self, body):
        self.send_json(404, status_object(404, "NotFound", NOT_FOUND))

    def r_needs_cert(self, body):
        if self.client_cn() is None:
            self.send_json(401, status_object(401, "Unauthorized", "Unauthorized: no client certificate"))
        else:
            self.send_json(200, {"kind": "Ok", "metadata": {"name": self.client_cn()}})

    def r_unavailable(self, body):
        data = b"<html>upstream down</html>"
        self.send_response(503)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def r_throttled(self, body):
        """While api.throttle is set: that status with Retry-After, as an
        API server's Priority and Fairness (429) or a proxy (503) answers."""
        api = self.server.api
        with api.lock:
            code = api.throttle
        if code:
            self.send_json(code, status_object(code, "TooManyRequests", "please try again later"),
                           extra=[("Retry-After", str(RETRY_AFTER_S))])
        else:
            with api.lock:
                api.served += 1
                api.lock.notify_all()
            self.send_json(200, {"kind": "Ok", "metadata": {"name": "ok"}})

    def r_redirect(self, body):
        self.send_response(302)
        self.send_header("Location", "/echo")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def big(self, with_length):
        self.close_connection = True
        piece = b"x" * MiB
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        total = 64 * MiB
        if with_length:
            self.send_header("Content-Length", str(total + len(b'{"data":""}')))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b'{"data":"')
        for _ in range(total // MiB):
            self.wfile.write(piece)
        self.wfile.write(b'"}')

    def r_big(self, body):
        self.big(True)

    def r_big_stream(self, body):
        self.big(False)

    def r_malformed(self, body):
        data = b'{"kind": "Pod", "metadata": {"name": '
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def r_watch_end(self, body):
        self.start_chunked()
        self.chunk(event("ADDED", "a") + event("MODIFIED", "a"))
        self.chunk(event("DELETED", "a")[:10])  # a line split across chunks
        self.chunk(event("DELETED", "a")[10:])
        self.end_chunked()

    def r_watch_then_hang(self, body):
        self.start_chunked()
        self.chunk(event("ADDED", "a"))
        self.chunk(event("MODIFIED", "a"))
        self.server.api.release.wait()

    def r_watch_long_line(self, body):
        self.close_connection = True
        self.start_chunked()
        self.chunk(event("ADDED", "a"))
        big = b'{"type":"ADDED","object":{"metadata":{"name":"' + b"y" * (2 * MiB)
        for i in range(0, len(big), 64 * 1024):
            self.chunk(big[i:i + 64 * 1024])
        self.chunk(b'"}}}\n')
        self.end_chunked()

    def r_watch_gone(self, body):
        self.send_json(410, status_object(410, "Expired", "too old resource version: 1 (42)"))

    def r_watch_error_event(self, body):
        self.start_chunked()
        self.chunk(event("ADDED", "a"))
        self.chunk(json.dumps({"type": "ERROR", "object": status_object(
            410, "Expired", "too old resource version: 1 (42)")}).encode() + b"\n")
        self.end_chunked()

    def r_watch_not_event(self, body):
        self.start_chunked()
        self.chunk(event("ADDED", "a"))
        self.chunk(b'{"type": "ADDED"}\n')
        self.end_chunked()


class FakeAPI:
    def __init__(self, certs):
        self.lock = threading.Condition()
        self.release = threading.Event()
        self.connections = 0
        self.requests, self.times = [], []  # times: time.monotonic() as each came
        self.throttle, self.served = 0, 0
        self.httpd = TLSServer(("127.0.0.1", 0), Handler)
        self.httpd.api = self
        self.httpd.ctx = server_context(certs)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, check, timeout=15.0, what="condition"):
        with self.lock:
            assert self.lock.wait_for(check, timeout), f"timed out waiting for {what}"

    def count_between(self, t0, t1):
        with self.lock:
            return sum(1 for t in self.times if t0 <= t < t1)

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("kapi-certs"))


@pytest.fixture
def api(certs):
    server = FakeAPI(certs)
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(tmp_path, certs, api):
    """A kubeconfig for the fake server: CA as data, an inline token."""
    return write_kubeconfig(tmp_path / "kubeconfig", api.url,
                            f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                            "    token: inline-token")


class Result:
    def __init__(self, proc, elapsed):
        self.code, self.out, self.err = proc.returncode, proc.stdout, proc.stderr
        self.lines = [l for l in self.out.splitlines() if not l.startswith("vmhwm_kib=")]
        self.elapsed = elapsed

    def field(self, key):
        for line in self.out.splitlines():
            if line.startswith(key + "="):
                return line[len(key) + 1:]
        return None

    def body(self):
        return json.loads(self.field("body"))

    @property
    def peak_mib(self):
        return int(self.field("vmhwm_kib")) / 1024


def kapi_get(tmp_path, *args, kubeconfig=None, env=None, timeout=60):
    """Runs kapi-get to its end; its exit code and output."""
    e = {k: v for k, v in os.environ.items()
         if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "kubeconfig")}
    e.update(env or {})
    argv = [KAPI_GET] + (["--kubeconfig", str(kubeconfig)] if kubeconfig else []) + list(args)
    start = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=timeout)
    return Result(p, time.monotonic() - start)


# ---- requests ----

def test_get_json_with_headers(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "GET", "/echo?labelSelector=a%3Db", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.field("status") == "200"
    b = r.body()
    assert b["method"] == "GET" and b["path"] == "/echo?labelSelector=a%3Db"
    assert b["accept"] == "application/json"
    assert b["user_agent"].startswith("devlet/")
    assert b["token"] == "inline-token"
    assert b["content_type"] is None and b["client_cn"] is None


@pytest.mark.parametrize("method,ctype", [("PATCH", "application/merge-patch+json"),
                                          ("POST", "application/json"),
                                          ("PUT", "application/json")])
def test_body_and_content_type(tmp_path, api, kubeconfig, method, ctype):
    r = kapi_get(tmp_path, method, "/echo", '{"spec": {"a": 1}}', kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    b = r.body()
    assert b["method"] == method and b["content_type"] == ctype
    assert b["body"] == {"spec": {"a": 1}}


def test_status_message_in_diag(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "GET", "/missing", kubeconfig=kubeconfig)
    assert r.code == 1
    assert r.field("status") == "404"
    assert f"GET /missing: 404 Not Found: {NOT_FOUND}" in r.err


def test_401_with_status_message(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "GET", "/needs-cert", kubeconfig=kubeconfig)
    assert r.code == 1
    assert r.field("status") == "401"
    assert "GET /needs-cert: 401 Unauthorized: Unauthorized: no client certificate" in r.err


def test_error_without_json_names_the_status(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "GET", "/unavailable", kubeconfig=kubeconfig)
    assert r.code == 1
    assert r.field("status") == "503"
    assert "GET /unavailable: 503 Service Unavailable" in r.err


def test_redirect_not_followed(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "GET", "/redirect", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.field("status") == "302"
    assert [p for _, p in api.requests] == ["/redirect"]


def test_malformed_json(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "GET", "/malformed", kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.field("error") == "EBADMSG"
    assert "GET /malformed: 200: the body is not JSON" in r.err


@pytest.mark.parametrize("route,message", [
    ("/big", "a body of 67108875 bytes is over the limit (16777216)"),
    # one string: the JSON kept is over its budget's bytes before the body is over its limit
    ("/big-stream", "JSON document over 4194304 bytes kept"),
])
def test_64_mib_body_bounded(tmp_path, api, kubeconfig, route, message):
    r = kapi_get(tmp_path, "GET", route, kubeconfig=kubeconfig)
    assert r.code == 3, r.err
    assert r.field("error") == "EMSGSIZE"
    assert f"GET {route}: {message}" in r.err
    assert r.peak_mib < 64, f"kapi-get peaked at {r.peak_mib:.1f} MiB"


def test_max_body_smaller(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--max-body", str(MiB), "GET", "/big-stream", kubeconfig=kubeconfig)
    assert r.field("error") == "EMSGSIZE"
    assert "over the limit (1048576 bytes)" in r.err
    assert r.peak_mib < 24, f"kapi-get peaked at {r.peak_mib:.1f} MiB"


def test_whole_call_timeout(tmp_path, api, kubeconfig):
    # a plain request on the watch that hangs: the whole-call bound cuts it
    r = kapi_get(tmp_path, "--timeout-ms", "500", "GET", "/watch/then-hang", kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.field("error") == "ETIMEDOUT"
    assert r.elapsed < 10


def test_connections_reused(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--repeat", "5", "GET", "/echo", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.lines.count("status=200") == 5
    assert api.connections == 1


def test_threads_share_the_client(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--threads", "4", "--repeat", "10", "GET", "/echo", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.lines.count("status=200") == 40
    # at most four calls are ever in flight, so at most four connections
    assert api.connections <= 4


# ---- TLS and credentials ----

def test_wrong_ca_fails_clearly(tmp_path, certs, api):
    kc = write_kubeconfig(tmp_path / "kc", api.url,
                          f"    certificate-authority: {certs / 'other-ca.crt'}", "    token: t")
    r = kapi_get(tmp_path, "GET", "/echo", kubeconfig=kc)
    assert r.code == 3
    assert r.field("error") == "ECONNABORTED"
    assert f"GET {api.url}/echo: " in r.err and "certificate" in r.err
    assert api.requests == []


def test_insecure_skip_verify(tmp_path, api):
    kc = write_kubeconfig(tmp_path / "kc", api.url, "    insecure-skip-tls-verify: true",
                          "    token: t")
    r = kapi_get(tmp_path, "GET", "/echo", kubeconfig=kc)
    assert r.code == 0, r.err


@pytest.mark.parametrize("as_data", [False, True])
def test_client_certificate(tmp_path, certs, api, as_data):
    for f in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / f).write_bytes((certs / f).read_bytes())
    if as_data:
        user = (f"    client-certificate-data: {b64(certs / 'client.crt')}\n"
                f"    client-key-data: {b64(certs / 'client.key')}")
    else:  # relative paths: from the kubeconfig's directory, not ours
        user = "    client-certificate: client.crt\n    client-key: client.key"
    kc = write_kubeconfig(tmp_path / "kc", api.url, "    certificate-authority: ca.crt", user)
    r = kapi_get(tmp_path, "GET", "/needs-cert", kubeconfig=kc)
    assert r.code == 0, r.err
    assert r.body()["metadata"]["name"] == "devlet-test"


@pytest.mark.parametrize("field", ["certificate-authority", "client-certificate", "client-key"])
@pytest.mark.parametrize("kind", ["fifo", "directory", "oversize"])
def test_tls_file_that_cannot_be_read_fails_at_once(tmp_path, certs, api, field, kind):
    """A FIFO that never gets a writer (OpenSSL's blocking fopen of it hung
    the call, with the client's lock held), a directory or a file over the
    4 MiB bound in place of the CA, the client certificate or its key: the
    call fails at once, naming the file and why; nothing reaches the
    server."""
    for f in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / f).write_bytes((certs / f).read_bytes())
    bad = tmp_path / "bad.pem"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "directory":
        bad.mkdir()
    else:
        bad.write_bytes(b"x" * (4 * MiB + 1))
    files = {"certificate-authority": "ca.crt", "client-certificate": "client.crt",
             "client-key": "client.key", field: str(bad)}
    kc = write_kubeconfig(tmp_path / "kc", api.url,
                          f"    certificate-authority: {files['certificate-authority']}",
                          f"    client-certificate: {files['client-certificate']}\n"
                          f"    client-key: {files['client-key']}")
    r = kapi_get(tmp_path, "GET", "/needs-cert", kubeconfig=kc, timeout=10)
    assert r.code != 0
    what = {"certificate-authority": "CA file", "client-certificate": "client certificate",
            "client-key": "client key"}[field]
    why = {"fifo": "not a regular file", "directory": "Is a directory",
           "oversize": "larger than 4 MiB"}[kind]
    assert f"{what} {bad}: {why}" in r.err, r.err
    assert api.requests == []


def test_bearer_token_file(tmp_path, certs, api):
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text("  token-from-file\n")
    kc = write_kubeconfig(tmp_path / "kc", api.url,
                          f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                          "    token: inline-token\n    tokenFile: sa/token")
    r = kapi_get(tmp_path, "GET", "/echo", kubeconfig=kc)
    assert r.code == 0, r.err
    assert r.body()["token"] == "token-from-file"


def test_token_file_too_large(tmp_path, certs, api):
    (tmp_path / "token").write_text("x" * (64 * 1024 + 1))
    kc = write_kubeconfig(tmp_path / "kc", api.url, "    insecure-skip-tls-verify: true",
                          "    tokenFile: token")
    r = kapi_get(tmp_path, "GET", "/echo", kubeconfig=kc)
    assert r.code == 2
    assert f"{kc}:" in r.err and "larger than 64 KiB" in r.err
    assert api.requests == []


def test_in_cluster(tmp_path, certs, api):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "ca.crt").write_bytes((certs / "ca.crt").read_bytes())
    r = kapi_get(tmp_path, "--sa-dir", str(sa), "GET", "/echo",
                 env={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                      "KUBERNETES_SERVICE_PORT": str(api.port)})
    assert r.code == 0, r.err
    assert r.body()["token"] == "sa-token"


# ---- watches ----

def test_watch_until_the_server_ends_it(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "GET", "/watch/end?watch=1", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.lines == ["ADDED a", "MODIFIED a", "DELETED a", "status=200"]


def test_watch_that_hangs_is_cut(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "--low-speed-ms", "1000", "GET",
                 "/watch/then-hang?watch=1&timeoutSeconds=300", kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.lines[:3] == ["ADDED a", "MODIFIED a", "status=200"]
    assert r.field("error") == "ETIMEDOUT"
    assert "no byte moved for 1000 ms" in r.err
    assert r.elapsed < 10


def test_watch_stopped_while_silent(tmp_path, api, kubeconfig):
    # the stop flag is set from the second event; the stream then stays
    # silent, so only the progress callback can notice it
    r = kapi_get(tmp_path, "--watch", "--stop-after", "2", "GET", "/watch/then-hang?watch=1",
                 kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.lines[:3] == ["ADDED a", "MODIFIED a", "status=200"]
    assert r.field("error") == "ECANCELED"
    assert r.elapsed < 10


def test_watch_line_over_the_limit(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "--max-line", str(MiB), "GET", "/watch/long-line?watch=1",
                 kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.lines[0] == "ADDED a"
    assert r.field("error") == "EMSGSIZE"
    assert "line 2 is over the limit (1048576 bytes)" in r.err
    assert r.peak_mib < 24, f"kapi-get peaked at {r.peak_mib:.1f} MiB"


def test_watch_gone_as_status(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "GET", "/watch/gone?watch=1&resourceVersion=1",
                 kubeconfig=kubeconfig)
    assert r.code == 1
    assert r.field("status") == "410"
    assert r.field("error") == "EPROTO"
    assert "410 Gone: too old resource version: 1 (42)" in r.err


def test_watch_gone_as_error_event(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "GET", "/watch/error-event?watch=1", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.lines == ["ADDED a", "ERROR 410", "status=200"]


def test_watch_line_not_an_event(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "GET", "/watch/not-event?watch=1", kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.lines[0] == "ADDED a"
    assert r.field("error") == "EBADMSG"
    assert "line 2 is not an event" in r.err


def test_watch_path_must_say_watch(tmp_path, api, kubeconfig):
    r = kapi_get(tmp_path, "--watch", "GET", "/watch/end", kubeconfig=kubeconfig)
    assert r.code == 3
    assert r.field("error") == "EINVAL"
    assert api.requests == []


# ---- politeness: who we are, how often we ask, and waiting when told to ----

@pytest.mark.parametrize("component", [None, "dra"])
def test_user_agent_names_devlet_and_component(tmp_path, api, kubeconfig, component):
    args = ["--component", component] if component else []
    r = kapi_get(tmp_path, *args, "GET", "/echo", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    want = USER_AGENT + (" " + component if component else "")
    assert re.fullmatch(want, r.body()["user_agent"]), r.body()["user_agent"]


def run_looping(kubeconfig, *args):
    """kapi-get making its call over and over until killed."""
    e = {k: v for k, v in os.environ.items()
         if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "kubeconfig")}
    return subprocess.Popen([KAPI_GET, "--kubeconfig", str(kubeconfig), *args], env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_then_recovers(tmp_path, api, kubeconfig, status):
    """One consumer that asks again as soon as it is answered: while every
    answer is a 429 (or 503) with Retry-After: 3, the client waits those
    3 s before each next call, so the server sees at most 2 requests in any
    2.5 s (a client that does not wait sends hundreds); healed, the calls
    flow again."""
    api.throttle = status
    p = run_looping(kubeconfig, "--repeat", "100000", "GET", "/throttled")
    try:
        # the third request closes the window of 2.5 s after the first
        api.wait_for(lambda: len(api.times) >= 3, what="the third request")
        t0 = api.times[0]
        assert api.count_between(t0, t0 + 2.5) <= 2, [t - t0 for t in api.times[:10]]
        with api.lock:
            api.throttle = 0
        api.wait_for(lambda: api.served >= 5, timeout=RETRY_AFTER_S + 10,
                     what="calls answered once healed")
    finally:
        p.kill()
        p.wait()


def test_qps_and_burst_shared_by_threads(tmp_path, api, kubeconfig):
    """--qps 2 --burst 2 from 4 threads sharing one client: 2 calls at
    once, then one per 500 ms; every call waits for its turn and succeeds."""
    r = kapi_get(tmp_path, "--qps", "2", "--burst", "2", "--threads", "4", "--repeat", "3",
                 "GET", "/echo", kubeconfig=kubeconfig)
    assert r.code == 0, r.err
    assert r.lines.count("status=200") == 12
    t0 = api.times[0]
    # 2 at once, then at 0.5, 1.0, 1.5 (and 2.0, at the window's edge)
    assert api.count_between(t0, t0 + 2.0) <= 6, api.times
    # after the burst: at most 2 a second
    assert api.count_between(t0 + 1.0, t0 + 3.0) <= 5, api.times
