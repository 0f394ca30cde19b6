"""CDI specs from `devlet cdi generate`, consumed by a real runtime.

podman (with runc) reads the generated spec from /etc/cdi or /var/run/cdi
(the two directories podman 4.3 reads) and runs a busybox-static container
with `--device <kind>=<name>`; the container sees the device node with the
right major:minor and the bind-mounted files.  Kinds carry a random suffix so
parallel runs do not collide, and every spec file is removed afterwards.
"""

import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import uuid

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DEVLET_BUILD", ROOT / "build"))
DEVLET = BUILD / "devlet"
PODMAN_RUN = [
    "podman", "--runtime", "runc", "--cgroup-manager=cgroupfs",
    "run", "--rm", "--network=none",
    "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000",
]
BUSYBOX = "/bin/busybox"


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="devlet-cdi-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rootfs(tmp):
    """A busybox-static root filesystem for `podman run --rootfs`."""
    root = tmp / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in ("sh", "stat", "cat", "ls", "od", "head"):
        (root / "bin" / applet).symlink_to("busybox")
    return root


@pytest.fixture
def spec_files():
    """Spec files the test writes into the runtime's directories, removed
    afterwards whatever happens."""
    made = []
    yield made
    for p in made:
        pathlib.Path(p).unlink(missing_ok=True)


def unique_name():
    return "cditest" + uuid.uuid4().hex[:10]


def devlet(*args):
    return subprocess.run([str(DEVLET), *map(str, args)], capture_output=True, text=True, timeout=60)


def podman_run(rootfs, device, script):
    res = subprocess.run(PODMAN_RUN + ["--device", device, "--rootfs", str(rootfs),
                                       "/bin/sh", "-c", script],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"podman failed ({res.returncode}): {res.stderr}"
    return res.stdout


def write_config(tmp, name, groups):
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump({"version": "v1", "hostDevices": {
        "devices": [{"name": name, "groups": groups}]}}))
    return cfg


def test_hostdev_spec_in_podman(tmp, rootfs, spec_files):
    name = unique_name()
    node = tmp / "zero0"
    os.mknod(node, 0o666 | 0o020000, os.makedev(1, 5))  # like /dev/zero
    data = tmp / "data.txt"
    data.write_text("hello from the host\n")
    cfg = write_config(tmp, name, [{"count": 2, "paths": [
        {"path": str(node), "mountPath": "/dev/thing0"},
        {"path": str(data), "mountPath": "/etc/thing.txt", "type": "Mount", "readOnly": True},
    ]}])

    out = pathlib.Path("/etc/cdi") / f"devlet.io-{name}.yaml"
    spec_files.append(out)
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev", "--output", out)
    assert res.returncode == 0, res.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o644"

    spec = yaml.safe_load(out.read_text())
    assert spec["kind"] == f"devlet.io/{name}"
    assert spec["cdiVersion"] == "0.5.0"  # host paths differ from container paths
    assert [d["name"] for d in spec["devices"]] == [f"{name}-0", f"{name}-1"]
    node_spec = spec["devices"][1]["containerEdits"]["deviceNodes"][0]
    assert node_spec == {"path": "/dev/thing0", "hostPath": str(node), "type": "c",
                         "major": 1, "minor": 5, "permissions": "rw"}

    got = podman_run(rootfs, f"devlet.io/{name}={name}-1",
                     "stat -c '%t:%T %F' /dev/thing0; head -c 4 /dev/thing0 | od -An -tx1; "
                     "cat /etc/thing.txt; (echo x > /etc/thing.txt) 2>/dev/null || echo read-only")
    lines = got.splitlines()
    assert lines[0] == "1:5 character special file"
    assert lines[1].split() == ["00", "00", "00", "00"]
    assert lines[2] == "hello from the host"
    assert lines[3] == "read-only"


def test_digit_names_and_json_in_var_run(tmp, rootfs, spec_files):
    """Glob matches named 0 and 1 become CDI devices "0" and "1" (cdiVersion
    0.5.0, names quoted in YAML); the JSON form in /var/run/cdi works too."""
    name = unique_name()
    gpus = tmp / "gpus"
    gpus.mkdir()
    for i in (0, 1):
        os.mknod(gpus / str(i), 0o666 | 0o020000, os.makedev(1, 3 + i * 2))  # null, zero
    cfg = write_config(tmp, name, [{"paths": [{"path": str(gpus / "*")}]}])

    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev")
    assert res.returncode == 0, res.stderr
    assert '- name: "0"' in res.stdout
    spec = yaml.safe_load(res.stdout)
    assert [d["name"] for d in spec["devices"]] == ["0", "1"]

    outdir = pathlib.Path("/var/run/cdi")
    spec_files.append(outdir / f"devlet.io-{name}.json")
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev",
                 "--format", "json", "--output-dir", outdir)
    assert res.returncode == 0, res.stderr
    spec = json.loads((outdir / f"devlet.io-{name}.json").read_text())
    assert spec["cdiVersion"] == "0.5.0"
    assert spec["devices"][1]["containerEdits"]["deviceNodes"][0]["path"] == str(gpus / "1")

    got = podman_run(rootfs, f"devlet.io/{name}=1", f"stat -c '%t:%T' {gpus}/1; ls {gpus}")
    assert got.split() == ["1:5", "1"]


def test_generate_errors(tmp):
    name = unique_name()
    cfg = write_config(tmp, name, [{"paths": [{"path": "/dev/null"}]}])
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev",
                 "--format", "toml")
    assert res.returncode == 2 and "unknown format" in res.stderr
    res = devlet("cdi", "generate", "--config-file", cfg, "--vendor", "bad/vendor")
    assert res.returncode == 2 and "not a valid CDI kind" in res.stderr
    res = devlet("cdi", "frobnicate")
    assert res.returncode == 2
    res = devlet("cdi", "generate", "--config-file", tmp / "missing.yaml")
    assert res.returncode != 0 and "missing.yaml" in res.stderr
    res = devlet("cdi", "generate", "--help")
    assert res.returncode == 0 and "--output" in res.stdout

    # a resource whose name CDI refuses as a class: a warning, no spec
    cfg = write_config(tmp, "3d-" + name, [{"paths": [{"path": "/dev/null"}]}])
    res = devlet("cdi", "generate", "--config-file", cfg, "--backends", "hostdev")
    assert res.returncode == 1
    assert "not a valid CDI kind" in res.stderr and res.stdout == ""
