"""Helpers for talking to the local cluster (scripts/cluster.py): kubectl,
pods, and waiting for what the cluster reports.  Used by the end-to-end
tests (tests/e2e) and the real-kubelet benchmark (bench/bench-cluster.py)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import cluster as cl  # noqa: E402

WAIT = 120.0


class Cluster:
    """kubectl against the local cluster, and waiting for what it reports."""

    node = cl.NODE
    busybox = cl.BUSYBOX_IMAGE

    def kubectl(self, *args, check=True, input=None, timeout=60):
        r = subprocess.run([cl.kubectl_bin(), "--kubeconfig", cl.path("admin.kubeconfig"), *args],
                           input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, obj):
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def wait(self, what, check, timeout=WAIT, interval=0.25):
        """Polls check() (the cluster's own answer) until it returns a true value."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                v = check()
                if v:
                    return v
                last = v
            except (AssertionError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
                last = e
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")

    def allocatable(self):
        return self.get("node", self.node)["status"]["allocatable"]

    def capacity(self):
        return self.get("node", self.node)["status"]["capacity"]

    def pod(self, name, resources, command, namespace="default"):
        """Creates a busybox pod asking for resources (name -> count) and
        running command (a shell line); returns its name."""
        self.apply({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"devlet-e2e": "1"}},
            "spec": {
                "hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "main", "image": self.busybox, "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", command],
                    "resources": {"limits": {k: str(v) for k, v in resources.items()}},
                }],
            },
        })
        return name

    def phase(self, name, namespace="default"):
        return self.get("pod", "-n", namespace, name)["status"].get("phase")

    def wait_phase(self, name, phases, namespace="default", timeout=WAIT):
        return self.wait(f"pod {name} in {phases}",
                         lambda: self.phase(name, namespace) in phases and self.phase(name, namespace),
                         timeout=timeout)

    def logs(self, name, namespace="default", container=None, all_restarts=False):
        """What the pod's container printed, from the kubelet's own log files
        (/var/log/pods, CRI format).  `kubectl logs` cannot work here: the
        API server reaches a kubelet through the Node's address, and a
        kubelet never reports a loopback one."""
        pod = self.get("pod", "-n", namespace, name)
        container = container or pod["spec"]["containers"][0]["name"]
        d = f"/var/log/pods/{namespace}_{name}_{pod['metadata']['uid']}/{container}"
        try:
            files = sorted((f for f in os.listdir(d) if f.endswith(".log")), key=lambda f: int(f.split(".")[0]))
        except FileNotFoundError:
            return ""
        out, line = [], []
        for f in files if all_restarts else files[-1:]:
            with open(os.path.join(d, f), errors="replace") as fh:
                for raw in fh:
                    parts = raw.rstrip("\n").split(" ", 3)
                    if len(parts) < 3:
                        continue
                    line.append(parts[3] if len(parts) == 4 else "")
                    if parts[2] == "F":
                        out.append("".join(line))
                        line = []
        return "".join(x + "\n" for x in out)

    def devlet_log(self, all_restarts=False):
        return self.logs(self.devlet_pod()["metadata"]["name"], "devlet", "devlet", all_restarts)

    def run_pod(self, name, resources, command, timeout=WAIT):
        """A pod that runs command to completion; returns its output."""
        self.pod(name, resources, command)
        phase = self.wait_phase(name, ("Succeeded", "Failed"), timeout=timeout)
        out = self.logs(name)
        if phase != "Succeeded":
            st = self.get("pod", name)["status"]
            raise AssertionError(f"pod {name} {phase} ({st.get('reason')}: {st.get('message')}), "
                                 f"events {self.events(name)}, output: {out!r}")
        return out

    def delete_pods(self, *names, namespace="default"):
        if names:
            self.kubectl("delete", "pod", "-n", namespace, "--wait=true", "--grace-period=0", "--force",
                         *names, check=False, timeout=120)

    def events(self, name, namespace="default"):
        ev = self.get("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
        return [(e.get("reason"), e.get("message", "")) for e in ev["items"]]

    def devlet_pod(self):
        pods = self.get("pods", "-n", "devlet", "-l", "app.kubernetes.io/name=devlet")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert len(live) == 1, [p["metadata"]["name"] for p in pods]
        return live[0]

    def devlet_ready(self):
        p = self.devlet_pod()
        return any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))

    def kubelet_version(self):
        return self.get("node", self.node)["status"]["nodeInfo"]["kubeletVersion"]

    def devlet_watched(self, resources):
        """Whether the kubelet has opened ListAndWatch on every one of
        resources with devlet's current container (its `watched` lines):
        from then on it admits pods asking for them."""
        log = self.devlet_log()
        return all(f"watched resource={r} " in log for r in resources)

    def set_config(self, text):
        """Replaces devlet's config file through its ConfigMap, as an operator does."""
        self.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "devlet-config", "namespace": "devlet"},
                    "data": {"config.yaml": text}})


def cluster_running():
    if not os.path.isdir(cl.STATE):
        return False
    out = subprocess.run([sys.executable, cl.__file__, "status"], text=True, stdout=subprocess.PIPE).stdout
    return all("running" in line for line in out.splitlines())


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def process_gone(pid):
    """True once pid has exited: reaped here when it is this process's child
    (a kubelet a test started), or gone or a zombie otherwise."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def devlet_host_pid(cluster):
    """The host PID of devlet's process in its pod (hostPID is not needed:
    the container's process is a host process with devlet's binary)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cg = f.read()
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        if comm == "devlet" and "/kubepods" in cg:
            found.append(int(pid))
    assert len(found) == 1, found
    return found[0]


# what the test overlay serves (cluster.py): resource -> count on the Node
DEVICES = {"nvidia.com/gpu": "8", "amd.com/gpu": "64", "devlet.io/fuse": "2", "devlet.io/zero": "1"}


def kubelet_log_count(text, resource):
    """How many lines of the kubelet's log hold text and name resource."""
    with open(cl.path("logs", "kubelet.log"), errors="replace") as f:
        return sum(1 for line in f if text in line and f'resource="{resource}"' in line)


KLOG_TIME = re.compile(r"^[IWEF](\d{4} \d\d:\d\d:\d\d\.\d{6}) ")


def kubelet_log_size():
    return os.path.getsize(cl.path("logs", "kubelet.log"))


def kubelet_log_since(offset):
    """The kubelet's log lines written after offset (kubelet_log_size()),
    each as (seconds since the epoch by its klog header, or None; line)."""
    year = time.localtime().tm_year
    out = []
    with open(cl.path("logs", "kubelet.log"), "rb") as f:
        f.seek(offset)
        for raw in f:
            line = raw.decode(errors="replace")
            m = KLOG_TIME.match(line)
            t = None
            if m:
                st = time.strptime(f"{year}{m.group(1)[:13]}", "%Y%m%d %H:%M:%S")
                t = time.mktime(st) + float("0" + m.group(1)[13:])
            out.append((t, line))
    return out


def kubelet_args():
    """The running kubelet's PID and command line."""
    with open(cl.path("kubelet.pid")) as f:
        pid = int(f.read())
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return pid, [a.decode() for a in f.read().split(b"\0")[:-1]]


def kubelet_stop(cluster):
    """Stops the running kubelet (SIGTERM, as a service manager does) and
    returns the command line it ran with."""
    pid, args = kubelet_args()
    os.killpg(pid, signal.SIGTERM)
    cluster.wait("the kubelet to exit", lambda: process_gone(pid), timeout=30)
    return args


def kubelet_swap(cluster, args, version, resources):
    """Stops the running kubelet and starts args, a kubelet of another
    version.  That kubelet restarts devlet's container (a container's hash
    differs between kubelet versions), and until the new devlet has
    registered, a pod admitted on the Node's stale allocatable fails
    (UnexpectedAdmissionError).  Returns once the new kubelet reports
    version, has restarted devlet, and watches every one of resources."""
    restarts = cluster.devlet_pod()["status"]["containerStatuses"][0]["restartCount"]
    kubelet_stop(cluster)
    cl.start("kubelet", args)
    cluster.wait(f"kubelet {version} in the Node's status", lambda: cluster.kubelet_version() == version)
    cluster.wait("the new kubelet to restart devlet's container", lambda: cluster.devlet_pod()["status"][
        "containerStatuses"][0]["restartCount"] > restarts and cluster.devlet_ready())
    cluster.wait("the new kubelet to watch every resource of devlet's", lambda: cluster.devlet_watched(resources))


def kubelet_restart(cluster):
    """Stops the kubelet and starts it again with the same arguments, as a
    node's service manager does; returns when its new registration socket
    was created (the socket's ctime, epoch seconds)."""
    sock = "/var/lib/kubelet/device-plugins/kubelet.sock"

    def ino():  # the inode number alone may be reused at once
        try:
            st = os.stat(sock)
            return st.st_ino, st.st_ctime_ns
        except FileNotFoundError:
            return None
    old = ino()
    cl.start("kubelet", kubelet_stop(cluster))
    # the old socket file outlives the old kubelet: wait for the new one
    cluster.wait("the kubelet's new socket", lambda: ino() not in (None, old), timeout=60, interval=0.01)
    return os.stat(sock).st_ctime
