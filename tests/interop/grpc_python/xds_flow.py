"""Interop: our ads_server example <-> the gRPC C-core xDS client (PyPI grpcio).

Starts two echo backends, our ads_server (SotW ADS) on 127.0.0.1, and a gRPC channel to
xds:///echo.test whose bootstrap (GRPC_XDS_BOOTSTRAP) names the server. Serves a Listener
(api_listener, HttpConnectionManager with RDS over ADS), a RouteConfiguration, a Cluster
(EDS over ADS) and a ClusterLoadAssignment, then walks the story of issue 8, reading the
client's view through CSDS (grpcio-csds) after each step and comparing it with the store.
Every wait is bounded. Writes a JSON report (steps, deviations) and exits non-zero on a
failed expectation.

usage: python xds_flow.py ADS_SERVER_BINARY DESCRIPTORS WORKDIR
"""
import json
import os
import signal
import subprocess
import sys
import time
from concurrent import futures

import grpc
import grpc_csds
from google.protobuf import any_pb2, json_format
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import api_listener_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.admin.v3 import config_dump_shared_pb2
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc

LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
TARGET = "echo.test"
STEP_TIMEOUT = 20.0

report = {"peer": "grpcio (gRPC C-core) " + grpc.__version__, "steps": [], "deviations": []}


def log(*args):
    print("[grpc-python]", *args, flush=True)


def fail(message):
    report["failure"] = message
    raise AssertionError(message)


# ---------------------------------------------------------------- resources


def listener():
    hcm = hcm_pb2.HttpConnectionManager(
        rds=hcm_pb2.Rds(
            config_source=config_source_pb2.ConfigSource(
                ads=config_source_pb2.AggregatedConfigSource(),
                resource_api_version=config_source_pb2.V3,
            ),
            route_config_name="route-1",
        ),
        http_filters=[hcm_pb2.HttpFilter(name="router", typed_config=pack(router_pb2.Router()))],
    )
    return listener_pb2.Listener(
        name=TARGET, api_listener=api_listener_pb2.ApiListener(api_listener=pack(hcm))
    )


def route():
    return route_pb2.RouteConfiguration(
        name="route-1",
        virtual_hosts=[
            route_components_pb2.VirtualHost(
                name="vh",
                domains=["*"],
                routes=[
                    route_components_pb2.Route(
                        match=route_components_pb2.RouteMatch(prefix=""),
                        route=route_components_pb2.RouteAction(cluster="cluster-1"),
                    )
                ],
            )
        ],
    )


def cluster(valid=True, note=""):
    c = cluster_pb2.Cluster(
        name="cluster-1",
        type=cluster_pb2.Cluster.EDS if valid else cluster_pb2.Cluster.STATIC,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(
            eds_config=config_source_pb2.ConfigSource(
                ads=config_source_pb2.AggregatedConfigSource(),
                resource_api_version=config_source_pb2.V3,
            )
        ),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
    )
    if note:
        # A changed field clients keep, so a restored Cluster differs from the deleted one.
        c.circuit_breakers.thresholds.add(max_requests={"value": 1000})
    return c


def endpoints(port):
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name="cluster-1",
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                locality=base_pb2.Locality(region="local"),
                load_balancing_weight={"value": 1},
                lb_endpoints=[
                    endpoint_components_pb2.LbEndpoint(
                        endpoint=endpoint_components_pb2.Endpoint(
                            address=address_pb2.Address(
                                socket_address=address_pb2.SocketAddress(
                                    address="127.0.0.1", port_value=port
                                )
                            )
                        )
                    )
                ],
            )
        ],
    )


def pack(message):
    a = any_pb2.Any()
    a.Pack(message)
    return a


class Store:
    """The resources file ads_server serves; every write is atomic, then SIGHUP."""

    def __init__(self, path):
        self.path = path
        self.resources = {}  # (type_url, name) -> message
        self.server = None

    def set(self, type_url, message):
        name = message.cluster_name if type_url == EDS else message.name
        self.resources[(type_url, name)] = message

    def remove(self, type_url, name):
        self.resources.pop((type_url, name), None)

    def write(self):
        items = [json.loads(json_format.MessageToJson(pack(m))) for m in self.resources.values()]
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"resources": items}, f, indent=1)
        os.replace(tmp, self.path)
        if self.server is not None:
            self.server.send_signal(signal.SIGHUP)


# ---------------------------------------------------------------- the record


class Record:
    def __init__(self, path):
        self.path = path

    def lines(self):
        """The complete lines so far. The server appends while we read, so a last line
        without its newline is one still being written: it is left for the next read. A
        complete line that does not parse is a defect of the record and fails the run."""
        out = []
        try:
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return out
        complete, _, _unfinished = text.rpartition("\n")
        for number, raw in enumerate(complete.split("\n"), start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                out.append(json.loads(raw))
            except ValueError as e:
                fail(f"{self.path} line {number} is not JSON: {e}")
        return out

    def messages(self):
        return [l for l in self.lines() if "dir" in l]

    def settled(self, timeout=STEP_TIMEOUT):
        """Waits until the client answered (ACK or NACK) the last response of every type."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            open_ = {}
            for l in self.messages():
                m = l["message"]
                key = (l["stream"], m.get("typeUrl"))
                if l["dir"] == "S->C":
                    open_[key] = m.get("nonce")
                elif key in open_ and open_[key] == m.get("responseNonce"):
                    open_.pop(key)
            if not open_:
                return
            time.sleep(0.05)
        fail(f"responses left unanswered: {open_}")

    def wait(self, what, predicate, timeout=STEP_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, line in enumerate(self.messages()):
                if predicate(i, line):
                    return i, line
            time.sleep(0.05)
        fail(f"timed out waiting in the record for: {what}")


# ---------------------------------------------------------------- peers


def start_backend(name):
    def echo(request, context):
        return name.encode()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "interop.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def call(channel, timeout=2.0):
    rpc = channel.unary_unary("/interop.Echo/Echo")
    try:
        return rpc(b"hi", timeout=timeout).decode()
    except grpc.RpcError as e:
        return f"error:{e.code().name}"


def wait_call(channel, what, predicate, timeout=STEP_TIMEOUT):
    deadline = time.monotonic() + timeout
    result = None
    while time.monotonic() < deadline:
        result = call(channel)
        if predicate(result):
            return result
        time.sleep(0.1)
    fail(f"timed out waiting for RPCs: {what} (last result {result})")


def csds(stub):
    response = stub.FetchClientStatus(csds_pb2.ClientStatusRequest(), timeout=5)
    view = {}
    for config in response.config:
        for g in config.generic_xds_configs:
            status = config_dump_shared_pb2.ClientResourceStatus.Name(g.client_status)
            body = None
            if g.HasField("xds_config"):
                body = g.xds_config.value
            view[(g.type_url, g.name)] = {
                "status": status,
                "version": g.version_info,
                "body": body,
                "error": g.error_state.details if g.HasField("error_state") else "",
                "failed_version": g.error_state.version_info if g.HasField("error_state") else "",
            }
    return view


def compare(stub, store, step, expect=None):
    """The client's CSDS view against the store: every stored resource is ACKED with the
    same content, except the keys of `expect` ((type URL, name) -> acceptable statuses,
    ABSENT for not listed)."""
    expect = expect or {}
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        view = csds(stub)
        problems = []
        keys = list(store.resources) + [k for k in expect if k not in store.resources]
        for key in keys:
            type_url, name = key
            want = expect.get(key, ("ACKED",))
            got = view.get(key)
            status = got["status"] if got else "ABSENT"
            if status not in want:
                problems.append(f"{type_url.rsplit('.', 1)[-1]}/{name}: {status} (want {want})")
            elif status == "ACKED":
                message = store.resources[key]
                held = type(message)()
                held.ParseFromString(got["body"] or b"")
                if held != message:
                    problems.append(f"{name}: CSDS content differs from the store")
        if not problems:
            summary = {f"{t.rsplit('.', 1)[-1]}/{n}": v["status"] for (t, n), v in view.items()}
            report["steps"].append({"step": step, "csds": summary})
            log(f"CSDS after {step}: {summary}")
            return view
        if time.monotonic() > deadline:
            shown = {f"{t.rsplit('.', 1)[-1]}/{n}": {k: v for k, v in e.items() if k != "body"}
                     for (t, n), e in view.items()}
            fail(f"CSDS after {step}: {problems}; CSDS view: {shown}")
        time.sleep(0.1)


# ---------------------------------------------------------------- the story


TAPS = []


def start_tap(upstream, workdir):
    """With XDS_TAP (the xds-sansio binary), puts `xds-sansio tap` between the client and
    the server: returns the process and the address the client dials instead."""
    binary = os.environ.get("XDS_TAP")
    if not binary:
        return None
    out = open(os.path.join(workdir, "tap.txt"), "w")
    tap = subprocess.Popen(
        [binary, "tap", "--listen", "127.0.0.1:0", "--upstream", upstream,
         "--record", os.path.join(workdir, "tap.jsonl")],
        stdout=out, stderr=subprocess.STDOUT, text=True)
    TAPS.append(tap)
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(os.path.join(workdir, "tap.txt")) as f:
            first = f.readline()
        if first.startswith("tap listening on "):
            return tap, first.split()[3].rstrip(",")
        time.sleep(0.05)
    fail("the tap did not start")


def stop_tap():
    """Ends the tap (SIGTERM: it prints its closing line)."""
    for tap in TAPS:
        tap.send_signal(signal.SIGTERM)
        try:
            tap.wait(10)
        except subprocess.TimeoutExpired:
            tap.kill()


def main(binary, descriptors, workdir):
    os.makedirs(workdir, exist_ok=True)
    resources = os.path.join(workdir, "resources.json")
    record = Record(os.path.join(workdir, "record.jsonl"))
    backend1, port1 = start_backend("B1")
    backend2, port2 = start_backend("B2")
    store = Store(resources)
    store.set(LDS, listener())
    store.set(RDS, route())
    store.set(CDS, cluster())
    store.set(EDS, endpoints(port1))
    store.write()

    server = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--resources", resources,
         "--descriptors", descriptors, "--record", record.path, "--verbose"],
        stdout=subprocess.PIPE,
        stderr=open(os.path.join(workdir, "ads_server.log"), "w"),
        text=True,
    )
    store.server = server
    try:
        line = server.stdout.readline()
        if not line.startswith("listening on "):
            fail(f"ads_server did not start: {line!r}")
        address = line.split()[-1]
        server_address = address
        log("ads_server at", address)
        tap = start_tap(address, workdir)
        if tap is not None:
            tap_process, address = tap
            log("the client goes through the tap at", address)
        bootstrap = os.path.join(workdir, "bootstrap.json")
        with open(bootstrap, "w") as f:
            json.dump(
                {
                    "xds_servers": [
                        {
                            "server_uri": address,
                            "channel_creds": [{"type": "insecure"}],
                            "server_features": ["xds_v3"],
                        }
                    ],
                    "node": {"id": "grpc-python-interop", "cluster": "interop", "locality": {"zone": "z"}},
                },
                f,
            )
        os.environ["GRPC_XDS_BOOTSTRAP"] = bootstrap

        admin = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        grpc_csds.add_csds_servicer(admin)
        admin_port = admin.add_insecure_port("127.0.0.1:0")
        admin.start()
        csds_stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{admin_port}")
        )

        channel = grpc.insecure_channel(f"xds:///{TARGET}")
        # 1. An RPC through xDS succeeds.
        wait_call(channel, "first RPC through xDS", lambda r: r == "B1")
        compare(csds_stub, store, "first fetch")
        log("1. RPC through xDS: ok")

        # 2. An invalid Cluster is NACKed with error_detail; the server holds it.
        store.set(CDS, cluster(valid=False))
        store.write()
        nack_at, nack = record.wait(
            "a CDS NACK",
            lambda i, l: l["dir"] == "C->S"
            and l["message"].get("typeUrl") == CDS
            and "errorDetail" in l["message"],
        )
        error = nack["message"]["errorDetail"]
        log("2. NACK:", error)
        if not error.get("message"):
            report["deviations"].append("NACK error_detail has no message")
        time.sleep(2.0)
        resent = [
            l for i, l in enumerate(record.messages())
            if i > nack_at and l["dir"] == "S->C" and l["message"].get("typeUrl") == CDS
        ]
        if resent:
            fail(f"the server resent CDS after the NACK: {resent}")
        if call(channel) != "B1":
            fail("RPCs stopped working after the NACK")
        view = compare(csds_stub, store, "NACK", expect={(CDS, "cluster-1"): ("NACKED",)})
        if not view[(CDS, "cluster-1")]["error"]:
            report["deviations"].append("CSDS shows no error_state details for the NACKed cluster")
        held = cluster_pb2.Cluster()
        held.ParseFromString(view[(CDS, "cluster-1")]["body"] or b"")
        if held != cluster():
            report["deviations"].append("CSDS does not show the last good cluster while NACKED")
        # The management server's own view: the node's NACK in its per-node applied state,
        # served as CSDS on its port (XdsServerBuilder::csds).
        server_csds = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(
            grpc.insecure_channel(server_address)
        )
        status = server_csds.FetchClientStatus(csds_pb2.ClientStatusRequest(), timeout=STEP_TIMEOUT)
        nacked = [
            g
            for c in status.config
            if c.node.id == "grpc-python-interop"
            for g in c.generic_xds_configs
            if g.type_url == CDS and g.client_status == config_dump_shared_pb2.NACKED
        ]
        if not nacked:
            fail(f"the server's CSDS does not show the node's CDS NACK: {status}")
        if error.get("message") and error["message"] not in nacked[0].error_state.details:
            fail(f"the server's CSDS NACK lacks the client's message: {nacked[0]}")
        log("2. the server's CSDS:", nacked[0].error_state.details)
        report["steps"].append(
            {"step": "NACK", "error_detail": error, "resent": False,
             "server_csds": nacked[0].error_state.details}
        )

        # 3. Fix the cluster; an endpoint change takes effect.
        store.set(CDS, cluster())
        store.write()
        compare(csds_stub, store, "cluster fixed")
        store.set(EDS, endpoints(port2))
        store.write()
        wait_call(channel, "endpoint change to B2", lambda r: r == "B2")
        compare(csds_stub, store, "endpoint change")
        log("3. endpoint change: ok")

        # 4. Cluster removal and restore.
        store.remove(CDS, "cluster-1")
        store.write()
        record.wait(
            "a CDS response without cluster-1",
            lambda i, l: l["dir"] == "S->C" and l["message"].get("typeUrl") == CDS
            and not l["message"].get("resources"),
        )
        view = compare(csds_stub, store, "cluster removal",
                       expect={(CDS, "cluster-1"): ("DOES_NOT_EXIST", "ABSENT"),
                               # No cluster, no interest in its endpoints.
                               (EDS, "cluster-1"): ("ACKED", "ABSENT")})
        time.sleep(1.0)
        after_removal = call(channel)
        report["steps"].append({"step": "cluster removal", "rpc": after_removal})
        if after_removal == "B2":
            report["deviations"].append(
                "after the Cluster is removed RPCs still reach the old endpoints "
                "(deletion ignored, as gRFC A88 allows without fail_on_data_errors)")
        store.set(CDS, cluster(note="restored"))
        store.write()
        wait_call(channel, "RPCs after the cluster is restored", lambda r: r == "B2")
        compare(csds_stub, store, "cluster restore")
        log("4. cluster removal/restore: ok (RPC during removal:", after_removal, ")")

        # 5. Listener removal and restore.
        store.remove(LDS, TARGET)
        store.write()
        record.wait(
            "an LDS response without the listener",
            lambda i, l: l["dir"] == "S->C" and l["message"].get("typeUrl") == LDS
            and not l["message"].get("resources"),
        )
        compare(csds_stub, store, "listener removal",
                expect={(LDS, TARGET): ("DOES_NOT_EXIST", "ABSENT"),
                        # No listener, no interest in what it referred to.
                        (RDS, "route-1"): ("ACKED", "ABSENT"),
                        (CDS, "cluster-1"): ("ACKED", "ABSENT"),
                        (EDS, "cluster-1"): ("ACKED", "ABSENT")})
        time.sleep(1.0)
        after_removal = call(channel)
        report["steps"].append({"step": "listener removal", "rpc": after_removal})
        if after_removal == "B2":
            report["deviations"].append(
                "after the Listener is removed RPCs still work (deletion ignored)")
        restored = listener()
        restored.stat_prefix = "restored"
        store.set(LDS, restored)
        store.write()
        wait_call(channel, "RPCs after the listener is restored", lambda r: r == "B2")
        compare(csds_stub, store, "listener restore")
        log("5. listener removal/restore: ok (RPC during removal:", after_removal, ")")

        # 6. The server ends the stream; the client reconnects with its last versions.
        record.settled()
        last = {}
        for l in record.messages():
            m = l["message"]
            if l["dir"] == "C->S" and "errorDetail" not in m and m.get("versionInfo"):
                last[m["typeUrl"]] = m["versionInfo"]
        streams = {l["stream"] for l in record.messages()}
        server.send_signal(signal.SIGUSR1)
        record.wait("requests on a new stream",
                    lambda i, l: l["stream"] not in streams and l["dir"] == "C->S")
        time.sleep(1.0)
        first = {}
        for l in record.messages():
            m = l["message"]
            if l["stream"] not in streams and l["dir"] == "C->S":
                first.setdefault(m["typeUrl"], m.get("versionInfo", ""))
        report["steps"].append({"step": "reconnect", "held": last, "first_requests": first})
        for type_url, version in last.items():
            if first.get(type_url) != version:
                report["deviations"].append(
                    f"after reconnect the first {type_url.rsplit('.', 1)[-1]} request "
                    f"carries version {first.get(type_url)!r}, not the last ACKed {version!r}")
        if call(channel) != "B2":
            fail("RPCs broke across the reconnect")
        compare(csds_stub, store, "reconnect")
        log("6. reconnect with last versions:", first)
        channel.close()
        admin.stop(0)
    finally:
        stop_tap()
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
        backend1.stop(0)
        backend2.stop(0)


if __name__ == "__main__":
    binary, descriptors, workdir = sys.argv[1:4]
    code = 0
    try:
        main(binary, descriptors, workdir)
        report["result"] = "passed"
    except Exception as e:  # report, then fail
        report["result"] = f"FAILED: {e}"
        code = 1
    with open(os.path.join(workdir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log("report:", json.dumps(report, indent=1))
    sys.exit(code)
