"""deploy/helm/devlet: `helm lint` passes, `helm template` renders with the
defaults and with the value sets below, every rendered object validates
against the Kubernetes API schemas (tests/deploy/validate.js, as for
deploy/), and the chart renders what the kustomize overlays render: for each
overlay a value set whose DaemonSet has the same shape (host paths and how
they are mounted, probes, resources, security contexts, scheduling) and
whose container, given to `devlet run` with its env and config file, runs
with the same effective configuration (devlet's `running with config=` line).

helm is the peer scripts/peers.sh builds from the Go module proxy at the
version tests/cluster/versions.env pins, from its cache when it is there
(as `make peers`, a prerequisite of `make integration`, leaves it)."""

import base64
import copy
import ctypes
import ctypes.util
import json
import os
import subprocess
import tempfile

import pytest
import yaml

from devlet_harness import BUILD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "deploy", "helm", "devlet")
OVERLAYS_DIR = os.path.join(ROOT, "deploy", "overlays")
NVIDIA_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AMD_TOLERATION = {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# env vars the container runtime reads (not devlet); the rest of the env
# is compared through devlet's effective configuration
RUNTIME_ENV = {"NODE_NAME", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_MONITOR_DEVICES"}


def overlay_config(overlay):
    with open(os.path.join(OVERLAYS_DIR, overlay, "config.yaml")) as f:
        return yaml.safe_load(yaml.safe_load(f)["data"]["config.yaml"])


NO_EXTRAS = {"gfd": {"enabled": False}, "cdi": {"enabled": False}, "metrics": {"podAttribution": False}}

# overlay -> (release namespace, values that render the same)
AS_OVERLAY = {
    "all-in-one": ("devlet", {}),
    # NVIDIA's static manifest has no node affinity
    "nvidia-only": ("kube-system", {**NO_EXTRAS, "familyAffinity": False}),
    "amd-only": ("devlet", {**NO_EXTRAS, "nvidia": {"enabled": False}, "amd": {"enabled": True},
                            "backends": ["amd"], "labelsOutput": "node"}),
    "host-devices-only": ("devlet", {**NO_EXTRAS, "nvidia": {"enabled": False}, "failOnInitError": None,
                                     "hostDevices": {"enabled": True,
                                                     "devices": overlay_config("host-devices-only")[
                                                         "hostDevices"]["devices"]}}),
    # the MPS overlay's own choices: no Tegra term (NFD's CPU vendor), the
    # base's memory limit
    "nvidia-mps": ("devlet", {**NO_EXTRAS, "mps": {"enabled": True}, "failOnInitError": None,
                              "extraConfig": {"sharing": overlay_config("nvidia-mps")["sharing"]},
                              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                  "nodeSelectorTerms": [
                                      {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present",
                                                             "operator": "In", "values": ["true"]}]},
                                      {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In",
                                                             "values": ["true"]}]}]}}},
                              "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                            "limits": {"cpu": "100m", "memory": "64Mi"}}}),
    "dra": ("devlet", {"dra": {"enabled": True}}),
    "metrics": ("devlet", {"serviceMonitor": {"enabled": True}}),
}

# value sets beyond the overlays' (each also schema-validated)
MIG_MIXED = {"migStrategy": "mixed", "deviceListStrategy": ["envvar", "cdi-cri"], "deviceIDStrategy": "index",
             "compatWithCPUManager": True}
PER_NODE = {"config": {"map": {
    "default": "version: v1\nflags:\n  migStrategy: none\n",
    "a100-mixed": "version: v1\nflags:\n  migStrategy: mixed\n",
    "h100.single": "version: v1\nflags:\n  migStrategy: single\nsharing:\n  timeSlicing:\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 2\n",
}}}
TLS_AUTH = {"tlsServerConfig": {"enabled": True, "clientAuthType": "RequireAndVerifyClientCert"},
            "basicAuth": {"users": {"prometheus": "s3cret", "alice": "wonder"}},
            "serviceMonitor": {"enabled": True, "tlsConfig": {"insecureSkipVerify": True}}}
AMD_ONLY = AS_OVERLAY["amd-only"][1]
EVERYTHING = {
    **MIG_MIXED, "backends": ["nvidia", "amd", "hostdev"],
    "amd": {"enabled": True, "resourceNamingStrategy": "mixed", "healthInterval": "10s",
            "disabledHealthChecks": ["ras", "kfd"], "deviceCount": 4},
    "hostDevices": {"enabled": True, "devices": [{"name": "fuse", "groups": [{"count": 4,
                                                                                "paths": [{"path": "/dev/fuse"}]}]}]},
    "nvidiaDriverRoot": "/run/nvidia/driver", "gdsEnabled": True, "mofedEnabled": False, "gdrcopyEnabled": True,
    "deviceDiscoveryStrategy": "nvml",
    "gfd": {"noTimestamp": True, "sleepInterval": "30s"},
    "cdi": {"nvidiaHookPath": "/usr/local/bin/nvidia-cdi-hook", "featureFlags": "disable-nvsandbox-utils"},
    "metrics": {"collectInterval": 10000, "kubernetesVirtualGPUs": True},
    "logFormat": "json", "verbosity": 1,
    "arguments": ["--hostname-label", "hostname"],
    "extraEnv": [{"name": "DEVLET_RESCAN_INTERVAL", "value": "7s"}],
    "extraVolumes": [{"name": "counters", "configMap": {"name": "my-counters"}}],
    "extraVolumeMounts": [{"name": "counters", "mountPath": "/etc/counters", "readOnly": True}],
    "extraConfig": {"health": {"recovery": {"enabled": True, "quietPeriod": "5s"}}},
    "image": {"repository": "registry.example.com/devlet", "tag": "v1.2.3", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "nodeSelector": {"pool": "gpu"},
    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    "runtimeClassName": "nvidia", "priorityClassName": "my-priority",
    "podAnnotations": {"team": "ml"}, "podLabels": {"cost-center": "42"},
    "securityContext": {"privileged": True}, "resources": {"limits": {"memory": "256Mi"}},
    "service": {"port": 9500},
}

VALUE_SETS = {
    "defaults": {}, "mig-mixed": MIG_MIXED, "per-node-configs": PER_NODE, "dra": {"dra": {"enabled": True}},
    "service-monitor": {"serviceMonitor": {"enabled": True}}, "tls-basic-auth": TLS_AUTH, "amd-only": AMD_ONLY,
    "everything": EVERYTHING, "metrics-off": {"metrics": {"enabled": False}},
    **{f"as-{o}": v for o, (_, v) in AS_OVERLAY.items()},
}


# ---------------------------------------------------------------- helm

@pytest.fixture(scope="session")
def helm(tmp_path_factory):
    """The helm peer: built by scripts/peers.sh (from its cache when built),
    run with its own config and cache directories."""
    res = subprocess.run([os.path.join(ROOT, "scripts", "peers.sh"), "helm"], capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 0, res.stderr
    dirs = dict(line.split("=", 1) for line in res.stdout.split())
    binary = os.path.join(dirs["helm"], "bin", "helm")
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ, HELM_CONFIG_HOME=str(home / "config"), HELM_CACHE_HOME=str(home / "cache"),
               HELM_DATA_HOME=str(home / "data"))

    def run(*args, check=True):
        r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env)
        if check:
            assert r.returncode == 0, f"helm {' '.join(args)}: {r.stderr}"
        return r
    return run


_rendered = {}


def template(helm, values, namespace="devlet", release="devlet", check=True):
    """helm template's output for values (a dict) as text."""
    key = (json.dumps(values, sort_keys=True), namespace, release)
    if key not in _rendered or not check:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            yaml.safe_dump(values, f)
            f.flush()
            r = helm("template", release, CHART, "--namespace", namespace, "--values", f.name, check=check)
        if not check:
            return r
        _rendered[key] = r.stdout
    return _rendered[key]


def render(helm, values, **kw):
    return [o for o in yaml.safe_load_all(template(helm, values, **kw)) if o]


def of_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def one(objs, kind):
    found = of_kind(objs, kind)
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def container(ds, name="devlet"):
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


def env_of(c):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def kinds(objs):
    """The kinds rendered, the Namespace aside (Helm's charts make none)."""
    return sorted(o["kind"] for o in objs if o["kind"] != "Namespace")


def kustomize(overlay):
    res = subprocess.run(["kubectl", "kustomize", os.path.join(OVERLAYS_DIR, overlay)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return [o for o in yaml.safe_load_all(res.stdout) if o]


# ------------------------------------------------ devlet's effective config

def effective_config(c, config_text, tmp):
    """The configuration `devlet run` would run with, given the container's
    args (after `run`), its plain env and config_text as its config file:
    build/tools/config-dump loads them as `devlet run` does and prints the
    JSON of devlet's `running with config=` line whole.  A warning (an
    unknown or misspelt key) fails the test."""
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write(config_text)
    args = list(c["args"][1:])
    args[args.index("--config-file") + 1] = cfg
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({e["name"]: e["value"] for e in c.get("env", []) if "value" in e})
    r = subprocess.run([str(BUILD / "tools" / "config-dump"), *args], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and not r.stderr, r.stderr
    conf = json.loads(r.stdout)
    conf["flags"].pop("config-file")
    return conf


# ---------------------------------------------------------------- shape

def volume_source(v):
    if "hostPath" in v:
        return ("hostPath", v["hostPath"]["path"], v["hostPath"].get("type"))
    if "configMap" in v:
        return ("configMap",)
    return tuple(sorted(k for k in v if k != "name"))


def mounts(ds, c):
    """mountPath -> (volume source, readOnly, propagation, recursiveReadOnly)"""
    vols = {v["name"]: volume_source(v) for v in ds["spec"]["template"]["spec"]["volumes"]}
    return {m["mountPath"]: (vols[m["name"]], m.get("readOnly", False), m.get("mountPropagation"),
                             m.get("recursiveReadOnly")) for m in c.get("volumeMounts", [])}


def shape(ds):
    """What must match between an overlay's DaemonSet and the chart's."""
    spec = ds["spec"]["template"]["spec"]
    out = {
        "updateStrategy": ds["spec"]["updateStrategy"],
        "annotations": ds["spec"]["template"]["metadata"].get("annotations", {}),
        "pod": {k: spec.get(k) for k in ("hostPID", "hostNetwork", "automountServiceAccountToken",
                                         "priorityClassName", "securityContext", "affinity", "runtimeClassName",
                                         "nodeSelector")},
        "tolerations": sorted(json.dumps(t, sort_keys=True) for t in spec.get("tolerations", [])),
        "volumes": sorted(volume_source(v) for v in spec["volumes"]),
        "containers": {},
    }
    for c in spec["containers"]:
        out["containers"][c["name"]] = {
            "image": c["image"], "imagePullPolicy": c.get("imagePullPolicy"),
            "args": c["args"],
            "ports": c.get("ports"), "readinessProbe": c.get("readinessProbe"),
            "livenessProbe": c.get("livenessProbe"), "resources": c.get("resources"),
            "securityContext": c.get("securityContext"), "terminationMessagePath": c.get("terminationMessagePath"),
            "mounts": mounts(ds, c),
            "runtime env": {k: v for k, v in env_of(c).items() if k in RUNTIME_ENV},
        }
    return out


# ---------------------------------------------------------------- tests

def test_helm_lint(helm):
    r = helm("lint", "--strict", CHART)
    assert "1 chart(s) linted, 0 chart(s) failed" in r.stdout, r.stdout


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_renders_and_validates_against_api_schemas(helm, name, node_modules, tmp_path):
    text = template(helm, VALUE_SETS[name])
    objs = render(helm, VALUE_SETS[name])
    assert of_kind(objs, "DaemonSet")
    for o in objs:
        if o["kind"] not in {"ClusterRole", "ClusterRoleBinding", "DeviceClass", "ValidatingAdmissionPolicy",
                             "ValidatingAdmissionPolicyBinding"}:
            assert o["metadata"]["namespace"] == "devlet", (o["kind"], o["metadata"]["name"])
    f = tmp_path / f"{name}.yaml"
    f.write_text(text)
    res = subprocess.run(["node", os.path.join(ROOT, "tests", "deploy", "validate.js"), str(node_modules), str(f)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(objs)} objects, 0 problems" in res.stdout


@pytest.mark.parametrize("overlay", sorted(AS_OVERLAY))
def test_renders_what_the_overlay_renders(helm, overlay, tmp_path):
    """The chart with the overlay's value set: the same DaemonSet shape, the
    same effective devlet configuration, the same objects around it."""
    namespace, values = AS_OVERLAY[overlay]
    chart = render(helm, values, namespace=namespace)
    kust = kustomize(overlay)
    ds_c, ds_k = one(chart, "DaemonSet"), one(kust, "DaemonSet")
    assert shape(ds_c) == shape(ds_k)
    cm_k = [o for o in of_kind(kust, "ConfigMap") if o["metadata"]["name"] == "devlet-config"][0]
    cm_c = one(chart, "ConfigMap")
    # one after the other, in the same directory: the same paths
    got = effective_config(container(ds_c), cm_c["data"]["config.yaml"], str(tmp_path))
    want = effective_config(container(ds_k), cm_k["data"]["config.yaml"], str(tmp_path))
    assert got == want
    # the objects around the DaemonSet
    assert kinds(chart) == kinds(kust)
    svc_c, svc_k = one(chart, "Service")["spec"], one(kust, "Service")["spec"]
    assert (svc_c["clusterIP"], svc_c["ports"]) == (svc_k["clusterIP"], svc_k["ports"])
    assert one(chart, "ServiceAccount")["automountServiceAccountToken"] is False
    if overlay == "dra":
        assert one(chart, "ClusterRole")["rules"] == one(kust, "ClusterRole")["rules"]
        assert {o["metadata"]["name"]: o["spec"] for o in of_kind(chart, "DeviceClass")} == \
               {o["metadata"]["name"]: o["spec"] for o in of_kind(kust, "DeviceClass")}
        # the own-node policy: the same rules (the chart's names its release)
        assert one(chart, "ValidatingAdmissionPolicy")["spec"] == \
               one(kust, "ValidatingAdmissionPolicy")["spec"]
        assert one(chart, "ValidatingAdmissionPolicyBinding")["spec"]["validationActions"] == ["Deny"]
    if overlay == "metrics":
        sm_c, sm_k = one(chart, "ServiceMonitor"), one(kust, "ServiceMonitor")
        assert sm_c["spec"]["endpoints"] == sm_k["spec"]["endpoints"]


def test_defaults_are_all_in_one(helm):
    """No values: all-in-one's DaemonSet (checked field by field above),
    one DaemonSet, the chart's own config file, no DRA, no monitor."""
    objs = render(helm, {})
    assert sorted(o["kind"] for o in objs) == ["ConfigMap", "DaemonSet", "Service", "ServiceAccount"]
    ds = one(objs, "DaemonSet")
    assert ds["metadata"]["name"] == "devlet"
    c = container(ds)
    assert c["args"] == ["run", "--config-file", "/etc/devlet/config.yaml"]
    assert c["image"] == "localhost/devlet:latest"
    assert yaml.safe_load(one(objs, "ConfigMap")["data"]["config.yaml"]) == {"version": "v1"}
    spec = ds["spec"]["template"]["spec"]
    assert spec["tolerations"] == [NVIDIA_TOLERATION]
    (cfg,) = [v for v in spec["volumes"] if "configMap" in v]
    assert cfg["configMap"] == {"name": "devlet-config"}  # the whole map, no subPath: reloads reach the pod


def test_release_name_prefixes_objects(helm):
    objs = render(helm, {}, release="gpu")
    assert {o["metadata"]["name"] for o in objs} == {"gpu-devlet", "gpu-devlet-config"}
    ds = one(objs, "DaemonSet")
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == "gpu-devlet"
    assert one(objs, "Service")["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()


def test_nvidia_mig_mixed_values_reach_devlet(helm, tmp_path):
    """NVIDIA's chart's keys become the env vars NVIDIA's chart sets, and
    devlet runs with them."""
    objs = render(helm, MIG_MIXED)
    c = container(one(objs, "DaemonSet"))
    env = env_of(c)
    assert env["MIG_STRATEGY"] == "mixed"
    assert env["DEVICE_LIST_STRATEGY"] == "envvar,cdi-cri"
    assert env["DEVICE_ID_STRATEGY"] == "index"
    assert env["PASS_DEVICE_SPECS"] == "true"
    assert env["FAIL_ON_INIT_ERROR"] == "false"
    conf = effective_config(c, one(objs, "ConfigMap")["data"]["config.yaml"], str(tmp_path))["flags"]
    assert conf["mig-strategy"] == "mixed"
    assert conf["device-list-strategy"] == ["envvar", "cdi-cri"]
    assert conf["device-id-strategy"] == "index"
    assert conf["pass-device-specs"] is True
    assert conf["fail-on-init-error"] is False
    # no privilege for compatWithCPUManager (NVIDIA's chart makes it privileged)
    assert c["securityContext"]["privileged"] is False


def test_every_value_reaches_the_container(helm, tmp_path):
    objs = render(helm, EVERYTHING)
    ds = one(objs, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    c = container(ds)
    env = env_of(c)
    assert c["image"] == "registry.example.com/devlet:v1.2.3" and c["imagePullPolicy"] == "Always"
    assert c["args"] == ["run", "--config-file", "/etc/devlet/config.yaml", "--metrics-address=:9500",
                         "--hostname-label", "hostname"]
    assert {k: env[k] for k in ("DEVLET_BACKENDS", "NVIDIA_DRIVER_ROOT", "GDS_ENABLED", "MOFED_ENABLED",
                                "GDRCOPY_ENABLED", "DEVICE_DISCOVERY_STRATEGY", "GFD_NO_TIMESTAMP",
                                "GFD_SLEEP_INTERVAL", "NVIDIA_CDI_HOOK_PATH", "CDI_FEATURE_FLAGS",
                                "RESOURCE_NAMING_STRATEGY", "DEVLET_AMD_HEALTH_INTERVAL", "DCGM_EXPORTER_INTERVAL",
                                "KUBERNETES_VIRTUAL_GPUS", "DEVLET_LOG_FORMAT", "DEVLET_VERBOSITY",
                                "DEVLET_RESCAN_INTERVAL")} == {
        "DEVLET_BACKENDS": "nvidia,amd,hostdev", "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver",
        "GDS_ENABLED": "true", "MOFED_ENABLED": "false", "GDRCOPY_ENABLED": "true",
        "DEVICE_DISCOVERY_STRATEGY": "nvml", "GFD_NO_TIMESTAMP": "true", "GFD_SLEEP_INTERVAL": "30s",
        "NVIDIA_CDI_HOOK_PATH": "/usr/local/bin/nvidia-cdi-hook", "CDI_FEATURE_FLAGS": "disable-nvsandbox-utils",
        "RESOURCE_NAMING_STRATEGY": "mixed", "DEVLET_AMD_HEALTH_INTERVAL": "10s",
        "DCGM_EXPORTER_INTERVAL": "10000", "KUBERNETES_VIRTUAL_GPUS": "true", "DEVLET_LOG_FORMAT": "json",
        "DEVLET_VERBOSITY": "1", "DEVLET_RESCAN_INTERVAL": "7s"}
    # the driver root is the hostPath behind /driver-root
    (root,) = [v for v in spec["volumes"] if v["name"] == "driver-root"]
    assert root["hostPath"]["path"] == "/run/nvidia/driver"
    assert {"name": "counters", "configMap": {"name": "my-counters"}} in spec["volumes"]
    assert {"name": "counters", "mountPath": "/etc/counters", "readOnly": True} in c["volumeMounts"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["runtimeClassName"] == "nvidia" and spec["priorityClassName"] == "my-priority"
    assert spec["tolerations"] == [NVIDIA_TOLERATION, AMD_TOLERATION,
                                   {"key": "CriticalAddonsOnly", "operator": "Exists"}]
    # host devices run on every node: no GPU affinity
    assert "affinity" not in spec
    meta = ds["spec"]["template"]["metadata"]
    assert meta["annotations"]["team"] == "ml" and meta["annotations"]["prometheus.io/port"] == "9500"
    assert meta["labels"]["cost-center"] == "42"
    assert c["securityContext"] == {"privileged": True}
    assert c["resources"] == {"limits": {"memory": "256Mi"}}
    assert c["ports"] == [{"name": "metrics", "containerPort": 9500, "protocol": "TCP"}]
    assert one(objs, "Service")["spec"]["ports"][0]["port"] == 9500
    # /dev is the host's: the AMD device nodes come with it, no mounts of their own
    paths = {m["mountPath"] for m in c["volumeMounts"]}
    assert "/dev" in paths and "/dev/kfd" not in paths
    config = yaml.safe_load(one(objs, "ConfigMap")["data"]["config.yaml"])
    assert config["hostDevices"]["devices"][0]["name"] == "fuse"
    assert config["health"]["recovery"]["enabled"] is True
    conf = effective_config(c, one(objs, "ConfigMap")["data"]["config.yaml"], str(tmp_path))
    f = conf["flags"]
    assert f["backends"] == ["nvidia", "amd", "hostdev"] and f["nvidia-driver-root"] == "/run/nvidia/driver"
    assert f["gds-enabled"] is True and f["gdrcopy-enabled"] is True and f["mofed-enabled"] is False
    assert f["no-timestamp"] is True and f["sleep-interval"] == 30000
    assert f["nvidia-cdi-hook-path"] == "/usr/local/bin/nvidia-cdi-hook"
    assert f["cdi-feature-flags"] == ["disable-nvsandbox-utils"]
    assert f["resource-naming-strategy"] == "mixed" and f["amd-health-interval"] == 10000
    assert f["amd-disable-healthchecks"] == ["ras", "kfd"] and f["amd-device-count"] == 4
    assert f["collect-interval"] == 10000 and f["kubernetes-virtual-gpus"] is True
    assert f["log-format"] == "json" and f["verbosity"] == 1
    assert f["hostname-label"] == "hostname" and f["rescan-interval"] == 7000
    assert f["metrics-address"] == ":9500"
    assert conf["hostDevices"] == ["devlet.io/fuse"]


def test_per_node_configs_one_daemonset_each(helm, tmp_path):
    """config.map with NVIDIA's per-node label: the default config on nodes
    whose label is missing or names no other config, each other config on
    the nodes labelled with its name, each GPU node term ANDed with it."""
    objs = render(helm, PER_NODE)
    cm = one(objs, "ConfigMap")
    assert set(cm["data"]) == {"default", "a100-mixed", "h100.single"}
    sets = {d["metadata"]["name"]: d for d in of_kind(objs, "DaemonSet")}
    assert set(sets) == {"devlet", "devlet-a100-mixed", "devlet-h100.single"}
    label = "nvidia.com/device-plugin.config"
    want = {"devlet": ("default", {"key": label, "operator": "NotIn", "values": ["a100-mixed", "h100.single"]}),
            "devlet-a100-mixed": ("a100-mixed", {"key": label, "operator": "In", "values": ["a100-mixed"]}),
            "devlet-h100.single": ("h100.single", {"key": label, "operator": "In", "values": ["h100.single"]})}
    strategies = {"default": "none", "a100-mixed": "mixed", "h100.single": "single"}
    selectors_seen = []
    for name, (key, expr) in want.items():
        ds = sets[name]
        spec = ds["spec"]["template"]["spec"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        assert len(terms) == 3  # NVIDIA's three GPU-node terms, each with the config's
        for t in terms:
            assert t["matchExpressions"][-1] == expr
        (vol,) = [v for v in spec["volumes"] if "configMap" in v]
        assert vol["configMap"]["items"] == [{"key": key, "path": "config.yaml"}]
        sel = ds["spec"]["selector"]["matchLabels"]
        assert sel.items() <= ds["spec"]["template"]["metadata"]["labels"].items()
        selectors_seen.append(json.dumps(sel, sort_keys=True))
        d = tmp_path / name
        d.mkdir()
        conf = effective_config(container(ds), cm["data"][key], str(d))
        assert conf["flags"]["mig-strategy"] == strategies[key]
    assert len(set(selectors_seen)) == 3, "each DaemonSet selects only its own pods"
    # the Service selects every DaemonSet's pods
    svc = one(objs, "Service")
    assert all(svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
               for d in sets.values())


@pytest.mark.parametrize("values,default_key", [
    ({"config": {"map": {"only": "version: v1\n"}}}, "only"),                       # single
    ({"config": {"map": {"a": "version: v1\n", "b": "version: v1\n"}, "default": "b"}}, "b"),
    ({"config": {"map": {"a": "version: v1\n", "b": "version: v1\n"},
                 "fallbackStrategies": ["named", "single", "empty"]}}, "config.yaml"),
    ({"config": {"name": "my-configs", "default": "big"}}, "big"),
    ({"config": {"name": "my-configs"}}, "config.yaml"),
])
def test_config_fallback_strategies(helm, values, default_key):
    objs = render(helm, values)
    (ds,) = [d for d in of_kind(objs, "DaemonSet") if d["metadata"]["name"] == "devlet"]
    assert ds["spec"]["template"]["metadata"]["labels"]["devlet.io/config"] == default_key
    (vol,) = [v for v in ds["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert vol["configMap"].get("items", [{"key": "config.yaml"}])[0]["key"] == default_key
    if values["config"].get("name"):
        assert vol["configMap"]["name"] == "my-configs"
        assert not of_kind(objs, "ConfigMap")  # theirs, not the chart's
    elif default_key == "config.yaml":  # "empty": the chart's own file beside the named ones
        assert yaml.safe_load(one(objs, "ConfigMap")["data"]["config.yaml"]) == {"version": "v1"}


@pytest.mark.parametrize("values,message", [
    ({"config": {"map": {"a": "version: v1\n"}, "default": "x"}}, "config.default \"x\" is not a key"),
    ({"config": {"map": {"A_B": "version: v1\n"}}}, "config.map key \"A_B\""),
    ({"config": {"map": {"a": "version: v1\n"}, "fallbackStrategies": ["nearest"]}}, "unknown strategy"),
])
def test_config_errors_are_refused(helm, values, message):
    r = template(helm, values, check=False)
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_only_labelled_nodes_without_a_default(helm):
    """Two configs and no default (named and single find none): only the
    nodes labelled with a config's name get devlet; a "default" key is
    the default (named)."""
    values = {"config": {"map": {"a": "version: v1\n", "b": "version: v1\n"}}}
    sets = of_kind(render(helm, values), "DaemonSet")
    assert sorted(d["metadata"]["name"] for d in sets) == ["devlet-a", "devlet-b"]
    for d in sets:
        terms = d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert all(t["matchExpressions"][-1]["operator"] == "In" for t in terms)
    values["config"]["map"]["default"] = "version: v1\n"
    names = sorted(d["metadata"]["name"] for d in of_kind(render(helm, values), "DaemonSet"))
    assert names == ["devlet", "devlet-a", "devlet-b"]


def test_device_classes_and_rbac_only_with_dra(helm):
    for values in ({}, MIG_MIXED, {**AMD_ONLY, "labelsOutput": "features.d"}, TLS_AUTH):
        kinds = {o["kind"] for o in render(helm, values)}
        assert not kinds & {"DeviceClass", "ClusterRole", "ClusterRoleBinding"}, values
    objs = render(helm, {"dra": {"enabled": True}}, namespace="gpus", release="dl")
    assert {o["metadata"]["name"] for o in of_kind(objs, "DeviceClass")} == {
        "gpu.nvidia.com", "mig.nvidia.com", "gpu.amd.com", "hostdev.devlet.io"}
    role, binding = one(objs, "ClusterRole"), one(objs, "ClusterRoleBinding")
    rules = {(g, r): set(x["verbs"]) for x in role["rules"] for g in x["apiGroups"] for r in x["resources"]}
    assert rules == {("resource.k8s.io", "resourceslices"):
                     {"list", "watch", "create", "update", "delete", "deletecollection"},
                     ("resource.k8s.io", "resourceclaims"): {"get"},
                     ("", "nodes"): {"get"}}
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "dl-devlet-dra"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dl-devlet", "namespace": "gpus"}]
    ds = one(objs, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is True and spec["serviceAccountName"] == "dl-devlet"
    c = container(ds)
    assert env_of(c)["DEVLET_DRA_RESOURCES"] == "nvidia.com/gpu,amd.com/gpu"
    paths = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry"} <= paths
    # the policy binds to the release's own account and names its policy
    policy = one(objs, "ValidatingAdmissionPolicy")
    assert policy["metadata"]["name"] == "dl-devlet-dra-own-node-slices"
    assert policy["spec"]["matchConditions"][0]["expression"] == \
        'request.userInfo.username == "system:serviceaccount:gpus:dl-devlet"'
    assert one(objs, "ValidatingAdmissionPolicyBinding")["spec"]["policyName"] == policy["metadata"]["name"]
    # DeviceClasses are cluster-wide: another install may own them
    objs = render(helm, {"dra": {"enabled": True, "deviceClasses": False, "ownNodePolicy": False}})
    assert not of_kind(objs, "DeviceClass") and of_kind(objs, "ClusterRole")
    assert not of_kind(objs, "ValidatingAdmissionPolicy")


def test_pod_labels_get_their_rbac_and_token(helm):
    """metrics.podLabels: --kubernetes-enable-pod-labels on, the token
    mounted, and a ClusterRole that allows listing and watching pods."""
    objs = render(helm, {"metrics": {"podLabels": True}}, namespace="gpus", release="dl")
    role, binding = one(objs, "ClusterRole"), one(objs, "ClusterRoleBinding")
    rules = {(g, r): set(x["verbs"]) for x in role["rules"] for g in x["apiGroups"] for r in x["resources"]}
    assert rules == {("", "pods"): {"list", "watch"}}
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "dl-devlet-pod-labels"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dl-devlet", "namespace": "gpus"}]
    ds = one(objs, "DaemonSet")
    assert ds["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert env_of(container(ds))["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"] == "true"
    # without metrics, nothing of it
    objs = render(helm, {"metrics": {"enabled": False, "podLabels": True}})
    assert not of_kind(objs, "ClusterRole")
    assert "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS" not in env_of(container(one(objs, "DaemonSet")))


def test_service_monitor(helm):
    assert not of_kind(render(helm, {}), "ServiceMonitor")
    objs = render(helm, {"serviceMonitor": {"enabled": True, "interval": "30s", "honorLabels": False,
                                            "additionalLabels": {"release": "kube-prometheus-stack"},
                                            "relabelings": [{"targetLabel": "cluster", "replacement": "a"}]}})
    sm, svc = one(objs, "ServiceMonitor"), one(objs, "Service")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["metadata"]["namespace"] == svc["metadata"]["namespace"]
    (ep,) = sm["spec"]["endpoints"]
    assert ep == {"port": "metrics", "path": "/metrics", "interval": "30s", "honorLabels": False,
                  "relabelings": [{"targetLabel": "cluster", "replacement": "a"}]}
    assert ep["port"] in {p["name"] for p in svc["spec"]["ports"]}
    assert svc["spec"]["clusterIP"] == "None"
    objs = render(helm, {"serviceMonitor": {"enabled": True}, "service": {"type": "NodePort"}})
    assert "clusterIP" not in one(objs, "Service")["spec"]


def crypt_matches(password, hashed):
    """libxcrypt's crypt(3) checks a bcrypt hash (no Python module needed)."""
    lib = ctypes.CDLL(ctypes.util.find_library("crypt"))
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return lib.crypt(password.encode(), hashed.encode()) == hashed.encode()


def test_tls_and_basic_auth_web_config(helm):
    """dcgm-exporter's tlsServerConfig and basicAuth: exporter-toolkit's web
    config in a Secret, mounted and passed with --web-config-file (only
    then), the TLS files from the chart's Secret, probes that work without
    the password."""
    plain = container(one(render(helm, {}), "DaemonSet"))
    assert not any("web-config" in a for a in plain["args"])
    assert not of_kind(render(helm, {}), "Secret")

    objs = render(helm, TLS_AUTH)
    ds = one(objs, "DaemonSet")
    c = container(ds)
    i = c["args"].index("--web-config-file")
    path = c["args"][i + 1]
    secrets = {s["metadata"]["name"]: s for s in of_kind(objs, "Secret")}
    web = yaml.safe_load(secrets["devlet-web-config"]["stringData"]["web-config.yaml"])
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    mnts = {m["mountPath"]: m for m in c["volumeMounts"]}
    # the flag names the file in the mounted Secret
    mount = mnts[os.path.dirname(path)]
    assert mount["readOnly"] is True
    assert vols[mount["name"]]["secret"]["secretName"] == "devlet-web-config"
    assert os.path.basename(path) == "web-config.yaml"
    tls = web["tls_server_config"]
    assert tls["client_auth_type"] == "RequireAndVerifyClientCert"
    tls_secret = secrets["devlet-tls"]
    for key, file in (("cert_file", "tls.crt"), ("key_file", "tls.key"), ("client_ca_file", "ca.crt")):
        d, f = os.path.split(tls[key])
        assert f == file and f in tls_secret["data"]
        assert vols[mnts[d]["name"]]["secret"]["secretName"] == "devlet-tls"
    cert = base64.b64decode(tls_secret["data"]["tls.crt"]).decode()
    assert cert.startswith("-----BEGIN CERTIFICATE-----")
    users = web["basic_auth_users"]
    assert set(users) == {"prometheus", "alice"}
    assert crypt_matches("s3cret", users["prometheus"]) and crypt_matches("wonder", users["alice"])
    assert not crypt_matches("wrong", users["prometheus"])
    assert "s3cret" not in template(helm, TLS_AUTH)
    # with basic auth the probes are TCP checks (the kubelet has no password)
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["tcpSocket"] == {"port": "metrics"} and "httpGet" not in c[probe]
    # TLS alone: HTTP probes, over HTTPS
    c = container(one(render(helm, {"tlsServerConfig": {"enabled": True}}), "DaemonSet"))
    assert c["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "metrics", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/health", "port": "metrics", "scheme": "HTTPS"}
    # Prometheus scrapes over https
    (ep,) = one(objs, "ServiceMonitor")["spec"]["endpoints"]
    assert ep["scheme"] == "https" and ep["tlsConfig"] == {"insecureSkipVerify": True}
    # a Secret of the user's: no TLS Secret made, theirs mounted
    objs = render(helm, {"tlsServerConfig": {"enabled": True, "existingSecret": "my-tls"}})
    assert {s["metadata"]["name"] for s in of_kind(objs, "Secret")} == {"devlet-web-config"}
    vols = {v["name"]: v for v in one(objs, "DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    assert any(v.get("secret", {}).get("secretName") == "my-tls" for v in vols.values())
    # cert and key given as values
    r = template(helm, {"tlsServerConfig": {"enabled": True, "autoGenerated": False}}, check=False)
    assert r.returncode != 0 and "tlsServerConfig.cert is needed" in r.stderr


def test_amd_only(helm):
    objs = render(helm, AMD_ONLY)
    ds = one(objs, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    c = container(ds)
    assert not {k for k in env_of(c) if k.startswith("NVIDIA_")}
    assert env_of(c)["DEVLET_BACKENDS"] == "amd"
    assert spec["tolerations"] == [AMD_TOLERATION]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"] for t in terms for e in t["matchExpressions"]} == {
        "feature.node.kubernetes.io/pci-1002.present", "feature.node.kubernetes.io/amd-gpu", "amd.com/gpu.present"}
    host = {v["hostPath"]["path"]: v["hostPath"]["type"] for v in spec["volumes"] if "hostPath" in v}
    assert host == {"/var/lib/kubelet/device-plugins": "Directory", "/dev/dri": "Directory",
                    "/dev/kfd": "CharDevice"}
    assert c["resources"]["limits"]["memory"] == "64Mi"


def test_metrics_off(helm, tmp_path):
    """No endpoint: no port, probes, Service, scrape annotations or pod
    attribution (hostPID and its mounts)."""
    objs = render(helm, {"metrics": {"enabled": False}, "serviceMonitor": {"enabled": True}})
    assert sorted(o["kind"] for o in objs) == ["ConfigMap", "DaemonSet", "ServiceAccount"]
    ds = one(objs, "DaemonSet")
    c = container(ds)
    assert "ports" not in c and "readinessProbe" not in c and "livenessProbe" not in c
    assert "hostPID" not in ds["spec"]["template"]["spec"]
    assert "annotations" not in ds["spec"]["template"]["metadata"]
    paths = {m["mountPath"] for m in c["volumeMounts"]}
    assert not paths & {"/var/lib/kubelet/pod-resources", "/run/containerd", "/run/containers/storage"}
    conf = effective_config(c, one(objs, "ConfigMap")["data"]["config.yaml"], str(tmp_path))
    assert conf["flags"]["metrics-address"] == ""


def test_chart_does_not_drift_from_the_overlays_host_paths(helm):
    """Every host path the chart can mount is one deploy/'s overlays mount
    (test_deploy.py says why each is there), at the same place."""
    overlay_paths = set()
    for o in os.listdir(OVERLAYS_DIR):
        if os.path.exists(os.path.join(OVERLAYS_DIR, o, "kustomization.yaml")):
            ds = one(kustomize(o), "DaemonSet")
            for c in ds["spec"]["template"]["spec"]["containers"]:
                overlay_paths |= {(p, m[0]) for p, m in mounts(ds, c).items() if m[0][0] == "hostPath"}
    values = copy.deepcopy(EVERYTHING)
    values.pop("nvidiaDriverRoot")
    for vs in (values, {"mps": {"enabled": True}, "dra": {"enabled": True}}, AMD_ONLY):
        ds = one(render(helm, vs), "DaemonSet")
        for c in ds["spec"]["template"]["spec"]["containers"]:
            chart_paths = {(p, m[0]) for p, m in mounts(ds, c).items() if m[0][0] == "hostPath"}
            assert chart_paths <= overlay_paths, chart_paths - overlay_paths


def test_every_value_is_documented():
    """docs/INSTALL.md's Helm section names every top-level value and every
    value under the groups that map to devlet's flags."""
    with open(os.path.join(ROOT, "docs", "INSTALL.md")) as f:
        doc = f.read()
    section = doc[doc.index("\n## Helm\n"):doc.index("\n## 4. Check the node\n")]
    with open(os.path.join(CHART, "values.yaml")) as f:
        vals = yaml.safe_load(f)
    missing = []
    for key, v in vals.items():
        if f"`{key}" not in section and f"{key}`" not in section:
            missing.append(key)
        if key in {"amd", "gfd", "cdi", "mps", "dra", "metrics", "serviceMonitor", "tlsServerConfig", "config"}:
            for sub in v:
                if sub not in section:
                    missing.append(f"{key}.{sub}")
    assert not missing, missing


@pytest.mark.parametrize("output,rule", [
    ("node", ("", "nodes", {"get", "patch"})),
    ("node-feature", ("nfd.k8s-sigs.io", "nodefeatures", {"get", "create", "update"})),
])
def test_labels_through_the_api_get_their_rbac_and_token(helm, output, rule):
    """labelsOutput node (AMD's labeller's way) or node-feature: the service
    account's token is mounted and its ClusterRole allows exactly those calls."""
    objs = render(helm, {**AMD_ONLY, "labelsOutput": output}, namespace="gpus", release="dl")
    role, binding = one(objs, "ClusterRole"), one(objs, "ClusterRoleBinding")
    rules = {(g, r): set(x["verbs"]) for x in role["rules"] for g in x["apiGroups"] for r in x["resources"]}
    assert rules == {(rule[0], rule[1]): rule[2]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dl-devlet", "namespace": "gpus"}]
    spec = one(objs, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is True
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["DEVLET_LABELS_OUTPUT"] == output
