"""Peers and helpers for devlet's metrics endpoint, shared by
tests/integration/test_metrics.py and bench/bench-metrics.py.

- MockNvml: a mock NVML configuration (a profile from tests/mock-nvml/
  profiles) that tests edit and rewrite atomically, and the environment that
  makes devlet load the mock library.
- PodResourcesSim: the kubelet's v1.PodResourcesLister/List in grpcio,
  answering whatever pods the test sets.
- scrape(), parse(): GET /metrics and a small parser of the text format
  (samples as (name, labels dict, value)).
- Prometheus: a real Prometheus server (Debian's), loopback only, in a temp
  directory, scraping devlet every second.
- podman helpers: a busybox-static rootfs and `podman run` the way it works
  here (root, runc, cgroupfs, no network).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent import futures
from typing import Dict, List, Optional, Tuple

import grpc
import yaml

from devlet_harness import wait_until
from kubelet_sim import BUILD_DIR

import podresources_pb2 as prpb  # noqa: E402  (build/py, on sys.path through kubelet_sim)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES = os.path.join(REPO, "tests", "mock-nvml", "profiles")
MOCK_NVML_LIB = os.path.join(BUILD_DIR, "mock-nvml", "libnvidia-ml.so.1")
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
BUSYBOX = "/bin/busybox"
PODMAN_RUN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs", "run", "-d",
              "--network=none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"]
# podman 4.3 keeps each container's config.json under /var/lib (userdata);
# CRI-O's and newer podman's runtime state lives under /run
PODMAN_STATE_DIRS = ["/var/lib/containers/storage/overlay-containers",
                     "/run/containers/storage/overlay-containers"]


# ---------------------------------------------------------------- mock NVML

class MockNvml:
    """A profile copied to path; devices are the YAML list tests edit."""

    def __init__(self, workdir: str, profile: str = "h100-8x-nvswitch.yaml"):
        self.path = os.path.join(workdir, "nvml.yaml")
        with open(os.path.join(PROFILES, profile)) as f:
            self.config = yaml.safe_load(f)
        self.write()

    @property
    def devices(self) -> List[dict]:
        return self.config["devices"]

    def uuid(self, index: int) -> str:
        return self.devices[index]["uuid"]

    def set_processes(self, index: int, processes: List[dict]):
        self.devices[index]["processes"] = processes
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            yaml.safe_dump(self.config, f, sort_keys=False)
        os.replace(tmp, self.path)  # the mock never reads a half-written file

    def env(self) -> Dict[str, str]:
        return {"DEVLET_NVML_LIBRARY": MOCK_NVML_LIB, "MOCK_NVML_CONFIG": self.path}


# ---------------------------------------------------------------- pod resources

class PodResourcesSim:
    """v1.PodResourcesLister/List on a Unix socket.  pods: a list of
    (namespace, pod, [(container, [(resource, [device IDs])])])."""

    def __init__(self, socket_path: str):
        self.socket_path = socket_path
        self.pods: List[Tuple[str, str, List[Tuple[str, List[Tuple[str, List[str]]]]]]] = []
        self.calls = 0
        self.server: Optional[grpc.Server] = None

    def _list(self, request, context):
        self.calls += 1
        resp = prpb.ListPodResourcesResponse()
        for ns, name, containers in self.pods:
            pod = resp.pod_resources.add(name=name, namespace=ns)
            for cname, devices in containers:
                c = pod.containers.add(name=cname)
                for resource, ids in devices:
                    c.devices.add(resource_name=resource, device_ids=ids)
        return resp

    def start(self) -> "PodResourcesSim":
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.unary_unary_rpc_method_handler(
            self._list, request_deserializer=prpb.ListPodResourcesRequest.FromString,
            response_serializer=prpb.ListPodResourcesResponse.SerializeToString)
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("v1.PodResourcesLister", {"List": handler}),))
        self.server.add_insecure_port("unix:" + self.socket_path)
        self.server.start()
        return self

    def stop(self):
        if self.server:
            self.server.stop(0)
            self.server = None


# ---------------------------------------------------------------- scraping

def metrics_port(devlet, timeout: float = 10.0) -> int:
    m = devlet.wait_log(r"serving metrics address=\S+ port=(\d+)", timeout=timeout)
    return int(m.group(1))


def http_get(port: int, path: str, method: str = "GET", timeout: float = 5.0):
    """Returns (status, headers, body text)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def scrape(port: int) -> str:
    status, _, body = http_get(port, "/metrics")
    assert status == 200, status
    return body


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse(text: str) -> List[Tuple[str, Dict[str, str], float]]:
    """Samples of the text format (comments skipped)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"unparsable sample line: {line!r}"
        labels = {}
        if m.group(2):
            pos = 0
            body = m.group(2)
            while pos < len(body):
                lm = _LABEL.match(body, pos)
                assert lm, f"unparsable labels in {line!r}"
                labels[lm.group(1)] = (lm.group(2).replace('\\"', '"').replace("\\n", "\n")
                                       .replace("\\\\", "\\"))
                pos = lm.end()
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def select(samples, name: str, **labels) -> List[Tuple[Dict[str, str], float]]:
    return [(lab, v) for n, lab, v in samples
            if n == name and all(lab.get(k) == want for k, want in labels.items())]


def wait_samples(port: int, check, timeout: float, what: str):
    """Scrapes until check(samples) is true; returns its value."""
    last = {"text": ""}

    def poll():
        last["text"] = scrape(port)
        return check(parse(last["text"]))
    try:
        return wait_until(poll, timeout, what, interval=0.05)
    except TimeoutError as e:
        raise TimeoutError(f"{e}\nlast scrape:\n{last['text'][-6000:]}") from None


def promtool_check(text: str) -> Tuple[int, str]:
    res = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True,
                         timeout=60)
    return res.returncode, res.stdout + res.stderr


# ---------------------------------------------------------------- Prometheus

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A Prometheus server on 127.0.0.1 scraping targets every second."""

    def __init__(self, targets: List[str]):
        self.dir = tempfile.mkdtemp(prefix="dlt-prom-", dir="/tmp")
        self.port = free_port()
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            yaml.safe_dump({
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [{"job_name": "devlet", "static_configs": [{"targets": targets}]}],
            }, f)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen([
            PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={self.dir}/data",
            f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
        ], stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_ready(self, timeout: float = 60.0):
        def ready():
            assert self.proc.poll() is None, f"prometheus exited: {self.log_text()}"
            try:
                with urllib.request.urlopen(self.url("/-/ready"), timeout=2) as r:
                    return r.status == 200
            except (urllib.error.URLError, ConnectionError):
                return False
        wait_until(ready, timeout, "Prometheus to be ready", interval=0.1)

    def query(self, expr: str) -> List[dict]:
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(self.url(f"/api/v1/query?{q}"), timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def log_text(self) -> str:
        with open(os.path.join(self.dir, "prometheus.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- podman

def busybox_rootfs(path: str) -> str:
    """A rootfs with a static busybox as /bin/sh and /bin/sleep."""
    os.makedirs(os.path.join(path, "bin"), exist_ok=True)
    shutil.copy(BUSYBOX, os.path.join(path, "bin", "busybox"))
    for tool in ("sh", "sleep"):
        link = os.path.join(path, "bin", tool)
        if not os.path.lexists(link):
            os.symlink("busybox", link)
    return path


def cri_annotations(namespace: str, pod: str, container: str) -> List[str]:
    """containerd's CRI annotations, as podman --annotation flags."""
    out = []
    for k, v in (("io.kubernetes.cri.sandbox-name", pod),
                 ("io.kubernetes.cri.sandbox-namespace", namespace),
                 ("io.kubernetes.cri.container-name", container),
                 ("io.kubernetes.cri.container-type", "container")):
        out += ["--annotation", f"{k}={v}"]
    return out


def podman_start(rootfs: str, *args: str) -> str:
    """Starts `sleep` in a container; returns its ID."""
    res = subprocess.run(PODMAN_RUN + list(args) + ["--rootfs", rootfs, "/bin/sleep", "600"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]


def podman_pid(cid: str) -> int:
    res = subprocess.run(["podman", "inspect", "--format", "{{.State.Pid}}", cid],
                         capture_output=True, text=True, timeout=60, check=True)
    return int(res.stdout.strip())


def podman_rm(cid: str):
    subprocess.run(["podman", "rm", "-f", "-t", "0", cid], capture_output=True, timeout=120)
