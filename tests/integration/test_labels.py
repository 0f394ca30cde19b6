"""`devlet labels`: GFD-compatible labels, printed or kept current in a file.

Host devices give "<resource>.count" labels; the looping mode rewrites the
file on hot-plug and every --sleep-interval, replaces it atomically, and
leaves it in place on exit unless --remove-on-exit.  Every label printed is
checked against Kubernetes' key and value rules.
"""

import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile

import pytest
import yaml

from devlet_harness import DEVLET_BIN as DEVLET, MOCK_NVML_LIB as MOCK_NVML, ROOT
from devlet_harness import devlet_cli as devlet, wait_until


NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
KEY = re.compile(r"^([a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*/)?" + NAME + "$")
VALUE = re.compile(r"^(" + NAME + ")?$")


def parse_labels(text):
    """key=value lines -> dict, checking every key and value."""
    labels = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        assert KEY.match(key) and len(key.split("/")[0]) <= 253, f"invalid key {key!r}"
        assert VALUE.match(value), f"invalid value {value!r} for {key}"
        assert key not in labels, f"duplicate key {key}"
        labels[key] = value
    return labels


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="devlet-labels-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def hostdev_config(tmp, extra=None):
    devs = tmp / "devs"
    devs.mkdir(exist_ok=True)
    cfg = {"version": "v1", "hostDevices": {"devices": [
        {"name": "fuse", "groups": [{"count": 3, "paths": [{"path": "/dev/null"}]}]},
        {"name": "serial", "groups": [{"paths": [{"path": str(devs / "tty*")}]}]},
    ]}}
    cfg.update(extra or {})
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path



def test_prints_host_device_counts(tmp):
    cfg = hostdev_config(tmp)
    (tmp / "devs" / "tty0").touch()
    res = devlet("labels", "--config-file", cfg, "--backends", "hostdev")
    assert res.returncode == 0, res.stderr
    labels = parse_labels(res.stdout)
    # GFD's timestamp is the NVIDIA backend's: a node without one has none
    assert labels == {"devlet.io/fuse.count": "3", "devlet.io/serial.count": "1"}
    assert res.stdout == "".join(sorted(res.stdout.splitlines(keepends=True)))


def test_oneshot_to_file_and_env_forms(tmp):
    cfg = hostdev_config(tmp)
    out = tmp / "features.d" / "gfd"
    env = {**os.environ, "GFD_OUTPUT_FILE": str(out), "GFD_NO_TIMESTAMP": "true"}
    res = devlet("labels", "--config-file", cfg, "--backends", "hostdev", env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    assert out.read_text() == "devlet.io/fuse.count=3\ndevlet.io/serial.count=0\n"
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    # unprefixed forms, and "-" for standard output
    env = {**os.environ, "OUTPUT_FILE": "-", "NO_TIMESTAMP": "1"}
    res = devlet("labels", "--config-file", cfg, "--backends", "hostdev", env=env)
    assert res.stdout == "devlet.io/fuse.count=3\ndevlet.io/serial.count=0\n"


def test_config_file_keys(tmp):
    out = tmp / "gfd"
    cfg = hostdev_config(tmp, {"flags": {"gfd": {"noTimestamp": True, "outputFile": str(out)}}})
    res = devlet("labels", "--config-file", cfg, "--backends", "hostdev")
    assert res.returncode == 0, res.stderr
    assert parse_labels(out.read_text()) == {"devlet.io/fuse.count": "3",
                                             "devlet.io/serial.count": "0"}


def run_loop(tmp, cfg, out, *extra):
    return subprocess.Popen([str(DEVLET), "labels", "--config-file", str(cfg), "--backends",
                             "hostdev", "--oneshot=false", "-o", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return err


def read_labels(path):
    try:
        return parse_labels(path.read_text())
    except FileNotFoundError:
        return None


def test_loop_rewrites_on_hotplug_and_interval(tmp):
    cfg = hostdev_config(tmp)
    out = tmp / "nfd" / "features.d" / "gfd"
    proc = run_loop(tmp, cfg, out, "--sleep-interval", "200ms", "--rescan-interval", "100ms")
    try:
        first = wait_until(lambda: read_labels(out), what="the labels file")
        assert first["devlet.io/serial.count"] == "0"
        (tmp / "devs" / "tty0").touch()
        (tmp / "devs" / "tty1").touch()
        wait_until(lambda: (read_labels(out) or {}).get("devlet.io/serial.count") == "2",
                   what="the hot-plugged devices in the labels")
        # the interval rewrites the file (renamed over: a new inode each time)
        ino = out.stat().st_ino
        wait_until(lambda: out.stat().st_ino != ino, timeout=5,
                   what="a rewrite at the interval")
        # never a temporary file left beside it
        assert sorted(p.name for p in out.parent.iterdir()) == ["gfd"]
    finally:
        err = stop(proc)
    # the labels stay when devlet stops
    assert read_labels(out)["devlet.io/serial.count"] == "2", err


def test_remove_on_exit(tmp):
    cfg = hostdev_config(tmp)
    out = tmp / "gfd"
    proc = run_loop(tmp, cfg, out, "--remove-on-exit", "--sleep-interval", "infinite")
    try:
        wait_until(lambda: read_labels(out), what="the labels file")
    finally:
        stop(proc)
    assert not out.exists()


def test_unwritable_output_is_an_error(tmp):
    cfg = hostdev_config(tmp)
    (tmp / "file").write_text("x")
    res = devlet("labels", "--config-file", cfg, "--backends", "hostdev", "-o", tmp / "file" / "gfd")
    assert res.returncode == 1
    assert "Not a directory" in res.stderr


def test_devlet_run_keeps_labels_and_cdi_specs_current(tmp):
    """devlet run writes the labels and, with a CDI device-list strategy, the
    specs at start-up and again when a device is hot-plugged."""
    cfg = hostdev_config(tmp)
    out, cdi = tmp / "gfd", tmp / "cdi"
    plugins = pathlib.Path(tempfile.mkdtemp(prefix="devlet-lp-", dir="/tmp"))
    proc = subprocess.Popen([str(DEVLET), "run", "--config-file", str(cfg), "--backends", "hostdev",
                             "--plugin-directory", str(plugins), "-o", str(out),
                             "--cdi-spec-dir", str(cdi), "--device-list-strategy", "envvar,cdi-cri",
                             "--rescan-interval", "100ms", "--sleep-interval", "infinite"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spec_file = cdi / "devlet.io-serial.yaml"
    try:
        wait_until(lambda: read_labels(out), what="the labels file")
        wait_until((cdi / "devlet.io-fuse.yaml").exists, what="the fuse spec")
        assert read_labels(out)["devlet.io/serial.count"] == "0"
        assert not spec_file.exists()  # no device yet: no spec
        (tmp / "devs" / "tty0").touch()
        wait_until(lambda: read_labels(out)["devlet.io/serial.count"] == "1",
                   what="the new device in the labels")
        wait_until(lambda: spec_file.exists() and [
            d["name"] for d in yaml.safe_load(spec_file.read_text())["devices"]] == ["tty0"],
            what="the new device in the CDI spec")
    finally:
        err = stop(proc)
        shutil.rmtree(plugins, ignore_errors=True)
    assert "spec written kind=devlet.io/serial" in err
    assert read_labels(out)["devlet.io/serial.count"] == "1"


def test_devlet_run_without_cdi_strategy_writes_no_spec(tmp):
    cfg = hostdev_config(tmp)
    out, cdi = tmp / "gfd", tmp / "cdi"
    plugins = pathlib.Path(tempfile.mkdtemp(prefix="devlet-lp-", dir="/tmp"))
    proc = subprocess.Popen([str(DEVLET), "run", "--config-file", str(cfg), "--backends", "hostdev",
                             "--plugin-directory", str(plugins), "-o", str(out),
                             "--cdi-spec-dir", str(cdi)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: read_labels(out), what="the labels file")
    finally:
        stop(proc)
        shutil.rmtree(plugins, ignore_errors=True)
    assert not cdi.exists()


# ---- GFD labels from the mock NVML, against golden files ----

GOLDEN = ROOT / "tests" / "golden" / "labels"
PROFILES = ROOT / "tests" / "mock-nvml" / "profiles"
TIME_SLICING = {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
TIME_SLICING_RENAMED = {"sharing": {"timeSlicing": {
    "renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
MPS = {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
MIG_TIME_SLICING = {"sharing": {"timeSlicing": {"resources": [
    {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}}

# name: (profile, MIG strategy, extra config); every GPU's PCI class is
# 0x030200 (compute) in a fake sysfs, except for v100 (no sysfs entry:
# gpu.mode=unknown)
GOLDEN_CASES = {
    "h100": ("h100-8x-nvswitch.yaml", "none", {}),
    "v100": ("v100-dgx1.yaml", "none", {}),
    "h100-time-slicing": ("h100-8x-nvswitch.yaml", "none", TIME_SLICING),
    "h100-time-slicing-renamed": ("h100-8x-nvswitch.yaml", "none", TIME_SLICING_RENAMED),
    "a100-mig-single": ("a100-mig-single.yaml", "single", {}),
    "a100-mig-mixed": ("a100-mig-mixed.yaml", "mixed", MIG_TIME_SLICING),
    "a100-mig-mixed-none": ("a100-mig-mixed.yaml", "none", {}),
    "mig-one-plain-one": ("mig-one-plain-one.yaml", "mixed", {}),
    "mig-one-plain-one-time-slicing": ("mig-one-plain-one.yaml", "mixed", TIME_SLICING),
    # two MIG profiles under strategy single: GFD's MIG-INVALID labels
    "a100-mig-single-invalid": ("a100-mig-mixed.yaml", "single", {}),
    # MPS asked for, MIG single: MIG devices are never MPS-shared
    "a100-mig-single-mps": ("a100-mig-single.yaml", "single", MPS),
    # multi-node NVLink: every GPU names the same clique
    "gb200-clique": ("gb200-nvl-tray.yaml", "none", {}),
}


def nvidia_labels(tmp, profile, strategy, extra, timestamp=False):
    machine = tmp / "product_name"
    machine.write_text("DGX H100 (mock)\n")
    sysfs = tmp / "sys"
    if profile != "v100-dgx1.yaml":
        for gpu in yaml.safe_load((PROFILES / profile).read_text())["devices"]:
            bus = gpu["pciBusId"]
            dev = sysfs / "bus" / "pci" / "devices" / ("0000" + bus[8:].lower())
            dev.mkdir(parents=True)
            (dev / "class").write_text("0x030200\n")
    cfg = tmp / "nvidia.yaml"
    cfg.write_text(yaml.safe_dump({"version": "v1", "flags": {"migStrategy": strategy}, **extra}))
    env = {**os.environ, "DEVLET_NVML_LIBRARY": str(MOCK_NVML),
           "MOCK_NVML_CONFIG": str(PROFILES / profile)}
    return devlet("labels", "--config-file", cfg, "--backends", "nvidia",
                  *([] if timestamp else ["--no-timestamp"]),
                  "--machine-type-file", machine, "--sysfs-root", sysfs, env=env)


def test_gfd_timestamp_is_the_nvidia_backends(tmp):
    """GFD's timestamp comes with GFD's labels (the NVIDIA backend's), and
    only there: a node of host devices alone has none (above)."""
    res = nvidia_labels(tmp, "v100-dgx1.yaml", "none", {}, timestamp=True)
    assert res.returncode == 0, res.stderr
    assert parse_labels(res.stdout)["nvidia.com/gfd.timestamp"].isdigit()


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_gfd_labels_golden(tmp, case):
    res = nvidia_labels(tmp, *GOLDEN_CASES[case])
    assert res.returncode == 0, res.stderr
    parse_labels(res.stdout)  # every key and value valid
    golden = GOLDEN / f"{case}.txt"
    if os.environ.get("DEVLET_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(res.stdout)
    assert res.stdout == golden.read_text(), f"labels differ from {golden} " \
        "(DEVLET_UPDATE_GOLDEN=1 rewrites it after a deliberate change)"


def test_long_product_name_stays_a_valid_label(tmp):
    """GFD writes a product label Kubernetes refuses when the name is long
    (over 63 characters with -MIG-<profile>-SHARED); devlet cuts it and adds
    a hash, and says so."""
    name = "NVIDIA Graphics Device With A Very Long Marketing Name 96GB HBM3e (rev 2)"
    nvml = tmp / "nvml.yaml"
    nvml.write_text(yaml.safe_dump({"devices": [{
        "uuid": "GPU-0badc0de-0000-4000-8000-000000000001", "name": name, "memoryMiB": 98304,
        "pciBusId": "00000000:01:00.0", "computeCapability": "9.0"}]}))
    machine = tmp / "product_name"
    machine.write_text("x")
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump({"version": "v1", **TIME_SLICING}))
    env = {**os.environ, "DEVLET_NVML_LIBRARY": str(MOCK_NVML), "MOCK_NVML_CONFIG": str(nvml)}
    res = devlet("labels", "--config-file", cfg, "--backends", "nvidia", "--no-timestamp",
                 "--machine-type-file", machine, "--sysfs-root", tmp, env=env)
    assert res.returncode == 0, res.stderr
    labels = parse_labels(res.stdout)
    product = labels["nvidia.com/gpu.product"]
    assert len(product) == 63
    assert product.startswith("NVIDIA-Graphics-Device-With-A-Very-Long-Marketing-Name-")
    assert re.fullmatch(r".*-[0-9a-f]{8}", product)
    assert "not a valid Kubernetes label value" in res.stderr
    # the same name always gives the same label
    again = devlet("labels", "--config-file", cfg, "--backends", "nvidia", "--no-timestamp",
                   "--machine-type-file", machine, "--sysfs-root", tmp, env=env)
    assert parse_labels(again.stdout)["nvidia.com/gpu.product"] == product


def mock_nvml_labels(tmp, devices, *extra, config=None):
    """`devlet labels` on a mock NVML made of devices (NVML's YAML)."""
    nvml = tmp / "nvml.yaml"
    nvml.write_text(yaml.safe_dump({"driverVersion": "570.124.06", "cudaDriverVersion": 12080,
                                    "devices": devices}))
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump({"version": "v1", **(config or {})}))
    env = {**os.environ, "DEVLET_NVML_LIBRARY": str(MOCK_NVML), "MOCK_NVML_CONFIG": str(nvml)}
    return devlet("labels", "--config-file", cfg, "--backends", "nvidia", "--machine-type-file",
                  "", "--sysfs-root", tmp, *extra, env=env)


def gpu(i, fabric=None):
    d = {"uuid": f"GPU-0badc0de-0000-4000-8000-00000000000{i}", "name": "NVIDIA GB200",
         "memoryMiB": 189471, "pciBusId": f"00000000:0{i + 1}:00.0", "computeCapability": "10.0"}
    if fabric:
        d["fabric"] = fabric
    return d


CLUSTER = "4a6f1c2e-8d3b-4f7a-9c15-2e8b7d6a5f01"


def test_clique_label_rules(tmp):
    """GFD's: only GPUs whose fabric registration completed (state and
    status) on a cluster (a non-zero UUID) count; they must agree."""
    done = {"clusterUuid": CLUSTER, "cliqueId": 7}
    cases = [
        ([gpu(0, done), gpu(1, done)], f"{CLUSTER}.7"),
        # one GPU still registering: the others decide
        ([gpu(0, done), gpu(1, {**done, "state": "in_progress"})], f"{CLUSTER}.7"),
        # failed registration, a zero cluster UUID, no fabric: none
        ([gpu(0, {**done, "status": 999})], None),
        ([gpu(0, {"clusterUuid": "00000000-0000-0000-0000-000000000000", "cliqueId": 7})], None),
        ([gpu(0), gpu(1)], None),
    ]
    for devices, want in cases:
        res = mock_nvml_labels(tmp, devices, "--no-timestamp")
        assert res.returncode == 0, res.stderr
        assert parse_labels(res.stdout).get("nvidia.com/gpu.clique") == want, devices
    # two cliques: no label, and a warning
    res = mock_nvml_labels(tmp, [gpu(0, done), gpu(1, {**done, "cliqueId": 8})], "--no-timestamp")
    assert res.returncode == 0, res.stderr
    assert "nvidia.com/gpu.clique" not in parse_labels(res.stdout)
    assert "different NVLink cliques" in res.stderr


def test_no_gfd_timestamp_without_an_nvidia_gpu(tmp):
    """NVML loads but finds no GPU (an AMD-only node with the driver's
    libraries): none of GFD's labels, the timestamp included."""
    res = mock_nvml_labels(tmp, [])
    assert res.returncode == 0, res.stderr
    assert "nvidia.com/gfd.timestamp" not in res.stdout
    res = mock_nvml_labels(tmp, [gpu(0)])
    assert parse_labels(res.stdout)["nvidia.com/gfd.timestamp"].isdigit()


def test_mps_never_shares_mig_devices(tmp):
    """NVIDIA's MPS control daemon skips MIG devices: under MIG single with
    MPS, the MIG devices are served and labelled unshared, with a warning."""
    res = nvidia_labels(tmp, "a100-mig-single.yaml", "single", MPS)
    assert res.returncode == 0, res.stderr
    labels = parse_labels(res.stdout)
    assert labels["nvidia.com/gpu.replicas"] == "1"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "none"
    assert not labels["nvidia.com/gpu.product"].endswith("-SHARED")
    assert labels["nvidia.com/mps.capable"] == "false"
    assert "MPS does not share MIG devices" in res.stderr
