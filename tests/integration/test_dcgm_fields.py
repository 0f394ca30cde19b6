"""dcgm-exporter's fields beyond the default set, end to end with the mock
NVML (the DGX H100 profile unless said): dcgm-exporter's own counters files
fed to `--collectors`, label rows, the DCGM_EXP_* window counters, the
opt-in error and throttling families, XIDs with health checks off, and the
counters files devlet ships for its image."""

import os
import re

import pytest

from devlet_harness import run_devlet
from metrics_sim import MockNvml, parse, promtool_check, scrape, select, wait_samples

NODE = "node-a"
WAIT = 20.0
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The fields of dcgm-exporter's own files (NVIDIA/dcgm-exporter etc/), as
# facts: the rows left uncommented, with their types.
DCGM_DEFAULT_COUNTERS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"), ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"), ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"), ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "counter"), ("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"), ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"), ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"), ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"), ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"), ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"), ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
]
DCGM_DCP_METRICS_INCLUDED = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"), ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"), ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"), ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"), ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"), ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"), ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"), ("DCGM_FI_DEV_FB_USED", "gauge"), ("DCGM_FI_DEV_FB_RESERVED", "gauge"),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter"), ("DCGM_FI_DEV_RETIRED_DBE", "counter"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"), ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"), ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
    ("DCGM_FI_DRIVER_VERSION", "label"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"), ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"), ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
]
# fields dcgm-exporter's default file leaves commented out that devlet gives
OPT_IN = [
    "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_FAN_SPEED",
    "DCGM_FI_DEV_PSTATE", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    "DCGM_FI_DEV_RELIABILITY_VIOLATION", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_RETIRED_SBE",
    "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "DCGM_EXP_XID_ERRORS_COUNT", "DCGM_EXP_CLOCK_EVENTS_COUNT",
]
# promtool's lint objects to dcgm-exporter's names; only these complaints, only on DCGM_*
ALLOWED_LINT = (
    'counter metrics should have "_total" suffix',
    "label names should be written in 'snake_case' not 'camelCase'",
    "metric name should not include type 'counter'",
)


@pytest.fixture
def nvml(dirs):
    return MockNvml(dirs.work)


def write_csv(dirs, name, rows):
    path = os.path.join(dirs.work, name)
    with open(path, "w") as f:
        f.write("# DCGM FIELD, Prometheus metric type, help message\n")
        for field, kind in rows:
            f.write(f"{field}, {kind}, test row\n")
    return path


def one_shot(nvml, dirs, csv=None, env=None):
    args = ["metrics", "--pod-resources-socket", os.path.join(dirs.run, "absent.sock"),
            "--container-state-dirs", dirs.run]
    if csv:
        args += ["--collectors", csv]
    res = run_devlet(args, env={**nvml.env(), **(env or {})})
    assert res.returncode == 0, res.stderr
    return res


def start(devlet, nvml, dirs, extra=(), env=None):
    from metrics_sim import metrics_port
    d = devlet(args=["--metrics-address", "127.0.0.1:0", "--collect-interval", "100",
                     "--pod-resources-socket", os.path.join(dirs.run, "pod-resources.sock"),
                     "--container-state-dirs", os.path.join(dirs.run, "state"), *extra],
               env={**nvml.env(), "NODE_NAME": NODE, **(env or {})})
    return d, metrics_port(d)


def types_of(text):
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def assert_promtool_parses(text):
    rc, out = promtool_check(text)
    assert rc in (0, 3), out
    for line in out.splitlines():
        name, _, problem = line.partition(" ")
        assert name.startswith("DCGM_") and problem in ALLOWED_LINT, line


def csv_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                field, kind, _ = (c.strip() for c in line.split(",", 2))
                rows.append((field, kind))
    return rows


@pytest.mark.parametrize("rows", [DCGM_DEFAULT_COUNTERS, DCGM_DCP_METRICS_INCLUDED],
                         ids=["default-counters", "dcp-metrics-included"])
def test_dcgm_exporter_files_are_exported(nvml, dirs, rows):
    """Every field of dcgm-exporter's own files is exported with its type, or
    (retired pages, which an H100 does not support: it remaps rows) left out
    with a warning naming it."""
    csv = write_csv(dirs, "dcgm.csv", rows)
    res = one_shot(nvml, dirs, csv)
    samples = parse(res.stdout)
    types = types_of(res.stdout)
    absent_on_h100 = {"DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE"}
    for field, kind in rows:
        if kind == "label":
            assert all(lab.get(field) for name, lab, _ in samples if name.startswith("DCGM_FI_")), field
        elif field in absent_on_h100:
            assert not select(samples, field), field
            assert re.search(rf"no device gives a value for.*field={field}\b", res.stderr), res.stderr
        else:
            assert len(select(samples, field)) == 8, field  # one per GPU
            assert types[field] == kind, field
    assert "does not export" not in res.stderr
    assert_promtool_parses(res.stdout)


def test_retired_pages_on_a_gpu_that_retires_them(dirs):
    nvml = MockNvml(dirs.work, "v100-dgx1.yaml")
    nvml.devices[2]["retiredPages"] = {"sbe": 3, "dbe": 1, "pending": True}
    nvml.write()
    csv = write_csv(dirs, "retired.csv", [("DCGM_FI_DEV_RETIRED_SBE", "counter"),
                                          ("DCGM_FI_DEV_RETIRED_DBE", "counter"),
                                          ("DCGM_FI_DEV_RETIRED_PENDING", "counter")])
    samples = parse(one_shot(nvml, dirs, csv).stdout)
    assert [v for _, v in select(samples, "DCGM_FI_DEV_RETIRED_SBE", gpu="2")] == [3]
    assert [v for _, v in select(samples, "DCGM_FI_DEV_RETIRED_DBE", gpu="2")] == [1]
    assert [v for _, v in select(samples, "DCGM_FI_DEV_RETIRED_PENDING", gpu="2")] == [1]
    assert [v for _, v in select(samples, "DCGM_FI_DEV_RETIRED_SBE", gpu="0")] == [0]


def test_default_collection_adds_only_the_default_files_new_fields(nvml, dirs):
    res = one_shot(nvml, dirs)
    names = {name for name, _, _ in parse(res.stdout)}
    for field, _ in DCGM_DEFAULT_COUNTERS:
        assert field in names, field
    for field in OPT_IN:
        assert field not in names, field
    samples = parse(res.stdout)
    assert [v for _, v in select(samples, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", gpu="0")] == [0]  # bare metal
    # no label rows: no label fields beside the driver version
    assert not any("DCGM_FI_DEV_SERIAL" in lab for _, lab, _ in samples)


def test_opt_in_families(nvml, dirs):
    nvml.devices[1]["eccErrors"] = {"sbeVolatile": 5, "dbeVolatile": 1, "sbeAggregate": 50, "dbeAggregate": 2}
    nvml.devices[1]["violationsNs"] = {"power": 1000, "thermal": 2000, "syncBoost": 3,
                                       "boardLimit": 4, "lowUtilization": 17500000000, "reliability": 6}
    nvml.devices[1]["nvlinkErrors"] = {"replay": 1, "recovery": 2, "crcFlit": 3, "crcData": 4}
    nvml.devices[1]["performanceState"] = 2
    nvml.devices[1]["fanSpeedPercent"] = 40
    nvml.devices[1]["vgpuLicensed"] = True
    nvml.write()
    csv = write_csv(dirs, "opt-in.csv", [(f, "gauge") for f in OPT_IN if not f.startswith("DCGM_EXP_")]
                    + [("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge")])
    res = one_shot(nvml, dirs, csv)
    samples = parse(res.stdout)

    def one(field, gpu="1"):
        got = [v for _, v in select(samples, field, gpu=gpu)]
        assert len(got) == 1, (field, got)
        return got[0]
    assert one("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL") == 5
    assert one("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == 1
    assert one("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL") == 50
    assert one("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL") == 2
    assert one("DCGM_FI_DEV_POWER_VIOLATION") == 1000
    assert one("DCGM_FI_DEV_THERMAL_VIOLATION") == 2000
    assert one("DCGM_FI_DEV_SYNC_BOOST_VIOLATION") == 3
    assert one("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION") == 4
    assert one("DCGM_FI_DEV_LOW_UTIL_VIOLATION") == 17500000000
    assert one("DCGM_FI_DEV_RELIABILITY_VIOLATION") == 6
    # 18 NVLinks, each counting the same errors
    assert one("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL") == 18
    assert one("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL") == 36
    assert one("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL") == 54
    assert one("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL") == 72
    assert one("DCGM_FI_DEV_PSTATE") == 2
    assert one("DCGM_FI_DEV_FAN_SPEED") == 40
    assert one("DCGM_FI_DEV_VGPU_LICENSE_STATUS") == 1
    assert one("DCGM_FI_DEV_POWER_MGMT_LIMIT") == 700
    assert one("DCGM_FI_DEV_ENFORCED_POWER_LIMIT") == 700
    # what the H100 fact sheet says the others answer: no fan, ECC and violations 0 but low utilisation
    assert one("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", gpu="0") == 0
    assert one("DCGM_FI_DEV_LOW_UTIL_VIOLATION", gpu="0") == 17500000000
    assert one("DCGM_FI_DEV_PSTATE", gpu="0") == 0
    assert one("DCGM_FI_DEV_VGPU_LICENSE_STATUS", gpu="0") == 0
    assert [v for _, v in select(samples, "DCGM_FI_DEV_FAN_SPEED", gpu="0")] == []
    # retired pages: H100 remaps rows instead
    assert not select(samples, "DCGM_FI_DEV_RETIRED_SBE")
    assert_promtool_parses(res.stdout)


def test_label_rows_become_labels(nvml, dirs):
    csv = write_csv(dirs, "labels.csv", [
        ("DCGM_FI_DEV_GPU_TEMP", "gauge"), ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
        ("DCGM_FI_DEV_SERIAL", "label"), ("DCGM_FI_DEV_VBIOS_VERSION", "label"),
        ("DCGM_FI_DEV_BRAND", "label"), ("DCGM_FI_DEV_MINOR_NUMBER", "label"),
        ("DCGM_FI_DEV_NAME", "label"), ("DCGM_FI_DEV_UUID", "label"), ("DCGM_FI_DRIVER_VERSION", "label"),
        ("DCGM_FI_DEV_OEM_INFOROM_VER", "label")])
    res = one_shot(nvml, dirs, csv)
    samples = parse(res.stdout)
    for gpu in range(8):
        dev = nvml.devices[gpu]
        for family in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"):
            [(lab, _)] = select(samples, family, gpu=str(gpu))
            assert lab["DCGM_FI_DEV_SERIAL"] == dev["serial"]
            assert lab["DCGM_FI_DEV_VBIOS_VERSION"] == dev["vbios"]
            assert lab["DCGM_FI_DEV_MINOR_NUMBER"] == str(dev["minor"])
            assert lab["DCGM_FI_DEV_NAME"] == dev["name"]
            assert lab["DCGM_FI_DEV_UUID"] == dev["uuid"]
            assert lab["DCGM_FI_DEV_BRAND"]
            assert lab["DCGM_FI_DRIVER_VERSION"] == "550.54.15"
    # devlet's own families do not get the label fields
    assert not any(k.startswith("DCGM_FI_DEV_") for name, lab, _ in samples if name.startswith("devlet_")
                   for k in lab)
    assert re.search(r"does not export field=DCGM_FI_DEV_OEM_INFOROM_VER reason=\"[^\"]*infoROM", res.stderr)
    assert_promtool_parses(res.stdout)


def test_nvswitch_fields_are_warned_about_once(nvml, dirs):
    csv = write_csv(dirs, "nvswitch.csv", [("DCGM_FI_DEV_GPU_TEMP", "gauge"),
                                           ("DCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_TX", "counter"),
                                           ("DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT", "gauge")])
    res = one_shot(nvml, dirs, csv)
    lines = [line for line in res.stderr.splitlines() if "NVSWITCH" in line]
    assert len(lines) == 1, res.stderr
    assert ("fields=DCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_TX,DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT" in lines[0])
    assert "NVSwitch module" in lines[0]


def test_xid_count_over_the_window(devlet, nvml, dirs):
    csv = write_csv(dirs, "xid.csv", [("DCGM_FI_DEV_XID_ERRORS", "gauge"), ("DCGM_EXP_XID_ERRORS_COUNT", "gauge")])
    d, port = start(devlet, nvml, dirs, extra=["--collectors", csv])
    d.wait_log(r"health monitoring started")
    # before any XID: one zero series per GPU, without an xid label
    samples = wait_samples(port, lambda s: len(select(s, "DCGM_EXP_XID_ERRORS_COUNT")) == 8 and s, WAIT,
                           "a zero XID count per GPU")
    for lab, v in select(samples, "DCGM_EXP_XID_ERRORS_COUNT"):
        assert v == 0 and lab["window_size_in_ms"] == "300000" and "xid" not in lab
    nvml.config["events"] = [{"device": 4, "type": "xid", "xid": 79}, {"device": 4, "type": "xid", "xid": 79},
                             {"device": 4, "type": "xid", "xid": 43}]
    nvml.write()
    samples = wait_samples(port, lambda s: [v for _, v in select(s, "DCGM_EXP_XID_ERRORS_COUNT", gpu="4",
                                                                 xid="79")] == [2] and s,
                           WAIT, "two XID 79 on GPU 4")
    counts = {lab.get("xid"): v for lab, v in select(samples, "DCGM_EXP_XID_ERRORS_COUNT", gpu="4")}
    assert counts == {"79": 2, "43": 1}
    assert [(lab.get("xid"), v) for lab, v in select(samples, "DCGM_EXP_XID_ERRORS_COUNT", gpu="0")] == [(None, 0)]
    assert_promtool_parses(scrape(port))


def test_clock_events_count(devlet, nvml, dirs):
    nvml.devices[2]["clocksEventReasons"] = 0x5  # gpu_idle, power_cap
    nvml.devices[5]["clocksEventReasons"] = 0  # none (the others: 0x1, an idle H100)
    nvml.write()
    csv = write_csv(dirs, "clock.csv", [("DCGM_EXP_CLOCK_EVENTS_COUNT", "gauge")])
    d, port = start(devlet, nvml, dirs, extra=["--collectors", csv])
    samples = wait_samples(port, lambda s: [v for _, v in select(s, "DCGM_EXP_CLOCK_EVENTS_COUNT", gpu="2",
                                                                 clock_event="power_cap") if v >= 3] and s,
                           WAIT, "three samples with power_cap on GPU 2")
    events = {lab["clock_event"]: v for lab, v in select(samples, "DCGM_EXP_CLOCK_EVENTS_COUNT", gpu="2")}
    assert set(events) == {"gpu_idle", "power_cap"} and events["gpu_idle"] == events["power_cap"]
    assert [lab.get("clock_event") for lab, _ in select(samples, "DCGM_EXP_CLOCK_EVENTS_COUNT", gpu="0")] \
        == ["gpu_idle"]
    assert [(lab.get("clock_event"), v) for lab, v in select(samples, "DCGM_EXP_CLOCK_EVENTS_COUNT", gpu="5")] \
        == [(None, 0)]


def test_xids_reach_metrics_with_health_checks_disabled(devlet, nvml, dirs):
    csv = write_csv(dirs, "xid.csv", [("DCGM_FI_DEV_XID_ERRORS", "gauge"), ("DCGM_EXP_XID_ERRORS_COUNT", "gauge")])
    d, port = start(devlet, nvml, dirs, extra=["--collectors", csv], env={"DP_DISABLE_HEALTHCHECKS": "all"})
    d.wait_log(r"health checks disabled .*XIDs still watched for metrics")
    wait_samples(port, lambda s: select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="3"), WAIT, "XID series")
    nvml.config["events"] = [{"device": 3, "type": "xid", "xid": 48}]
    nvml.write()
    # the collector's families and devlet's own (rendered on the loop's
    # tick) are published apart: wait for both (slow under emulation)
    samples = wait_samples(port, lambda s: [v for _, v in select(s, "DCGM_FI_DEV_XID_ERRORS", gpu="3")] == [48]
                           and [v for _, v in select(s, "devlet_xid_events_total", UUID=nvml.uuid(3),
                                                     xid="48")] == [1]
                           and s, WAIT, "GPU 3's XID 48")
    assert [v for _, v in select(samples, "DCGM_EXP_XID_ERRORS_COUNT", gpu="3", xid="48")] == [1]
    # a critical XID, yet no health decision: every device stays healthy
    assert not [v for _, v in select(samples, "devlet_devices", health="unhealthy") if v]
    assert "GPU unhealthy" not in d.log_text()


def test_shipped_counters_files_match_dcgm_exporters():
    """deploy/dcgm-exporter/ holds devlet's own words for dcgm-exporter's
    field lists; the fields and types are dcgm-exporter's."""
    base = os.path.join(REPO, "deploy", "dcgm-exporter")
    assert csv_rows(os.path.join(base, "default-counters.csv")) == DCGM_DEFAULT_COUNTERS
    assert csv_rows(os.path.join(base, "dcp-metrics-included.csv")) == DCGM_DCP_METRICS_INCLUDED
