"""A simulated kubelet (device-plugin side) and a small Python device plugin.

KubeletSim serves the v1beta1 Registration service on <plugin_dir>/kubelet.sock
and behaves like the real kubelet's device manager: inside its Register
handler it validates the request, dials the plugin's endpoint and calls
GetDevicePluginOptions before answering, then runs one ListAndWatch reader
per registered resource that keeps the latest snapshot.  A newer registration
of the same resource replaces (and stops) the older endpoint.  restart()
deletes every file in the plugin directory, as the kubelet does when it starts.

A registration counts as accepted once the handler has decided, before the
answer reaches the plugin (as in the kubelet): a test that stops the
simulator right after may cut that answer off, and the plugin will retry.

Everything the tests wait for (registrations, snapshots, stream ends) is
guarded by one threading.Condition, so waiting never sleeps blindly.

PyPlugin is a device plugin written with grpcio: the harness checks itself
against it, `devlet probe` is tested against it, and the benchmark uses it as
the grpcio round-trip floor.

The protobuf message modules come from $DEVLET_BUILD/py (`make py`); the gRPC
service plumbing is written here by hand.
"""

import os
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import grpc

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.path.abspath(os.environ.get("DEVLET_BUILD") or os.path.join(_REPO, "build"))
_PY_DIR = os.path.join(BUILD_DIR, "py")
if _PY_DIR not in sys.path:
    sys.path.insert(0, _PY_DIR)

try:
    import deviceplugin_pb2 as pb  # noqa: E402
except ImportError as e:  # pragma: no cover - a setup error, said plainly
    raise ImportError(f"{e}: run `make py` (looked in {_PY_DIR})") from e

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
DEFAULT_TIMEOUT = 10.0

# One connection per channel: tests reason about "the" connection to a socket,
# so channels must not share grpcio's global subchannel pool.
CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.enable_http_proxy", 0),
    ("grpc.enable_retries", 0),
]


def unix_target(path: str) -> str:
    return "unix://" + os.path.abspath(path)


def endpoint_name(resource: str) -> str:
    """devlet's socket file name for a resource: devlet-devlet.io_fuse.sock."""
    return "devlet-" + resource.replace("/", "_") + ".sock"


def valid_extended_resource_name(name: str) -> bool:
    """What the kubelet accepts as a device plugin resource name (roughly
    v1helper.IsExtendedResourceName): <domain>/<name>, not in kubernetes.io."""
    if name.count("/") != 1:
        return False
    domain, short = name.split("/")
    if not domain or not short or len(short) > 63:
        return False
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    return all(c in ok for c in short) and short[0].isalnum() and short[-1].isalnum()


# ---------------------------------------------------------------- client side


class PluginClient:
    """The kubelet's view of one plugin socket: unary calls and ListAndWatch.
    authority: the :authority its requests carry; None is grpcio's own
    (localhost), as kubelets from v1.26 send."""

    def __init__(self, socket_path: str, authority: Optional[str] = None):
        self.socket_path = os.path.abspath(socket_path)
        self.authority = authority
        opts = CHANNEL_OPTIONS + ([("grpc.default_authority", authority)] if authority else [])
        self.channel = grpc.insecure_channel(unix_target(socket_path), options=opts)
        ch = self.channel
        self._options = ch.unary_unary(
            "/v1beta1.DevicePlugin/GetDevicePluginOptions",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.DevicePluginOptions.FromString)
        self._law = ch.unary_stream(
            "/v1beta1.DevicePlugin/ListAndWatch",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.ListAndWatchResponse.FromString)
        self._preferred = ch.unary_unary(
            "/v1beta1.DevicePlugin/GetPreferredAllocation",
            request_serializer=pb.PreferredAllocationRequest.SerializeToString,
            response_deserializer=pb.PreferredAllocationResponse.FromString)
        self._allocate = ch.unary_unary(
            "/v1beta1.DevicePlugin/Allocate",
            request_serializer=pb.AllocateRequest.SerializeToString,
            response_deserializer=pb.AllocateResponse.FromString)
        self._prestart = ch.unary_unary(
            "/v1beta1.DevicePlugin/PreStartContainer",
            request_serializer=pb.PreStartContainerRequest.SerializeToString,
            response_deserializer=pb.PreStartContainerResponse.FromString)

    def options(self, timeout=DEFAULT_TIMEOUT, wait_for_ready=False) -> "pb.DevicePluginOptions":
        return self._options(pb.Empty(), timeout=timeout, wait_for_ready=wait_for_ready)

    def options_future(self, timeout=DEFAULT_TIMEOUT, wait_for_ready=False):
        return self._options.future(pb.Empty(), timeout=timeout, wait_for_ready=wait_for_ready)

    def list_and_watch(self):
        """The streaming call: iterate it for ListAndWatchResponse; cancel() ends it."""
        return self._law(pb.Empty())

    def allocate(self, containers: List[List[str]], timeout=DEFAULT_TIMEOUT) -> "pb.AllocateResponse":
        req = pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=list(ids)) for ids in containers])
        return self._allocate(req, timeout=timeout)

    def preferred_request(self, requests, timeout=DEFAULT_TIMEOUT) -> "pb.PreferredAllocationResponse":
        """requests: [(available, must, size), ...], one per container."""
        req = pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=list(a), must_include_deviceIDs=list(m), allocation_size=s)
            for a, m, s in requests])
        return self._preferred(req, timeout=timeout)

    def preferred(self, available, must, size, timeout=DEFAULT_TIMEOUT) -> List[str]:
        resp = self.preferred_request([(available, must, size)], timeout=timeout)
        if len(resp.container_responses) != 1:
            raise AssertionError(f"expected 1 container response, got {len(resp.container_responses)}")
        return list(resp.container_responses[0].deviceIDs)

    def prestart(self, ids, timeout=DEFAULT_TIMEOUT) -> "pb.PreStartContainerResponse":
        return self._prestart(pb.PreStartContainerRequest(devices_ids=list(ids)), timeout=timeout)

    def close(self):
        self.channel.close()


@dataclass
class Device:
    id: str
    health: str
    numa: Optional[int]  # None: no topology in the message

    @staticmethod
    def from_pb(d) -> "Device":
        numa = d.topology.nodes[0].ID if d.HasField("topology") and d.topology.nodes else None
        return Device(d.ID, d.health, numa)


class Snapshot:
    """One ListAndWatch message: devices in the order sent, and the
    time.monotonic() of its arrival (the benchmark times health events)."""

    def __init__(self, seq: int, msg):
        self.seq = seq
        self.time = time.monotonic()  # when it arrived
        self.raw = msg
        self.devices = [Device.from_pb(d) for d in msg.devices]
        self.by_id = {d.id: d for d in self.devices}

    def ids(self) -> List[str]:
        return [d.id for d in self.devices]

    def healthy_ids(self) -> List[str]:
        return [d.id for d in self.devices if d.health == "Healthy"]

    def health(self, dev_id: str) -> Optional[str]:
        d = self.by_id.get(dev_id)
        return d.health if d else None

    def __contains__(self, dev_id):
        return dev_id in self.by_id

    def __repr__(self):
        return f"Snapshot#{self.seq}({', '.join(f'{d.id}:{d.health}' for d in self.devices)})"


class Endpoint:
    """One registered plugin as the kubelet tracks it: a client plus a
    ListAndWatch reader thread.  State changes go through sim.cond."""

    def __init__(self, sim: "KubeletSim", resource: str, socket_path: str, generation: int):
        self.sim = sim
        self.resource = resource
        self.socket_path = socket_path
        self.generation = generation
        self.client = PluginClient(socket_path, socket_path if sim.old_authority else None)
        self.options = None
        self.snapshots: List[Snapshot] = []
        self.stream_done = False
        self.stream_error: Optional[grpc.RpcError] = None
        self._lock = threading.Lock()  # _call, _thread, _stopping
        self._call = None
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    @property
    def latest(self) -> Optional[Snapshot]:
        return self.snapshots[-1] if self.snapshots else None

    def start_watch(self):
        with self._lock:
            if self._stopping:
                return
            self._call = self.client.list_and_watch()
            self._thread = threading.Thread(target=self._read, name=f"law-{self.resource}", daemon=True)
            self._thread.start()

    def _read(self):
        err = None
        try:
            for msg in self._call:
                with self.sim.cond:
                    self.snapshots.append(Snapshot(len(self.snapshots), msg))
                    self.sim.cond.notify_all()
        except grpc.RpcError as e:
            err = e
        with self.sim.cond:
            self.stream_done = True
            if not self._stopping:
                self.stream_error = err
                self.sim._event(f"ListAndWatch ended resource={self.resource} "
                                f"error={err.code().name + ': ' + str(err.details()) if err else None}")
            self.sim.cond.notify_all()

    def stop(self):
        with self._lock:
            self._stopping = True
            call, thread = self._call, self._thread
        if call is not None:
            call.cancel()
        self.client.close()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=DEFAULT_TIMEOUT)


@dataclass
class Registration:
    version: str
    endpoint: str
    resource_name: str
    options: "pb.DevicePluginOptions"          # as sent in RegisterRequest
    generation: int                            # which start() of the simulator got it
    time: float                                # time.monotonic() on arrival
    socket_existed: bool                       # the endpoint file existed on arrival
    accepted: bool = False
    error: Optional[str] = None
    dialed_options: Optional["pb.DevicePluginOptions"] = None  # GetDevicePluginOptions inside Register
    endpoint_obj: Optional[Endpoint] = field(default=None, repr=False)


class KubeletSim:
    """old_authority: dial plugins as kubelets before v1.26 do, with the
    socket's path as :authority (grpc-go's default for a bare path target)."""

    def __init__(self, plugin_dir: str, kubelet_socket: Optional[str] = None, workers: int = 16,
                 old_authority: bool = False, allow_reconnect: bool = False):
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.old_authority = old_authority
        # kubelets before 1.37 took a second registration from a connected
        # socket (and dropped the old endpoint); 1.37 refuses it
        self.allow_reconnect = allow_reconnect
        self.socket_path = os.path.abspath(kubelet_socket or os.path.join(plugin_dir, KUBELET_SOCKET))
        self.workers = workers
        self.cond = threading.Condition()
        self.registrations: List[Registration] = []
        self.endpoints: Dict[str, Endpoint] = {}
        self.generation = 0
        self.events: List[str] = []  # a human-readable log, shown when a test fails
        self._reject = 0
        self._reject_message = ""
        self._server: Optional[grpc.Server] = None
        self._serving = 0  # the generation being served; 0 while stopped
        self._dialing = set()  # GetDevicePluginOptions futures of Register handlers
        self._stopped = True   # stop() ran: handlers still running stop dialing

    # -------------------------------------------------------- lifecycle

    def start(self):
        assert self._server is None, "already started"
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.workers),
                             options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "v1beta1.Registration",
            {"Register": grpc.unary_unary_rpc_method_handler(
                self._register,
                request_deserializer=pb.RegisterRequest.FromString,
                response_serializer=pb.Empty.SerializeToString)}),))
        with self.cond:
            self.generation += 1
            gen = self.generation
            self._stopped = False
        if server.add_insecure_port(unix_target(self.socket_path)) == 0:
            raise RuntimeError(f"cannot listen on {self.socket_path}")
        server.start()
        self._server = server
        with self.cond:
            self._serving = gen
        self._event(f"kubelet started generation={gen} socket={self.socket_path}")

    def stop(self):
        """Stops serving and drops every endpoint (cancels their streams)."""
        server, self._server = self._server, None
        with self.cond:
            self._serving = 0
            self._stopped = True
            dialing = list(self._dialing)
        # a plugin that went away mid-Register would hold its handler (and
        # the interpreter's exit) for the whole dial timeout
        for fut in dialing:
            fut.cancel()
        if server is not None:
            server.stop(grace=None).wait(DEFAULT_TIMEOUT)
        with self.cond:
            eps = list(self.endpoints.values())
            self.endpoints.clear()
            self.cond.notify_all()
        for ep in eps:
            ep.stop()
        self._event("kubelet stopped")

    def restart(self):
        """Like a kubelet restart: stop, delete every file in the plugin
        directory (devlet's sockets included), start again."""
        self.stop()
        for name in os.listdir(self.plugin_dir):
            p = os.path.join(self.plugin_dir, name)
            if not os.path.isdir(p) or os.path.islink(p):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        self.start()

    def reject_next(self, n: int, message: str = "simulated kubelet rejection"):
        """The next n Register calls fail with gRPC UNKNOWN (as the kubelet's
        plain Go errors do)."""
        with self.cond:
            self._reject = n
            self._reject_message = message

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -------------------------------------------------------- Register

    def _event(self, text: str):
        self.events.append(f"{time.monotonic():.3f} {text}")

    def _register(self, req, context):
        sock = os.path.join(self.plugin_dir, req.endpoint)
        with self.cond:
            reg = Registration(version=req.version, endpoint=req.endpoint,
                               resource_name=req.resource_name, options=req.options,
                               generation=self.generation, time=time.monotonic(),
                               socket_existed=os.path.exists(sock))
            self.registrations.append(reg)
            reject = self._reject > 0
            if reject:
                self._reject -= 1
            self.cond.notify_all()
        self._event(f"Register resource={req.resource_name} endpoint={req.endpoint} "
                    f"version={req.version} gen={reg.generation}")

        def fail(code, msg):
            with self.cond:
                reg.error = msg
                self.cond.notify_all()
            self._event(f"Register rejected resource={req.resource_name}: {msg}")
            context.abort(code, msg)

        if reject:
            fail(grpc.StatusCode.UNKNOWN, self._reject_message)
        if req.version != API_VERSION:
            fail(grpc.StatusCode.UNKNOWN, f"requested device plugin API version {req.version!r} is not supported")
        if not valid_extended_resource_name(req.resource_name):
            fail(grpc.StatusCode.UNKNOWN, f"invalid name of device plugin socket: {req.resource_name!r}")
        if not req.endpoint or "/" in req.endpoint:
            fail(grpc.StatusCode.UNKNOWN, f"invalid endpoint {req.endpoint!r}")

        # Since 1.37 a kubelet refuses a registration from a socket it is
        # still connected to (its ListAndWatch open): the plugin must let the
        # old connection go first.
        with self.cond:
            old = self.endpoints.get(req.resource_name)
            connected = old is not None and not old.stream_done and old.socket_path == sock
        if connected and not self.allow_reconnect:
            fail(grpc.StatusCode.UNKNOWN, f"device plugin already connected: {sock}")

        # The kubelet dials back (blocking, 10 s) and asks for the options
        # before it answers Register.
        ep = Endpoint(self, req.resource_name, sock, reg.generation)
        fut = ep.client.options_future(timeout=DEFAULT_TIMEOUT, wait_for_ready=True)
        context.add_callback(fut.cancel)  # a stopped kubelet stops dialing
        with self.cond:
            self._dialing.add(fut)
            stopped = self._stopped or self.generation != reg.generation
        if stopped:
            fut.cancel()
        try:
            ep.options = fut.result()
        except grpc.FutureCancelledError:
            ep.stop()
            fail(grpc.StatusCode.CANCELLED, "Register cancelled")
        except grpc.RpcError as e:
            ep.stop()
            fail(grpc.StatusCode.UNKNOWN,
                 f"failed to dial device plugin: {e.code().name}: {e.details()}")
        finally:
            with self.cond:
                self._dialing.discard(fut)
        with self.cond:
            stale = self._serving != reg.generation
            old = None
            if not stale:
                old = self.endpoints.get(req.resource_name)
                self.endpoints[req.resource_name] = ep
                reg.dialed_options = ep.options
                reg.endpoint_obj = ep
                reg.accepted = True
                self.cond.notify_all()
        if stale:  # this kubelet stopped while the handler dialed back
            ep.stop()
            fail(grpc.StatusCode.UNAVAILABLE, "kubelet is shutting down")
        if old is not None:
            old.stop()
        ep.start_watch()
        return pb.Empty()

    # -------------------------------------------------------- waiting

    def wait_for(self, check: Callable[[], object], timeout: float, what: Callable[[], str]):
        """Waits (under self.cond, woken by every change) until check()
        returns a true value, and returns it; TimeoutError says what()."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = check()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout}s waiting for {what()}")
                self.cond.wait(left)

    def accepted(self, resource: Optional[str] = None, generation: Optional[int] = None) -> List[Registration]:
        with self.cond:
            return [r for r in self.registrations if r.accepted
                    and (resource is None or r.resource_name == resource)
                    and (generation is None or r.generation == generation)]

    def attempts(self, resource: Optional[str] = None) -> List[Registration]:
        with self.cond:
            return [r for r in self.registrations if resource is None or r.resource_name == resource]

    def wait_for_registration(self, resource: str, count: int = 1, timeout: float = DEFAULT_TIMEOUT,
                              generation: Optional[int] = None) -> Registration:
        """Waits until `count` registrations of resource were accepted (in the
        given simulator generation, if any) and returns the count-th."""
        def check():
            regs = self.accepted(resource, generation)
            return regs[count - 1] if len(regs) >= count else None
        return self.wait_for(check, timeout, lambda: (
            f"registration #{count} of {resource} (generation {generation}); "
            f"attempts so far: {[(r.resource_name, r.generation, r.accepted, r.error) for r in self.registrations]}"))

    def wait_for_attempts(self, resource: str, count: int, timeout: float = DEFAULT_TIMEOUT) -> List[Registration]:
        """Waits until `count` Register calls for resource arrived (accepted or
        not) and, for the last of them, the handler has decided."""
        def check():
            regs = self.attempts(resource)
            if len(regs) >= count and (regs[count - 1].accepted or regs[count - 1].error):
                return regs[:count]
            return None
        return self.wait_for(check, timeout, lambda: f"{count} Register attempts for {resource}")

    def endpoint(self, resource: str) -> Endpoint:
        with self.cond:
            ep = self.endpoints.get(resource)
        if ep is None:
            raise KeyError(f"{resource} is not registered")
        return ep

    def wait_for_snapshot(self, resource: str, predicate: Callable[[Snapshot], bool] = lambda s: True,
                          timeout: float = DEFAULT_TIMEOUT) -> Snapshot:
        """Waits until the latest ListAndWatch snapshot of resource's current
        endpoint satisfies predicate, and returns it."""
        def check():
            ep = self.endpoints.get(resource)
            snap = ep.latest if ep else None
            return snap if snap is not None and predicate(snap) else None

        def what():
            ep = self.endpoints.get(resource)
            return (f"a matching snapshot of {resource}; latest: "
                    f"{ep.latest if ep else 'not registered'}")
        return self.wait_for(check, timeout, what)

    def wait_for_stream_end(self, ep: Endpoint, timeout: float = DEFAULT_TIMEOUT) -> Endpoint:
        self.wait_for(lambda: ep.stream_done, timeout, lambda: f"the end of {ep.resource}'s ListAndWatch")
        return ep

    # -------------------------------------------------------- calls

    def client(self, resource: str) -> PluginClient:
        return self.endpoint(resource).client

    def options(self, resource: str) -> "pb.DevicePluginOptions":
        return self.client(resource).options()

    def allocate(self, resource: str, containers: List[List[str]], timeout=DEFAULT_TIMEOUT):
        return self.client(resource).allocate(containers, timeout=timeout)

    def preferred(self, resource: str, available, must, size, timeout=DEFAULT_TIMEOUT) -> List[str]:
        return self.client(resource).preferred(available, must, size, timeout=timeout)

    def prestart(self, resource: str, ids, timeout=DEFAULT_TIMEOUT):
        return self.client(resource).prestart(ids, timeout=timeout)


# ---------------------------------------------------------------- a Python plugin


def _device_pb(d: Device):
    msg = pb.Device(ID=d.id, health=d.health)
    if d.numa is not None:
        msg.topology.nodes.add(ID=d.numa)
    return msg


class PyPlugin:
    """A device plugin in grpcio.  allocate(request) -> AllocateResponse may be
    replaced; the default answers one DeviceSpec per ID (/dev/<id>)."""

    def __init__(self, socket_path: str, devices: List[Device], pre_start_required=False,
                 preferred_available=True, allocate: Optional[Callable] = None, workers: int = 8):
        self.socket_path = os.path.abspath(socket_path)
        self.opts = pb.DevicePluginOptions(pre_start_required=pre_start_required,
                                           get_preferred_allocation_available=preferred_available)
        self.allocate_fn = allocate or self.default_allocate
        self.workers = workers
        self.cond = threading.Condition()
        self._devices = list(devices)
        self._version = 0
        self._stopping = False
        self._server: Optional[grpc.Server] = None
        self.calls: List[str] = []

    def default_allocate(self, req):
        known = {d.id: d for d in self.devices}
        resp = pb.AllocateResponse()
        for c in req.container_requests:
            cr = resp.container_responses.add()
            for i in c.devices_ids:
                if i not in known or known[i].health != "Healthy":
                    return None, f"unknown or unhealthy device {i}"
                cr.devices.add(container_path=f"/dev/{i}", host_path=f"/dev/{i}", permissions="rw")
        return resp, None

    @property
    def devices(self) -> List[Device]:
        with self.cond:
            return list(self._devices)

    def set_devices(self, devices: List[Device]):
        with self.cond:
            self._devices = list(devices)
            self._version += 1
            self.cond.notify_all()

    # handlers
    def _options(self, req, ctx):
        self.calls.append("GetDevicePluginOptions")
        return self.opts

    def _list_and_watch(self, req, ctx):
        self.calls.append("ListAndWatch")

        def wake():
            with self.cond:
                self.cond.notify_all()
        ctx.add_callback(wake)
        seen = -1
        while True:
            with self.cond:
                while self._version == seen and ctx.is_active() and not self._stopping:
                    self.cond.wait()
                if not ctx.is_active() or self._stopping:
                    return
                seen = self._version
                devs = list(self._devices)
            yield pb.ListAndWatchResponse(devices=[_device_pb(d) for d in devs])

    def _preferred(self, req, ctx):
        self.calls.append("GetPreferredAllocation")
        resp = pb.PreferredAllocationResponse()
        for c in req.container_requests:
            ids = list(c.must_include_deviceIDs)
            for a in c.available_deviceIDs:
                if len(ids) >= c.allocation_size:
                    break
                if a not in ids:
                    ids.append(a)
            resp.container_responses.add(deviceIDs=ids)
        return resp

    def _allocate(self, req, ctx):
        self.calls.append("Allocate")
        resp, err = self.allocate_fn(req)
        if err:
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, err)
        return resp

    def _prestart(self, req, ctx):
        self.calls.append("PreStartContainer")
        return pb.PreStartContainerResponse()

    def start(self):
        h = grpc.unary_unary_rpc_method_handler
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.workers))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", {
            "GetDevicePluginOptions": h(self._options, request_deserializer=pb.Empty.FromString,
                                        response_serializer=pb.DevicePluginOptions.SerializeToString),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self._list_and_watch, request_deserializer=pb.Empty.FromString,
                response_serializer=pb.ListAndWatchResponse.SerializeToString),
            "GetPreferredAllocation": h(self._preferred,
                                        request_deserializer=pb.PreferredAllocationRequest.FromString,
                                        response_serializer=pb.PreferredAllocationResponse.SerializeToString),
            "Allocate": h(self._allocate, request_deserializer=pb.AllocateRequest.FromString,
                          response_serializer=pb.AllocateResponse.SerializeToString),
            "PreStartContainer": h(self._prestart, request_deserializer=pb.PreStartContainerRequest.FromString,
                                   response_serializer=pb.PreStartContainerResponse.SerializeToString),
        }),))
        if server.add_insecure_port(unix_target(self.socket_path)) == 0:
            raise RuntimeError(f"cannot listen on {self.socket_path}")
        server.start()
        self._server = server
        return self

    def register(self, kubelet_socket: str, resource: str, timeout=DEFAULT_TIMEOUT):
        """Registers with a kubelet the way a device plugin does."""
        with grpc.insecure_channel(unix_target(kubelet_socket), options=CHANNEL_OPTIONS) as ch:
            call = ch.unary_unary("/v1beta1.Registration/Register",
                                  request_serializer=pb.RegisterRequest.SerializeToString,
                                  response_deserializer=pb.Empty.FromString)
            call(pb.RegisterRequest(version=API_VERSION, endpoint=os.path.basename(self.socket_path),
                                    resource_name=resource, options=self.opts),
                 timeout=timeout, wait_for_ready=True)

    def stop(self):
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait(DEFAULT_TIMEOUT)
        try:
            os.unlink(self.socket_path)
        except FileNotFoundError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
