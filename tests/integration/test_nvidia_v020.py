"""NVIDIA device plugin v0.20's DaemonSet, as an operator switching to devlet
runs it: flags without a subcommand, the newer flags and env vars (dev root,
MPS root, discovery strategy, IMEX channels, CDI feature flags and hooks,
GFD's NodeFeature API flags, now honoured), the start-up line with the effective config,
`devlet help run`, and --kubelet-socket "" (serve, never register).  Through
the simulated kubelet over the mock NVML."""

import json
import os

from devlet_harness import DEVLET_BIN, make_node, run_devlet, wait_until
from mock_gpus import GPU, V100, start

QUIET = {"DP_DISABLE_HEALTHCHECKS": "all"}
CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"
LIST_ROOT = "/var/run/nvidia-container-devices"

# NVIDIA v0.20's flags as its Helm chart and docs spell them
NVIDIA_ARGS = ["--mig-strategy=none", "--fail-on-init-error=true", "--pass-device-specs=false",
               "--device-list-strategy=envvar", "--device-id-strategy=uuid",
               "--nvidia-driver-root=/", "--mps-root=/run/nvidia/mps",
               "--device-discovery-strategy=auto", "--cdi-feature-flags=disable-nvsandbox-utils",
               "--cdi-annotation-prefix=cdi.k8s.io/", "--nvidia-cdi-hook-path=/usr/bin/nvidia-cdi-hook",
               "--driver-root-ctr-path=/driver-root", "--imex-channel-ids=0"]


def test_nvidia_args_without_subcommand(kubelet, devlet, node, dirs):
    """`devlet --mig-strategy=none ...` is `devlet run`: registers, logs its
    effective configuration as one JSON line, and gives the IMEX channel."""
    make_node(f"{dirs.dev}/nvidia-caps-imex-channels/channel0")
    n = node("v100-dgx1")
    d = devlet(None, start=False, env=n.env(**QUIET, IMEX_REQUIRED="true",
                                            CDI_FEATURE_FLAGS="enable-explicit-driver-libraries"))
    d.command = lambda: [DEVLET_BIN, "--plugin-directory", dirs.plugins, *NVIDIA_ARGS,
                         "--nvidia-dev-root", dirs.root, "--metrics-address="]
    d.start()
    kubelet.wait_for_registration(GPU)
    assert kubelet.wait_for_snapshot(GPU).ids() == V100
    m = d.wait_log(r"running with config=(\{.*\})\n")
    cfg = json.loads(m.group(1))
    assert cfg["flags"]["mig-strategy"] == "none"
    assert cfg["flags"]["dev-root"] == dirs.root
    assert cfg["flags"]["imex-channel-ids"] == ["0"]
    assert cfg["flags"]["cdi-feature-flags"] == ["disable-nvsandbox-utils"]  # the flag beats the env
    assert cfg["flags"]["imex-required"] is True
    resp = kubelet.allocate(GPU, [[V100[1]]])
    assert dict(resp.container_responses[0].envs) == {"NVIDIA_VISIBLE_DEVICES": V100[1],
                                                      "NVIDIA_IMEX_CHANNELS": "0"}
    assert "warn  config:" not in d.log_text()  # every flag NVIDIA's chart passes applies


def test_imex_channel_in_every_strategy(kubelet, devlet, node, dirs):
    make_node(f"{dirs.dev}/nvidia-caps-imex-channels/channel0")
    for f in ("nvidiactl",):
        make_node(f"{dirs.dev}/{f}")
    n = node("v100-dgx1")
    start(devlet, kubelet, n, env=QUIET,
          args=["--device-list-strategy", "volume-mounts,cdi-cri", "--pass-device-specs",
                "--dev-root", dirs.root, "--imex-channel-ids", "0"])
    c = kubelet.allocate(GPU, [[V100[2]]]).container_responses[0]
    assert [d.name for d in c.cdi_devices] == ["k8s.device-plugin.nvidia.com/gpu=" + V100[2],
                                               "k8s.device-plugin.nvidia.com/imex-channel=0"]
    assert [(m.host_path, m.container_path) for m in c.mounts] == [
        ("/dev/null", f"{LIST_ROOT}/{V100[2]}"), ("/dev/null", f"{LIST_ROOT}/imex/0")]
    assert [(s.container_path, s.host_path) for s in c.devices] == [
        ("/dev/nvidiactl", f"{dirs.root}/dev/nvidiactl"),
        ("/dev/nvidia2", f"{dirs.root}/dev/nvidia2"),
        (CHANNEL0, dirs.root + CHANNEL0)]


def test_imex_channel_missing(node, dirs):
    """Not required: left out with a warning.  Required: the backend fails,
    as NVIDIA's plugin fails to start."""
    n = node("v100-dgx1")
    res = run_devlet(["list", "-o", "json", "--dev-root", dirs.root, "--imex-channel-ids", "0"],
                     env=n.env(**QUIET))
    assert res.returncode == 0, res.stderr
    assert "IMEX channel 0 not found" in res.stderr
    res = run_devlet(["list", "--dev-root", dirs.root, "--imex-channel-ids", "0", "--imex-required"],
                     env=n.env(**QUIET))
    assert res.returncode == 1
    assert "IMEX channel 0 is required (--imex-required) but " + dirs.root + CHANNEL0 in res.stderr


def test_refused_and_warned(node):
    n = node("v100-dgx1")
    res = run_devlet(["list", "--device-discovery-strategy", "tegra"], env=n.env())
    assert res.returncode == 2
    assert "--device-discovery-strategy=tegra is not supported" in res.stderr
    res = run_devlet(["list", "--imex-channel-ids", "3"], env=n.env())
    assert res.returncode == 2
    assert "channelIDs must be [] or [0]; found [3]" in res.stderr
    # GFD's NodeFeature API: the labels go to the API server (here: none
    # reachable, so `devlet labels` fails and says why); GFD's client knobs
    # are accepted quietly
    res = run_devlet(["labels", "--use-node-feature-api", "--node-name", "n1", "--namespace", "gpu",
                      "--kubeconfig", "/nowhere", "--kube-api-qps", "7", "--no-timestamp",
                      "--machine-type-file", ""], env=n.env(**QUIET))
    assert res.returncode == 1, res.stderr
    assert "warning:" not in res.stderr
    assert "/nowhere: API server" in res.stderr


def test_help_run():
    res = run_devlet(["help", "run"])
    assert res.returncode == 0
    assert res.stdout.startswith("usage: devlet run [flags]")
    assert "--imex-channel-ids" in res.stdout
    assert run_devlet(["run", "--help"]).stdout == res.stdout


def test_kubelet_socket_empty_serves_without_registering(kubelet, devlet, node, dirs):
    n = node("v100-dgx1")
    d = devlet(None, args=["--kubelet-socket="], env=n.env(**QUIET))
    d.wait_log("serving the plugin sockets without registering")
    sock = d.socket_path(GPU)
    wait_until(lambda: os.path.exists(sock), 10, "the plugin socket")
    res = run_devlet(["probe", "--socket", sock])
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["devices"]) == 8
    # Register goes out right after serving: had it been sent, it would be here
    assert kubelet.registrations == []


def test_startup_warns_where_nvidia_would_differ(kubelet, devlet, node):
    """Each MIG device NVIDIA's plugin would serve under another name, and
    each resource a key NVIDIA ignores renames or resizes, is named once at
    start-up."""
    n = node("a100-mig-mixed")
    config = {"version": "v1", "flags": {"migStrategy": "mixed"},
              "resources": {"gpus": [{"pattern": "*A100*", "name": "nvidia.com/a100"}]}}
    d = start(devlet, kubelet, n, config=config, env=QUIET,
              resources=["nvidia.com/a100", "nvidia.com/mig-1c.3g.40gb", "nvidia.com/mig-2c.3g.40gb"])
    one, two = n.mig_uuids(3)[1:3]
    log = d.log_text()
    assert (f"differs from NVIDIA's plugin: MIG device {one} (GPU 3, profile 1c.3g.40gb) is served "
            "as nvidia.com/mig-1c.3g.40gb; NVIDIA's plugin would serve it as nvidia.com/mig-3g.40gb") in log
    assert f"MIG device {two} (GPU 3, profile 2c.3g.40gb) is served as nvidia.com/mig-2c.3g.40gb" in log
    assert ("resource nvidia.com/mig-3g.40gb has 3 devices; NVIDIA's plugin would serve 5 from the "
            "same config") in log
    assert ("resource nvidia.com/a100 (4 devices) would not exist with NVIDIA's plugin and the same "
            "config: it would serve these devices as nvidia.com/gpu") in log
    assert log.count("differs from NVIDIA's plugin") == 7
