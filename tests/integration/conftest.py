"""Fixtures for the integration tests: short temporary directories (Unix
socket paths must stay under 108 bytes), the simulated kubelet, a factory
that starts `devlet run` and, on teardown, stops it with SIGTERM and checks
that it exited 0 and removed its sockets, and the mock NVML's node file.
When a test fails, devlet's log and the simulator's event log are added to
the report."""

import os
import pathlib
import shutil
import subprocess
import tempfile
from types import SimpleNamespace

import pytest

from devlet_harness import DEVLET_BIN, Devlet
from kubelet_sim import BUILD_DIR, KubeletSim
from mock_gpus import MockNode

ROOT_DIR = pathlib.Path(__file__).resolve().parents[2]


def _track(request, attr, obj):
    items = getattr(request.node, attr, None)
    if items is None:
        items = []
        setattr(request.node, attr, items)
    items.append(obj)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    for i, d in enumerate(getattr(item, "_devlets", [])):
        text = d.log_text()
        if len(text) > 30000:
            text = "[...]\n" + text[-30000:]
        rep.sections.append((f"devlet #{i} log ({d.log_path})", text or "(empty)"))
    for i, sim in enumerate(getattr(item, "_sims", [])):
        rep.sections.append((f"kubelet simulator #{i} events", "\n".join(sim.events[-300:])))


@pytest.fixture(scope="session")
def build_dir():
    if not os.path.exists(DEVLET_BIN):
        pytest.fail(f"{DEVLET_BIN} is missing: run `make` (DEVLET_BUILD={BUILD_DIR})")
    return BUILD_DIR


@pytest.fixture(scope="session")
def node_modules():
    """tests/deploy's pinned npm packages, installed once into $BUILD/node
    (validate.js checks rendered manifests with them: test_deploy, test_helm)."""
    dest = pathlib.Path(BUILD_DIR) / "node"
    lock = ROOT_DIR / "tests" / "deploy" / "package-lock.json"
    installed = dest / "package-lock.json"
    if not ((dest / "node_modules").is_dir() and installed.exists()
            and installed.read_bytes() == lock.read_bytes()):
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT_DIR / "tests" / "deploy" / "package.json", dest)
        shutil.copy(lock, dest)
        res = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=dest,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
    return dest / "node_modules"


@pytest.fixture
def dirs():
    """root/plugins (the kubelet's device-plugins dir), root/dev (fake device
    nodes), root/run (other files), root/work (config, logs)."""
    root = tempfile.mkdtemp(prefix="dlt-", dir="/tmp")
    d = SimpleNamespace(root=root, plugins=os.path.join(root, "plugins"), dev=os.path.join(root, "dev"),
                        run=os.path.join(root, "run"), work=os.path.join(root, "work"))
    for p in (d.plugins, d.dev, d.run, d.work):
        os.mkdir(p)
    yield d
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def node(dirs):
    """node(profile) or node(data=...): the mock NVML's YAML in dirs.run,
    written from a profile in tests/mock-nvml/profiles or from data."""
    return lambda profile=None, data=None: MockNode(os.path.join(dirs.run, "nvml.yaml"), profile, data)


@pytest.fixture
def plugin_dir(dirs):
    """The device-plugins directory as a Path (dirs keeps paths short: a Unix
    socket path must fit in 108 bytes, and pytest's tmp_path can be longer)."""
    return pathlib.Path(dirs.plugins)


@pytest.fixture
def kubelet_factory(request, dirs):
    """Makes simulators (not started); each is stopped on teardown."""
    sims = []

    def make(plugin_dir=None, kubelet_socket=None, old_authority=False, allow_reconnect=False):
        sim = KubeletSim(plugin_dir or dirs.plugins, kubelet_socket, old_authority=old_authority,
                         allow_reconnect=allow_reconnect)
        sims.append(sim)
        _track(request, "_sims", sim)
        return sim
    yield make
    for sim in sims:
        sim.stop()


@pytest.fixture
def kubelet(kubelet_factory):
    """A started simulated kubelet on <plugin_dir>/kubelet.sock."""
    sim = kubelet_factory()
    sim.start()
    return sim


@pytest.fixture
def devlet(request, build_dir, dirs):
    """devlet(config, **Devlet kwargs) starts `devlet run` on dirs.plugins.
    Teardown: SIGTERM, exit code 0 within 10 s, no devlet-*.sock left, no
    sanitizer report.  A devlet that died on its own fails the test."""
    started = []

    def start(config=None, start=True, workdir=None, **kw):
        n = len(started)
        d = Devlet(kw.pop("plugin_dir", dirs.plugins),
                   workdir or os.path.join(dirs.work, f"devlet{n}"), config, **kw)
        started.append(d)
        _track(request, "_devlets", d)
        if start:
            d.start()
        return d
    yield start

    # all stopped before any socket is checked: devlets may share a plugin dir
    problems = []
    stopped = []
    for d in started:
        if d.proc is None:
            continue
        if d.returncode is None and d.proc.poll() is not None:
            problems.append(f"devlet (pid {d.pid}) exited on its own with code {d.proc.returncode}")
            continue
        if d.returncode is None:
            try:
                rc = d.terminate()
            except TimeoutError as e:
                problems.append(str(e))
                continue
            if rc != 0:
                problems.append(f"devlet exited with code {rc} after SIGTERM (want 0)")
        stopped.append(d)
    for d in stopped:
        left = d.own_sockets()
        if left:
            problems.append(f"devlet left its sockets behind: {left}")
        report = d.sanitizer_report()
        if report:
            problems.append(f"sanitizer report:\n{report}")
    if problems:
        pytest.fail("\n".join(problems))


# ---- the fake API server (fake_apiserver.py), for the modules that talk to
# it through devlet's kapi client; test_kapi.py has its own.

@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    from fake_apiserver import make_certs
    return make_certs(tmp_path_factory.mktemp("apiserver-certs"))


@pytest.fixture
def api(certs):
    from fake_apiserver import ApiServer
    server = ApiServer(certs)
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(tmp_path, api, certs):
    """A kubeconfig for the fake server: its CA as data, an inline token."""
    from fake_apiserver import b64, write_kubeconfig
    return str(write_kubeconfig(tmp_path / "kubeconfig", api.url,
                                f"    certificate-authority-data: {b64(certs / 'ca.crt')}",
                                "    token: test-token"))
