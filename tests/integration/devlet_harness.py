"""Running build/devlet for tests, the demo and the benchmark.

The build directory (BUILD, DEVLET_BIN) is decided here once.  Devlet wraps
one `devlet run` process: its config file (written from a dict
as YAML, or given as text), its log file (stdout and stderr together), the
signals the contract knows (SIGHUP reload, SIGTERM stop) and the sockets it
owns in the plugin directory.  It never sleeps blindly: waits poll with a
deadline (wait_until).  Helpers here also build hostDevices configs and fake
device nodes, run one-shot subcommands (run_devlet, devlet_cli), and speak raw
HTTP/2 to a socket for the hostile-peer tests.
"""

import glob
import os
import pathlib
import re
import shlex
import signal
import socket
import struct
import stat
import subprocess
import time
from typing import Dict, List, Optional, Union

from kubelet_sim import BUILD_DIR, endpoint_name

# The one build directory every test and benchmark uses: $DEVLET_BUILD, or
# the repository's build/.
ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(BUILD_DIR)
DEVLET_BIN = os.path.join(BUILD_DIR, "devlet")
MOCK_NVML_LIB = os.path.join(BUILD_DIR, "mock-nvml", "libnvidia-ml.so.1")
STOP_TIMEOUT = 10.0
# What runs devlet's binaries when they are not the host's own: `make
# check-arm64` sets DEVLET_EXEC_PREFIX="qemu-aarch64-static -L /" so an arm64
# build runs under qemu-user without binfmt (signals reach the guest; the
# pid and /proc/PID are the emulator's).  Empty: the binary runs itself.
EXEC_PREFIX: List[str] = shlex.split(os.environ.get("DEVLET_EXEC_PREFIX", ""))
EMULATED = bool(EXEC_PREFIX)
SANITIZER_ERRORS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def devlet_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment devlet runs in: ours without devlet's own variables
    (so a developer's shell cannot change a test), plus extra.  With
    DEVLET_ASAN=1 the sanitizers report with a distinctive exit code."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONFIG_FILE", "PLUGIN_DIRECTORY", "KUBELET_SOCKET")
           and not k.startswith("GFD_")
           and k not in ("OUTPUT_FILE", "DEVLET_CDI_SPEC_DIR", "DEVICE_LIST_STRATEGY")}
    if os.environ.get("DEVLET_ASAN") == "1":
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    env.update(extra or {})
    return env


def wait_until(check, timeout: float = 10.0, what: str = "condition", interval: float = 0.01):
    """Polls check() until it returns a true value (returned) or the
    deadline passes (TimeoutError naming what)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def make_node(path: str, char_device: bool = True, major: int = 1, minor: int = 3):
    """A fake device node: a character device (1:3, like /dev/null, unless
    told otherwise) when we are root, else an ordinary file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if char_device and os.geteuid() == 0:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    else:
        with open(path, "w"):
            pass


def hostdev_config(devices: List[dict], domain: Optional[str] = None) -> dict:
    """A `version: v1` config with a hostDevices section."""
    section = {"devices": devices}
    if domain is not None:
        section = {"domain": domain, **section}
    return {"version": "v1", "hostDevices": section}


def write_config(path: str, config: Union[dict, str]):
    import yaml
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # devlet never reads a half-written file


class Devlet:
    def __init__(self, plugin_dir: str, workdir: str, config: Union[dict, str, None] = None,
                 args: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None,
                 use_env: bool = False, kubelet_socket: Optional[str] = None, binary: str = DEVLET_BIN,
                 new_session: bool = False):
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.workdir = os.path.abspath(workdir)
        self.config_path = os.path.join(self.workdir, "config.yaml")
        self.log_path = os.path.join(self.workdir, "devlet.log")
        self.binary = binary
        self.args = list(args or [])
        self.extra_env = dict(env or {})
        self.use_env = use_env
        self.kubelet_socket = kubelet_socket
        self.new_session = new_session  # out of our terminal's process group (no Ctrl-C)
        self.proc: Optional[subprocess.Popen] = None
        self.returncode: Optional[int] = None
        self.start_time: Optional[float] = None
        if config is not None:
            self.write_config(config)

    # ------------------------------------------------ process

    def command(self) -> List[str]:
        cmd = [self.binary, "run"]
        if not self.use_env:
            if os.path.exists(self.config_path):
                cmd += ["--config-file", self.config_path]
            cmd += ["--plugin-directory", self.plugin_dir]
            if self.kubelet_socket:
                cmd += ["--kubelet-socket", self.kubelet_socket]
        return cmd + self.args

    def environment(self) -> Dict[str, str]:
        extra = dict(self.extra_env)
        # devlet run writes node labels and CDI specs: into the test's own
        # directory, never the host's /etc/kubernetes or /var/run/cdi
        extra.setdefault("GFD_OUTPUT_FILE", os.path.join(self.workdir, "gfd"))
        extra.setdefault("DEVLET_CDI_SPEC_DIR", os.path.join(self.workdir, "cdi"))
        if self.use_env:
            extra["PLUGIN_DIRECTORY"] = self.plugin_dir
            if os.path.exists(self.config_path):
                extra["CONFIG_FILE"] = self.config_path
            if self.kubelet_socket:
                extra["KUBELET_SOCKET"] = self.kubelet_socket
        return devlet_env(extra)

    def start(self) -> "Devlet":
        assert self.proc is None, "already started"
        if not os.path.exists(self.binary):
            raise FileNotFoundError(f"{self.binary} is missing: run `make`")
        os.makedirs(self.workdir, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.start_time = time.monotonic()
            self.proc = subprocess.Popen(EXEC_PREFIX + self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.environment(),
                                         close_fds=True, start_new_session=self.new_session)
        finally:
            log.close()
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        assert self.alive(), f"devlet is not running (exit code {self.proc.poll() if self.proc else None})"
        self.proc.send_signal(sig)

    def sighup(self):
        self.signal(signal.SIGHUP)

    def terminate(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then waits; kills it (and raises) past the timeout."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise TimeoutError(f"devlet did not exit within {timeout}s of SIGTERM") from None
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    # ------------------------------------------------ files

    def write_config(self, config: Union[dict, str]):
        os.makedirs(self.workdir, exist_ok=True)
        write_config(self.config_path, config)

    def socket_path(self, resource: str) -> str:
        return os.path.join(self.plugin_dir, endpoint_name(resource))

    def own_sockets(self) -> List[str]:
        return sorted(glob.glob(os.path.join(glob.escape(self.plugin_dir), "devlet-*.sock")))

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        try:
            return os.path.getsize(self.log_path)
        except FileNotFoundError:
            return 0

    def wait_log(self, pattern: str, since: int = 0, timeout: float = 10.0) -> re.Match:
        """Waits for a regex to appear in the log after byte offset since."""
        rx = re.compile(pattern)

        def check():
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return rx.search(f.read().decode("utf-8", "replace"))
        return wait_until(check, timeout, f"/{pattern}/ in devlet's log", interval=0.02)

    def registered_count(self, resource: str) -> int:
        """How many `registered resource=R ` lines devlet logged: the one log
        line tests may use, only to know that devlet has seen a Register
        answer (the behaviour itself is observed over gRPC)."""
        return len(re.findall(r"registered resource=" + re.escape(resource) + r"(\s|$)", self.log_text()))

    def wait_registered(self, resource: str, count: int, timeout: float = 10.0):
        wait_until(lambda: self.registered_count(resource) >= count, timeout,
                   f"devlet to log registration #{count} of {resource}", interval=0.005)

    def sanitizer_report(self) -> Optional[str]:
        text = self.log_text()
        for marker in SANITIZER_ERRORS:
            i = text.find(marker)
            if i >= 0:
                return text[max(0, i - 200):i + 4000]
        return None

    def vm_hwm_kib(self) -> int:
        """Peak resident set size (VmHWM) in KiB."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmHWM in /proc/PID/status")


def devlet_cli(*args, env: Optional[Dict[str, str]] = None,
               timeout: float = 60.0) -> subprocess.CompletedProcess:
    """`devlet ARGS...` (each argument made a string), captured."""
    return run_devlet([str(a) for a in args], timeout=timeout, env=env)


def run_devlet(args: List[str], timeout: float = 30.0, env: Optional[Dict[str, str]] = None,
               binary: str = DEVLET_BIN) -> subprocess.CompletedProcess:
    """Runs a one-shot subcommand (list, probe, version...) and captures it."""
    return subprocess.run(EXEC_PREFIX + [binary] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, env=devlet_env(env))

# ------------------------------------------------ raw HTTP/2 (hostile peers)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def raw_connect(path, timeout=10):
    """A raw connection; a full listen backlog (EAGAIN: Unix sockets do not
    wait in non-blocking connect) is retried until the deadline."""
    def attempt():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        s.settimeout(timeout)
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            s.close()
            return None
    return wait_until(attempt, timeout, f"a connection to {path}", interval=0.001)


def send_quietly(s, data):
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may hang up before it has read everything


def closed_by_peer(s, timeout=10):
    s.settimeout(timeout)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def read_until_eof(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def frame_types(data):
    types, off = [], 0
    while off + 9 <= len(data):
        length = int.from_bytes(data[off:off + 3], "big")
        types.append(data[off + 3])
        off += 9 + length
    return types


def hpack(headers):
    """Literal header fields without indexing or Huffman coding (short strings only)."""
    out = b""
    for name, value in headers:
        n, v = name.encode(), value.encode()
        assert len(n) < 127 and len(v) < 127
        out += b"\0" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return out


def read_frames_until(s, pred):
    """Reads (type, flags, stream, payload) frames until pred(frames) holds."""
    data, frames = b"", []
    while not pred(frames):
        chunk = s.recv(65536)
        assert chunk, f"connection closed early after {frames}"
        data += chunk
        while len(data) >= 9 and len(data) >= 9 + int.from_bytes(data[:3], "big"):
            length = int.from_bytes(data[:3], "big")
            stream = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
            frames.append((data[3], data[4], stream, data[9:9 + length]))
            data = data[9 + length:]
    return frames
