"""deploy/: every overlay renders with `kubectl kustomize`, every rendered
object validates against the Kubernetes API schemas (tests/deploy/validate.js
with the npm packages kubernetes-models and @kubernetes-models/prometheus-operator,
installed into $DEVLET_BUILD/node), and the DaemonSets follow the rules
docs/INSTALL.md states: probes, resources, NODE_NAME, rolling updates, no
privilege, and host paths only where a job needs them."""

import json
import os
import pathlib
import selectors
import signal
import subprocess
import time

import pytest
import yaml

from devlet_harness import BUILD

ROOT = pathlib.Path(__file__).resolve().parents[2]
OVERLAYS_DIR = ROOT / "deploy" / "overlays"
OVERLAYS = sorted(p.name for p in OVERLAYS_DIR.iterdir() if (p / "kustomization.yaml").exists())

GPU = {"all-in-one", "nvidia-only", "nvidia-mps", "metrics", "metrics-podmonitor", "monitoring", "dra"}
# process attribution (metrics per pod) is on where the pod-resources socket is
ATTRIBUTION = {"all-in-one", "metrics", "metrics-podmonitor", "monitoring", "dra"}
# the MPS control daemon serves its clients' processes: it sees the host's
HOST_PID = ATTRIBUTION | {"nvidia-mps"}
NAMESPACED = {"ServiceAccount", "ConfigMap", "Service", "DaemonSet", "ServiceMonitor", "PodMonitor",
              "PrometheusRule"}
NVIDIA_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


# overlays whose pods talk to the API server (service account token mounted)
API_CLIENT = {"dra", "amd-only"}

# host path -> (mounted read-only, overlays that mount it)
HOST_PATHS = {
    "/var/lib/kubelet/device-plugins": (False, set(OVERLAYS)),
    "/var/lib/kubelet/pod-resources": (True, ATTRIBUTION),
    "/run/containerd": (True, ATTRIBUTION),
    "/run/containers/storage": (True, ATTRIBUTION),
    "/var/run/cdi": (False, ATTRIBUTION),
    "/etc/kubernetes/node-feature-discovery/features.d": (False, ATTRIBUTION),
    "/": (True, ATTRIBUTION),
    "/dev": (True, {"host-devices-only"}),
    "/run/nvidia/mps": (True, {"nvidia-mps"}),
    "/dev/dri": (True, {"amd-only"}),
    "/dev/kfd": (True, {"amd-only"}),
    "/var/lib/kubelet/plugins": (False, {"dra"}),
    "/var/lib/kubelet/plugins_registry": (False, {"dra"}),
}


def test_expected_overlays_exist():
    assert {"all-in-one", "nvidia-only", "amd-only", "host-devices-only", "metrics",
            "metrics-podmonitor"} <= set(OVERLAYS)


_rendered = {}


def render(overlay):
    if overlay not in _rendered:
        res = subprocess.run(["kubectl", "kustomize", str(OVERLAYS_DIR / overlay)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        _rendered[overlay] = res.stdout
    return _rendered[overlay]


def objects(overlay):
    return list(yaml.safe_load_all(render(overlay)))


def one(overlay, kind):
    found = [o for o in objects(overlay) if o["kind"] == kind]
    assert len(found) == 1, f"{overlay}: {len(found)} {kind} objects"
    return found[0]


def daemonset(overlay):
    return one(overlay, "DaemonSet")


def config_map(overlay):
    """devlet's own ConfigMap (not the Grafana dashboard's)."""
    found = [o for o in objects(overlay) if o["kind"] == "ConfigMap"
             and "grafana_dashboard" not in o["metadata"].get("labels", {})]
    assert len(found) == 1, f"{overlay}: {len(found)} config ConfigMaps"
    return found[0]


def container(overlay, name="devlet"):
    (c,) = [c for c in daemonset(overlay)["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders(overlay):
    objs = objects(overlay)
    assert objs and all(isinstance(o, dict) and o.get("kind") for o in objs)
    for o in objs:
        if o["kind"] in NAMESPACED:
            assert o["metadata"].get("namespace"), f"{o['kind']}/{o['metadata']['name']} has no namespace"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_against_api_schemas(overlay, node_modules, tmp_path):
    f = tmp_path / f"{overlay}.yaml"
    f.write_text(render(overlay))
    res = subprocess.run(["node", str(ROOT / "tests" / "deploy" / "validate.js"), str(node_modules), str(f)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(objects(overlay))} objects, 0 problems" in res.stdout


def test_validator_rejects_bad_objects(node_modules, tmp_path):
    """The checker itself: a misspelt field, a wrong type and an unknown kind
    are each reported."""
    objs = objects("metrics")
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    c["resources"]["limits"]["memory"] = ["64Mi"]
    sm = next(o for o in objs if o["kind"] == "ServiceMonitor")
    sm["spec"]["endpoints"][0]["honorLabel"] = True
    objs.append({"apiVersion": "v1", "kind": "Sevice", "metadata": {"name": "typo"}})
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    res = subprocess.run(["node", str(ROOT / "tests" / "deploy" / "validate.js"), str(node_modules), str(f)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "DaemonSet/devlet: unknown field .spec.template.spec.containers[0].readinesProbe" in res.stdout
    assert "containers/0/resources/limits/memory must be" in res.stdout
    assert "ServiceMonitor/devlet: unknown field .spec.endpoints[0].honorLabel" in res.stdout
    assert "Sevice/typo: unknown kind Sevice in v1" in res.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_daemonset_probes_resources_env_and_updates(overlay):
    ds = daemonset(overlay)
    c = container(overlay)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["metrics"] == 9400
    # readiness: every resource registered; liveness: the loop is alive
    for probe, path in (("readinessProbe", "/ready"), ("livenessProbe", "/health")):
        get = c[probe]["httpGet"]
        assert get["path"] == path, probe
        assert ports.get(get["port"], get["port"]) == 9400
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind]), kind
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert c["args"][0] == "run"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_privilege(overlay):
    sc = container(overlay)["securityContext"]
    assert sc["privileged"] is False
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in sc["capabilities"]
    # root only for the root-owned kubelet sockets; see Containerfile
    assert sc["runAsUser"] == 0
    spec = daemonset(overlay)["spec"]["template"]["spec"]
    assert spec.get("hostNetwork", False) is False
    # the API server is talked to only by the DRA driver and the Node labels
    assert spec.get("automountServiceAccountToken") is (overlay in API_CLIENT)


def test_dra_overlay_rbac_is_exactly_what_the_driver_calls():
    """The DRA overlay's ClusterRole: the node's ResourceSlices and reading
    claims, nothing more; bound to devlet's service account; one
    DeviceClass per kind of device the drivers publish."""
    objs = objects("dra")
    (role,) = [o for o in objs if o["kind"] == "ClusterRole"]
    rules = {(g, r): set(x["verbs"]) for x in role["rules"] for g in x["apiGroups"] for r in x["resources"]}
    assert rules == {("resource.k8s.io", "resourceslices"):
                     {"list", "watch", "create", "update", "delete", "deletecollection"},
                     ("resource.k8s.io", "resourceclaims"): {"get"},
                     ("", "nodes"): {"get"}}
    (binding,) = [o for o in objs if o["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "devlet", "namespace": "devlet"}]
    classes = {o["metadata"]["name"] for o in objs if o["kind"] == "DeviceClass"}
    assert classes == {"gpu.nvidia.com", "mig.nvidia.com", "gpu.amd.com", "hostdev.devlet.io"}
    config = yaml.safe_load(config_map("dra")["data"]["config.yaml"])
    assert config["flags"]["draResources"] == ["nvidia.com/gpu", "amd.com/gpu"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_host_pid_only_with_process_attribution(overlay):
    assert daemonset(overlay)["spec"]["template"]["spec"].get("hostPID", False) == (overlay in HOST_PID)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_host_paths_only_where_a_job_needs_them(overlay):
    spec = daemonset(overlay)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container(overlay)["volumeMounts"]}
    assert set(mounts) == set(volumes), "every volume is mounted, every mount has a volume"
    host = {v["hostPath"]["path"]: mounts[name] for name, v in volumes.items() if "hostPath" in v}
    want = {path for path, (_, overlays) in HOST_PATHS.items() if overlay in overlays}
    assert set(host) == want
    for path, mount in host.items():
        assert mount.get("readOnly", False) == HOST_PATHS[path][0], path
    # container state, the driver root and the MPS root hold other
    # containers' mounts: the host's unmounts must reach this pod
    for path in ("/run/containerd", "/run/containers/storage", "/", "/run/nvidia/mps"):
        if path in host:
            assert host[path]["mountPropagation"] == "HostToContainer", path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_config_map_is_mounted_as_a_directory(overlay):
    """No subPath, so ConfigMap edits reach the node (the ..data swap that
    devlet watches)."""
    c = container(overlay)
    spec = daemonset(overlay)["spec"]["template"]["spec"]
    cm = config_map(overlay)
    (vol,) = [v for v in spec["volumes"] if v.get("configMap", {}).get("name") == cm["metadata"]["name"]]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == vol["name"]]
    assert "subPath" not in mount and mount["readOnly"] is True
    config_file = c["args"][c["args"].index("--config-file") + 1]
    assert config_file == mount["mountPath"] + "/config.yaml"
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["version"] == "v1"


@pytest.mark.parametrize("overlay", sorted(GPU))
def test_gpu_overlays_schedule_on_gpu_nodes(overlay):
    spec = daemonset(overlay)["spec"]["template"]["spec"]
    assert NVIDIA_TOLERATION in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"
    if overlay == "nvidia-only":
        # as NVIDIA's static manifest: no affinity, so a cluster without
        # NFD keeps its GPU capacity after the swap
        assert "affinity" not in spec
        return
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    assert {"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"} <= keys
    env = {e["name"]: e.get("value") for e in container(overlay)["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_nvidia_only_is_a_drop_in_for_nvidias_static_manifest():
    objs = objects("nvidia-only")
    assert all(o["metadata"]["namespace"] == "kube-system" for o in objs)
    assert "Namespace" not in {o["kind"] for o in objs}
    spec = daemonset("nvidia-only")["spec"]["template"]["spec"]
    assert spec["tolerations"] == [NVIDIA_TOLERATION]
    assert spec["priorityClassName"] == "system-node-critical"
    host = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert host == {"/var/lib/kubelet/device-plugins"}
    env = {e["name"]: e.get("value") for e in container("nvidia-only")["env"]}
    assert env["FAIL_ON_INIT_ERROR"] == "false"


def test_mps_overlay_runs_the_control_daemon_beside_devlet():
    """nvidia-mps: the second container runs `devlet mps-control-daemon` on
    the same config; it alone is privileged (its shm tmpfs must propagate to
    the host, Bidirectional) and writes the MPS root devlet only reads."""
    spec = daemonset("nvidia-mps")["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["devlet", "mps-control-daemon"]
    side = container("nvidia-mps", "mps-control-daemon")
    assert side["args"] == ["mps-control-daemon", "--config-file", "/etc/devlet/config.yaml"]
    assert side["securityContext"]["privileged"] is True
    mounts = {m["mountPath"]: m for m in side["volumeMounts"]}
    assert mounts["/run/nvidia/mps"]["mountPropagation"] == "Bidirectional"
    assert mounts["/run/nvidia/mps"].get("readOnly", False) is False
    assert mounts["/etc/devlet"]["readOnly"] is True
    (vol,) = [v for v in spec["volumes"] if v["name"] == mounts["/run/nvidia/mps"]["name"]]
    assert vol["hostPath"] == {"path": "/run/nvidia/mps", "type": "DirectoryOrCreate"}
    env = {e["name"]: e.get("value") for e in side["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and "compute" in env["NVIDIA_DRIVER_CAPABILITIES"]
    config = yaml.safe_load(one("nvidia-mps", "ConfigMap")["data"]["config.yaml"])
    assert config["flags"]["mpsRoot"] == "/run/nvidia/mps"
    assert config["sharing"]["mps"]["resources"][0]["replicas"] > 1


def test_host_devices_only_example():
    spec = daemonset("host-devices-only")["spec"]["template"]["spec"]
    assert "tolerations" not in spec and "affinity" not in spec
    c = container("host-devices-only")
    # devlet looks for each device at its host path
    (dev,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev"]
    assert dev["recursiveReadOnly"] == "IfPossible"
    assert not c["terminationMessagePath"].startswith("/dev/")
    config = yaml.safe_load(config_map("host-devices-only")["data"]["config.yaml"])
    names = {d["name"] for d in config["hostDevices"]["devices"]}
    assert {"fuse", "serial"} <= names


def test_amd_only_overlay():
    spec = daemonset("amd-only")["spec"]["template"]["spec"]
    assert {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert "feature.node.kubernetes.io/pci-1002.present" in {e["key"] for t in terms for e in t["matchExpressions"]}
    kinds = {v["hostPath"]["path"]: v["hostPath"]["type"] for v in spec["volumes"] if "hostPath" in v}
    assert kinds["/dev/kfd"] == "CharDevice" and kinds["/dev/dri"] == "Directory"
    config = yaml.safe_load(one("amd-only", "ConfigMap")["data"]["config.yaml"])
    assert config["flags"]["backends"] == ["amd"]
    assert config["flags"]["amd"]["resourceNamingStrategy"] == "single"
    # labels on the Node, as AMD's labeller: reading and patching nodes, nothing more
    assert config["flags"]["labelsOutput"] == "node"
    objs = objects("amd-only")
    (role,) = [o for o in objs if o["kind"] == "ClusterRole"]
    rules = {(g, r): set(x["verbs"]) for x in role["rules"] for g in x["apiGroups"] for r in x["resources"]}
    assert rules == {("", "nodes"): {"get", "patch"}}
    (binding,) = [o for o in objs if o["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "devlet", "namespace": "devlet"}]
    # devlet accepts the file as it is: no unknown keys
    cfg = pathlib.Path(BUILD) / "amd-only-config.yaml"
    cfg.write_text(one("amd-only", "ConfigMap")["data"]["config.yaml"])
    res = subprocess.run([str(BUILD / "devlet"), "list", "--config-file", str(cfg), "--sysfs-root",
                          "/nonexistent"], capture_output=True, text=True, timeout=30)
    cfg.unlink()
    assert res.returncode == 0, res.stderr
    assert "warn" not in res.stderr


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "nvidia-only"])
def test_own_namespace_admits_host_paths(overlay):
    ns = one(overlay, "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert all(o["metadata"].get("namespace") == ns["metadata"]["name"]
               for o in objects(overlay) if o["kind"] in NAMESPACED)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_is_headless_and_reaches_the_metrics_port(overlay):
    svc = one(overlay, "Service")
    pod_labels = daemonset(overlay)["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 9400 and port["targetPort"] == "metrics"
    ann = daemonset(overlay)["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "9400"


def test_service_monitor_selects_the_service():
    sm = one("metrics", "ServiceMonitor")
    svc = one("metrics", "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["metadata"]["namespace"] == svc["metadata"]["namespace"]
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] in {p["name"] for p in svc["spec"]["ports"]} and ep["path"] == "/metrics"
    assert "PodMonitor" not in {o["kind"] for o in objects("metrics")}


def test_monitoring_overlay_ships_the_dashboard_and_the_alerts():
    """deploy/overlays/monitoring: ../metrics plus the dashboard as a
    ConfigMap Grafana's sidecar loads and the PrometheusRule, both exactly
    as deploy/monitoring has them (test_monitoring.py tests their content)."""
    objs = objects("monitoring")
    (dash,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "devlet-dashboard"]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    with open(ROOT / "deploy" / "monitoring" / "devlet-dashboard.json") as f:
        assert json.loads(dash["data"]["devlet-dashboard.json"]) == json.load(f)
    rule = one("monitoring", "PrometheusRule")
    with open(ROOT / "deploy" / "monitoring" / "prometheusrule.yaml") as f:
        assert rule["spec"] == yaml.safe_load(f)["spec"]
    assert rule["metadata"]["namespace"] == daemonset("monitoring")["metadata"]["namespace"]
    assert {"ServiceMonitor", "DaemonSet"} <= {o["kind"] for o in objs}


def test_pod_monitor_selects_the_pods():
    pm = one("metrics-podmonitor", "PodMonitor")
    pod_labels = daemonset("metrics-podmonitor")["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (ep,) = pm["spec"]["podMetricsEndpoints"]
    assert ep["port"] in {p["name"] for p in container("metrics-podmonitor")["ports"]}
    assert "ServiceMonitor" not in {o["kind"] for o in objects("metrics-podmonitor")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_config_map_loads_without_warnings(overlay, tmp_path, plugin_dir):
    """devlet run reads the overlay's config.yaml without a warning (an
    unknown or misspelt key is a warning, never an error, so only the log
    shows it).  The kubelet manager's first line comes after the config's
    warnings; then devlet is stopped."""
    config = tmp_path / "config.yaml"
    config.write_text(config_map(overlay)["data"]["config.yaml"])
    proc = subprocess.Popen([str(BUILD / "devlet"), "run", "--config-file", str(config),
                             "--plugin-directory", str(plugin_dir),
                             "--output-file", str(tmp_path / "gfd"),
                             "--cdi-spec-dir", str(tmp_path / "cdi")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = b""
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + 30
        while b" kubelet: " not in log:
            assert time.monotonic() < deadline, log.decode()
            if sel.select(timeout=deadline - time.monotonic()):
                chunk = os.read(proc.stderr.fileno(), 65536)
                assert chunk, "devlet exited: " + log.decode()
                log += chunk
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
        log += rest
    text = log.decode()
    assert proc.returncode == 0, text
    assert not [line for line in text.splitlines() if " config: " in line and " warn " in line], text
