"""What a container gets from devlet's NVIDIA resources, seen from a
simulated kubelet over the mock NVML: every device list strategy's Allocate
response field by field (envvar, volume-mounts, cdi-annotations, cdi-cri,
all four together), index and UUID IDs, pass-device-specs under a fake dev
root with the control nodes and MIG capability nodes, GDS/MOFED/GDRCOPY;
MIG single (a layout built here) and mixed, and the layouts NVIDIA refuses
(devlet serves nothing from them but keeps GFD's labels); time-slicing replicas
(renameByDefault, rename, a `devices` count and list, de-duplicated IDs,
preferred replicas distributed and packed); renaming by resources.gpus and
resources.mig patterns; GetPreferredAllocation on the DGX-1 topology beyond
what test_nvidia.py asks.

devlet runs with DP_DISABLE_HEALTHCHECKS=all here (QUIET): these tests are
about responses, and without the health monitor's thread devlet stops at
once instead of within its 500 ms NVML wait.  Health is
test_nvidia_health.py's."""

import json
import os
import re
import subprocess

import grpc
import pytest

from devlet_harness import DEVLET_BIN, devlet_env, hostdev_config, make_node, run_devlet, wait_until
from mock_gpus import GPU, V100, envs, load_profile, mig_minor, mig_minors, start

QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
CDI = "k8s.device-plugin.nvidia.com/gpu="
LIST_ROOT = "/var/run/nvidia-container-devices"
UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def run(devlet, kubelet, node, **kw):
    kw["env"] = {**QUIET, **kw.get("env", {})}
    return start(devlet, kubelet, node, **kw)


def only(c, **fields):
    """Asserts that container response c has exactly these non-empty fields
    (envs, mounts, devices, annotations, cdi_devices) and no others."""
    got = {
        "envs": dict(c.envs),
        "mounts": [(m.host_path, m.container_path, m.read_only) for m in c.mounts],
        "devices": [(s.container_path, s.host_path, s.permissions) for s in c.devices],
        "annotations": dict(c.annotations),
        "cdi_devices": [d.name for d in c.cdi_devices],
    }
    for k, v in got.items():
        assert v == fields.get(k, type(v)()), f"{k}: {v!r}"


def one_annotation(c, prefix="cdi.k8s.io/"):
    (key, value), = c.annotations.items()
    assert re.fullmatch(re.escape(prefix) + "nvidia-device-plugin_" + UUID4, key), key
    return key, value


# ------------------------------------------------------------ device list strategies

def test_envvar_with_index_ids(kubelet, devlet, node):
    n = node("v100-dgx1")
    run(devlet, kubelet, n, args=["--device-id-strategy", "index", "--gdrcopy-enabled"])
    # IDs advertised stay UUIDs; only what the runtime is told changes
    assert kubelet.wait_for_snapshot(GPU).ids() == V100
    resp = kubelet.allocate(GPU, [[V100[3], V100[0]], [V100[7]]])
    only(resp.container_responses[0], envs={"NVIDIA_VISIBLE_DEVICES": "3,0", "NVIDIA_GDRCOPY": "enabled"})
    only(resp.container_responses[1], envs={"NVIDIA_VISIBLE_DEVICES": "7", "NVIDIA_GDRCOPY": "enabled"})


def test_volume_mounts_with_index_ids(kubelet, devlet, node):
    n = node("v100-dgx1")
    run(devlet, kubelet, n, args=["--device-list-strategy", "volume-mounts", "--device-id-strategy", "index"])
    c = kubelet.allocate(GPU, [[V100[6], V100[1]]]).container_responses[0]
    only(c, envs={"NVIDIA_VISIBLE_DEVICES": LIST_ROOT},
         mounts=[("/dev/null", f"{LIST_ROOT}/6", False), ("/dev/null", f"{LIST_ROOT}/1", False)])


def test_cdi_annotations_with_prefix_and_extras(kubelet, devlet, node):
    n = node("v100-dgx1")
    run(devlet, kubelet, n, args=["--device-list-strategy", "cdi-annotations",
                                  "--cdi-annotation-prefix", "nvidia.cdi.k8s.io/",
                                  "--gds-enabled", "--mofed-enabled", "--gdrcopy-enabled"])
    resp = kubelet.allocate(GPU, [[V100[2], V100[5]], [V100[4]]])
    extras = "k8s.device-plugin.nvidia.com/gds=all,k8s.device-plugin.nvidia.com/mofed=all," \
             "k8s.device-plugin.nvidia.com/gdrcopy=all"
    keys = []
    for c, ids in zip(resp.container_responses, ([V100[2], V100[5]], [V100[4]])):
        key, value = one_annotation(c, "nvidia.cdi.k8s.io/")
        keys.append(key)
        assert value == ",".join(CDI + i for i in ids) + "," + extras
        # only CDI: no NVIDIA_GDS env, no mounts, no device specs
        only(c, annotations={key: value})
    assert keys[0] != keys[1]  # a fresh UUID per container


def test_cdi_cri_only_ignores_device_specs(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    make_node(f"{dirs.dev}/nvidiactl")
    run(devlet, kubelet, n, args=["--device-list-strategy", "cdi-cri", "--pass-device-specs",
                                  "--dev-root", dirs.root, "--device-id-strategy", "index"])
    c = kubelet.allocate(GPU, [[V100[0], V100[3]]]).container_responses[0]
    only(c, cdi_devices=[CDI + "0", CDI + "3"])


def test_all_strategies_with_device_specs(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    for f in ("nvidiactl", "nvidia-uvm", "nvidia-modeset"):  # no nvidia-uvm-tools here
        make_node(f"{dirs.dev}/{f}")
    config = {"version": "v1", "flags": {"gdsEnabled": True, "plugin": {
        "deviceListStrategy": ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"]}}}
    run(devlet, kubelet, n, config=config, args=["--pass-device-specs", "--dev-root", dirs.root + "/"])
    c = kubelet.allocate(GPU, [[V100[5], V100[2]]]).container_responses[0]
    names = [CDI + V100[5], CDI + V100[2], "k8s.device-plugin.nvidia.com/gds=all"]
    key, _ = one_annotation(c)
    # volume-mounts' NVIDIA_VISIBLE_DEVICES replaces envvar's, as NVIDIA's does
    only(c, envs={"NVIDIA_VISIBLE_DEVICES": LIST_ROOT, "NVIDIA_GDS": "enabled"},
         mounts=[("/dev/null", f"{LIST_ROOT}/{V100[5]}", False), ("/dev/null", f"{LIST_ROOT}/{V100[2]}", False)],
         devices=[("/dev/nvidiactl", f"{dirs.root}/dev/nvidiactl", "rw"),
                  ("/dev/nvidia-uvm", f"{dirs.root}/dev/nvidia-uvm", "rw"),
                  ("/dev/nvidia-modeset", f"{dirs.root}/dev/nvidia-modeset", "rw"),
                  ("/dev/nvidia5", f"{dirs.root}/dev/nvidia5", "rw"),
                  ("/dev/nvidia2", f"{dirs.root}/dev/nvidia2", "rw")],
         annotations={key: ",".join(names)}, cdi_devices=names)


# ------------------------------------------------------------ MIG

A100 = load_profile("a100-mig-mixed")["devices"]


def test_mig_mixed_index_ids_and_capability_nodes(kubelet, devlet, node, dirs):
    n = node("a100-mig-mixed")
    for f in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        make_node(f"{dirs.dev}/{f}")
    mig_minors(f"{dirs.root}/proc", 8)
    run(devlet, kubelet, n, resources=[GPU, "nvidia.com/mig-2g.20gb", "nvidia.com/mig-2c.3g.40gb"],
        args=["--mig-strategy", "mixed", "--device-id-strategy", "index", "--pass-device-specs",
              "--dev-root", dirs.root, "--device-list-strategy", "envvar,cdi-cri"],
        env={"DEVLET_PROC_ROOT": f"{dirs.root}/proc"})
    ctl = [(f"/dev/{f}", f"{dirs.root}/dev/{f}", "rw") for f in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]

    def cap(minor):
        return (f"/dev/nvidia-caps/nvidia-cap{minor}", f"{dirs.root}/dev/nvidia-caps/nvidia-cap{minor}", "rw")

    # GPU 0's 2g.20gb: MIG device 0:0, GPU instance 5, compute instance 0
    c = kubelet.allocate("nvidia.com/mig-2g.20gb", [[n.mig_uuids(0)[0]]]).container_responses[0]
    only(c, envs={"NVIDIA_VISIBLE_DEVICES": "0:0"}, cdi_devices=[CDI + "0:0"],
         devices=ctl + [("/dev/nvidia0", f"{dirs.root}/dev/nvidia0", "rw"), cap(mig_minor(0, 5)),
                        cap(mig_minor(0, 5, 0))])
    # GPU 3's second 3g.40gb instance (gi 2) split in two compute instances:
    # its 2c part is MIG device 3:2, compute instance 1, its own resource
    c = kubelet.allocate("nvidia.com/mig-2c.3g.40gb", [[n.mig_uuids(3)[2]]]).container_responses[0]
    only(c, envs={"NVIDIA_VISIBLE_DEVICES": "3:2"}, cdi_devices=[CDI + "3:2"],
         devices=ctl + [("/dev/nvidia3", f"{dirs.root}/dev/nvidia3", "rw"), cap(mig_minor(3, 2)),
                        cap(mig_minor(3, 2, 1))])
    # the GPUs with MIG off stay whole GPUs
    assert kubelet.wait_for_snapshot(GPU).ids() == [d["uuid"] for d in A100[4:]]
    c = kubelet.allocate(GPU, [[A100[6]["uuid"]]]).container_responses[0]
    only(c, envs={"NVIDIA_VISIBLE_DEVICES": "6"}, cdi_devices=[CDI + "6"],
         devices=ctl + [("/dev/nvidia6", f"{dirs.root}/dev/nvidia6", "rw")])


def mig_single_node():
    """Two A100 40GB GPUs in MIG mode, each cut into three 2g.10gb."""
    base = load_profile("mig-one-plain-one")
    gpus = []
    for i, numa in enumerate((0, 1)):
        g = dict(base["devices"][0], uuid=f"GPU-0000000{i}-5524-54f1-4fab-6f3e164f1513",
                 pciBusId=f"00000000:{0x3b + i:02x}:00.0", minor=i, numaNode=numa, processes=[])
        g["mig"] = [{"gi": gi, "ci": 0, "profile": "2g.10gb", "placement": 2 * k,
                     "uuid": f"MIG-{i}{k}000000-19e2-2bc1-b4ff-00ae3f1347de"}
                    for k, gi in enumerate((3, 4, 5))]
        gpus.append(g)
    return {"driverVersion": base["driverVersion"], "devices": gpus}


def test_mig_single(kubelet, devlet, node):
    n = node(data=mig_single_node())
    migs = n.mig_uuids(0) + n.mig_uuids(1)
    run(devlet, kubelet, n, args=["--mig-strategy", "single", "--device-id-strategy", "index"])
    snap = kubelet.wait_for_snapshot(GPU)
    assert snap.ids() == migs
    assert [d.numa for d in snap.devices] == [0, 0, 0, 1, 1, 1]
    assert [r.resource_name for r in kubelet.accepted()] == [GPU]
    resp = kubelet.allocate(GPU, [[migs[4], migs[0]]])
    only(resp.container_responses[0], envs={"NVIDIA_VISIBLE_DEVICES": "1:1,0:0"})


def test_impossible_mig_layouts_serve_nothing_and_label(kubelet, devlet, dirs, node):
    """Layouts NVIDIA's plugin refuses (it exits with --fail-on-init-error):
    devlet serves no NVIDIA resource, says why, and keeps GFD's labels,
    <model>-MIG-INVALID with count 0 under single, as GFD writes them."""
    one_plain = mig_single_node()
    del one_plain["devices"][1]["mig"]
    empty = mig_single_node()
    empty["devices"][1]["mig"] = []
    cases = [(one_plain, None, "single",
              "all devices on the node must be configured with the same migEnabled value"),
             (None, "a100-mig-mixed", "single",
              "invalid MIG configuration: more than one MIG device type present on node"),
             (empty, None, "mixed",
              "invalid MIG configuration: at least one device with migEnabled=true was not "
              "configured correctly: device 1 has an invalid MIG configuration")]
    for data, profile, strategy, why in cases:
        n = node(profile, data)
        d = devlet(None, args=["--backends", "nvidia", "--mig-strategy", strategy], env=n.env(**QUIET))
        d.wait_log("MIG layout cannot be served, no NVIDIA resources .*" + re.escape(why))
        gfd = os.path.join(d.workdir, "gfd")
        wait_until(lambda: os.path.exists(gfd), 10, "the labels file")
        labels = dict(line.split("=", 1) for line in open(gfd).read().split())
        if strategy == "single":
            assert labels["nvidia.com/gpu.product"].endswith("-MIG-INVALID")
            assert labels["nvidia.com/gpu.count"] == "0"
        assert labels["nvidia.com/mig.strategy"] == strategy
        assert "nvidia.com/cuda.driver-version.full" in labels
        assert d.terminate() == 0
        assert kubelet.attempts() == []


def test_impossible_mig_layout_without_fail_on_init_error(kubelet, devlet, node, dirs):
    n = node("a100-mig-mixed")
    make_node(f"{dirs.dev}/fuse")
    config = hostdev_config([{"name": "fuse", "groups": [{"paths": [{"path": f"{dirs.dev}/fuse"}]}]}],
                            domain="devlet.io")
    config["flags"] = {"migStrategy": "single", "failOnInitError": False}
    d = devlet(config, args=["--backends", "nvidia,hostdev"], env=n.env(**QUIET))
    kubelet.wait_for_registration("devlet.io/fuse")
    assert "more than one MIG device type present on node" in d.log_text()
    assert d.alive()
    assert [r.resource_name for r in kubelet.attempts()] == ["devlet.io/fuse"]


# ------------------------------------------------------------ time-slicing replicas

def replicas(uuid, n):
    return [f"{uuid}::{i}" for i in range(n)]


def sharing(*resources, **opts):
    return {"version": "v1", "sharing": {"timeSlicing": {**opts, "resources": list(resources)}}}


def test_replicas_rename_by_default_and_dedup(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    make_node(f"{dirs.dev}/nvidiactl")
    config = sharing({"name": GPU, "replicas": 2}, renameByDefault=True)
    d = run(devlet, kubelet, n, config=config, resources=["nvidia.com/gpu.shared"],
            args=["--device-list-strategy", "envvar,volume-mounts,cdi-cri", "--pass-device-specs",
                  "--dev-root", dirs.root])
    snap = kubelet.wait_for_snapshot("nvidia.com/gpu.shared")
    assert snap.ids() == [r for u in V100 for r in replicas(u, 2)]
    assert [d.numa for d in snap.devices] == [0] * 8 + [1] * 8
    # every GPU is shared: there is no plain nvidia.com/gpu left
    listed = run_devlet(["list", "-o", "json", "--config-file", d.config_path, "--backends", "nvidia"], env=n.env())
    assert [r["name"] for r in json.loads(listed.stdout)["resources"]] == ["nvidia.com/gpu.shared"]
    # without failRequestsGreaterThanOne, two replicas of one GPU are one GPU for the runtime
    c = kubelet.allocate("nvidia.com/gpu.shared",
                         [[f"{V100[3]}::1", f"{V100[0]}::0", f"{V100[3]}::0"]]).container_responses[0]
    only(c, envs={"NVIDIA_VISIBLE_DEVICES": LIST_ROOT},
         mounts=[("/dev/null", f"{LIST_ROOT}/{V100[3]}", False), ("/dev/null", f"{LIST_ROOT}/{V100[0]}", False)],
         devices=[("/dev/nvidiactl", f"{dirs.root}/dev/nvidiactl", "rw"),
                  ("/dev/nvidia3", f"{dirs.root}/dev/nvidia3", "rw"),
                  ("/dev/nvidia0", f"{dirs.root}/dev/nvidia0", "rw")],
         cdi_devices=[CDI + V100[3], CDI + V100[0]])


def test_replicas_rename_and_device_selection(kubelet, devlet, node):
    n = node("v100-dgx1")
    ts = "nvidia.com/gpu-ts"
    # a count: the first two GPUs by index are shared, the other six stay whole
    d = run(devlet, kubelet, n, resources=[GPU, ts],
            config=sharing({"name": GPU, "rename": ts, "replicas": 3, "devices": 2}))
    assert kubelet.wait_for_snapshot(ts).ids() == replicas(V100[0], 3) + replicas(V100[1], 3)
    assert kubelet.wait_for_snapshot(GPU).ids() == V100[2:]
    resp = kubelet.allocate(ts, [[f"{V100[1]}::2"]])
    assert envs(resp) == {"NVIDIA_VISIBLE_DEVICES": V100[1]}
    # a list, by index and by UUID (in any case), after a reload
    d.write_config(sharing({"name": GPU, "rename": ts, "replicas": 2, "devices": ["6", V100[3].upper()]}))
    d.sighup()
    kubelet.wait_for_snapshot(ts, lambda s: s.ids() == replicas(V100[3], 2) + replicas(V100[6], 2))
    kubelet.wait_for_snapshot(GPU, lambda s: s.ids() == [V100[i] for i in (0, 1, 2, 4, 5, 7)])


def test_preferred_replicas_distributed_and_packed(kubelet, devlet, node):
    n = node("v100-dgx1")
    config = sharing({"name": GPU, "replicas": 4})
    # GPU 0 idle (4 free), GPU 1 busy (its last replica free), GPU 2 half used
    avail = replicas(V100[0], 4) + [f"{V100[1]}::3", f"{V100[2]}::2", f"{V100[2]}::1"]
    d = run(devlet, kubelet, n, config=config)
    assert kubelet.preferred(GPU, avail, [], 2) == [f"{V100[0]}::0", f"{V100[2]}::1"]
    assert kubelet.preferred(GPU, avail, [f"{V100[1]}::3"], 3) == [
        f"{V100[1]}::3", f"{V100[0]}::0", f"{V100[2]}::1"]
    d.terminate()

    run_ = devlet(config, args=["--shared-devices-allocation-policy", "packed"], env=n.env(**QUIET))
    kubelet.wait_for_registration(GPU, count=2)
    assert run_.alive()
    assert kubelet.preferred(GPU, avail, [], 2) == [f"{V100[1]}::3", f"{V100[2]}::1"]
    assert kubelet.preferred(GPU, avail, [], 4) == [f"{V100[1]}::3", f"{V100[2]}::1", f"{V100[2]}::2",
                                                    f"{V100[0]}::0"]


# ------------------------------------------------------------ renaming by pattern

def test_rename_gpus_by_pattern(kubelet, devlet, node):
    n = node("h100-8x-nvswitch")
    h100 = n.uuids()
    config = {"version": "v1", "resources": {"gpus": [{"pattern": "H100", "name": "nvidia.com/h100"}]},
              "sharing": {"timeSlicing": {"resources": [
                  {"name": "nvidia.com/h100", "rename": "nvidia.com/h100-shared", "replicas": 2, "devices": ["7"]}]}}}
    run(devlet, kubelet, n, config=config, resources=["nvidia.com/h100", "nvidia.com/h100-shared"])
    snap = kubelet.wait_for_snapshot("nvidia.com/h100")
    assert snap.ids() == h100[:7]
    assert [d.numa for d in snap.devices] == [0, 0, 0, 0, 1, 1, 1]
    assert kubelet.wait_for_snapshot("nvidia.com/h100-shared").ids() == replicas(h100[7], 2)
    assert GPU not in [r.resource_name for r in kubelet.attempts()]
    assert envs(kubelet.allocate("nvidia.com/h100", [[h100[4]]])) == {"NVIDIA_VISIBLE_DEVICES": h100[4]}
    assert len(kubelet.preferred("nvidia.com/h100", h100[:7], [], 4)) == 4


def test_rename_first_matching_pattern_then_default(kubelet, devlet, node):
    n = node("mig-one-plain-one")
    sxm, pcie = n.uuids()
    config = {"version": "v1", "resources": {"gpus": [
        {"pattern": "A100-PCIE*", "name": "nvidia.com/a100-pcie"},
        {"pattern": "PCIE", "name": "nvidia.com/never"}]}}
    run(devlet, kubelet, n, config=config, resources=["nvidia.com/a100-pcie", GPU])
    assert kubelet.wait_for_snapshot("nvidia.com/a100-pcie").ids() == [pcie]
    assert kubelet.wait_for_snapshot(GPU).ids() == [sxm]  # MIG mode, whole under mig-strategy none
    assert "nvidia.com/never" not in [r.resource_name for r in kubelet.attempts()]


def test_rename_mig_by_pattern(kubelet, devlet, node):
    n = node("a100-mig-mixed")
    config = {"version": "v1", "flags": {"migStrategy": "mixed"}, "resources": {
        "gpus": [{"pattern": "A100", "name": "nvidia.com/a100"}],
        "mig": [{"pattern": "1g.10gb", "name": "nvidia.com/mig-small"},
                {"pattern": "4g.*", "name": "nvidia.com/mig-big"}]}}
    small, big = "nvidia.com/mig-small", "nvidia.com/mig-big"
    run(devlet, kubelet, n, config=config, resources=["nvidia.com/a100", small, big, "nvidia.com/mig-3g.40gb"])
    assert kubelet.wait_for_snapshot(small).ids() == n.mig_uuids(0)[2:] + n.mig_uuids(1)
    assert kubelet.wait_for_snapshot(big).ids() == n.mig_uuids(2)[:1]
    assert kubelet.wait_for_snapshot("nvidia.com/a100").ids() == n.uuids()[4:]
    names = {r.resource_name for r in kubelet.attempts()}
    assert names == {"nvidia.com/a100", small, big, "nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb",
                     "nvidia.com/mig-1c.3g.40gb", "nvidia.com/mig-2c.3g.40gb"}
    resp = kubelet.allocate(small, [[n.mig_uuids(1)[6]]])
    assert envs(resp) == {"NVIDIA_VISIBLE_DEVICES": n.mig_uuids(1)[6]}


# ------------------------------------------------------------ preferred allocation (DGX-1)

# NV2 (two-link) pairs of the hybrid cube-mesh
NV2 = {frozenset(p) for p in ((0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7))}


def test_preferred_nvlink_sets(kubelet, devlet, node):
    n = node("v100-dgx1")
    run(devlet, kubelet, n)
    pair = kubelet.preferred(GPU, V100, [], 2)
    # a pair joined by two NVLinks; of those, one behind a single PCIe switch
    assert frozenset(V100.index(u) for u in pair) in NV2
    assert pair == [V100[2], V100[3]]
    # the two quads tie; either is NVLink-optimal
    quad = {V100.index(u) for u in kubelet.preferred(GPU, V100[::-1], [], 4)}
    assert quad in ({0, 1, 2, 3}, {4, 5, 6, 7})
    # must-include picks the quad
    assert kubelet.preferred(GPU, V100, [V100[6]], 4) == V100[4:]
    assert kubelet.preferred(GPU, V100, [V100[0], V100[7]], 2) == [V100[0], V100[7]]
    assert sorted(kubelet.preferred(GPU, V100, [], 8)) == sorted(V100)
    # one request, two containers, each answered on its own
    resp = kubelet.client(GPU).preferred_request([(V100, [], 4), (V100[4:], [V100[5]], 2)])
    assert [list(c.deviceIDs) for c in resp.container_responses] == [V100[:4], [V100[5], V100[6]]]
    # unknown available IDs are skipped; an unknown must-include ID is an error
    assert kubelet.preferred(GPU, ["GPU-nope", V100[1], V100[5]], [], 2) == [V100[1], V100[5]]
    with pytest.raises(grpc.RpcError) as e:
        kubelet.preferred(GPU, V100, ["GPU-nope"], 2)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
