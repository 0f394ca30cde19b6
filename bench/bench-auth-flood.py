#!/usr/bin/python3
"""`make bench`: basic authentication on the metrics port under a
password-guessing flood (issue 28), as the issue measured it: 24 keep-alive
connections from 127.0.0.2 loop wrong passwords for a real user (half one
fixed wrong password, half fresh random ones) while, from 127.0.0.1, a
scraper tries a right password bcrypt has not verified yet (a user of its
own each time) every --seconds/--tries seconds.  Prints how many tries got
200 and how long they took, and devlet's CPU (utime + stime of the process)
over the flood, in percent of one core.  The hashes have --cost (10:
exporter-toolkit's documented example).  Figures are reported, never
asserted.
Usage: DEVLET_BUILD=build bench-auth-flood.py [--tries N] [--seconds S] [--cost C]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from devlet_harness import Devlet  # noqa: E402
from test_auth_flood import Flood, bcrypt, cpu_seconds, scrape  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--cost", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="devlet-auth-bench-") as tmp:
        scrapers = {f"scraper{i}": f"right-{i}" for i in range(args.tries)}
        users = dict(scrapers, alice="alice-right")
        web = os.path.join(tmp, "web.yml")
        with open(web, "w") as f:
            f.write("basic_auth_users:\n" + "".join(
                f"  {u}: '{bcrypt(p, args.cost)}'\n" for u, p in users.items()))
        os.makedirs(os.path.join(tmp, "plugins"))
        d = Devlet(os.path.join(tmp, "plugins"), os.path.join(tmp, "work"),
                   args=["--metrics-address", "127.0.0.1:0", "--kubelet-socket", "",
                         "--web-config-file", web]).start()
        try:
            port = int(d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1))
            flood = Flood(port)
            try:
                flood.answered[0].wait(30)
                cpu0, t0 = cpu_seconds(d.pid), time.monotonic()
                statuses, ok_secs = [], []
                for i, (user, password) in enumerate(scrapers.items()):
                    time.sleep(max(0.0, t0 + i * args.seconds / args.tries - time.monotonic()))
                    try:
                        status, secs = scrape(port, user, password)
                    except OSError:
                        status, secs = 0, 0.0
                    statuses.append(status)
                    if status == 200:
                        ok_secs.append(secs)
                time.sleep(max(0.0, t0 + args.seconds - time.monotonic()))
                cpu = (cpu_seconds(d.pid) - cpu0) / (time.monotonic() - t0)
                counts = flood.counts[:]
            finally:
                flood.close()
        finally:
            d.terminate()
    by = {s: statuses.count(s) for s in sorted(set(statuses))}
    lat = (f"p50 {statistics.median(ok_secs) * 1000:.0f} ms, max {max(ok_secs) * 1000:.0f} ms"
           if ok_secs else "-")
    print(f"{'auth flood (24 conns, cost ' + str(args.cost) + ')':<34} right password 200 on "
          f"{by.get(200, 0)}/{len(statuses)} first tries {by}; latency {lat}; "
          f"devlet CPU {cpu * 100:.1f}% of a core over {args.seconds:.0f} s; "
          f"attackers' answers 200/401/429/503/other per kind {counts}")


if __name__ == "__main__":
    main()
