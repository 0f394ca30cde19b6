"""devlet as a Dynamic Resource Allocation driver (resource.k8s.io/v1) on the
real cluster: the real scheduler allocates from devlet's ResourceSlices with
CEL, the real kubelet calls devlet's NodePrepareResources, and containerd
injects the claim's CDI spec into the container.

The module switches the GPUs and devlet.io/zero to DRA with a config reload
(the ConfigMap, as an operator edits it) and switches them back at the end,
so the rest of the suite keeps its device plugin; devlet.io/fuse stays with
the device plugin throughout.  Every assertion reads what the cluster
reports (ResourceSlices, claims, pod phases and events, what a container
prints, the files on the node), never devlet's word.
"""

import json
import os
import re

import pytest
import yaml

from kube import REPO, cl, kubelet_restart, unique

H100 = os.path.join(REPO, "tests", "mock-nvml", "profiles", f"{cl.NVML_PROFILE}.yaml")
CDI_DIR = "/var/run/cdi"


def gpu_uuids():
    with open(H100) as f:
        return [d["uuid"] for d in yaml.safe_load(f)["devices"]]


def reloads(cluster):
    return cluster.devlet_log().count("daemon: reloaded")


def reconfigure(cluster, text):
    """Edits devlet's ConfigMap and waits for devlet to reload it (nothing
    to wait for when it already holds text: `make cluster DRA=1`)."""
    cm = cluster.get("configmap", "-n", "devlet", "devlet-config")
    if cm["data"]["config.yaml"] == text:
        return
    before = reloads(cluster)
    cluster.set_config(text)
    cluster.wait("devlet to reload its config", lambda: reloads(cluster) > before, timeout=120)


def slices(cluster):
    return cl.resource_slices()


def claim_spec(uid, driver="gpu.nvidia.com"):
    return os.path.join(CDI_DIR, f"k8s.{driver}-claim_{uid}.json")


@pytest.fixture(scope="module")
def dra(cluster):
    """GPUs and devlet.io/zero through DRA for the module; back after."""
    reconfigure(cluster, cl.config_text(True))
    cluster.wait("every driver's ResourceSlices",
                 lambda: slices(cluster) == {"gpu.nvidia.com": 8, "gpu.amd.com": 64,
                                             "hostdev.devlet.io": 1})
    # the kubelet counts a device plugin's devices out once its stream ends
    cluster.wait("the moved resources off the device plugin",
                 lambda: all(cluster.allocatable().get(r.split("=")[0], "0") == "0" for r in cl.DRA_RESOURCES))
    yield cluster
    reconfigure(cluster, cl.CONFIG)
    cluster.wait("the GPUs back with the device plugin",
                 lambda: cluster.allocatable().get("nvidia.com/gpu") == "8"
                 and cluster.allocatable().get("devlet.io/zero") == "1"
                 and cluster.devlet_watched(["nvidia.com/gpu", "amd.com/gpu", "devlet.io/zero"]))
    cluster.wait("the DRA ResourceSlices gone", lambda: slices(cluster) == {})


def template(cluster, name, device_class, cel=None, count=1):
    req = {"name": "dev", "exactly": {"deviceClassName": device_class, "count": count}}
    if cel:
        req["exactly"]["selectors"] = [{"cel": {"expression": cel}}]
    cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"spec": {"devices": {"requests": [req]}}}})


def claim(cluster, name, device_class, cel=None):
    req = {"name": "dev", "exactly": {"deviceClassName": device_class}}
    if cel:
        req["exactly"]["selectors"] = [{"cel": {"expression": cel}}]
    cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"devices": {"requests": [req]}}})


def claim_pod(cluster, name, command, template_name=None, claim_name=None, resources=None):
    src = {"resourceClaimTemplateName": template_name} if template_name else {"resourceClaimName": claim_name}
    cluster.apply({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"devlet-e2e": "1"}},
        "spec": {
            "hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "dev", **src}],
            "containers": [{
                "name": "main", "image": cluster.busybox, "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", command],
                "resources": {"claims": [{"name": "dev"}],
                              "limits": {k: str(v) for k, v in (resources or {}).items()}},
            }],
        },
    })
    return name


def pod_claim_uid(cluster, pod):
    """The UID of the ResourceClaim the pod's claim "dev" resolved to."""
    st = cluster.get("pod", pod)["status"]
    name = next(s["resourceClaimName"] for s in st.get("resourceClaimStatuses", []) if s["name"] == "dev")
    return cluster.get("resourceclaim", name)["metadata"]["uid"]


def wait_output(cluster, pod, text):
    return cluster.wait(f"pod {pod} to print {text!r}", lambda: text in cluster.logs(pod) and cluster.logs(pod))


def test_slices_and_device_plugin_side_by_side(dra):
    """ResourceSlices for the three drivers, the device plugin's resources
    that moved are off the Node, devlet.io/fuse is still there."""
    # the reload re-registered devlet.io/fuse too: the kubelet counts it in
    # again at its next status update
    alloc = dra.wait("devlet.io/fuse on the Node", lambda: dra.allocatable().get("devlet.io/fuse") == "2"
                     and dra.allocatable())
    assert alloc.get("nvidia.com/gpu", "0") == "0", alloc
    items = dra.get("resourceslices")["items"]
    nv = [s for s in items if s["spec"]["driver"] == "gpu.nvidia.com" and s["spec"]["nodeName"] == dra.node]
    assert len(nv) == 1 and nv[0]["spec"]["pool"]["name"] == dra.node
    names = {d["name"] for d in nv[0]["spec"]["devices"]}
    assert names == {f"gpu-{i}" for i in range(8)}, names
    dev = nv[0]["spec"]["devices"][0]
    assert dev["attributes"]["uuid"]["string"] in gpu_uuids()
    assert "H100" in dev["attributes"]["productName"]["string"]


def test_claim_by_cel_runs_and_unprepares(dra, pods):
    """A template selecting by product name and memory: the scheduler
    allocates, the kubelet prepares, the container gets the GPU through the
    claim's CDI spec; deleting the pod unprepares (spec gone)."""
    name = unique("dra-cel")
    template(dra, name, "gpu.nvidia.com",
             'device.attributes["gpu.nvidia.com"].productName.contains("H100") && '
             'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0')
    pods.append(claim_pod(dra, name, "echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 3600", template_name=name))
    dra.wait_phase(name, ("Running",))
    out = wait_output(dra, name, "gpu=")
    uuid = out.split("gpu=")[1].split()[0]
    assert uuid in gpu_uuids(), out
    uid = pod_claim_uid(dra, name)
    assert os.path.exists(claim_spec(uid))
    dra.delete_pods(name)
    dra.wait("the claim's CDI spec removed", lambda: not os.path.exists(claim_spec(uid)))


def two_pods_on(cluster, pods, name):
    """Two running pods on the claim name; the GPU each says it has."""
    got = []
    for p in (f"{name}-a", f"{name}-b"):
        pods.append(claim_pod(cluster, p, "echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 3600", claim_name=name))
    for p in (f"{name}-a", f"{name}-b"):
        cluster.wait_phase(p, ("Running",))
        got.append(wait_output(cluster, p, "gpu=").split("gpu=")[1].split()[0])
    return got


def test_shared_claim_two_pods(dra, pods):
    """One ResourceClaim, two pods: both run with the same GPU."""
    name = unique("dra-shared")
    claim(dra, name, "gpu.nvidia.com")
    try:
        got = two_pods_on(dra, pods, name)
        assert got[0] == got[1] and got[0] in gpu_uuids(), got
    finally:
        dra.delete_pods(*pods)
        dra.kubectl("delete", "resourceclaim", name, "--wait=true", check=False)


def test_host_devices_by_dra_and_by_device_plugin(dra, pods):
    """devlet.io/zero through a claim and devlet.io/fuse through the device
    plugin, in one container."""
    name = unique("dra-hostdev")
    template(dra, name, "hostdev.devlet.io")
    pods.append(claim_pod(dra, name, "test -c /dev/zero && test -c /dev/fuse && echo both-ok",
                          template_name=name, resources={"devlet.io/fuse": 1}))
    dra.wait_phase(name, ("Succeeded",))
    assert "both-ok" in dra.logs(name)


def test_devlet_restart_between_prepare_and_unprepare(dra, pods):
    """devlet restarted while a claim is prepared: the new devlet knows it
    from its checkpoint, and unprepares it when the pod goes."""
    name = unique("dra-restart")
    template(dra, name, "gpu.nvidia.com")
    pods.append(claim_pod(dra, name, "echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 3600", template_name=name))
    dra.wait_phase(name, ("Running",))
    uid = pod_claim_uid(dra, name)
    old = dra.devlet_pod()["metadata"]["name"]
    dra.kubectl("-n", "devlet", "delete", "pod", old, "--wait=true")
    dra.wait("the new devlet ready", lambda: dra.devlet_pod()["metadata"]["name"] != old and dra.devlet_ready())
    assert "checkpoint loaded driver=gpu.nvidia.com claims=1" in dra.devlet_log()
    assert os.path.exists(claim_spec(uid))
    dra.delete_pods(name)
    dra.wait("the claim's CDI spec removed", lambda: not os.path.exists(claim_spec(uid)))
    with open("/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json") as f:
        assert uid not in json.load(f)["claims"]


def test_kubelet_restart_slices_come_back(dra, pods):
    """A starting kubelet wipes the node's ResourceSlices; devlet puts them
    back, and a claim is served again."""
    kubelet_restart(dra)
    dra.wait("the ResourceSlices back",
             lambda: slices(dra) == {"gpu.nvidia.com": 8, "gpu.amd.com": 64, "hostdev.devlet.io": 1})
    name = unique("dra-kubelet")
    template(dra, name, "gpu.nvidia.com")
    pods.append(claim_pod(dra, name, "echo gpu=$NVIDIA_VISIBLE_DEVICES", template_name=name))
    dra.wait_phase(name, ("Succeeded",))
    assert dra.logs(name).split("gpu=")[1].split()[0] in gpu_uuids()


def test_amd_partitions_by_type_on_one_hive(dra, pods):
    """Four CPX partitions with at least 16Gi each, all on one XGMI hive
    (matchAttribute): the container gets the render nodes and /dev/kfd."""
    name = unique("dra-amd")
    dra.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"spec": {"devices": {
                   "requests": [{"name": "dev", "exactly": {
                       "deviceClassName": "gpu.amd.com", "count": 4,
                       "selectors": [{"cel": {"expression":
                                              'device.attributes["gpu.amd.com"].computePartition == "cpx" && '
                                              'device.capacity["gpu.amd.com"].memory.compareTo(quantity("16Gi")) >= 0'}}]}}],
                   "constraints": [{"requests": ["dev"], "matchAttribute": "gpu.amd.com/xgmiHiveID"}]}}}})
    pods.append(claim_pod(dra, name, "ls /dev/dri | grep -c renderD; test -e /dev/kfd && echo kfd-ok",
                          template_name=name))
    dra.wait_phase(name, ("Succeeded",))
    out = dra.logs(name).split()
    assert out == ["4", "kfd-ok"], out


def test_mig_profile_by_cel(dra, pods):
    """An A100 node in MIG mode (mixed): the MIG devices are DRA devices of
    their own, and a claim for profile 1g.10gb gets one of them."""
    from test_cluster import use_gpus
    profile = os.path.join(REPO, "tests", "mock-nvml", "profiles", "a100-mig-mixed.yaml")
    with open(profile) as f:
        devices = yaml.safe_load(f)["devices"]
    mig_uuids = {m["uuid"] for d in devices for m in d.get("mig", []) if m["profile"] == "1g.10gb"}
    mig = sum(len(d.get("mig", [])) for d in devices)
    use_gpus("a100-mig-mixed.yaml")
    text = cl.config_text(True).replace("migStrategy: none", "migStrategy: mixed").replace(
        "  - nvidia.com/gpu\n", "  - nvidia.com/*\n")
    try:
        reconfigure(dra, text)
        dra.wait("the GPUs and MIG devices in the slice", lambda: slices(dra).get("gpu.nvidia.com") == 4 + mig)
        name = unique("dra-mig")
        template(dra, name, "mig.nvidia.com", 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"')
        pods.append(claim_pod(dra, name, "echo $NVIDIA_VISIBLE_DEVICES", template_name=name))
        dra.wait_phase(name, ("Succeeded",))
        assert dra.logs(name).strip() in mig_uuids, dra.logs(name)
    finally:
        use_gpus(f"{cl.NVML_PROFILE}.yaml")
        reconfigure(dra, cl.config_text(True))
        dra.wait("the H100s back", lambda: slices(dra).get("gpu.nvidia.com") == 8)


def gpu_taints(cluster):
    """{uuid: [(key, value, effect)]} of the node's tainted NVIDIA GPUs."""
    out = {}
    for s in cluster.get("resourceslices")["items"]:
        if s["spec"]["driver"] != "gpu.nvidia.com" or s["spec"].get("nodeName") != cluster.node:
            continue
        for d in s["spec"].get("devices", []):
            if d.get("taints"):
                out[d["attributes"]["uuid"]["string"]] = [
                    (t["key"], t.get("value", ""), t["effect"]) for t in d["taints"]]
    return out


def claim_health(cluster, pod):
    """The healths the kubelet reports for the pod's claim "dev"."""
    p = cluster.get("pod", pod)
    out = []
    for cs in p.get("status", {}).get("containerStatuses", []):
        for st in cs.get("allocatedResourcesStatus") or []:
            if st["name"].startswith("claim:"):
                out += [r.get("health") for r in st.get("resources") or []]
    return out


def test_unhealthy_gpu_gets_no_new_allocation(dra, pods):
    """An XID taints its GPU in the slice (gpu.nvidia.com/xid=79,
    NoSchedule, as NVIDIA's DRA driver names it): a claim for all 8 waits
    (the scheduler does not allocate a tainted device) until the GPU
    recovers and the taint goes."""
    from test_cluster import append_event, use_gpus
    reconfigure(dra, cl.config_text(True) + "health:\n  recovery:\n    enabled: true\n    quietPeriod: 20s\n")
    # a pod holding GPU 3 sees its health (KEP-4680: devlet's health
    # service, the kubelet's allocatedResourcesStatus)
    holder = unique("dra-holder")
    template(dra, holder, "gpu.nvidia.com",
             cel=f'device.attributes["gpu.nvidia.com"].uuid == "{gpu_uuids()[3]}"')
    pods.append(claim_pod(dra, holder, "sleep 3600", template_name=holder))
    try:
        dra.wait_phase(holder, ("Running",))
        dra.wait("the GPU Healthy in the holder's status",
                 lambda: claim_health(dra, holder) == ["Healthy"])
        append_event({"device": 3, "type": "xid", "xid": 79})
        dra.wait("the GPU tainted in its slice", lambda: gpu_taints(dra), interval=0.05)
        assert gpu_taints(dra) == {gpu_uuids()[3]: [("gpu.nvidia.com/xid", "79", "NoSchedule")]}
        assert slices(dra).get("gpu.nvidia.com") == 8
        dra.wait("the GPU Unhealthy in the holder's status",
                 lambda: claim_health(dra, holder) == ["Unhealthy"])
        dra.delete_pods(holder)
        name = unique("dra-all8")
        template(dra, name, "gpu.nvidia.com", count=8)
        pods.append(claim_pod(dra, name, "echo $NVIDIA_VISIBLE_DEVICES", template_name=name))
        dra.wait("the scheduler to refuse the claim",
                 lambda: any(r == "FailedScheduling" for r, _ in dra.events(name)))
        assert dra.phase(name) == "Pending"
        dra.wait_phase(name, ("Succeeded",), timeout=120)
        assert len(dra.logs(name).strip().split(",")) == 8, dra.logs(name)
        assert gpu_taints(dra) == {}
    finally:
        use_gpus(f"{cl.NVML_PROFILE}.yaml")
        reconfigure(dra, cl.config_text(True))


def test_extended_resource_served_through_dra(dra, pods):
    """devlet.io/zero in mode "both": a pod that asks for it the device
    plugin's way ("devlet.io/zero: 1", no claim) is served through DRA, by
    the DeviceClass that maps the extended resource (DRAExtendedResource)."""
    dra.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
               "metadata": {"name": "zero.devlet.io"},
               "spec": {"extendedResourceName": "devlet.io/zero",
                        "selectors": [{"cel": {"expression":
                                               'device.driver == "hostdev.devlet.io" && '
                                               'device.attributes["hostdev.devlet.io"].resource == "devlet.io/zero"'}}]}})
    try:
        name = unique("dra-extended")
        pods.append(dra.pod(name, {"devlet.io/zero": 1}, "test -c /dev/zero && echo zero-ok; sleep 3600"))
        dra.wait_phase(name, ("Running",))
        wait_output(dra, name, "zero-ok")
        st = dra.get("pod", name)["status"]
        claim = st["extendedResourceClaimStatus"]["resourceClaimName"]
        uid = dra.get("resourceclaim", claim)["metadata"]["uid"]
        assert os.path.exists(claim_spec(uid, "hostdev.devlet.io"))
        dra.delete_pods(name)
        dra.wait("the claim's CDI spec removed", lambda: not os.path.exists(claim_spec(uid, "hostdev.devlet.io")))
    finally:
        dra.kubectl("delete", "deviceclass", "zero.devlet.io", check=False)


def test_slices_of_a_deleted_node_are_collected(cluster, tmp_path):
    """devlet's ResourceSlices are owned by their Node: a node that is
    deleted (scaled away, replaced) takes its slices with it, through the
    real garbage collector, even when devlet is gone too.  A second devlet
    runs here on the host for a Node object of its own (its host devices
    published through DRA), so the cluster's real node is left alone."""
    import signal
    import stat
    import subprocess

    node = unique("ghost")
    cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    uid = json.loads(cluster.kubectl("get", "node", node, "-o", "json").stdout)["metadata"]["uid"]
    dev = tmp_path / "dev"
    dev.mkdir()
    os.mknod(dev / "ttyG0", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"version": "v1", "hostDevices": {
        "domain": "devlet.io", "devices": [
            {"name": "ghost", "groups": [{"paths": [{"path": f"{dev}/ttyG*"}]}]}]}}))
    binary = os.path.join(os.environ.get("DEVLET_BUILD", os.path.join(REPO, "build")), "devlet")
    log = open(tmp_path / "devlet.log", "w")
    proc = subprocess.Popen(
        [binary, "--config-file", str(config), "--backends", "hostdev", "--metrics-address", "",
         "--kubeconfig", cl.path("admin.kubeconfig"), "--node-name", node,
         "--plugin-directory", str(tmp_path / "plugins"),
         "--kubelet-socket", str(tmp_path / "plugins" / "kubelet.sock"),
         "--kubelet-registrar-directory-path", str(tmp_path / "reg"),
         "--kubelet-plugins-directory-path", str(tmp_path / "draplug"),
         "--cdi-spec-dir", str(tmp_path / "cdi"), "--output-file", str(tmp_path / "gfd"),
         "--dra-resources", "devlet.io/ghost"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        def ours():
            out = cluster.kubectl("get", "resourceslices", "-o", "json").stdout
            return [s for s in json.loads(out)["items"] if s["spec"].get("nodeName") == node]
        got = cluster.wait("the ghost node's slice", lambda: ours() or None)
        assert [(o["kind"], o["name"], o["uid"]) for o in got[0]["metadata"]["ownerReferences"]] \
            == [("Node", node, uid)], got[0]["metadata"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        cluster.kubectl("delete", "node", node)
        cluster.wait("the garbage collector to remove the slice", lambda: not ours(), timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        cluster.kubectl("delete", "node", node, "--ignore-not-found", check=False)


def test_a_node_writes_only_its_own_slices(dra):
    """The ValidatingAdmissionPolicy of deploy/overlays/dra (policy.yaml):
    devlet's service account, with the token of devlet's pod on this node
    (what devlet itself holds: it names the node), may create and delete a
    ResourceSlice of this node, and is refused one of another node."""
    cluster = dra
    pod = cluster.devlet_pod()["metadata"]
    token = cluster.kubectl("create", "token", "devlet", "-n", "devlet", "--duration", "10m",
                            "--bound-object-kind", "Pod", "--bound-object-name", pod["name"],
                            "--bound-object-uid", pod["uid"]).stdout.strip()

    def as_devlet(*args, input=None):
        import subprocess
        return subprocess.run([cl.kubectl_bin(), "--kubeconfig", "/dev/null",
                               "--server", "https://127.0.0.1:6443",
                               "--certificate-authority", cl.path("pki", "ca.crt"),
                               "--token", token, *args],
                              input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60)

    def slice_of(node):
        name = unique("policy")
        return name, json.dumps({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": "policy.devlet.io", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "d0"}]}})

    # its own node: allowed, both ways
    name, obj = slice_of(cluster.node)
    r = as_devlet("create", "-f", "-", input=obj)
    assert r.returncode == 0, r.stderr
    r = as_devlet("delete", "resourceslice", name)
    assert r.returncode == 0, r.stderr
    # another node: refused, with the policy's words
    other = unique("elsewhere")
    name, obj = slice_of(other)
    r = as_devlet("create", "-f", "-", input=obj)
    assert r.returncode != 0
    assert "devlet-dra-own-node-slices" in r.stderr and \
        f'devlet on node "{cluster.node}" may not write a ResourceSlice of node "{other}"' in r.stderr, \
        r.stderr
    assert cluster.kubectl("get", "resourceslice", name, check=False).returncode != 0
    # nor may it delete another node's slice (made here by the admin)
    cluster.kubectl("create", "-f", "-", input=obj)
    try:
        r = as_devlet("delete", "resourceslice", name)
        assert r.returncode != 0 and "may not write a ResourceSlice" in r.stderr, r.stderr
    finally:
        cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found")


def test_an_admin_access_claim_shares_a_held_gpu(dra, pods):
    """Admin access (GA in 1.36): a claim with adminAccess, in a namespace
    labelled for it, gets a GPU another pod holds, for monitoring or
    debugging; devlet prepares it beside the holder's claim and the
    holder keeps its GPU."""
    uuid = gpu_uuids()[5]
    cel = f'device.attributes["gpu.nvidia.com"].uuid == "{uuid}"'
    holder = unique("held")
    template(dra, holder, "gpu.nvidia.com", cel=cel)
    pods.append(claim_pod(dra, holder, "echo $NVIDIA_VISIBLE_DEVICES; sleep 3600", template_name=holder))
    dra.wait_phase(holder, ("Running",))
    ns = unique("admin")
    dra.apply({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": ns, "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    name = unique("admin-pod")
    try:
        dra.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": name, "namespace": ns},
                   "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": {
                       "deviceClassName": "gpu.nvidia.com", "adminAccess": True,
                       "selectors": [{"cel": {"expression": cel}}]}}]}}}})
        dra.apply({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {
                "hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": name}],
                "containers": [{"name": "main", "image": dra.busybox, "imagePullPolicy": "Never",
                                "command": ["/bin/sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"],
                                "resources": {"claims": [{"name": "dev"}]}}]}})
        dra.wait_phase(name, ("Succeeded",), namespace=ns)
        assert uuid in dra.logs(name, namespace=ns), dra.logs(name, namespace=ns)
        assert dra.phase(holder) == "Running"
        assert uuid in dra.logs(holder)
    finally:
        dra.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_a_device_plugin_pod_gets_a_gpu_through_dra(dra, pods):
    """The GPUs served through DRA (the module's mode "dra", the device
    plugin's nvidia.com/gpu gone from the node): a pod written for the
    device plugin ("nvidia.com/gpu: 1", no claim) runs, given a GPU by the
    gpu.nvidia.com DeviceClass's extendedResourceName."""
    assert dra.allocatable().get("nvidia.com/gpu", "0") == "0"
    name = unique("dp-style")
    pods.append(dra.pod(name, {"nvidia.com/gpu": 1}, "echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 3600"))
    dra.wait_phase(name, ("Running",))
    out = wait_output(dra, name, "gpu=GPU-")
    assert out.strip().split("=", 1)[1] in gpu_uuids(), out
    claim = dra.get("pod", name)["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    results = dra.get("resourceclaim", claim)["status"]["allocation"]["devices"]["results"]
    assert [r["driver"] for r in results] == ["gpu.nvidia.com"]


def configured_claim(cluster, name, sharing):
    """A claim for one GPU carrying NVIDIA's opaque GpuConfig, as written
    for NVIDIA's DRA driver."""
    cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"devices": {
                       "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                       "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
                           "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                           "sharing": sharing}}}]}}})


def test_a_time_slicing_claim_shared_by_two_pods(dra, pods):
    """NVIDIA's TimeSlicing GpuConfig, unchanged: two pods share the claim's
    GPU; the interval goes to nvidia-smi compute-policy, which the mock
    machine lacks, and devlet says it was not applied."""
    name = unique("ts-shared")
    configured_claim(dra, name, {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})
    try:
        got = two_pods_on(dra, pods, name)
        assert got[0] == got[1] and got[0] in gpu_uuids(), got
        uid = dra.get("resourceclaim", name)["metadata"]["uid"]
        dra.wait("devlet to say the interval was not applied", lambda: re.search(
            rf"time-slice not applied claim_uid={uid} device={got[0]} reason=\"nvidia-smi not found",
            dra.devlet_log()))
    finally:
        dra.delete_pods(*pods)
        dra.kubectl("delete", "resourceclaim", name, "--wait=true", check=False)


def test_a_wrong_claim_config_shows_in_the_pods_events(dra, pods):
    """A GpuConfig devlet cannot apply: the pod does not start, and its
    events carry devlet's message with the field's path."""
    name = unique("bad-config")
    configured_claim(dra, name, {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}})
    try:
        pods.append(claim_pod(dra, name, "echo ran", claim_name=name))
        ev = dra.wait("the kubelet's FailedPrepareDynamicResources event", lambda: [
            m for r, m in dra.events(name) if r == "FailedPrepareDynamicResources"])
        assert (f"claim default/{name}: the claim's config[0]: "
                ".sharing.timeSlicingConfig.interval: unknown time-slice interval \"Forever\"") in ev[0], ev
        assert dra.phase(name) == "Pending"
    finally:
        dra.delete_pods(*pods)
        dra.kubectl("delete", "resourceclaim", name, "--wait=true", check=False)
