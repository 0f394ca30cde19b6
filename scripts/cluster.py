#!/usr/bin/python3
"""`make cluster` and `make cluster-down`: a one-node Kubernetes cluster on
loopback, built from the real components, with devlet installed on it the way
an operator installs it.

    cluster.py up [--overlay NAME] [--no-devlet]   bring it up, print KUBECONFIG=... last
    cluster.py down                                stop everything, remove what up made
    cluster.py status                              one line per component

`up` builds (or takes from the cache) the peers tests/cluster/versions.env
pins (scripts/peers.sh), then starts etcd, kube-apiserver (certificates made
here with openssl), kube-controller-manager, kube-scheduler, containerd (CRI
plugin, CDI on, runc from Debian, a loopback-only CNI config) and the kubelet,
all on 127.0.0.1, and waits for the Node to be Ready.  No registry is
reachable, so the pause and busybox images are built here (a static pause
binary, Debian's busybox-static) and devlet's image by scripts/build-image.sh,
each imported with `ctr -n k8s.io images import`.  Then devlet is applied with
`kubectl apply -k` on a test overlay over deploy/overlays/<overlay>
(dra by default: all-in-one plus the DRA driver's RBAC, sockets and
DeviceClasses) that adds the mock hardware: the mock NVML (8 H100s), a fake
AMD sysfs tree (8 MI300X in CPX, 64 partitions), fake device nodes for both,
and host devices (/dev/fuse, two at a time; /dev/zero, one).  Every resource
is served by the device plugin, unless DRA=1 is in the environment (`make
cluster DRA=1`): then the GPUs and devlet.io/zero are served through DRA
(ResourceSlices; pods ask with ResourceClaims) and devlet.io/fuse through the
device plugin, side by side.

Everything `up` makes is recorded under the state directory
(DEVLET_CLUSTER_DIR, default /var/lib/devlet-cluster) before it is made, so
`down` also cleans up after a failed or interrupted `up`: it kills the
components and every container they started (by cgroup), unmounts what the
kubelet and containerd mounted, and removes what was not there before: the
host directories `up` found absent, and inside those it found (an empty
/var/lib/kubelet a package left, CDI spec directories) every file and
directory that appeared since (the kubelet's pods/, plugins/, checkpoints,
*_state files; CDI specs), so the next `up` finds the host as this one did.

Facts of these machines that the configuration encodes: root lacks
CAP_SYS_RESOURCE (containerd's restrict_oom_score_adj), cgroups are v1
hybrid (kubelet failCgroupV1: false), and a loopback-only CNI config with
hostNetwork pods is enough for a Ready node.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATE = os.environ.get("DEVLET_CLUSTER_DIR", "/var/lib/devlet-cluster")
BUILD = os.environ.get("DEVLET_BUILD", os.path.join(REPO, "build"))
NODE = "devlet-node"
SERVICE_CIDR = "10.0.0.0/24"
CONTAINERD_SOCK = "/run/containerd/containerd.sock"
PAUSE_IMAGE = "localhost/devlet-cluster/pause:1"
BUSYBOX_IMAGE = "localhost/devlet-cluster/busybox:1"
DEVLET_IMAGE = "localhost/devlet:latest"
NVML_PROFILE = "h100-8x-nvswitch"
AMD_PROFILE = "mi300x-8x-cpx"
# each component's listening ports, checked before anything starts
PORTS = {
    "etcd": [2379, 2380],
    "kube-apiserver": [6443],
    "kube-controller-manager": [10257],
    "kube-scheduler": [10259],
    "kubelet": [10250, 10248],
}
# The feature gates the tests need that are off by default, by Kubernetes
# minor.  1.35, all alpha there: DRAExtendedResource (a DeviceClass's
# extendedResourceName, which lets pods that ask for an extended resource,
# "devlet.io/zero: 1", be served through DRA: --dra-resources mode "both"),
# DRADeviceTaints (an unhealthy device's taint in its slice) and
# ResourceHealthStatus (a device's health in the pod's status, KEP-4680).
# 1.37: none; what the tests use is GA or beta and on by default
# (DRAExtendedResource and DRADeviceTaints GA, DRAAdminAccess GA since
# 1.36, ResourceHealthStatus beta).
FEATURE_GATES = {"1.35": "DRAExtendedResource=true,DRADeviceTaints=true,ResourceHealthStatus=true",
                 "1.37": ""}
# host paths the kubelet, containerd and devlet's DaemonSet create: removed
# by `down` when `up` found them absent, emptied of what appeared in them
# since when it found them
HOST_DIRS = ["/var/lib/kubelet", "/var/lib/containerd", "/run/containerd", "/var/log/pods",
             "/var/log/containers", "/etc/kubernetes", "/opt/containerd", "/var/run/cdi", "/etc/cdi",
             "/run/containers/storage", "/var/lib/devlet"]
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd",
              "kubelet"]


class ClusterError(Exception):
    """A one-line reason `up` could not go on."""


def path(*parts):
    return os.path.join(STATE, *parts)


def log(msg):
    print(f"cluster: {msg}", file=sys.stderr, flush=True)


def run(args, **kw):
    kw.setdefault("check", True)
    return subprocess.run(args, **kw)


# ---------------------------------------------------------------- peers

def peers():
    """The peers' bin directories by name, building what the cache lacks."""
    out = run([os.path.join(REPO, "scripts", "peers.sh"), "kubernetes", "etcd", "containerd"],
              stdout=subprocess.PIPE, text=True).stdout
    dirs = dict(line.split("=", 1) for line in out.split())
    return {name: os.path.join(d, "bin") for name, d in dirs.items()}


def _pinned(key):
    with open(os.path.join(REPO, "tests", "cluster", "versions.env")) as f:
        for line in f:
            if line.startswith(key + "="):
                return line[len(key) + 1:].strip()
    return "unknown"


def minor(version):
    """'v1.37.2' -> '1.37'."""
    return ".".join(version.lstrip("v").split(".")[:2])


def peer_version(name):
    """The version tests/cluster/versions.env pins for a peer; for
    kubernetes, the newest release unless K8S names the oldest supported
    minor (K8S=1.35), as scripts/peers.sh picks it."""
    if name == "kubernetes":
        want = os.environ.get("K8S", "").lstrip("v")
        oldest = _pinned("KUBERNETES_OLDEST_VERSION")
        if want and want == minor(oldest):
            return oldest
    return _pinned(f"{name.upper().replace('-', '_')}_VERSION")


def feature_gates():
    """The --feature-gates value for the pinned Kubernetes ('' for none)."""
    return FEATURE_GATES.get(minor(peer_version("kubernetes")), "")


def gate_args():
    gates = feature_gates()
    return ["--feature-gates", gates] if gates else []


def peers_dir(name):
    """Where scripts/peers.sh keeps a peer (built or not)."""
    return run([os.path.join(REPO, "scripts", "peers.sh"), "--dir", name], stdout=subprocess.PIPE,
               text=True).stdout.strip()


def peer_bins():
    """Like peers(), from a recorded state (`down` must not build)."""
    try:
        with open(path("peers.json")) as f:
            return json.load(f)
    except OSError:
        return {}


def kubectl_bin():
    return os.path.join(peer_bins().get("kubernetes", ""), "kubectl")


# ---------------------------------------------------------------- pre-flight

def preflight():
    if os.geteuid() != 0:
        raise ClusterError("needs root: the kubelet and containerd manage mounts, cgroups and device nodes")
    if os.path.exists(STATE):
        raise ClusterError(f"{STATE} exists: a cluster is up, or an earlier one left it; "
                           "run `make cluster-down` first")
    for tool in ("openssl", "runc", "buildah"):
        if shutil.which(tool) is None:
            raise ClusterError(f"{tool} not found (scripts/deps.sh installs it)")
    if not os.path.exists("/usr/lib/cni/loopback"):
        raise ClusterError("/usr/lib/cni/loopback not found (Debian's containernetworking-plugins)")
    for comp, ports in PORTS.items():
        for port in ports:
            s = socket.socket()
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
            except OSError as e:
                raise ClusterError(f"port {port} ({comp}) is busy: {e.strerror}; "
                                   "stop what holds it (or run `make cluster-down`)") from None
            finally:
                s.close()
    for p in (CONTAINERD_SOCK, "/var/lib/kubelet/pods", "/var/lib/kubelet/device-plugins/kubelet.sock"):
        if os.path.lexists(p):
            raise ClusterError(f"{p} exists: another kubelet or containerd runs here, or one left it behind")


def tree(top):
    """Every path under directory top, relative to it (links not followed)."""
    out = []
    for dirpath, dirs, files in os.walk(top, onerror=lambda e: None):
        rel = os.path.relpath(dirpath, top)
        out += [os.path.normpath(os.path.join(rel, n)) for n in dirs + files]
    return sorted(out)


def record_host_state():
    """Writes, before anything is created, which host paths `down` may
    remove: the host directories that are absent, and what the others hold."""
    os.makedirs(path("logs"), exist_ok=True)
    created = [d for d in HOST_DIRS if not os.path.lexists(d)]
    found = {d: tree(d) for d in HOST_DIRS if os.path.isdir(d) and not os.path.islink(d)}
    with open(path("host.json"), "w") as f:
        json.dump({"created": created, "found": found}, f)


def remove_new(top, before):
    """Removes what is under directory top and not in before (its tree()
    then): the topmost new entries, with all they hold."""
    before = set(before)
    for dirpath, dirs, files in os.walk(top, onerror=lambda e: None):
        rel = os.path.relpath(dirpath, top)
        for name in list(dirs) + files:
            if os.path.normpath(os.path.join(rel, name)) in before:
                continue
            p = os.path.join(dirpath, name)
            if name in dirs:
                dirs.remove(name)  # not walked into: removed whole
            try:
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            except OSError as e:
                log(f"warning: cannot remove {p}: {e.strerror}")


def root_propagation():
    """The optional fields of /'s line in mountinfo ("shared:N", ...)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/":
                return fields[6:fields.index("-")]
    return []


def share_root():
    """A node's / is a shared mount (systemd makes it one); the DaemonSets'
    HostToContainer mounts of /, /run/containerd and /var/run/cdi need it.
    A private / (some sandboxes) is made shared, and private again by down."""
    if any(f.startswith(("shared:", "master:")) for f in root_propagation()):
        return
    open(path("root-made-shared"), "w").close()
    run(["mount", "--make-shared", "/"])


# ---------------------------------------------------------------- certificates

def openssl(*args):
    run(["openssl", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_pki():
    pki = path("pki")
    os.makedirs(pki, mode=0o700)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", f"{pki}/ca.key", "-out", f"{pki}/ca.crt", "-days", "3650",
            "-subj", "/CN=devlet-cluster-ca")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{pki}/sa.key")
    openssl("ec", "-in", f"{pki}/sa.key", "-pubout", "-out", f"{pki}/sa.pub")

    def cert(name, subj, usage, sans=None):
        ext = f"{pki}/{name}.ext"
        with open(ext, "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                    f"extendedKeyUsage={usage}\n")
            if sans:
                f.write(f"subjectAltName={','.join(sans)}\n")
        openssl("req", "-new", *ec, "-keyout", f"{pki}/{name}.key", "-out", f"{pki}/{name}.csr", "-subj", subj)
        openssl("x509", "-req", "-in", f"{pki}/{name}.csr", "-CA", f"{pki}/ca.crt", "-CAkey", f"{pki}/ca.key",
                "-CAcreateserial", "-days", "3650", "-extfile", ext, "-out", f"{pki}/{name}.crt")
        os.unlink(ext)
        os.unlink(f"{pki}/{name}.csr")

    cert("apiserver", "/CN=kube-apiserver", "serverAuth",
         ["IP:127.0.0.1", "IP:10.0.0.1", "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
          "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    cert("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client", "clientAuth")
    cert("admin", "/O=system:masters/CN=devlet-cluster-admin", "clientAuth")
    cert("controller-manager", "/CN=system:kube-controller-manager", "clientAuth")
    cert("scheduler", "/CN=system:kube-scheduler", "clientAuth")
    cert("kubelet", f"/O=system:nodes/CN=system:node:{NODE}", "clientAuth")
    cert("kubelet-serving", f"/O=system:nodes/CN=system:node:{NODE}", "serverAuth",
         ["IP:127.0.0.1", "DNS:localhost", f"DNS:{NODE}"])
    for name in ("admin", "controller-manager", "scheduler", "kubelet"):
        kubeconfig(name)


def kubeconfig(name):
    pki = path("pki")
    text = f"""apiVersion: v1
kind: Config
clusters:
- name: devlet
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: {pki}/ca.crt
users:
- name: {name}
  user:
    client-certificate: {pki}/{name}.crt
    client-key: {pki}/{name}.key
contexts:
- name: devlet
  context: {{cluster: devlet, user: {name}}}
current-context: devlet
"""
    with open(path(f"{name}.kubeconfig"), "w") as f:
        f.write(text)


# ---------------------------------------------------------------- processes

def start(name, args, env=None):
    logf = open(path("logs", f"{name}.log"), "ab")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env, cwd=STATE)
    logf.close()
    with open(path(f"{name}.pid"), "w") as f:
        f.write(str(proc.pid))
    proc.log = path("logs", f"{name}.log")
    return proc


def wait_for(what, check, proc=None, timeout=120.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ClusterError(f"{what}: exited with {proc.returncode}; see {proc.log}")
        try:
            if check():
                return
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last = e
        time.sleep(0.2)
    raise ClusterError(f"{what}: not ready after {timeout:.0f} s ({last or 'no answer'})")


def https_ok(url):
    ctx = ssl.create_default_context(cafile=path("pki", "ca.crt"))
    ctx.load_cert_chain(path("pki", "admin.crt"), path("pki", "admin.key"))
    with urllib.request.urlopen(url, context=ctx, timeout=2) as r:
        return r.status == 200


def kubectl(*args, check=True, timeout=60):
    return run([kubectl_bin(), "--kubeconfig", path("admin.kubeconfig"), *args], check=check,
               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


# ---------------------------------------------------------------- components

def start_etcd(bins):
    p = start("etcd", [os.path.join(bins["etcd"], "etcd"), "--name", "devlet", "--data-dir", path("etcd"),
                       "--listen-client-urls", "http://127.0.0.1:2379",
                       "--advertise-client-urls", "http://127.0.0.1:2379",
                       "--listen-peer-urls", "http://127.0.0.1:2380",
                       "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                       "--initial-cluster", "devlet=http://127.0.0.1:2380",
                       "--unsafe-no-fsync", "--log-level", "warn"])
    wait_for("etcd", lambda: b'"true"' in urllib.request.urlopen("http://127.0.0.1:2379/health",
                                                                timeout=2).read(), p)


def start_control_plane(bins):
    k = bins["kubernetes"]
    pki = path("pki")
    p = start("kube-apiserver", [
        os.path.join(k, "kube-apiserver"), "--etcd-servers", "http://127.0.0.1:2379",
        "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", "6443",
        "--tls-cert-file", f"{pki}/apiserver.crt", "--tls-private-key-file", f"{pki}/apiserver.key",
        "--client-ca-file", f"{pki}/ca.crt",
        "--kubelet-client-certificate", f"{pki}/apiserver-kubelet-client.crt",
        "--kubelet-client-key", f"{pki}/apiserver-kubelet-client.key",
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file", f"{pki}/sa.pub", "--service-account-signing-key-file", f"{pki}/sa.key",
        "--service-cluster-ip-range", SERVICE_CIDR, "--authorization-mode", "Node,RBAC",
        "--allow-privileged=true", "--endpoint-reconciler-type", "none", "--profiling=false",
        *gate_args(), "--v", "1"])
    wait_for("kube-apiserver", lambda: https_ok("https://127.0.0.1:6443/readyz"), p)
    start("kube-controller-manager", [
        os.path.join(k, "kube-controller-manager"), "--kubeconfig", path("controller-manager.kubeconfig"),
        "--authentication-kubeconfig", path("controller-manager.kubeconfig"),
        "--authorization-kubeconfig", path("controller-manager.kubeconfig"),
        "--bind-address", "127.0.0.1", "--leader-elect=false", "--use-service-account-credentials",
        "--service-account-private-key-file", f"{pki}/sa.key", "--root-ca-file", f"{pki}/ca.crt",
        "--cluster-signing-cert-file", f"{pki}/ca.crt", "--cluster-signing-key-file", f"{pki}/ca.key",
        "--service-cluster-ip-range", SERVICE_CIDR, *gate_args(), "--v", "1"])
    start("kube-scheduler", [
        os.path.join(k, "kube-scheduler"), "--kubeconfig", path("scheduler.kubeconfig"),
        "--authentication-kubeconfig", path("scheduler.kubeconfig"),
        "--authorization-kubeconfig", path("scheduler.kubeconfig"),
        "--bind-address", "127.0.0.1", "--leader-elect=false", *gate_args(), "--v", "1"])


def start_containerd(bins):
    os.makedirs(path("cni"))
    with open(path("cni", "10-loopback.conflist"), "w") as f:
        json.dump({"cniVersion": "1.0.0", "name": "devlet-loopback", "plugins": [{"type": "loopback"}]}, f)
    with open(path("containerd.toml"), "w") as f:
        f.write(f"""version = 3
disabled_plugins = ["io.containerd.internal.v1.opt"]

[grpc]
  address = "{CONTAINERD_SOCK}"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  # root lacks CAP_SYS_RESOURCE here: without this every sandbox fails
  restrict_oom_score_adj = true

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{shutil.which('runc')}"
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "{path('cni')}"
""")
    env = dict(os.environ, PATH=f"{bins['containerd']}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    p = start("containerd", [os.path.join(bins["containerd"], "containerd"), "--config", path("containerd.toml")],
              env=env)
    wait_for("containerd", lambda: run([ctr_bin(), "--address", CONTAINERD_SOCK, "version"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0, p)


def ctr_bin():
    return os.path.join(peer_bins()["containerd"], "ctr")


def start_kubelet(bins):
    pki = path("pki")
    with open(path("kubelet.yaml"), "w") as f:
        f.write(f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {pki}/ca.crt}}
authorization: {{mode: Webhook}}
tlsCertFile: {pki}/kubelet-serving.crt
tlsPrivateKeyFile: {pki}/kubelet-serving.key
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{CONTAINERD_SOCK}
# cgroups here are v1 hybrid: kubelets from v1.35 refuse them unless told
failCgroupV1: false
failSwapOn: false
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
fileCheckFrequency: 5s
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
# the images are imported, never pulled: the garbage collector must keep them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}}
serializeImagePulls: false
featureGates: {{{feature_gates().replace("=", ": ").replace(",", ", ")}}}
""")
    p = start("kubelet", [os.path.join(bins["kubernetes"], "kubelet"), "--config", path("kubelet.yaml"),
                          "--kubeconfig", path("kubelet.kubeconfig"), "--hostname-override", NODE,
                          "--node-ip", "127.0.0.1", "--v", "2"])
    wait_for("the Node to be Ready", node_ready, p, timeout=180)


def node_ready():
    r = kubectl("get", "node", NODE, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
                check=False, timeout=10)
    return r.returncode == 0 and r.stdout.strip() == "True"


# ---------------------------------------------------------------- images

def build_images(version):
    """pause, busybox and devlet's image as docker archives under STATE/images."""
    images = path("images")
    os.makedirs(images)
    rootfs = path("images", "rootfs")
    os.makedirs(rootfs)
    run(["gcc", "-static", "-O2", "-o", os.path.join(rootfs, "pause"),
         os.path.join(REPO, "tests", "cluster", "images", "pause.c")])
    simple_image("pause", PAUSE_IMAGE, rootfs, '["/pause"]')
    shutil.rmtree(rootfs)
    os.makedirs(os.path.join(rootfs, "bin"))
    shutil.copy("/bin/busybox", os.path.join(rootfs, "bin", "busybox"))
    for applet in ("sh", "cat", "ls", "stat", "env", "sleep", "test", "echo", "head", "grep"):
        os.symlink("busybox", os.path.join(rootfs, "bin", applet))
    simple_image("busybox", BUSYBOX_IMAGE, rootfs, '["/bin/sh"]')
    shutil.rmtree(rootfs)
    # the node's own architecture only: the cluster runs no other, and a
    # cross-build (and qemu) would only slow every `up`
    arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE,
                          text=True).stdout.strip()
    out = run([os.path.join(REPO, "scripts", "build-image.sh")], env=dict(os.environ, VERSION=version,
              BUILD=BUILD, ARCHES=arch), stdout=subprocess.PIPE, text=True).stdout.split()
    push(out[0], path("images", "devlet.tar"), [out[0], DEVLET_IMAGE])


def simple_image(name, ref, rootfs, entrypoint):
    ctr = run(["buildah", "from", "--quiet", "scratch"], stdout=subprocess.PIPE, text=True).stdout.strip()
    try:
        run(["buildah", "copy", "--quiet", ctr, rootfs, "/"], stdout=subprocess.DEVNULL)
        run(["buildah", "config", "--entrypoint", entrypoint, "--env", "PATH=/bin", ctr])
        run(["buildah", "commit", "--quiet", "--rm", ctr, ref], stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        run(["buildah", "rm", ctr], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        raise
    push(ref, path("images", f"{name}.tar"), [ref])


def push(ref, tar, tags):
    """Imports ref into containerd's k8s.io namespace (through a docker
    archive) under every name in tags."""
    run(["buildah", "push", "--quiet", ref, f"docker-archive:{tar}:{tags[0]}"], stdout=subprocess.DEVNULL)
    ctr(["images", "import", tar], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for t in tags[1:]:
        ctr(["images", "tag", "--force", tags[0], t], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def ctr(args, **kw):
    return run([ctr_bin(), "--address", CONTAINERD_SOCK, "-n", "k8s.io", *args], **kw)


# ---------------------------------------------------------------- mock hardware and devlet

def make_mock_hardware():
    """STATE/mock: the mock NVML and its 8 GPUs, a fake AMD sysfs tree, and a
    dev root whose device nodes the GPUs' and host devices' Allocate name."""
    mock = path("mock")
    os.makedirs(os.path.join(mock, "lib"))
    shutil.copy(os.path.join(BUILD, "mock-nvml", "libnvidia-ml.so.1"), os.path.join(mock, "lib"))
    shutil.copy(os.path.join(REPO, "tests", "mock-nvml", "profiles", f"{NVML_PROFILE}.yaml"),
                os.path.join(mock, "nvml.yaml"))
    dev = os.path.join(mock, "dev")
    os.makedirs(dev)

    def node(name, major, minor):
        os.mknod(os.path.join(dev, name), 0o666 | 0o020000, os.makedev(major, minor))

    for i in range(8):
        node(f"nvidia{i}", 195, i)
    node("nvidiactl", 195, 255)
    node("nvidia-uvm", 510, 0)
    node("nvidia-uvm-tools", 510, 1)
    sys.path.insert(0, os.path.join(REPO, "tests", "mock-amd"))
    import gen_sysfs  # noqa: E402 - the fake tree's generator lives with the tests
    import yaml
    with open(os.path.join(REPO, "tests", "mock-amd", "profiles", f"{AMD_PROFILE}.yaml")) as f:
        manifest = gen_sysfs.generate(yaml.safe_load(f), os.path.join(mock, "sys"), mock, True)
    with open(os.path.join(mock, "amd.json"), "w") as f:
        json.dump(manifest, f)


CONFIG = """version: v1
flags:
  migStrategy: none
  failOnInitError: false
hostDevices:
  domain: devlet.io
  devices:
  - name: fuse
    groups:
    - count: 2
      paths:
      - path: /dev/fuse
  - name: zero
    groups:
    - paths:
      - path: /dev/zero
"""
# DRA=1: what goes through DRA (the rest stays with the device plugin);
# devlet.io/zero also for pods that ask for it as an extended resource
DRA_RESOURCES = ["nvidia.com/gpu", "amd.com/gpu", "devlet.io/zero=both"]


def config_text(dra):
    """The test overlay's config file: CONFIG, with DRA_RESOURCES served
    through DRA when dra."""
    if not dra:
        return CONFIG
    return CONFIG.replace("  failOnInitError: false\n", "  failOnInitError: false\n  draResources:\n" +
                          "".join(f"  - {r}\n" for r in DRA_RESOURCES))


def write_overlay(overlay, dra=False):
    """STATE/deploy: a kustomization over deploy/overlays/OVERLAY that adds the
    mock hardware (the test overlay), as an operator adds a patch of theirs."""
    d = path("deploy")
    os.makedirs(d)
    mock = path("mock")
    base = os.path.relpath(os.path.join(REPO, "deploy", "overlays", overlay), d)
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        f.write(f"""apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- {base}
patches:
- path: mock-hardware.yaml
- path: config.yaml
""")
    with open(os.path.join(d, "mock-hardware.yaml"), "w") as f:
        f.write(f"""apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: devlet
spec:
  template:
    spec:
      # the local cluster's CNI is loopback only: on the host's network the
      # kubelet's probes and a scraper reach the metrics port
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      containers:
      - name: devlet
        # /dev is the host's, read-only: the termination log goes elsewhere
        terminationMessagePath: /termination-log
        env:
        - {{name: DEVLET_NVML_LIBRARY, value: {mock}/lib/libnvidia-ml.so.1}}
        - {{name: MOCK_NVML_CONFIG, value: {mock}/nvml.yaml}}
        - {{name: DEVLET_SYSFS_ROOT, value: {mock}/sys}}
        - {{name: NVIDIA_DEV_ROOT, value: {mock}}}
        # no kube-proxy here: the API server's service address leads
        # nowhere, so the in-cluster client is pointed at it directly
        - {{name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}}
        - {{name: KUBERNETES_SERVICE_PORT, value: "6443"}}
        volumeMounts:
        - {{name: mock-hardware, mountPath: {mock}, readOnly: true}}
        # host devices are looked for at their own paths, as in the
        # host-devices-only overlay
        - {{name: host-dev, mountPath: /dev, readOnly: true}}
      volumes:
      - name: mock-hardware
        hostPath: {{path: {mock}, type: Directory}}
      - name: host-dev
        hostPath: {{path: /dev, type: Directory}}
""")
    with open(os.path.join(d, "config.yaml"), "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: devlet-config\ndata:\n  config.yaml: |\n")
        f.write("".join(f"    {line}\n" for line in config_text(dra).splitlines()))


def resource_slices():
    """driver -> number of devices in this node's ResourceSlices"""
    r = kubectl("get", "resourceslices", "-o", "json", check=False, timeout=10)
    out = {}
    for s in json.loads(r.stdout or "{}").get("items", []) if r.returncode == 0 else []:
        if s["spec"].get("nodeName") == NODE:
            d = s["spec"]["driver"]
            out[d] = out.get(d, 0) + len(s["spec"].get("devices") or [])
    return out


def install_devlet(overlay, dra=False):
    make_mock_hardware()
    write_overlay(overlay, dra)
    # the GPU operator's label (or an operator's, by hand): the overlays'
    # node affinity asks for it when NFD is not installed
    kubectl("label", "--overwrite", "node", NODE, "nvidia.com/gpu.present=true", "amd.com/gpu.present=true")
    kubectl("apply", "-k", path("deploy"))
    kubectl("-n", "devlet", "rollout", "status", "ds/devlet", "--timeout=180s", timeout=200)
    if dra:
        wait_for("devlet's ResourceSlices", lambda: resource_slices().get("gpu.nvidia.com") == 8, timeout=60)
    else:
        wait_for("devlet's resources on the Node", lambda: allocatable().get("nvidia.com/gpu") == "8", timeout=60)


def allocatable():
    r = kubectl("get", "node", NODE, "-o", "jsonpath={.status.allocatable}", check=False, timeout=10)
    return json.loads(r.stdout or "{}") if r.returncode == 0 else {}


# ---------------------------------------------------------------- up / down

def up(overlay, with_devlet, keep=False, dra=False):
    preflight()
    t0 = time.monotonic()
    record_host_state()
    try:
        bins = peers()
        with open(path("peers.json"), "w") as f:
            json.dump(bins, f)
        log(f"peers ready ({time.monotonic() - t0:.0f} s)")
        run(["make", "-s", "-C", REPO, f"BUILD={BUILD}", "all"], stdout=subprocess.DEVNULL)
        share_root()
        make_pki()
        start_etcd(bins)
        start_control_plane(bins)
        start_containerd(bins)
        version = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout.strip() or "dev"
        build_images(version)
        start_kubelet(bins)
        log(f"node {NODE} Ready ({time.monotonic() - t0:.0f} s)")
        if with_devlet:
            install_devlet(overlay, dra)
            log(f"devlet serving ({time.monotonic() - t0:.0f} s)")
    except (ClusterError, subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        msg = str(e)
        if isinstance(e, subprocess.CalledProcessError) and e.stderr:
            msg += ": " + (e.stderr if isinstance(e.stderr, str) else e.stderr.decode(errors="replace")).strip()
        log(f"error: {msg}")
        if keep:
            log(f"left running as it is (--keep); logs in {path('logs')}")
            return 1
        log("stopping what was started (logs kept in /tmp/devlet-cluster-logs)")
        shutil.rmtree("/tmp/devlet-cluster-logs", ignore_errors=True)
        shutil.copytree(path("logs"), "/tmp/devlet-cluster-logs", dirs_exist_ok=True)
        down()
        return 1
    print(f"KUBECONFIG={path('admin.kubeconfig')}", flush=True)
    return 0


def pids_of_cluster():
    """Every process the cluster started: its components (recorded), the
    containerd shims, and every container process (by kubepods cgroup)."""
    bins = [os.path.realpath(b) for b in peer_bins().values()]
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.realpath(f"/proc/{pid}/exe")
            with open(f"/proc/{pid}/cgroup") as f:
                cg = f.read()
        except OSError:
            continue
        if any(exe.startswith(b + "/") for b in bins) or "/kubepods" in cg:
            found.add(int(pid))
    found.discard(os.getpid())
    return found


def kill_all():
    for name in ["kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "containerd", "etcd"]:
        try:
            with open(path(f"{name}.pid")) as f:
                os.killpg(int(f.read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = pids_of_cluster()
        if not left:
            return
        if time.monotonic() > deadline - 8:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.2)
    left = pids_of_cluster()
    if left:
        log(f"warning: processes still running: {sorted(left)}")


def unmount_all():
    roots = ["/var/lib/kubelet", "/run/containerd", "/var/lib/containerd", "/run/netns", "/var/run/netns", STATE]
    for _ in range(3):
        points = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if any(mp == r or mp.startswith(r + "/") for r in roots):
                    points.append(mp)
        if not points:
            return
        for mp in sorted(set(points), key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], stderr=subprocess.DEVNULL)


def remove_cgroups():
    for hier in os.listdir("/sys/fs/cgroup"):
        top = os.path.join("/sys/fs/cgroup", hier, "kubepods")
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: len(t[0]), reverse=True):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def down():
    if not os.path.isdir(STATE):
        log(f"nothing to stop ({STATE} does not exist)")
        return 0
    kill_all()
    unmount_all()
    remove_cgroups()
    try:
        with open(path("host.json")) as f:
            host = json.load(f)
    except (OSError, ValueError):
        host = {"created": [], "found": {}}
    for d, before in host.get("found", {}).items():
        if d not in host["created"] and os.path.isdir(d) and not os.path.islink(d):
            remove_new(d, before)
    for d in host["created"]:
        if os.path.islink(d):
            os.unlink(d)
        else:
            shutil.rmtree(d, ignore_errors=True)
    if os.path.exists(path("root-made-shared")):
        subprocess.run(["mount", "--make-private", "/"], check=False)
    shutil.rmtree(STATE, ignore_errors=True)
    log("stopped; every file and mount it made is removed")
    return 0


def status():
    for name in COMPONENTS:
        state = "stopped"
        try:
            with open(path(f"{name}.pid")) as f:
                os.kill(int(f.read()), 0)
            state = "running"
        except (OSError, ValueError):
            pass
        print(f"{name:24} {state}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--overlay", default=os.environ.get("OVERLAY", "dra"))
    u.add_argument("--dra", action="store_true", default=os.environ.get("DRA", "") not in ("", "0"),
                   help="serve the GPUs and devlet.io/zero through DRA (also DRA=1)")
    u.add_argument("--no-devlet", action="store_true", help="the cluster alone")
    u.add_argument("--keep", action="store_true", help="on an error, leave what runs for a look")
    sub.add_parser("down")
    sub.add_parser("status")
    a = ap.parse_args()
    try:
        if a.cmd == "up":
            return up(a.overlay, not a.no_devlet, a.keep, a.dra)
        if a.cmd == "down":
            return down()
        return status()
    except ClusterError as e:
        log(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
