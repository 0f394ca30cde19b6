"""The README documents what the binary does: its flags table is generated
from `devlet help flags` and must not drift."""
import os
import subprocess
import sys

from devlet_harness import BUILD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_readme_flags_table_is_current():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "readme-flags.py"),
                        os.path.join(BUILD, "devlet"), "--check"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_flag_in_help_is_in_readme():
    flags = subprocess.run([os.path.join(BUILD, "devlet"), "help", "flags"], check=True,
                           capture_output=True, text=True).stdout
    readme = open(os.path.join(ROOT, "README.md")).read()
    for line in flags.splitlines():
        line = line.strip()
        if line.startswith("--") or line.startswith("-v"):
            assert line in readme, line


# ---------------------------------------------------------------- MIGRATION.md's tables

MIGRATION = os.path.join(ROOT, "docs", "MIGRATION.md")

# Which command name a table's flags are given to, by the heading above it.
TABLES = {
    "### NVIDIA v0.20 flag/env/key → devlet": "nvidia-device-plugin",
    "## gpu-feature-discovery: labels": "gpu-feature-discovery",
    "## dcgm-exporter: metrics": "dcgm-exporter",
    "## From AMD's device plugin and node labeller": "k8s-device-plugin",
}

# Values for the flags devlet's table does not hold (the vendors' own).
VENDOR_VALUES = {"address": "127.0.0.1:9400", "a": "127.0.0.1:9400", "kubelet-url": "http://localhost:10250",
                 "driver_type": "container", "c": "5000"}


def migration_flags():
    """(command name, flag token, row) for each flag in the first column of
    MIGRATION.md's tables of flags."""
    current = None
    for line in open(MIGRATION).read().splitlines():
        if line.startswith("#"):
            current = TABLES.get(line.strip())
            continue
        if not current or not line.startswith("| ") or line.startswith("| ---"):
            continue
        first = line.split(" | ")[0]
        for tok in __import__("re").findall(r"`(-{1,2}[A-Za-z][\w-]*)", first):
            yield current, tok, line


def value_for(name, options):
    if name in VENDOR_VALUES:
        return VENDOR_VALUES[name]
    for o in options:
        if name in (o["flag"], o.get("alias"), o.get("short")):
            if o["type"] == "bool":
                return "true"
            if o["choices"]:
                return o["choices"][0] if o["choices"][0] != "auto" else o["default"] or "auto"
            if o["type"] == "duration":
                return "5s"
            return o["default"]
    return None


def test_every_flag_migration_lists_is_accepted(tmp_path):
    """Each flag in MIGRATION.md's tables, given to the command name the
    table is about with a valid value, loads (DEVLET_CHECK_CONFIG=1: checked
    and printed, nothing started)."""
    import json
    options = json.loads(subprocess.run([os.path.join(BUILD, "devlet"), "help", "options-json"],
                                        check=True, capture_output=True, text=True).stdout)["options"]
    names = set(TABLES.values())
    for n in names:
        os.symlink(os.path.join(BUILD, "devlet"), tmp_path / n)
    seen = 0
    for name, tok, row in migration_flags():
        flag = tok.lstrip("-")
        value = value_for(flag, options)
        arg = tok if value is None else f"{tok}={value}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DCGM_")}
        env.update(DEVLET_CHECK_CONFIG="1", DEVLET_SYSFS_ROOT="/nonexistent")
        r = subprocess.run([str(tmp_path / name), arg], capture_output=True, text=True, env=env,
                           timeout=30)
        assert r.returncode == 0, (name, arg, r.stderr, row)
        seen += 1
    assert seen >= 40, seen
