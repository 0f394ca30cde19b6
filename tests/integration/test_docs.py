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
