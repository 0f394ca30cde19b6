#!/usr/bin/python3
"""Keeps README.md's flags table equal to `devlet help flags`.

    scripts/readme-flags.py BUILD/devlet          rewrite the table in place
    scripts/readme-flags.py BUILD/devlet --check  exit 1 if it is stale
"""
import re
import subprocess
import sys

README = "README.md"
START = "<!-- flags:start (scripts/readme-flags.py) -->"
END = "<!-- flags:end -->"


def main():
    devlet = sys.argv[1]
    flags = subprocess.run([devlet, "help", "flags"], check=True, capture_output=True,
                           text=True).stdout.rstrip()
    text = open(README).read()
    block = f"{START}\n```\n{flags}\n```\n{END}"
    new = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    if "--check" in sys.argv:
        if new != text:
            print("README.md's flags table differs from `devlet help flags`; "
                  "run scripts/readme-flags.py build/devlet", file=sys.stderr)
            return 1
        return 0
    open(README, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
