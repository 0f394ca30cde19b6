"""deploy/monitoring: the alert rules pass `promtool check rules` and their
unit tests (`promtool test rules`, one case per alert), and a real
Prometheus scraping devlet on the mock NVML evaluates every query of the
Grafana dashboard, every alert expression and every query of
dcgm-exporter's own dashboard (tests/integration/data) with each returning
series.  The node is staged so that every alert fires: a GPU whose last XID
is 79, critical XIDs counted after the first scrapes, a GPU whose memory is
nearly full, one slowed for heat, no kubelet (nothing registered), and a
second devlet that collects only once an hour (stale metrics)."""

import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from devlet_harness import wait_until
from metrics_sim import PROMTOOL, MockNvml, PodResourcesSim, Prometheus, metrics_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
DCGM_QUERIES = pathlib.Path(__file__).resolve().parent / "data" / "dcgm-exporter-dashboard.promql"
NODE = "node-m"

# Grafana's variables as a dashboard on this node would set them
VARIABLES = {"$__rate_interval": "30s", "$__interval": "15s", "${datasource}": "prometheus"}
ALL = ".*"


def rule_file(dest: pathlib.Path) -> pathlib.Path:
    with open(MONITORING / "prometheusrule.yaml") as f:
        spec = yaml.safe_load(f)["spec"]
    out = dest / "rules.yaml"
    out.write_text(yaml.safe_dump(spec))
    return out


def alert_rules():
    with open(MONITORING / "prometheusrule.yaml") as f:
        return [r for g in yaml.safe_load(f)["spec"]["groups"] for r in g["rules"] if "alert" in r]


def dashboard_queries():
    with open(MONITORING / "devlet-dashboard.json") as f:
        dash = json.load(f)
    exprs = []
    for p in dash["panels"]:
        exprs += [t["expr"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            exprs.append(v["query"]["query"])
    return exprs


def dcgm_exporter_queries():
    return [line for line in DCGM_QUERIES.read_text().splitlines() if line.strip()]


def concrete(expr: str) -> str:
    """A dashboard query as Grafana sends it: variables filled in, and a
    label_values(selector, label) variable query as its selector."""
    for k, v in VARIABLES.items():
        expr = expr.replace(k, v)
    expr = re.sub(r"\$\{?[A-Za-z_]+\}?", ALL, expr)
    m = re.fullmatch(r"label_values\((.*),\s*\w+\)", expr.strip(), re.S)
    return m.group(1) if m else expr


def test_rules_pass_promtool_check(tmp_path):
    res = subprocess.run([PROMTOOL, "check", "rules", str(rule_file(tmp_path))], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in res.stdout


def test_every_alert_has_a_unit_test(tmp_path):
    rule_file(tmp_path)
    shutil.copy(MONITORING / "tests" / "alerts.test.yaml", tmp_path)
    with open(tmp_path / "alerts.test.yaml") as f:
        tested = {t["alertname"] for case in yaml.safe_load(f)["tests"] for t in case["alert_rule_test"]
                  if t.get("exp_alerts")}
    assert tested == {r["alert"] for r in alert_rules()}
    res = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "alerts.test.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_dashboard_covers_what_operators_watch():
    exprs = " ".join(dashboard_queries())
    for family in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                   "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "devlet_xid_events_total",
                   "devlet_devices", "devlet_container_memory_used_bytes", "devlet_allocations_total"):
        assert family in exprs, family


@pytest.fixture
def staged(devlet, dirs):
    """Two devlets on the mock (a staged node, and one that collects hourly)
    scraped by a real Prometheus."""
    nvml = MockNvml(dirs.work)
    nvml.devices[1]["memoryUsedMiB"] = 80000  # of 81559: nearly full
    nvml.devices[2]["clocksEventReasons"] = 0x40  # hardware thermal slowdown
    nvml.devices[0]["utilization"] = {"gpu": 70, "memory": 20, "encoder": 0, "decoder": 0}
    nvml.devices[0]["processes"] = [{"pid": 3999999, "usedMemoryMiB": 1000, "smUtil": 30}]
    nvml.devices[0]["gpm"] = {"smUtil": 60, "tensorUtil": 35}
    nvml.config["events"] = [{"device": 3, "type": "xid", "xid": 79}]
    nvml.write()
    podres = PodResourcesSim(os.path.join(dirs.run, "pod-resources.sock"))
    podres.pods = [("team-a", "train-0", [("main", [("nvidia.com/gpu", [nvml.uuid(0) + "::0"])])]),
                   ("team-a", "train-1", [("main", [("nvidia.com/gpu", [nvml.uuid(0) + "::1"])])]),
                   ("team-b", "infer-0", [("srv", [("nvidia.com/gpu", [nvml.uuid(4)])])])]
    podres.start()
    args = ["--metrics-address", "127.0.0.1:0", "--pod-resources-socket", podres.socket_path,
            "--container-state-dirs", dirs.run]
    env = {**nvml.env(), "NODE_NAME": NODE}
    a = devlet(args=args + ["--collect-interval", "200"], env=env)
    other = os.path.join(dirs.root, "plugins2")
    os.mkdir(other)
    b = devlet(args=args + ["--collect-interval", "3600000"], env=env, plugin_dir=other)
    prom = Prometheus([f"127.0.0.1:{metrics_port(a)}", f"127.0.0.1:{metrics_port(b)}"])
    try:
        prom.wait_ready()
        wait_until(lambda: prom.query("devlet_xid_events_total") and len(prom.query("up == 1")) == 2, 60,
                   "both devlets scraped, the XID counted", interval=0.2)
        # counted again after the first scrapes: an increase Prometheus sees
        nvml.config["events"].append({"device": 3, "type": "xid", "xid": 79})
        nvml.config["events"].append({"device": 5, "type": "xid", "xid": 48})
        nvml.write()
        yield prom
    finally:
        prom.stop()
        podres.stop()


def test_queries_and_alerts_return_series_on_a_real_prometheus(staged):
    prom = staged
    queries = ([("devlet dashboard", e) for e in dashboard_queries()] +
               [("alert " + r["alert"], r["expr"]) for r in alert_rules()] +
               [("dcgm-exporter dashboard", e) for e in dcgm_exporter_queries()])
    assert len(dcgm_exporter_queries()) == 10
    pending = {(what, concrete(e)) for what, e in queries}

    def all_answered():
        for item in sorted(pending):
            if prom.query(item[1]):
                pending.discard(item)
        return not pending
    try:
        wait_until(all_answered, 90, "every query and alert expression to return series", interval=1.0)
    except TimeoutError:
        raise AssertionError("no series for:\n" + "\n".join(f"{w}: {e}" for w, e in sorted(pending))) from None
    # and the figures are the staged ones
    # the hour-interval devlet may or may not have sampled before XID 79 came
    lost = prom.query(concrete(next(r["expr"] for r in alert_rules() if r["alert"] == "DevletGPULost")))
    assert lost and all(s["metric"]["gpu"] == "3" and s["metric"]["Hostname"] == NODE for s in lost)
    pods = {s["metric"]["pod"] for s in prom.query("sum by (pod) (devlet_container_memory_used_bytes)")}
    assert pods == {"train-0", "train-1", "infer-0"}
    assert sorted(float(s["value"][1]) for s in prom.query("count by (instance) (DCGM_FI_DEV_GPU_TEMP)")) == [8, 8]
