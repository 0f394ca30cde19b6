"""MPS that really runs: `devlet mps-control-daemon` starts one control daemon
per MPS resource (a stand-in nvidia-cuda-mps-control, tests/tools/, under a
fake driver root) with NVIDIA's pipe/log layout and limits, restarts it when
it dies and quits it on SIGTERM; `devlet run` serves the resource (healthy
devices, nvidia.com/mps.capable=true) only while the daemon is ready, and
Allocate hands out NVIDIA's MPS env vars and mounts.

The supervisor as PID 1 (a PID namespace of its own, unshare -pf) reaps the
daemons it inherits, so a killed one is restarted; a control program that
hangs or whose daemon holds its stdout never keeps SIGTERM waiting more than
2 s, and on a timeout its whole process group goes; nothing below
--mps-root is followed through a symlink, whether writing the readiness
marker or unmounting and mounting shm (in a mount namespace of its own,
unshare -m)."""

import os
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest

from devlet_harness import DEVLET_BIN, SANITIZER_ERRORS, devlet_env, wait_until, write_config
from mock_gpus import GPU

QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
STAND_IN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                        "nvidia-cuda-mps-control")
CONFIG = {"version": "v1", "sharing": {"mps": {"resources": [{"name": GPU, "replicas": 4}]}}}


def labels_of(d):
    path = os.path.join(d.workdir, "gfd")
    if not os.path.exists(path):
        return {}
    return dict(line.split("=", 1) for line in open(path).read().split())


def read(path):
    with open(path) as f:
        return f.read()


def test_mps_control_daemon_supervised_and_served(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    root = os.path.join(dirs.run, "mps")
    driver = os.path.join(dirs.root, "driver")
    os.makedirs(os.path.join(driver, "usr", "bin"))
    shutil.copy(STAND_IN, os.path.join(driver, "usr", "bin", "nvidia-cuda-mps-control"))
    flags = ["--mps-root", root, "--nvidia-driver-root", driver, "--driver-root-ctr-path", "/nowhere"]
    d = devlet(CONFIG, args=flags, env=n.env(**QUIET))
    ids = [f"{u}::{k}" for u in n.uuids() for k in range(4)]

    # no control daemon yet: advertised, but unhealthy, and not MPS-capable
    snap = kubelet.wait_for_snapshot(GPU)
    assert snap.ids() == ids and snap.healthy_ids() == []
    d.wait_log("MPS control daemon not ready, devices unhealthy until it is resource=nvidia.com/gpu")
    wait_until(lambda: labels_of(d).get("nvidia.com/mps.capable") == "false", 10, "mps.capable=false")

    sidecar = subprocess.Popen([DEVLET_BIN, "mps-control-daemon", "--config-file", d.config_path, *flags],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=devlet_env({**n.env(**QUIET), "DEVLET_MPS_SHM": "dir"}))
    try:
        assert kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == ids).ids() == ids
        wait_until(lambda: labels_of(d).get("nvidia.com/mps.capable") == "true", 10, "mps.capable=true")
        pipe = os.path.join(root, "nvidia.com/gpu", "pipe")
        logdir = os.path.join(root, "nvidia.com/gpu", "log")
        # NVIDIA's limits from 4 replicas: 25% of the threads, a quarter of 32 GiB
        assert read(os.path.join(pipe, "thread_percentage")).strip() == "25"
        assert read(os.path.join(pipe, "pinned_mem_limits")).split("\n")[:-1] == [
            f"{i} 8192M" for i in range(8)]
        assert f"CUDA_VISIBLE_DEVICES={','.join(n.uuids())}" in read(os.path.join(logdir, "control.log"))
        assert os.path.isdir(os.path.join(root, "shm"))

        c = kubelet.allocate(GPU, [[ids[5]]]).container_responses[0]
        assert dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": n.uuids()[1],
                                "CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe",
                                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
                                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8192M"}
        assert [(m.host_path, m.container_path) for m in c.mounts] == [
            (pipe, "/mps/nvidia.com/gpu/pipe"), (os.path.join(root, "shm"), "/dev/shm")]

        # the daemon dies: the supervisor starts it again
        pidfile = os.path.join(pipe, "nvidia-cuda-mps-control.pid")
        first = int(read(pidfile))
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: os.path.exists(pidfile) and read(pidfile).strip()
                   and int(read(pidfile)) != first, 15, "a new control daemon")
        wait_until(lambda: read(os.path.join(logdir, "control.log")).count("Startup") == 2, 10,
                   "the second start in control.log")
        wait_until(lambda: os.path.exists(os.path.join(root, "nvidia.com/gpu", ".started")), 10,
                   "the readiness marker again")
        assert kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == ids)

        # SIGTERM: every daemon quits, the marker goes, the resource stops serving
        second = int(read(pidfile))
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=10) == 0
        assert not os.path.exists(pidfile)
        assert not os.path.exists(os.path.join(root, "nvidia.com/gpu", ".started"))
        wait_until(lambda: not os.path.exists(f"/proc/{second}") or
                   read(f"/proc/{second}/stat").split()[2] == "Z", 10, "the daemon gone")
        kubelet.wait_for_snapshot(GPU, lambda s: s.healthy_ids() == [])
        wait_until(lambda: labels_of(d).get("nvidia.com/mps.capable") == "false", 10,
                   "mps.capable=false again")
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()
        print(sidecar.stdout.read().decode())
        pidfile = os.path.join(root, "nvidia.com/gpu", "pipe", "nvidia-cuda-mps-control.pid")
        if os.path.exists(pidfile):  # a stand-in daemon left by a failure
            try:
                os.kill(int(read(pidfile)), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass


def test_mps_sidecar_without_mps_idles(node, dirs):
    n = node("v100-dgx1")
    p = subprocess.Popen([DEVLET_BIN, "mps-control-daemon"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=devlet_env(n.env()))
    line = p.stdout.readline().decode()
    assert "sharing strategy is not MPS: no control daemon to run" in line
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0


def test_mps_replicas_beyond_the_servers_clients_are_refused(node, dirs):
    """An MPS server takes 48 clients (16 before compute capability 7.5, as
    NVIDIA counts): more replicas than that are refused, as NVIDIA's."""
    n = node("v100-dgx1")  # 7.0
    cfg = os.path.join(dirs.work, "mps.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n"
                "        replicas: 17\n")
    res = subprocess.run([DEVLET_BIN, "mps-control-daemon", "--config-file", cfg,
                          "--mps-root", os.path.join(dirs.run, "mps")], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=30,
                         env=devlet_env({**n.env(**QUIET), "DEVLET_MPS_SHM": "dir"}))
    assert res.returncode == 1
    assert "invalid MPS configuration: maximum allowed replicas exceeded: 17 > 16" in res.stderr


# ---- the supervisor on its own, as PID 1 or in a mount namespace ----

MARKER = os.path.join("nvidia.com/gpu", ".started")


class Sidecar:
    """`devlet mps-control-daemon` on node n with the stand-in, in a session
    of its own (so everything it starts can be found and stopped), behind
    prefix (e.g. unshare); its output in dirs.work/sidecar.log."""

    def __init__(self, dirs, n, prefix=(), shm="dir", script=None):
        self.root = os.path.join(dirs.run, "mps")
        self.pipe = os.path.join(self.root, "nvidia.com/gpu", "pipe")
        self.logdir = os.path.join(self.root, "nvidia.com/gpu", "log")
        self.marker = os.path.join(self.root, MARKER)
        driver = os.path.join(dirs.root, "driver")
        os.makedirs(os.path.join(driver, "usr", "bin"), exist_ok=True)
        shutil.copy(STAND_IN, os.path.join(driver, "usr", "bin", "nvidia-cuda-mps-control"))
        os.makedirs(self.logdir, exist_ok=True)
        cfg = os.path.join(dirs.work, "mps.yaml")
        write_config(cfg, CONFIG)
        self.argv = [DEVLET_BIN, "mps-control-daemon", "--config-file", cfg, "--mps-root", self.root,
                     "--nvidia-driver-root", driver, "--driver-root-ctr-path", "/nowhere"]
        self.env = {**n.env(**QUIET)}
        if shm:
            self.env["DEVLET_MPS_SHM"] = shm
        self.log_path = os.path.join(dirs.work, "sidecar.log")
        self.prefix = list(prefix)
        self.script = script
        self.proc = None

    def start(self):
        cmd = self.prefix + (["sh", "-c", self.script, "sh", *self.argv] if self.script else self.argv)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=devlet_env(self.env),
                                         start_new_session=True)
        return self

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def control_log(self):
        path = os.path.join(self.logdir, "control.log")
        return read(path) if os.path.exists(path) else ""

    def wait_control_log(self, pattern, count=1, timeout=10.0):
        wait_until(lambda: len(re.findall(pattern, self.control_log())) >= count, timeout,
                   f"{count}x /{pattern}/ in control.log")

    def ready(self):
        return os.path.exists(self.marker)

    def session(self):
        """pids of every process in the sidecar's session but the sidecar."""
        out = []
        for e in os.listdir("/proc"):
            if e.isdigit() and int(e) != self.proc.pid:
                try:
                    fields = read(f"/proc/{e}/stat").rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[3]) == self.proc.pid:
                    out.append(int(e))
        return out

    def stop(self):
        """Kills whatever is left (a failed test's), the session included."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.session():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(self.log())


@pytest.fixture
def sidecars():
    """Makes Sidecars; on teardown each is stopped and its log checked for a
    sanitizer report."""
    made = []
    yield lambda *a, **kw: made.append(Sidecar(*a, **kw)) or made[-1]
    for sc in made:
        sc.stop()
    reports = [sc.log() for sc in made if sc.proc and any(m in sc.log() for m in SANITIZER_ERRORS)]
    assert not reports, reports


def alive(pid):
    """pid exists and is not a zombie."""
    try:
        return read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def exit_time(proc, timeout, pid=None):
    """SIGTERM to proc (or to pid, the devlet under it: unshare ignores
    SIGTERM); seconds until proc exited (raises past timeout)."""
    start = time.monotonic()
    os.kill(pid or proc.pid, signal.SIGTERM)
    proc.wait(timeout=timeout)
    took = time.monotonic() - start
    print(f"SIGTERM to exit: {took:.2f} s")
    return took


def ns_processes(ns):
    """host pid -> (pid inside, state) of every process in PID namespace ns."""
    out = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{e}/ns/pid") != ns:
                continue
            status = dict(line.split(":", 1) for line in read(f"/proc/{e}/status").splitlines())
        except (OSError, ValueError):
            continue
        out[int(e)] = (int(status["NSpid"].split()[-1]), status["State"].split()[0])
    return out


def test_mps_supervisor_as_pid1_reaps_and_restarts_killed_daemons(node, dirs, sidecars):
    """PID 1 inherits the daemon once `-d` exits.  A killed daemon must be
    reaped: a zombie still answers kill -0, so the stand-in's client (like
    the real one) would find it alive and it would never be restarted."""
    sc = sidecars(dirs, node("v100-dgx1"), prefix=["unshare", "--pid", "--fork", "--kill-child"]).start()
    children = f"/proc/{sc.proc.pid}/task/{sc.proc.pid}/children"
    pid1 = int(wait_until(lambda: read(children).split(), 10, "devlet under unshare")[0])
    ns = os.readlink(f"/proc/{pid1}/ns/pid")
    assert ns_processes(ns)[pid1][0] == 1
    wait_until(sc.ready, 10, "the readiness marker")
    pidfile = os.path.join(sc.pipe, "nvidia-cuda-mps-control.pid")
    for kill in range(3):
        inside = int(read(pidfile))
        host = next(h for h, (p, _) in ns_processes(ns).items() if p == inside)
        os.kill(host, signal.SIGKILL)
        wait_until(lambda: read(pidfile).strip() and int(read(pidfile)) != inside, 15,
                   f"a new control daemon after kill #{kill + 1}")
        wait_until(sc.ready, 10, "the readiness marker again")
    # nothing left unreaped: every process in the namespace is alive
    wait_until(lambda: all(state != "Z" for _, state in ns_processes(ns).values()), 5,
               "no zombie in the namespace")
    assert sc.control_log().count("Startup") == 4
    took = exit_time(sc.proc, 10, pid1)
    assert sc.proc.returncode == 0 and took < 2.0, (sc.proc.returncode, took)


def test_mps_marker_never_written_through_a_planted_link(node, dirs, sidecars):
    """As PID 1 the marker's old temporary name was ".started.tmp.1": a link
    there made the supervisor write into (and chmod) any file."""
    sc = sidecars(dirs, node("v100-dgx1"), prefix=["unshare", "--pid", "--fork", "--kill-child"])
    victim = os.path.join(dirs.run, "victim")
    with open(victim, "w") as f:
        f.write("keep\n")
    os.chmod(victim, 0o600)
    os.symlink(victim, sc.marker + ".tmp.1")
    sc.start()
    wait_until(sc.ready, 10, "the readiness marker")
    assert read(victim) == "keep\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o600
    assert stat.S_ISREG(os.lstat(sc.marker).st_mode)
    assert "resource=nvidia.com/gpu" in read(sc.marker)
    assert os.path.islink(sc.marker + ".tmp.1")


def test_mps_sigterm_answered_while_a_control_client_hangs(node, dirs, sidecars):
    """A client that closes its stdout and then hangs: the supervisor used to
    wait for it without a deadline, SIGTERM blocked."""
    sc = sidecars(dirs, node("v100-dgx1")).start()
    wait_until(sc.ready, 10, "the readiness marker")
    daemon = int(read(os.path.join(sc.pipe, "nvidia-cuda-mps-control.pid")))
    open(os.path.join(sc.logdir, "hang-client"), "w").close()
    sc.wait_control_log(r"Hang pid=\d+")  # the next health check hangs now
    hung = int(re.search(r"Hang pid=(\d+)", sc.control_log()).group(1))
    took = exit_time(sc.proc, 10)
    assert sc.proc.returncode == 0 and took < 2.0, (sc.proc.returncode, took)
    # the hanging client's group went with it; the quit hung too, so the
    # daemon is still there (killed by the fixture)
    wait_until(lambda: not alive(hung), 5, "the hanging client killed")
    assert alive(daemon)
    assert "stopping signal=Terminated" in sc.log()


def test_mps_start_that_times_out_kills_its_process_group(node, dirs, sidecars):
    """`-d` starts a daemon that keeps its stdout and then hangs: at the
    deadline the whole group (client, daemon) is killed, not the client
    alone, so no orphan daemon is left to pile up; the next start works."""
    n = node("v100-dgx1")
    sc = sidecars(dirs, n)
    open(os.path.join(sc.logdir, "hang-start"), "w").close()
    sc.start()
    sc.wait_control_log(r"Hang pid=\d+")
    first = int(re.search(r"Startup pid=(\d+)", sc.control_log()).group(1))
    hung = int(re.search(r"Hang pid=(\d+)", sc.control_log()).group(1))
    os.unlink(os.path.join(sc.logdir, "hang-start"))
    # the 10 s deadline passes, the group goes, the next start succeeds
    wait_until(sc.ready, 20, "the readiness marker after the timed-out start")
    assert "MPS control daemon did not start resource=nvidia.com/gpu status=-110 (timed out, killed)" \
        in sc.log()
    assert not alive(first) and not alive(hung)
    daemons = [p for p in sc.session() if alive(p) and read(f"/proc/{p}/cmdline").startswith("sleep")]
    assert daemons == [int(read(os.path.join(sc.pipe, "nvidia-cuda-mps-control.pid")))]
    assert exit_time(sc.proc, 10) < 2.0


def test_mps_daemon_holding_stdout_does_not_stall_its_start(node, dirs, sidecars):
    """A daemon that keeps `-d`'s stdout open: the start is over when `-d`
    exits, not when the pipe closes (it used to time out after 10 s, leave
    the daemon running, and every later start be refused)."""
    sc = sidecars(dirs, node("v100-dgx1"))
    open(os.path.join(sc.logdir, "keep-stdout"), "w").close()
    start = time.monotonic()
    sc.start()
    wait_until(sc.ready, 5, "the readiness marker")
    print(f"ready after {time.monotonic() - start:.2f} s")
    sc.wait_control_log(r"Command get_default_active_thread_percentage", count=2, timeout=10)
    assert sc.control_log().count("Startup") == 1
    assert exit_time(sc.proc, 10) < 2.0


def test_mps_shm_symlink_refused_before_unmount_or_mount(node, dirs, sidecars):
    """<mps-root>/shm is a link to a directory with a tmpfs of its own: the
    supervisor refuses it (exit 1) before unmounting or mounting anything,
    so that tmpfs and its file stay.  In a mount namespace of its own."""
    target = os.path.join(dirs.run, "target")
    os.makedirs(target)
    script = ('mount -t tmpfs canary "$T" && touch "$T/canary" || exit 9; "$@"; rc=$?; '
              '[ -e "$T/canary" ] && echo canary-kept; exit $rc')
    sc = sidecars(dirs, node("v100-dgx1"), prefix=["unshare", "--mount", "--propagation", "private"],
                  shm=None, script=script)
    sc.env["T"] = target
    os.symlink(target, os.path.join(sc.root, "shm"))
    sc.start()
    assert sc.proc.wait(timeout=15) == 1
    assert "canary-kept" in sc.log()
    assert re.search(r"refusing the MPS shm directory path=\S+/shm error=\"Too many levels of "
                     r"symbolic links\" \(a symlink below --mps-root\)", sc.log())
    assert os.listdir(target) == []  # and nothing mounted over the host's directory


def test_mps_shm_mounted_through_the_checked_directory(node, dirs, sidecars):
    """The tmpfs goes on <mps-root>/shm through /proc/self/fd, after the
    stale mount there is detached.  In a mount namespace of its own."""
    script = ('mkdir -p "$S" && mount -t tmpfs stale "$S" && touch "$S/stale" || exit 9; '
              'exec "$@"')
    sc = sidecars(dirs, node("v100-dgx1"), prefix=["unshare", "--mount", "--propagation", "private"],
                  shm=None, script=script)
    sc.env["S"] = os.path.join(sc.root, "shm")
    sc.start()
    wait_until(sc.ready, 10, "the readiness marker")
    shm = os.path.join(sc.root, "shm")
    mounts = [line.split() for line in read(f"/proc/{sc.proc.pid}/mountinfo").splitlines()]
    at_shm = [m for m in mounts if m[4] == shm]
    assert [(m[-3], m[-2]) for m in at_shm] == [("tmpfs", "shm")], at_shm
    assert "size=65536k" in at_shm[0][-1] and "nosuid" in at_shm[0][5] and "noexec" in at_shm[0][5]
    assert not os.path.exists(f"/proc/{sc.proc.pid}/root{shm}/stale")
    assert exit_time(sc.proc, 10) < 2.0 and sc.proc.returncode == 0
