"""The API servers `make bench-scale` (bench/scale.py) runs devlet against,
each keeping one log of the requests it answered, as Request records: when
(time.time()), verb and resource as the API server's audit log names them
(list, watch, get, create, update, patch, delete; resourceslices, nodes,
pods...), the User-Agent, the status code, and whether a watch was
answered 410 as an ERROR event.

WatchCacheApi is the tests' fake API server (tests/integration/
fake_apiserver.py, composed, never edited) made to behave like the real
watch cache for every resource devlet watches (ResourceSlices, Pods and,
for config-manager, the Node), not only slices:
  - a watch without a resourceVersion, or from 0, starts with ADDED for
    what exists; from a version the cache still holds, with what came
    after it; from one older than the cache window (compact_watch_cache,
    as after an API server restart), with one ERROR event (410 Expired);
  - sendInitialEvents=true (with resourceVersionMatch=NotOlderThan and
    allowWatchBookmarks=true, else 422) streams what exists as ADDED, then
    a BOOKMARK annotated k8s.io/initial-events-end (the streaming list);
  - allowWatchBookmarks=true gets a BOOKMARK every BOOKMARK_S seconds and
    one just before the watch's timeoutSeconds ends it;
  - Node writes (the labels' PATCH) are events for the Node watch; Node
    LIST by fieldSelector is served;
  - throttle(seconds, retry_after): every request answered 429 with a
    Retry-After header until then (API Priority and Fairness rejecting).
Its record of each request is kept here (records), not in the tests'
lists, so what the tests' server does for them can change freely.

RealApiServer is etcd and kube-apiserver from the pinned peers
(scripts/peers.sh; ~/.cache/devlet/peers), configured as scripts/cluster.py
configures them (its own CA, service-account keys) but on free ephemeral
ports and in the harness's own directory, with an audit policy at level
Metadata (every request's verb, resource, user agent and code; the API
server's own loopback requests left out).  records() reads the audit log.
Its restart is down() (SIGTERM) and up() (etcd keeps running); it has no
429.  A watch answered 410 in an ERROR event is a 200 to the audit log: for
the real server "answered 410" counts only 410 statuses.
"""

import copy
import datetime
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from fake_apiserver import (NODE_PATH, ApiHandler, ApiServer, TLSServer, field_selector,  # noqa: E402
                            matches, status_object)

NODES = "/api/v1/nodes"
BOOKMARK_S = 60.0  # the real watch cache sends a bookmark about once a minute
RESOURCE_PATH = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/([^/]+)(/[^/]+)?")


@dataclass
class Request:
    t: float            # time.time() when it came
    verb: str           # list, watch, get, create, update, patch, delete, deletecollection
    resource: str       # resourceslices, nodes, pods, resourceclaims, nodefeatures...
    agent: str          # the User-Agent ("" when none)
    code: Optional[int] = None  # the status answered (None: none, the connection cut)
    gone: bool = False  # a 410: the status, or an ERROR event in a watch


def verb_of(method, path, query):
    m = RESOURCE_PATH.match(path)
    named = bool(m and m.group(2))
    if method == "GET":
        if (query.get("watch") or [""])[0] in ("1", "true"):
            return "watch"
        return "get" if named else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}.get(method, method.lower())


def resource_of(path):
    m = RESOURCE_PATH.match(path)
    return m.group(1) if m else path

# ---------------------------------------------------------------- the fake watch cache


class WatchCacheHandler(ApiHandler):
    rec = None

    def send_response(self, code, message=None):
        if self.rec is not None and self.rec.code is None:
            self.rec.code = code
            self.rec.gone = code == 410
        super().send_response(code, message)

    def do_GET(self):
        api = self.server.api
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        self.rec = api.record(self.command, url.path, query, self.headers.get("User-Agent") or "")
        retry_after = api.throttled()
        if retry_after:
            self.read_body()
            self.send_json(429, status_object(429, "TooManyRequests", "too many requests, please "
                                              "try again later"),
                           extra=[("Retry-After", str(retry_after))])
            return
        route = api.route_of(url.path, query)
        watching = (query.get("watch") or [""])[0] in ("1", "true")
        try:
            if url.path == NODES and self.command == "GET":
                self.watch_cached(query, "nodes") if watching else self.list_nodes(query)
                return
            if route in ("watch", "podwatch") and route not in api.modes:
                self.watch_cached(query, "slices" if route == "watch" else "pods")
                return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
            return
        super().do_GET()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def list_nodes(self, query):
        api = self.server.api
        sel = field_selector(query)
        with api.lock:
            items = [copy.deepcopy(n) for n in api.nodes.values() if matches(n, sel)]
            obj = {"kind": "NodeList", "apiVersion": "v1",
                   "metadata": {"resourceVersion": str(api.rv)}, "items": items}
        self.send_json(200, obj)

    def event(self, kind, obj):
        self.chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    def bookmark(self, rv, kind, initial_end=False):
        meta = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        self.event("BOOKMARK", {"kind": kind, "apiVersion": "v1", "metadata": meta})

    def watch_cached(self, query, what):
        api = self.server.api
        sel = field_selector(query)
        q = {k: v[0] for k, v in query.items()}
        timeout = int(q.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        initial = q.get("sendInitialEvents") in ("1", "true")
        rv = q.get("resourceVersion", "")
        events, objs, kind = api.watched(what)
        if initial and (q.get("resourceVersionMatch") != "NotOlderThan" or not bookmarks):
            self.send_status(422, "Invalid", "sendInitialEvents needs "
                             "resourceVersionMatch=NotOlderThan and allowWatchBookmarks")
            return
        self.start_chunked()
        with api.lock:
            pos, epoch, now_rv = len(events), api.watch_epoch, api.rv
            if initial or rv in ("", "0"):
                first = [("ADDED", copy.deepcopy(o)) for o in objs.values() if matches(o, sel)]
            elif api.cache_window is not None and int(rv) < api.cache_window:
                first, epoch = [("ERROR", status_object(410, "Expired",
                                                        f"too old resource version: {rv} "
                                                        f"({api.cache_window})"))], None
                self.rec.gone = True
                api.gone_answers += 1
            else:
                first = [(k, copy.deepcopy(o)) for k, o in events
                         if int(o["metadata"]["resourceVersion"]) > int(rv) and matches(o, sel)]
            api.watchers += 1
        try:
            for k, o in first:
                self.event(k, o)
            if initial and bookmarks and epoch is not None:
                self.bookmark(now_rv, kind, initial_end=True)
            next_mark, last_sent = time.monotonic() + BOOKMARK_S, False
            while epoch is not None and not api.stopping.is_set() and epoch == api.watch_epoch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                with api.lock:
                    api.lock.wait_for(lambda: len(events) > pos or api.stopping.is_set()
                                      or epoch != api.watch_epoch, min(0.5, left))
                    batch, pos, now_rv = events[pos:], len(events), api.rv
                for k, o in batch:
                    if matches(o, sel):
                        self.event(k, o)
                now = time.monotonic()
                closing = deadline - now < 1.0
                if bookmarks and (now >= next_mark or (closing and not last_sent)):
                    self.bookmark(now_rv, kind)
                    next_mark, last_sent = now + BOOKMARK_S, last_sent or closing
            self.end_chunked()
        finally:
            with api.lock:
                api.watchers -= 1
                api.lock.notify_all()


class WatchCacheApi(ApiServer):
    """The tests' ApiServer with a watch cache for every resource, a Node
    watch, 429 on demand, and its own request log (records)."""

    def __init__(self, certs):
        self.records: List[Request] = []
        self.node_events = []
        self.throttle_until, self.retry_after = 0.0, 0
        super().__init__(certs)

    def up(self):
        assert self.httpd is None
        httpd = TLSServer(("127.0.0.1", self.port), WatchCacheHandler)
        httpd.api, httpd.ctx = self, self.ctx
        self.port = httpd.server_address[1]
        self.httpd = httpd
        self.thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        self.thread.start()

    def record(self, method, path, query, agent):
        r = Request(time.time(), verb_of(method, path, query), resource_of(path), agent)
        with self.lock:
            self.records.append(r)
        return r

    def throttle(self, seconds, retry_after):
        with self.lock:
            self.throttle_until, self.retry_after = time.monotonic() + seconds, retry_after

    def throttled(self):
        """The Retry-After seconds while throttling, else 0."""
        with self.lock:
            return self.retry_after if time.monotonic() < self.throttle_until else 0

    def watched(self, what):
        """(the events, the objects by key, the kind) of a watched resource."""
        return {"slices": (self.events, self.slices, "ResourceSlice"),
                "pods": (self.pod_events, self.pods, "Pod"),
                "nodes": (self.node_events, self.nodes, "Node")}[what]

    def patch_node(self, name, patch):
        code, obj = super().patch_node(name, patch)
        if code == 200:
            self.node_events.append(("MODIFIED", copy.deepcopy(self.nodes[name])))
        return code, obj

    def requests_between(self, start, end):
        with self.lock:
            return [r for r in self.records if start <= r.t < end]

# ---------------------------------------------------------------- etcd + kube-apiserver


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peer_bin(name, binary):
    versions = {}
    with open(os.path.join(REPO, "tests", "cluster", "versions.env")) as f:
        for line in f:
            k, sep, v = line.strip().partition("=")
            if sep and not k.startswith("#"):
                versions[k] = v
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "devlet", "peers")
    return os.path.join(cache, f"{name}-{versions[name.upper() + '_VERSION']}", "bin", binary)


def real_available():
    """None when the peers are there, else why not."""
    for name, binary in (("kubernetes", "kube-apiserver"), ("etcd", "etcd")):
        p = peer_bin(name, binary)
        if not os.access(p, os.X_OK):
            return f"{p} is missing (make peers builds it)"
    return None


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver"]
- level: Metadata
"""


class RealApiServer:
    """etcd + kube-apiserver under workdir; spawn(name, args) starts a
    process the harness tracks (and stops, whatever happens)."""

    USER = "devlet-scale"

    def __init__(self, workdir, spawn):
        self.dir = workdir
        os.makedirs(self.dir, exist_ok=True)
        self.pki = os.path.join(self.dir, "pki")
        self.audit = os.path.join(self.dir, "audit.log")
        self.spawn = spawn
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self._seen, self._offset, self._partial = {}, 0, b""

    def openssl(self, *args):
        subprocess.run(["openssl", *args], cwd=self.pki, check=True, capture_output=True)

    def make_pki(self):
        os.makedirs(self.pki, mode=0o700)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        self.openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                     "-subj", "/CN=devlet-scale-ca")
        self.openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key")
        self.openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        for name, subj, usage, sans in (
                ("apiserver", "/CN=kube-apiserver", "serverAuth", "IP:127.0.0.1,DNS:localhost"),
                ("admin", "/O=system:masters/CN=devlet-scale-admin", "clientAuth", None),
                ("devlet", f"/O=system:masters/CN={self.USER}", "clientAuth", None)):
            with open(os.path.join(self.pki, f"{name}.ext"), "w") as f:
                f.write(f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                        f"extendedKeyUsage={usage}\n" + (f"subjectAltName={sans}\n" if sans else ""))
            self.openssl("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                         "-subj", subj)
            self.openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                         "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                         "-out", f"{name}.crt")

    def kubeconfig(self, path, user="devlet"):
        with open(path, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: scale
  cluster:
    server: {self.url}
    certificate-authority: {self.pki}/ca.crt
users:
- name: {user}
  user:
    client-certificate: {self.pki}/{user}.crt
    client-key: {self.pki}/{user}.key
contexts:
- name: scale
  context: {{cluster: scale, user: {user}}}
current-context: scale
""")
        return path

    def start(self, timeout=120.0):
        self.make_pki()
        with open(os.path.join(self.dir, "audit-policy.yaml"), "w") as f:
            f.write(AUDIT_POLICY)
        client, peer = free_port(), free_port()
        etcd = self.spawn("etcd", [
            peer_bin("etcd", "etcd"), "--name", "scale", "--data-dir", os.path.join(self.dir, "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"scale=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn"])
        self.wait("etcd", lambda: b'"true"' in urllib.request.urlopen(
            f"http://127.0.0.1:{client}/health", timeout=2).read(), etcd, timeout)
        pki = self.pki
        self.args = [
            peer_bin("kubernetes", "kube-apiserver"), "--etcd-servers", f"http://127.0.0.1:{client}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port),
            "--tls-cert-file", f"{pki}/apiserver.crt", "--tls-private-key-file", f"{pki}/apiserver.key",
            "--client-ca-file", f"{pki}/ca.crt",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", f"{pki}/sa.pub",
            "--service-account-signing-key-file", f"{pki}/sa.key",
            "--service-cluster-ip-range", "10.0.0.0/24", "--authorization-mode", "Node,RBAC",
            "--endpoint-reconciler-type", "none", "--profiling=false",
            "--audit-policy-file", os.path.join(self.dir, "audit-policy.yaml"),
            "--audit-log-path", self.audit, "--audit-log-format", "json",
            "--audit-log-mode", "blocking", "--audit-log-maxsize", "0", "--v", "1"]
        self.up(timeout)

    def up(self, timeout=120.0):
        """kube-apiserver (again: a restart's watch cache starts at etcd's
        current revision, so older resourceVersions get 410)."""
        self.proc = self.spawn("kube-apiserver", self.args)
        self.wait("kube-apiserver", lambda: self.call("GET", "/readyz", raw=True) == b"ok",
                  self.proc, timeout)

    def down(self):
        stop_process(self.proc)

    @staticmethod
    def wait(what, check, proc, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode} (log: {proc.log})")
            try:
                if check():
                    return
            except Exception as e:  # noqa: BLE001 - any failure is "not yet"
                last = e
            time.sleep(0.5)
        raise RuntimeError(f"{what}: not ready after {timeout:.0f} s ({last})")

    def call(self, method, path, body=None, raw=False):
        ctx = ssl.create_default_context(cafile=f"{self.pki}/ca.crt")
        ctx.load_cert_chain(f"{self.pki}/admin.crt", f"{self.pki}/admin.key")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "devlet-bench-scale"})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            out = r.read()
        return out if raw else json.loads(out)

    def add_node(self, name):
        self.call("POST", NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})

    def records(self):
        """Every devlet request in the audit log so far (one per audit ID:
        when it was received, and the code of its last stage)."""
        with open(self.audit, "rb") as f:
            f.seek(self._offset)
            data = self._partial + f.read()
            self._offset = f.tell()
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            agent = ev.get("userAgent") or ""
            if not agent.startswith("devlet/"):
                continue
            code = (ev.get("responseStatus") or {}).get("code")
            rec = self._seen.get(ev["auditID"])
            if rec is None:
                t = datetime.datetime.fromisoformat(
                    ev["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
                ref = ev.get("objectRef") or {}
                rec = Request(t, ev.get("verb", ""), ref.get("resource") or ev.get("requestURI", ""),
                              agent)
                self._seen[ev["auditID"]] = rec
            if code:
                rec.code = code
                rec.gone = code == 410
        return list(self._seen.values())

    def requests_between(self, start, end):
        return [r for r in self.records() if start <= r.t < end]


def stop_process(proc, timeout=10.0):
    """SIGTERM to the process's group, SIGKILL after timeout."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)
