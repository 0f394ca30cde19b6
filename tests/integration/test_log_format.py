"""--log-format: `devlet run` writes every line of its log in the chosen
format (text, json, klog), from the flag, the env var or the config file;
a reload switches the format at once.  And the reload metrics: a config
that a reload rejects shows as devlet_config_reloads_total{result="rejected"}
and devlet_config_last_reload_successful 0, the fixed one as applied and 1,
in families promtool accepts."""

import json
import os
import re

import pytest

from devlet_harness import hostdev_config, make_node
from metrics_sim import promtool_check, scrape, select, wait_samples

WAIT = 20.0


def metrics_args(dirs):
    return ["--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
            "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
            "--container-state-dirs", dirs.run]

TEXT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn |info |debug|trace) [\w.-]+: ")
KLOG = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} [ \d]{6}\d devlet/[\w.-]+:0\] ")


def config(dirs, **flags):
    if not os.path.exists(f"{dirs.dev}/fuse"):
        make_node(f"{dirs.dev}/fuse")
    cfg = hostdev_config([{"name": "fuse", "groups": [{"count": 2, "paths": [{"path": f"{dirs.dev}/fuse"}]}]}])
    if flags:
        cfg["flags"] = flags
    return cfg


def check_line(fmt: str, line: str) -> dict:
    """Asserts line is in fmt; returns the JSON object of a json line."""
    if fmt == "text":
        assert TEXT.match(line), line
    elif fmt == "klog":
        assert KLOG.match(line), line
    else:
        obj = json.loads(line)
        assert isinstance(obj, dict), line
        for key in ("ts", "level", "component", "msg"):
            assert isinstance(obj.get(key), str), (key, line)
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", obj["ts"]), line
        assert obj["level"] in ("error", "warn", "info", "debug", "trace"), line
        return obj
    return {}


def metrics_port(d, fmt: str) -> int:
    if fmt == "json":
        d.wait_log(r'"msg":"serving metrics"')
        for line in d.log_text().splitlines():
            obj = json.loads(line)
            if obj["msg"] == "serving metrics":
                return int(obj["port"])
    return int(d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1))


# the three formats, each from one of the three sources
@pytest.mark.parametrize("fmt,source", [("text", "default"), ("json", "env"), ("klog", "file"),
                                        ("json", "flag")])
def test_every_line_in_the_format(devlet, dirs, fmt, source):
    flags = {"logFormat": fmt} if source == "file" else {}
    args = metrics_args(dirs) + ["-v", "1"]
    if source == "flag":
        args += ["--log-format", fmt]
    env = {"DEVLET_LOG_FORMAT": fmt} if source == "env" else {}
    d = devlet(config(dirs, **flags), args=args, env=env)
    port = metrics_port(d, fmt)
    wait_samples(port, lambda s: select(s, "devlet_config_last_reload_successful"), WAIT, "reload gauge")
    assert d.terminate() == 0
    lines = d.log_text().splitlines()
    assert len(lines) > 5
    objs = [check_line(fmt, line) for line in lines]
    if fmt == "json":
        # event words and key=value fields
        started = [o for o in objs if o["msg"] == "starting"]
        assert started and started[0]["component"] == "daemon" and "version" in started[0], started
        assert any(o["level"] == "debug" for o in objs)
    if fmt == "klog":
        assert any(line.startswith("I") and "devlet/daemon:0] starting version=" in line for line in lines)


def reloads(samples):
    applied = select(samples, "devlet_config_reloads_total", result="applied")
    rejected = select(samples, "devlet_config_reloads_total", result="rejected")
    last = select(samples, "devlet_config_last_reload_successful")
    if not (applied and rejected and last):
        return None
    return applied[0][1], rejected[0][1], last[0][1]


def test_reload_switches_format_and_counts(devlet, dirs):
    d = devlet(config(dirs, logFormat="text"),
               args=metrics_args(dirs))
    port = metrics_port(d, "text")
    wait_samples(port, lambda s: reloads(s) == (0, 0, 1), WAIT, "no reload yet")

    # text → json, at once: the reload's own last line is JSON
    since = d.log_size()
    d.write_config(config(dirs, logFormat="json"))
    d.wait_log(r'\{"ts":"[^"]+","level":"info","component":"daemon","msg":"reloaded",', since=since,
               timeout=WAIT)
    wait_samples(port, lambda s: reloads(s) == (1, 0, 1), WAIT, "one reload applied")

    # a broken config is rejected: the running one (and its format) stays
    since = d.log_size()
    d.write_config(config(dirs, logFormat="xml"))
    m = d.wait_log(r'\{[^\n]*"msg":"reload failed, keeping the running configuration"[^\n]*\}\n',
                   since=since, timeout=WAIT)
    assert "xml" in json.loads(m.group(0))["error"]
    wait_samples(port, lambda s: reloads(s) == (1, 1, 0), WAIT, "the rejected reload")
    text = scrape(port)
    rc, out = promtool_check(text)
    assert rc == 0, out
    assert "# TYPE devlet_config_reloads_total counter" in text
    assert "# TYPE devlet_config_last_reload_successful gauge" in text

    # fixed, as klog
    since = d.log_size()
    d.write_config(config(dirs, logFormat="klog"))
    d.wait_log(r"\nI\d{4} [\d:.]+ +\d+ devlet/daemon:0\] reloaded resources=", since=since - 1,
               timeout=WAIT)
    wait_samples(port, lambda s: reloads(s) == (2, 1, 1), WAIT, "the fixed reload")
    assert d.terminate() == 0

    # every line in the format of its time
    fmt = "text"
    for line in d.log_text().splitlines():
        if fmt == "text" and line.startswith("{"):
            fmt = "json"
        elif fmt == "json" and not line.startswith("{"):
            fmt = "klog"
        check_line(fmt, line)
    assert fmt == "klog"
