"""The harness checked against itself: PyPlugin (a grpcio device plugin)
registers with KubeletSim, so the simulator's kubelet behaviour (dial-back
inside Register, ListAndWatch reader, replacement on re-registration,
rejection, restart wiping the directory) is known to work before devlet's
tests rely on it."""

import os
import threading

import grpc
import pytest

from kubelet_sim import Device, PyPlugin


def test_register_dials_back_before_answering(kubelet, plugin_dir):
    devs = [Device("a", "Healthy", None), Device("b", "Healthy", 1)]
    with PyPlugin(os.path.join(plugin_dir, "py.sock"), devs, pre_start_required=True) as plug:
        plug.register(kubelet.socket_path, "example.com/thing")
        reg = kubelet.wait_for_registration("example.com/thing")
        # Register returned only after the options call: it is on record already.
        assert plug.calls[0] == "GetDevicePluginOptions"
        assert reg.version == "v1beta1" and reg.endpoint == "py.sock" and reg.socket_existed
        assert reg.dialed_options == reg.options and reg.options.pre_start_required
        snap = kubelet.wait_for_snapshot("example.com/thing")
        assert [(d.id, d.health, d.numa) for d in snap.devices] == [("a", "Healthy", None), ("b", "Healthy", 1)]

        plug.set_devices([Device("a", "Unhealthy", None), Device("b", "Healthy", 1)])
        kubelet.wait_for_snapshot("example.com/thing", lambda s: s.health("a") == "Unhealthy")

        resp = kubelet.allocate("example.com/thing", [["b"]])
        assert resp.container_responses[0].devices[0].host_path == "/dev/b"
        with pytest.raises(grpc.RpcError) as e:
            kubelet.allocate("example.com/thing", [["a"]])
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "a" in e.value.details()
        assert kubelet.preferred("example.com/thing", ["a", "b", "c"], ["c"], 2) == ["c", "a"]
        kubelet.prestart("example.com/thing", ["b"])


def test_a_connected_plugin_registering_again_is_refused(kubelet, plugin_dir):
    """As a kubelet since 1.37: a second registration from a socket whose
    ListAndWatch is still open is refused ("device plugin already
    connected"); once that stream ends it is accepted."""
    with PyPlugin(os.path.join(plugin_dir, "py.sock"), [Device("a", "Healthy", None)]) as plug:
        plug.register(kubelet.socket_path, "example.com/thing")
        first = kubelet.wait_for_registration("example.com/thing").endpoint_obj
        kubelet.wait_for_snapshot("example.com/thing")
        with pytest.raises(grpc.RpcError) as e:
            plug.register(kubelet.socket_path, "example.com/thing")
        assert e.value.code() == grpc.StatusCode.UNKNOWN
        assert "device plugin already connected" in e.value.details()
        first.stop()
        plug.register(kubelet.socket_path, "example.com/thing")
        kubelet.wait_for_registration("example.com/thing", count=2)


def test_reregistration_replaces_endpoint_and_rejection(kubelet_factory, plugin_dir):
    """As a kubelet before 1.37: a second registration replaces the
    endpoint (its stream ended by the kubelet)."""
    kubelet = kubelet_factory(allow_reconnect=True)
    kubelet.start()
    with PyPlugin(os.path.join(plugin_dir, "py.sock"), [Device("a", "Healthy", None)]) as plug:
        kubelet.reject_next(1)
        with pytest.raises(grpc.RpcError) as e:
            plug.register(kubelet.socket_path, "example.com/thing")
        assert e.value.code() == grpc.StatusCode.UNKNOWN
        plug.register(kubelet.socket_path, "example.com/thing")
        first = kubelet.wait_for_registration("example.com/thing").endpoint_obj
        plug.register(kubelet.socket_path, "example.com/thing")
        kubelet.wait_for_registration("example.com/thing", count=2)
        kubelet.wait_for_stream_end(first)
        assert first.stream_error is None  # we ended it, not the plugin
        assert [r.accepted for r in kubelet.attempts()] == [False, True, True]
        with pytest.raises(grpc.RpcError):
            plug.register(kubelet.socket_path, "kubernetes.io/nope")


def test_restart_wipes_directory_and_bumps_generation(kubelet, plugin_dir):
    other = os.path.join(plugin_dir, "some-file")
    open(other, "w").close()
    gen = kubelet.generation
    kubelet.restart()
    assert kubelet.generation == gen + 1
    assert os.listdir(plugin_dir) == ["kubelet.sock"]


def test_stop_during_dial_back_is_clean(kubelet, plugin_dir):
    # A plugin that registers an endpoint nobody serves: the dial-back waits;
    # stopping the kubelet meanwhile must neither hang nor leak an endpoint.
    plug = PyPlugin(os.path.join(plugin_dir, "ghost.sock"), [])
    errors = []

    def reg():
        try:
            plug.register(kubelet.socket_path, "example.com/ghost", timeout=30)
        except grpc.RpcError as e:
            errors.append(e.code())
    t = threading.Thread(target=reg)
    t.start()
    kubelet.wait_for(lambda: kubelet.attempts("example.com/ghost"), 10, lambda: "the Register call")
    kubelet.stop()
    t.join(15)
    assert not t.is_alive() and errors
    assert kubelet.endpoints == {}
