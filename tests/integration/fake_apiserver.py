"""A fake Kubernetes API server for the tests of src/kapi/ and src/dra/,
hostile on demand.

The pieces every such test needs: a throwaway CA with server and client
certificates made by the openssl CLI (make_certs), a kubeconfig pointing at
a server (write_kubeconfig), Kubernetes' Status objects, and Python's
threaded http.server over TLS (TLSServer: the handshake runs in the
connection's thread, so a client that fails it holds up no one) with a
handler base that speaks JSON and chunked streams (JSONHandler).

ApiServer is the resource.k8s.io/v1 part the DRA module talks to: it keeps
ResourceSlices in memory (LIST with a fieldSelector, GET, POST, PUT checked
against resourceVersion, DELETE one or a collection, WATCH streaming the
events, which starts with ADDED for what exists, as a watch without
resourceVersion does) and serves the ResourceClaims a test puts in it.
For the labels module it also keeps Nodes (GET, and PATCH as a JSON
merge patch) and NFD's NodeFeature objects (nfd.k8s-sigs.io/v1alpha1:
GET, POST, PUT checked against resourceVersion), routes "nodes" and
"nodefeatures" (LABEL_ROUTES).
Each route (ROUTES) can be switched to a hostile mode (MODES); down()
closes the listening socket and every connection (connection refused) and
up() listens again on the same port.  Everything a test waits for goes
through one threading.Condition (wait_for), so no test sleeps blindly.
"""

import base64
import copy
import http.server
import json
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse

MiB = 1 << 20
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIM_PATH = re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)$")
NODE_PATH = re.compile(r"^/api/v1/nodes/([^/]+)$")
PODS = "/api/v1/pods"
NF_PATH = re.compile(r"^/apis/nfd\.k8s-sigs\.io/v1alpha1/namespaces/([^/]+)/nodefeatures(?:/([^/]+))?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

# ---------------------------------------------------------------- TLS, kubeconfig


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    """In directory d (a pathlib.Path): ca.{crt,key}, other-ca.{crt,key}
    (a CA that signed nothing), server.{crt,key} (127.0.0.1, localhost)
    and client.{crt,key} (CN devlet-test), signed by ca.  Returns d."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                "-subj", f"/CN=kapi-test-{ca}", "-days", "2", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        (d / f"{name}.ext").write_text(ext)
        cn = "localhost" if name == "server" else "devlet-test"
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return d


def server_context(certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "server.crt", certs / "server.key")
    ctx.load_verify_locations(certs / "ca.crt")
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def b64(path):
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path, server, cluster, user):
    """cluster and user: the mappings' lines (already indented by 4)."""
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: test
contexts:
- name: other
  context: {{cluster: nowhere, user: nobody}}
- name: test
  context:
    cluster: fake
    user: me
clusters:
- name: fake
  cluster:
    server: {server}
{cluster}
users:
- name: me
  user:
{user}
""")
    return path


def status_object(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}

# ---------------------------------------------------------------- HTTP plumbing


class JSONHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # an answer's head and body go out as separate writes: with Nagle on, the
    # body waits for the client's delayed ACK (40 ms) on a kept-alive
    # connection, as a real API server (Go sets TCP_NODELAY) never makes it
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def send_json(self, code, obj, extra=()):
        self.send_body(code, json.dumps(obj).encode(), extra)

    def send_body(self, code, data, extra=()):
        """data (bytes, JSON or not) as an application/json answer."""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_status(self, code, reason, message):
        self.send_json(code, status_object(code, reason, message))

    def start_chunked(self, code=200):
        self.send_response(code)
        self.send_header("Content-Type", "application/json;stream=watch")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")

    def client_cn(self):
        cert = self.connection.getpeercert()
        for rdn in (cert or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    return v
        return None

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""


class TLSServer(http.server.ThreadingHTTPServer):
    """ctx: the server's ssl.SSLContext; api: the handler's state
    (connections counted under api.lock, each open one in api.conns when
    the api keeps such a set)."""
    daemon_threads = True

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the connection's thread, so a client that
        # fails it never holds up the others.
        try:
            conn = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        conns = getattr(self.api, "conns", None)
        with self.api.lock:
            self.api.connections += 1
            if conns is not None:
                conns.add(conn)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            with self.api.lock:
                if conns is not None:
                    conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass

# ---------------------------------------------------------------- resource.k8s.io


ROUTES = ("slices", "watch", "claims")
LABEL_ROUTES = ("nodes", "nodefeatures")
POD_ROUTES = ("pods", "podwatch")
# hangup: the connection closes with no answer; slow: the answer comes after
# `delay` seconds; huge: 64 MiB of body without a length; malformed: broken
# JSON; silent: the headers (a watch: an open stream) and then nothing until
# the server stops; gone: 410; gone-event: a watch answered with one ERROR
# event (a 410 Status) and ended; error: 500; ends: an empty answer (a watch
# that ends at once); values: a 16 MiB body of `[],[],...`
MODES = ("hangup", "slow", "huge", "values", "malformed", "silent", "gone", "gone-event", "error",
         "ends", "busy")


def field_selector(query):
    """{"spec.nodeName": "n", ...} from a fieldSelector (a=b,c=d)."""
    sel = {}
    for v in query.get("fieldSelector", []):
        for term in v.split(","):
            if term:
                k, _, want = term.partition("=")
                sel[k] = want.lstrip("=")
    return sel


def field(obj, dotted):
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def matches(obj, sel):
    return all(field(obj, k) == v for k, v in sel.items())


def slice_problems(s):
    """What the real API server's validation would refuse (the part devlet
    could get wrong)."""
    p = []
    if s.get("apiVersion") != "resource.k8s.io/v1" or s.get("kind") != "ResourceSlice":
        p.append("apiVersion/kind")
    name = field(s, "metadata.name")
    if not isinstance(name, str) or not name or len(name) > 253:
        p.append("metadata.name")
    spec = s.get("spec") or {}
    if not spec.get("driver") or not spec.get("nodeName"):
        p.append("spec.driver/nodeName")
    pool = spec.get("pool") or {}
    if not pool.get("name") or not isinstance(pool.get("generation"), int) or \
            not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] < 1:
        p.append("spec.pool")
    devices = spec.get("devices") or []
    if len(devices) > 128:
        p.append("spec.devices: more than 128")
    for d in devices:
        if not DNS_LABEL.match(d.get("name", "")):
            p.append(f"device name {d.get('name')!r}")
        for k, v in (d.get("attributes") or {}).items():
            if not isinstance(v, dict) or len(v) != 1 or \
                    next(iter(v)) not in ("string", "int", "bool", "version"):
                p.append(f"attribute {k}")
    return p


class ApiHandler(JSONHandler):
    def do_GET(self):
        api = self.server.api
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        body = self.read_body()
        route = api.route_of(url.path, query)
        with api.lock:
            api.requests.append((self.command, self.path))
            api.agents.append(self.headers.get("User-Agent"))
            api.times.append(time.monotonic())
            api.hits[route] = api.hits.get(route, 0) + 1
            mode, params = api.modes.get(route, (None, {}))
            api.lock.notify_all()
        try:
            if mode and not self.hostile(mode, params, route):
                return
            if route is None:
                self.send_status(404, "NotFound", f"{url.path}: not found")
            elif route == "watch":
                self.watch(query)
            elif route == "pods":
                self.pods(query)
            elif route == "podwatch":
                self.watch(query, pods=True)
            elif route == "claims":
                self.claim(*CLAIM_PATH.match(url.path).groups())
            elif route == "nodes":
                self.node(NODE_PATH.match(url.path).group(1), body)
            elif route == "nodefeatures":
                self.nodefeature(*NF_PATH.match(url.path).groups(), body)
            else:
                self.slices(url.path, query, body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def hostile(self, mode, params, route):
        """Misbehaves; True when the request should then be answered."""
        api = self.server.api
        self.close_connection = True
        if mode == "hangup":
            return False
        if mode == "slow":
            api.stopping.wait(params.get("delay", 3))
            self.close_connection = False
            return True
        if mode == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'{"kind": "ResourceSliceList", "items": [], "x": "')
            piece = b"x" * MiB
            for _ in range(64):
                self.wfile.write(piece)
            self.wfile.write(b'"}')
            return False
        if mode == "values" and route in ("watch", "podwatch"):
            # an event whose Status message is nothing but values, `[],`
            # over and over: 3 MiB of them, inside the line limit
            n = 3 * MiB // 3
            self.start_chunked()
            self.chunk(b'{"type": "ADDED", "object": {"message": [' + b"[]," * (n - 1) + b"[]]}}\n")
            self.end_chunked()
            return False
        if mode == "values":
            # nothing but values: `[],` over and over, 16 MiB of them
            n = params.get("mib", 16) * MiB // 3
            data = (b'{"kind": "List", "metadata": {"resourceVersion": "1"}, "items": ['
                    + b"[]," * (n - 1) + b"[]]}")
            self.send_body(200, data)
            return False
        if mode == "malformed":
            data = b'{"kind": "ResourceSliceList", "items": [{"metadata": '
            self.send_body(200, data)
            return False
        if mode == "silent":
            if route in ("watch", "podwatch"):
                self.start_chunked()
            else:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100")
                self.end_headers()
            self.wfile.flush()
            api.stopping.wait()
            return False
        if mode == "gone":
            self.send_status(410, "Expired", "too old resource version: 1 (42)")
            return False
        if mode == "gone-event":
            self.close_connection = False
            self.start_chunked()
            ev = {"type": "ERROR", "object": status_object(410, "Expired",
                                                           "too old resource version: 1 (42)")}
            self.chunk(json.dumps(ev).encode() + b"\n")
            self.end_chunked()
            return False
        if mode == "error":
            self.send_status(500, "InternalError", "etcdserver: request timed out")
            return False
        if mode == "busy":
            # API Priority and Fairness turning requests away
            self.send_json(429, status_object(429, "TooManyRequests",
                                              "too many requests, please try again later"),
                           extra=[("Retry-After", str(params.get("after", 1)))])
            return False
        if mode == "ends":
            self.close_connection = False
            if route in ("watch", "podwatch"):
                self.start_chunked()
                self.end_chunked()
            else:
                self.send_json(200, {})
            return False
        raise ValueError(mode)

    # ---- resources ----

    def claim(self, ns, name):
        api = self.server.api
        with api.lock:
            obj = copy.deepcopy(api.claims.get((ns, name)))
        if obj is None:
            self.send_status(404, "NotFound", f'resourceclaims.resource.k8s.io "{name}" not found')
        else:
            self.send_json(200, obj)

    def node(self, name, body):
        api = self.server.api
        if self.command == "PATCH" and \
                self.headers.get("Content-Type") != "application/merge-patch+json":
            self.send_status(415, "UnsupportedMediaType", "the body of the request was in an "
                             "unknown format")
            return
        with api.lock:
            if self.command == "GET":
                code, obj = api.get_node(name)
            elif self.command == "PATCH":
                code, obj = api.patch_node(name, json.loads(body))
            else:
                code, obj = 405, status_object(405, "MethodNotAllowed", self.command)
        self.send_json(code, obj)

    def nodefeature(self, ns, name, body):
        api = self.server.api
        with api.lock:
            if self.command == "GET" and name:
                code, obj = api.get_nodefeature(ns, name)
            elif self.command == "POST" and not name:
                code, obj = api.create_nodefeature(ns, json.loads(body))
            elif self.command == "PUT" and name:
                code, obj = api.update_nodefeature(ns, name, json.loads(body))
            else:
                code, obj = 405, status_object(405, "MethodNotAllowed", self.command)
        self.send_json(code, obj)

    def slices(self, path, query, body):
        api = self.server.api
        name = path[len(SLICES) + 1:] if path.startswith(SLICES + "/") else None
        method = self.command
        code, obj = 405, status_object(405, "MethodNotAllowed", method)
        with api.lock:
            if method == "GET" and name is None:
                sel = field_selector(query)
                items = [copy.deepcopy(s) for s in api.slices.values() if matches(s, sel)]
                code, obj = 200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                                  "metadata": {"resourceVersion": str(api.rv)}, "items": items}
            elif method == "GET":
                code, obj = api.get_slice(name)
            elif method == "POST" and name is None:
                code, obj = api.create_slice(json.loads(body))
            elif method == "PUT" and name is not None:
                code, obj = api.update_slice(name, json.loads(body))
            elif method == "DELETE" and name is not None:
                code, obj = api.delete_slice(name)
            elif method == "DELETE":
                sel = field_selector(query)
                gone = [api.delete_slice(n)[1] for n, s in list(api.slices.items()) if matches(s, sel)]
                code, obj = 200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                                  "metadata": {"resourceVersion": str(api.rv)}, "items": gone}
        self.send_json(code, obj)

    def pods(self, query):
        api = self.server.api
        sel = field_selector(query)
        # limit/continue: the continue token is the next item's index
        limit = int((query.get("limit") or ["0"])[0])
        start = int((query.get("continue") or ["0"])[0])
        with api.lock:
            items = [p for p in api.pods.values() if matches(p, sel)]
            meta = {"resourceVersion": str(api.rv)}
            if limit > 0:
                if start + limit < len(items):
                    meta["continue"] = str(start + limit)
                items = items[start:start + limit]
            obj = {"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                   "items": copy.deepcopy(items)}
        self.send_json(200, obj)

    def watch(self, query, pods=False):
        api = self.server.api
        sel = field_selector(query)
        deadline = time.monotonic() + int((query.get("timeoutSeconds") or ["1800"])[0])
        events = api.pod_events if pods else api.events
        rv = (query.get("resourceVersion") or [""])[0]
        # a streaming list (WatchList): the objects as ADDED events, then a
        # bookmark marked as the end of the initial events
        stream = (query.get("sendInitialEvents") or [""])[0] == "true"
        if stream:
            with api.lock:
                api.streams += 1
            match = (query.get("resourceVersionMatch") or [""])[0]
            marks = (query.get("allowWatchBookmarks") or [""])[0] == "true"
            if not api.watch_list:
                self.send_status(422, "Invalid", "sendInitialEvents is forbidden for watch "
                                 "unless the WatchList feature gate is enabled")
                return
            if match != "NotOlderThan" or not marks:
                self.send_status(422, "Invalid", "sendInitialEvents needs "
                                 "resourceVersionMatch=NotOlderThan and allowWatchBookmarks")
                return
        self.start_chunked()
        with api.lock:
            pos, epoch = len(events), api.watch_epoch
            objs = api.pods if pods else api.slices
            first = [("ADDED", copy.deepcopy(s)) for s in objs.values() if matches(s, sel)]
            if stream:
                first.append(("BOOKMARK", {
                    "kind": "PodList" if pods else "ResourceSlice",
                    "metadata": {"resourceVersion": str(api.rv),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}}))
            elif api.cache_window is not None and not pods and rv not in ("", "0"):
                # the watch cache: from a version it still holds, what came
                # after it; from an older one, 410 Gone
                if int(rv) < api.cache_window:
                    api.gone_answers += 1
                    first, epoch = [("ERROR", status_object(410, "Expired",
                                                            f"too old resource version: {rv}"))], None
                else:
                    first = [(k, copy.deepcopy(o)) for k, o in events
                             if int(o["metadata"]["resourceVersion"]) > int(rv)]
            api.watchers += 1
            api.lock.notify_all()
        try:
            for kind, obj in first:
                self.chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
            while time.monotonic() < deadline and not api.stopping.is_set() and epoch == api.watch_epoch:
                with api.lock:
                    api.lock.wait_for(lambda: len(events) > pos or api.stopping.is_set()
                                      or epoch != api.watch_epoch, 0.2)
                    batch, pos = events[pos:], len(events)
                for kind, obj in batch:
                    if matches(obj, sel):
                        self.chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
            self.end_chunked()
        finally:
            with api.lock:
                api.watchers -= 1
                api.lock.notify_all()


class ApiServer:
    """The fake API server on 127.0.0.1 (url, port).  State under lock (a
    Condition): slices {name: object}, claims {(ns, name): object}, the
    requests [(method, path)] (agents and times: their User-Agents and
    time.monotonic() as they came), hits per route, the events watches send."""

    def __init__(self, certs):
        self.lock = threading.Condition()
        self.stopping = threading.Event()
        self.ctx = server_context(certs)
        self.slices, self.claims, self.events = {}, {}, []
        self.drop_taints = False  # DRADeviceTaints off: taints dropped on write
        self.nodes, self.nodefeatures, self.writes = {}, {}, []
        self.pods, self.pod_events = {}, []
        self.requests, self.hits, self.modes = [], {}, {}
        self.agents, self.times = [], []  # each request's User-Agent, and when it came
        self.conns = set()
        self.connections = self.watchers = self.watch_epoch = 0
        # the slices' watch cache (None: not modelled, every watch starts
        # with what exists): versions below it are gone (compact_watch_cache)
        self.cache_window, self.gone_answers = None, 0
        # streaming lists served (sendInitialEvents; False: 422, as with the
        # WatchList gate off), and how many were asked for
        self.watch_list, self.streams = True, 0
        self.rv = 100
        self.httpd = None
        self.port = 0
        self.up()
        self.url = f"https://127.0.0.1:{self.port}"

    # ---- listening ----

    def up(self):
        assert self.httpd is None
        httpd = TLSServer(("127.0.0.1", self.port), ApiHandler)
        httpd.api, httpd.ctx = self, self.ctx
        self.port = httpd.server_address[1]
        self.httpd = httpd
        self.thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        self.thread.start()

    def down(self):
        """Connections refused from now on, and every open one cut."""
        httpd, self.httpd = self.httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.stopping.set()
        with self.lock:
            self.lock.notify_all()
        self.down()

    # ---- hostility ----

    @staticmethod
    def route_of(path, query):
        if path == SLICES or path.startswith(SLICES + "/"):
            watch = (query.get("watch") or [""])[0] in ("1", "true")
            return "watch" if watch else "slices"
        if path == PODS:
            watch = (query.get("watch") or [""])[0] in ("1", "true")
            return "podwatch" if watch else "pods"
        if CLAIM_PATH.match(path):
            return "claims"
        if NODE_PATH.match(path):
            return "nodes"
        if NF_PATH.match(path):
            return "nodefeatures"
        return None

    def set_mode(self, mode, routes=ROUTES, **params):
        """mode (MODES, or None: behave) for each of routes."""
        assert mode is None or mode in MODES, mode
        routes = (routes,) if isinstance(routes, str) else routes
        with self.lock:
            for r in routes:
                if mode is None:
                    self.modes.pop(r, None)
                else:
                    self.modes[r] = (mode, params)

    def compact_watch_cache(self):
        """The slices' watch cache holds only what comes from now on (as
        after an API server restart, others' objects written meanwhile): a
        watch from an older version than the server's now gets 410 Gone, one
        from that version or a newer one what came after it."""
        with self.lock:
            self.rv += 10  # other objects written meanwhile
            self.cache_window = self.rv
            self.lock.notify_all()

    def end_watches(self):
        """Every open watch ends (cleanly, as at its timeoutSeconds)."""
        with self.lock:
            self.watch_epoch += 1
            self.lock.notify_all()

    def hit_count(self, route):
        with self.lock:
            return self.hits.get(route, 0)

    # ---- state (lock held by the callers inside; the tests' helpers take it) ----

    def _event(self, kind, obj):
        self.events.append((kind, copy.deepcopy(obj)))
        self.lock.notify_all()

    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    def get_slice(self, name):
        s = self.slices.get(name)
        if s is None:
            return 404, status_object(404, "NotFound", f'resourceslices.resource.k8s.io "{name}" not found')
        return 200, copy.deepcopy(s)

    def _gate_taints(self, s):
        """With drop_taints (DRADeviceTaints off, as on 1.35), the server
        drops the devices' taints on write, as the real one does."""
        if self.drop_taints:
            for d in s.get("spec", {}).get("devices") or []:
                d.pop("taints", None)

    def create_slice(self, s):
        self._gate_taints(s)
        problems = slice_problems(s)
        if problems:
            return 422, status_object(422, "Invalid", f"ResourceSlice is invalid: {problems}")
        name = s["metadata"]["name"]
        if name in self.slices:
            return 409, status_object(409, "AlreadyExists",
                                      f'resourceslices.resource.k8s.io "{name}" already exists')
        if s["metadata"].get("resourceVersion"):
            return 400, status_object(400, "BadRequest", "resourceVersion should not be set on "
                                      "objects to be created")
        s["metadata"].update(resourceVersion=self._next_rv(), uid=f"uid-{self.rv}",
                             creationTimestamp="2025-01-01T00:00:00Z")
        self.slices[name] = s
        self._event("ADDED", s)
        return 201, copy.deepcopy(s)

    def update_slice(self, name, s):
        self._gate_taints(s)
        old = self.slices.get(name)
        if old is None:
            return self.get_slice(name)
        problems = slice_problems(s)
        if problems or s["metadata"].get("name") != name:
            return 422, status_object(422, "Invalid", f"ResourceSlice is invalid: {problems}")
        if s["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
            return 409, status_object(409, "Conflict", f'Operation cannot be fulfilled on '
                                      f'resourceslices.resource.k8s.io "{name}": the object has been '
                                      f'modified; please apply your changes to the latest version '
                                      f'and try again')
        s["metadata"].update(resourceVersion=self._next_rv(), uid=old["metadata"]["uid"],
                             creationTimestamp=old["metadata"]["creationTimestamp"])
        self.slices[name] = s
        self._event("MODIFIED", s)
        return 200, copy.deepcopy(s)

    def delete_slice(self, name):
        s = self.slices.pop(name, None)
        if s is None:
            return self.get_slice(name)
        s["metadata"]["resourceVersion"] = self._next_rv()
        self._event("DELETED", s)
        return 200, copy.deepcopy(s)

    # ---- nodes and NodeFeatures (labels) ----

    def get_node(self, name):
        n = self.nodes.get(name)
        if n is None:
            return 404, status_object(404, "NotFound", f'nodes "{name}" not found')
        return 200, copy.deepcopy(n)

    def patch_node(self, name, patch):
        n = self.nodes.get(name)
        if n is None:
            return self.get_node(name)
        if set(patch) - {"metadata"} or set(patch.get("metadata", {})) - {"labels", "annotations"}:
            return 422, status_object(422, "Invalid", f"devlet patched more than labels: {patch}")
        meta = n["metadata"]
        for part in ("labels", "annotations"):
            for k, v in (patch["metadata"].get(part) or {}).items():
                if v is None:
                    meta.setdefault(part, {}).pop(k, None)
                elif not isinstance(v, str):
                    return 422, status_object(422, "Invalid", f"{part}[{k}]: not a string")
                else:
                    meta.setdefault(part, {})[k] = v
        meta["resourceVersion"] = self._next_rv()
        self.writes.append(("PATCH", "node", name, copy.deepcopy(patch)))
        self.lock.notify_all()
        return 200, copy.deepcopy(n)

    def get_nodefeature(self, ns, name):
        o = self.nodefeatures.get((ns, name))
        if o is None:
            return 404, status_object(404, "NotFound",
                                      f'nodefeatures.nfd.k8s-sigs.io "{name}" not found')
        return 200, copy.deepcopy(o)

    @staticmethod
    def nodefeature_problems(o):
        p = []
        if o.get("apiVersion") != "nfd.k8s-sigs.io/v1alpha1" or o.get("kind") != "NodeFeature":
            p.append("apiVersion/kind")
        labels = field(o, "spec.labels")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            p.append("spec.labels")
        if not isinstance(field(o, "spec.features"), dict):
            p.append("spec.features")
        return p

    def create_nodefeature(self, ns, o):
        name = field(o, "metadata.name")
        problems = self.nodefeature_problems(o)
        if problems or not name:
            return 422, status_object(422, "Invalid", f"NodeFeature is invalid: {problems}")
        if (ns, name) in self.nodefeatures:
            return 409, status_object(409, "AlreadyExists", f'"{name}" already exists')
        if o["metadata"].get("resourceVersion"):
            return 400, status_object(400, "BadRequest", "resourceVersion should not be set")
        o["metadata"].update(namespace=ns, resourceVersion=self._next_rv(), uid=f"uid-{self.rv}")
        self.nodefeatures[(ns, name)] = o
        self.writes.append(("POST", "nodefeature", name, copy.deepcopy(o)))
        self.lock.notify_all()
        return 201, copy.deepcopy(o)

    def update_nodefeature(self, ns, name, o):
        old = self.nodefeatures.get((ns, name))
        if old is None:
            return self.get_nodefeature(ns, name)
        problems = self.nodefeature_problems(o)
        if problems or field(o, "metadata.name") != name:
            return 422, status_object(422, "Invalid", f"NodeFeature is invalid: {problems}")
        if field(o, "metadata.resourceVersion") != old["metadata"]["resourceVersion"]:
            return 409, status_object(409, "Conflict", "the object has been modified")
        o["metadata"].update(namespace=ns, resourceVersion=self._next_rv(),
                             uid=old["metadata"]["uid"])
        self.nodefeatures[(ns, name)] = o
        self.writes.append(("PUT", "nodefeature", name, copy.deepcopy(o)))
        self.lock.notify_all()
        return 200, copy.deepcopy(o)

    # ---- for the tests ----

    def add_node(self, name, labels=None, annotations=None):
        with self.lock:
            self.nodes[name] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "resourceVersion": self._next_rv(),
                                             "labels": dict(labels or {}),
                                             "annotations": dict(annotations or {})},
                                "status": {}}

    def node_meta(self, name):
        with self.lock:
            return copy.deepcopy(self.nodes[name]["metadata"])

    def nodefeature_of(self, ns, name):
        with self.lock:
            return copy.deepcopy(self.nodefeatures.get((ns, name)))

    def writes_count(self):
        with self.lock:
            return len(self.writes)

    def wait_for(self, check, timeout=10.0, what="condition"):
        """check() under the lock until true (returned) or TimeoutError."""
        with self.lock:
            got = self.lock.wait_for(check, timeout)
            if not got:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            return got

    def slices_of(self, node=None, driver=None):
        """Copies of the slices (of node and driver), by name."""
        with self.lock:
            return {n: copy.deepcopy(s) for n, s in sorted(self.slices.items())
                    if node in (None, field(s, "spec.nodeName"))
                    and driver in (None, field(s, "spec.driver"))}

    def delete(self, name):
        """A slice deleted behind the publisher's back (as the kubelet does)."""
        with self.lock:
            return self.delete_slice(name)[0]

    def add_slice(self, s):
        with self.lock:
            code, obj = self.create_slice(copy.deepcopy(s))
            assert code == 201, obj
            return obj

    def put_claim(self, ns, name, uid, results=None, allocated=True, admin_access=False,
                  config=None):
        """A ResourceClaim; results: [(request, driver, pool, device)], each
        with adminAccess when admin_access; config: the allocation's
        configs, as the API server writes them ({"source", "requests",
        "opaque": {"driver", "parameters"}})."""
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"namespace": ns, "name": name, "uid": uid,
                              "resourceVersion": "1"},
                 "spec": {"devices": {"requests": [{"name": "dev"}]}},
                 "status": {}}
        if allocated:
            claim["status"]["allocation"] = {"devices": {"results": [
                {"request": r, "driver": d, "pool": p, "device": dev,
                 **({"adminAccess": True} if admin_access else {})}
                for r, d, p, dev in results or []]}}
            if config is not None:
                claim["status"]["allocation"]["devices"]["config"] = copy.deepcopy(config)
        with self.lock:
            self.claims[(ns, name)] = claim
        return claim

    def remove_claim(self, ns, name):
        with self.lock:
            self.claims.pop((ns, name), None)

    def requests_since(self, n, method=None):
        with self.lock:
            return [r for r in self.requests[n:] if method in (None, r[0])]

    def put_pod(self, ns, name, node, labels):
        """Creates or replaces a pod on node with labels (watches see
        ADDED or MODIFIED)."""
        with self.lock:
            kind = "MODIFIED" if (ns, name) in self.pods else "ADDED"
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"namespace": ns, "name": name, "labels": dict(labels),
                                "resourceVersion": self._next_rv()},
                   "spec": {"nodeName": node}}
            self.pods[(ns, name)] = pod
            self.pod_events.append((kind, copy.deepcopy(pod)))
            self.lock.notify_all()
