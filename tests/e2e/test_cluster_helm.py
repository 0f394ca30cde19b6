"""devlet installed with its Helm chart (deploy/helm/devlet) on the real
cluster, by the helm peer scripts/peers.sh builds (tests/cluster/versions.env
pins it), the way an operator installs it: `helm install`, `helm upgrade`,
`helm uninstall`.

The module parks the kustomize-installed devlet (namespace devlet, which
`make cluster` applied) for its duration: a nodeSelector no node has takes
its pod off the node, since two devlets on one node would register the
same resources and listen on the same host port.  The chart is installed
in its own namespace with the values that give it the mock hardware the
test overlay gives the kustomize one (scripts/cluster.py, write_overlay),
so the Node shows the same devices.  At the end the release is uninstalled
and the kustomize devlet put back as it was, with the Node's devices as
the rest of the suite expects them.  Every assertion reads what the
cluster reports (pods, the Node's allocatable, what a container prints).
"""

import json
import os
import subprocess
import urllib.request

import pytest
import yaml

from kube import DEVICES, REPO, cl, unique

CHART = os.path.join(REPO, "deploy", "helm", "devlet")
NS = "devlet-helm"
RELEASE = "devlet"
PARK = "devlet.io/e2e-parked"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
H100 = os.path.join(REPO, "tests", "mock-nvml", "profiles", f"{cl.NVML_PROFILE}.yaml")


def gpu_uuids():
    with open(H100) as f:
        return [d["uuid"] for d in yaml.safe_load(f)["devices"]]


def host_devices(fuse=2):
    """The test overlay's host devices (cluster.CONFIG), fuse shared by fuse."""
    devices = yaml.safe_load(cl.CONFIG)["hostDevices"]["devices"]
    for d in devices:
        if d["name"] == "fuse":
            d["groups"][0]["count"] = fuse
    return devices


def values(**extra):
    """The chart's values for this node: devlet's image as `make cluster`
    imported it, the host network (the cluster's CNI is loopback only), the
    test overlay's host devices and config flags, and its mock hardware."""
    mock = cl.path("mock")
    repo, tag = cl.DEVLET_IMAGE.rsplit(":", 1)
    v = {
        "image": {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"},
        "hostNetwork": True,
        "migStrategy": "none",
        "failOnInitError": False,
        "hostDevices": {"enabled": True, "domain": "devlet.io", "devices": host_devices()},
        "extraEnv": [
            {"name": "DEVLET_NVML_LIBRARY", "value": f"{mock}/lib/libnvidia-ml.so.1"},
            {"name": "MOCK_NVML_CONFIG", "value": f"{mock}/nvml.yaml"},
            {"name": "DEVLET_SYSFS_ROOT", "value": f"{mock}/sys"},
            {"name": "NVIDIA_DEV_ROOT", "value": mock},
        ],
        "extraVolumes": [{"name": "mock-hardware", "hostPath": {"path": mock, "type": "Directory"}}],
        "extraVolumeMounts": [{"name": "mock-hardware", "mountPath": mock, "readOnly": True}],
    }
    v.update(extra)
    return v


@pytest.fixture(scope="module")
def helm(cluster, tmp_path_factory):
    """helm against the local cluster: the peer's binary (built into the
    cache when missing), the cluster's admin kubeconfig, its own dirs."""
    out = subprocess.run([os.path.join(REPO, "scripts", "peers.sh"), "helm"], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=1800).stdout
    binary = os.path.join(dict(line.split("=", 1) for line in out.split())["helm"], "bin", "helm")
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ, HELM_CONFIG_HOME=str(home / "config"), HELM_CACHE_HOME=str(home / "cache"),
               HELM_DATA_HOME=str(home / "data"), KUBECONFIG=cl.path("admin.kubeconfig"))

    def run(*args, vals=None, check=True, timeout=300):
        cmd = [binary, *args]
        if vals is not None:
            f = home / f"values-{unique('v')}.yaml"
            f.write_text(yaml.safe_dump(vals))
            cmd += ["--values", str(f)]
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}: {r.stderr.strip()}")
        return r
    return run


def node_devices(cluster):
    a = cluster.allocatable()
    return {r: a.get(r, "0") for r in DEVICES}


def helm_pods(cluster):
    pods = cluster.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def helm_pod_ready(cluster, daemonset=RELEASE):
    """The release's one live pod, once it is Ready and owned by daemonset."""
    pods = helm_pods(cluster)
    return (len(pods) == 1 and ready(pods[0]) and pods[0]["metadata"]["ownerReferences"][0]["name"] == daemonset
            and pods[0])


def helm_log(cluster, pod):
    return cluster.logs(pod["metadata"]["name"], NS, "devlet")


@pytest.fixture(scope="module")
def chart(cluster, helm):
    """The kustomize devlet parked, the chart installed in NS for the
    module; then uninstalled, and the kustomize devlet back as before."""
    before = node_devices(cluster)
    ds = cluster.get("ds", "-n", "devlet", "devlet")
    selector = ds["spec"]["template"]["spec"].get("nodeSelector")
    cluster.kubectl("-n", "devlet", "patch", "ds", "devlet", "--type", "merge", "-p",
                    json.dumps({"spec": {"template": {"spec": {"nodeSelector": {PARK: "true"}}}}}))
    try:
        cluster.wait("the kustomize devlet's pod gone", lambda: not cluster.get(
            "pods", "-n", "devlet", "-l", "app.kubernetes.io/name=devlet")["items"], timeout=120)
        # what an earlier run that was cut short may have left
        helm("uninstall", RELEASE, "--namespace", NS, "--wait", check=False)
        cluster.apply({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": NS, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
        helm("install", RELEASE, CHART, "--namespace", NS, vals=values())
        yield cluster
    finally:
        helm("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "180s", check=False)
        cluster.kubectl("label", "node", cluster.node, f"{CONFIG_LABEL}-", check=False)
        cluster.kubectl("delete", "namespace", NS, "--wait=true", check=False, timeout=180)
        patch = ([{"op": "replace", "path": "/spec/template/spec/nodeSelector", "value": selector}] if selector
                 else [{"op": "remove", "path": "/spec/template/spec/nodeSelector"}])
        cluster.kubectl("-n", "devlet", "patch", "ds", "devlet", "--type", "json", "-p", json.dumps(patch))
        cluster.kubectl("-n", "devlet", "rollout", "status", "ds/devlet", "--timeout=180s", timeout=200)
        cluster.wait("the kustomize devlet serving again", lambda: cluster.devlet_ready()
                     and node_devices(cluster) == before, timeout=180)


def test_helm_install_serves_every_resource(chart):
    """`helm install`: one pod, Ready (/ready: every resource registered),
    the DaemonSet's shape the chart's defaults give, and the Node shows
    every device the kustomize devlet served."""
    chart.kubectl("-n", NS, "rollout", "status", f"ds/{RELEASE}", "--timeout=180s", timeout=200)
    pod = chart.wait("the chart's devlet pod Ready", lambda: helm_pod_ready(chart), timeout=180)
    assert pod["spec"]["nodeName"] == chart.node
    spec = pod["spec"]
    assert spec["hostPID"] is True and spec["priorityClassName"] == "system-node-critical"
    c = spec["containers"][0]
    assert c["securityContext"]["privileged"] is False and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    chart.wait("every device on the Node", lambda: node_devices(chart) == DEVICES, timeout=120)
    log = chart.wait("the kubelet to watch every resource", lambda: all(
        f"watched resource={r} " in helm_log(chart, pod) for r in DEVICES) and helm_log(chart, pod))
    assert "config: running with config=" in log


def test_helm_devices_usable_in_a_pod(chart, pods):
    out = chart.run_pod(pods.append(unique("helm-gpu")) or pods[-1], {"nvidia.com/gpu": 1, "devlet.io/fuse": 1},
                        "echo $NVIDIA_VISIBLE_DEVICES; test -c /dev/fuse && echo fuse")
    lines = out.split()
    assert lines[0] in gpu_uuids() and lines[1] == "fuse", out


def test_helm_metrics_endpoint(chart):
    """The chart's probes and Service point at the port devlet serves."""
    with urllib.request.urlopen("http://127.0.0.1:9400/ready", timeout=5) as r:
        assert r.status == 200
    with urllib.request.urlopen("http://127.0.0.1:9400/metrics", timeout=5) as r:
        text = r.read().decode()
    assert "DCGM_FI_DEV_GPU_TEMP{" in text and "devlet_" in text
    svc = chart.get("service", "-n", NS, RELEASE)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["ports"][0]["port"] == 9400
    pod = helm_pods(chart)[0]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


def test_helm_upgrade_reloads_config_without_restart(chart, helm):
    """`helm upgrade` with another host-device count: the ConfigMap the
    chart writes changes, devlet reloads it in place (the pod is not
    replaced: no checksum annotation), the Node shows the new count."""
    pod = helm_pod_ready(chart)
    helm("upgrade", RELEASE, CHART, "--namespace", NS,
         vals=values(hostDevices={"enabled": True, "domain": "devlet.io", "devices": host_devices(fuse=3)}))
    chart.wait("devlet.io/fuse: 3 on the Node", lambda: chart.allocatable().get("devlet.io/fuse") == "3",
               timeout=180)
    now = helm_pod_ready(chart)
    assert now["metadata"]["uid"] == pod["metadata"]["uid"]
    assert now["status"]["containerStatuses"][0]["restartCount"] == pod["status"]["containerStatuses"][0][
        "restartCount"]
    assert "daemon: reloaded" in helm_log(chart, now)
    helm("upgrade", RELEASE, CHART, "--namespace", NS, vals=values())
    chart.wait("devlet.io/fuse: 2 again", lambda: chart.allocatable().get("devlet.io/fuse") == "2", timeout=180)


def test_helm_per_node_config_follows_the_node_label(chart, helm):
    """config.map, NVIDIA's per-node configs: the node runs the default
    config until it is labelled nvidia.com/device-plugin.config=<name>;
    then that config's DaemonSet takes the node over, and gives it back
    when the label goes."""
    config = yaml.safe_load(cl.CONFIG)

    def text(fuse):
        c = dict(config, hostDevices={"domain": "devlet.io", "devices": host_devices(fuse)})
        return yaml.safe_dump(c)
    helm("upgrade", RELEASE, CHART, "--namespace", NS,
         vals=values(config={"map": {"default": text(2), "more-fuse": text(5)}}))
    chart.kubectl("-n", NS, "rollout", "status", f"ds/{RELEASE}", "--timeout=180s", timeout=200)
    chart.wait("the default config's pod", lambda: helm_pod_ready(chart), timeout=180)
    chart.wait("no node for the more-fuse DaemonSet yet", lambda: chart.get(
        "ds", "-n", NS, f"{RELEASE}-more-fuse").get("status", {}).get("observedGeneration")
        and not helm_pods(chart)[1:] and chart.get("ds", "-n", NS, f"{RELEASE}-more-fuse")["status"].get(
            "desiredNumberScheduled", 0) == 0)
    try:
        chart.kubectl("label", "--overwrite", "node", chart.node, f"{CONFIG_LABEL}=more-fuse")
        chart.wait("the more-fuse DaemonSet's pod on the node",
                   lambda: helm_pod_ready(chart, f"{RELEASE}-more-fuse"), timeout=180)
        chart.wait("devlet.io/fuse: 5", lambda: chart.allocatable().get("devlet.io/fuse") == "5", timeout=120)
        chart.wait("every other device still there", lambda: all(
            chart.allocatable().get(r) == n for r, n in DEVICES.items() if r != "devlet.io/fuse"), timeout=120)
    finally:
        chart.kubectl("label", "node", chart.node, f"{CONFIG_LABEL}-")
    chart.wait("the default config's pod back", lambda: helm_pod_ready(chart), timeout=180)
    chart.wait("devlet.io/fuse: 2", lambda: chart.allocatable().get("devlet.io/fuse") == "2", timeout=120)
    helm("upgrade", RELEASE, CHART, "--namespace", NS, vals=values())
    chart.wait("the chart's own config's pod", lambda: helm_pod_ready(chart) and not chart.get(
        "ds", "-n", NS, "-l", f"app.kubernetes.io/instance={RELEASE}")["items"][1:], timeout=180)


def test_helm_uninstall_takes_the_devices_away(chart, helm):
    """`helm uninstall`: the pod goes, and the kubelet counts the devices
    out when the plugin sockets go."""
    helm("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "180s")
    chart.wait("the chart's pods gone", lambda: not helm_pods(chart), timeout=120)
    chart.wait("the devices off the Node", lambda: all(v == "0" for v in node_devices(chart).values()),
               timeout=120)
    assert helm("status", RELEASE, "--namespace", NS, check=False).returncode != 0
