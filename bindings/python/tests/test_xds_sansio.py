"""The Python package against the real peer of its language: the gRPC C-core xDS client
(PyPI grpcio) resolving xds:///echo.test through the in-process control plane, then the
checker on what it did. Every wait is bounded."""
from __future__ import annotations

import base64
import json
import os
import tempfile
import threading
import time
from concurrent import futures

import grpc
import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import api_listener_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

import xds_sansio
from xds_sansio import ControlPlane, Stepper, XdsSansioError

LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
TARGET = "echo.test"
WAIT = 20.0


def pack(message):
    a = any_pb2.Any()
    a.Pack(message)
    return a


def ads():
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(), resource_api_version=config_source_pb2.V3
    )


def listener():
    hcm = hcm_pb2.HttpConnectionManager(
        rds=hcm_pb2.Rds(config_source=ads(), route_config_name="route-1"),
        http_filters=[hcm_pb2.HttpFilter(name="router", typed_config=pack(router_pb2.Router()))],
    )
    return listener_pb2.Listener(
        name=TARGET, api_listener=api_listener_pb2.ApiListener(api_listener=pack(hcm))
    )


def route():
    action = route_components_pb2.RouteAction(cluster="cluster-1")
    match = route_components_pb2.RouteMatch(prefix="")
    host = route_components_pb2.VirtualHost(
        name="vh", domains=["*"], routes=[route_components_pb2.Route(match=match, route=action)]
    )
    return route_pb2.RouteConfiguration(name="route-1", virtual_hosts=[host])


def cluster(valid=True):
    return cluster_pb2.Cluster(
        name="cluster-1",
        # gRPC accepts EDS, LOGICAL_DNS and aggregate clusters: STATIC is NACKed.
        type=cluster_pb2.Cluster.EDS if valid else cluster_pb2.Cluster.STATIC,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads()),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
    )


def endpoints(port):
    address = address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address="127.0.0.1", port_value=port)
    )
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(address=address)
    )
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name="cluster-1",
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                locality=base_pb2.Locality(region="local"),
                load_balancing_weight={"value": 1},
                lb_endpoints=[endpoint],
            )
        ],
    )


def start_backend(name):
    def echo(request, context):
        return name.encode()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler(
        "interop.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def call(channel):
    try:
        return channel.unary_unary("/interop.Echo/Echo")(b"hi", timeout=2.0).decode()
    except grpc.RpcError as e:
        return f"error:{e.code().name}"


def wait_for(what, predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def use_bootstrap(workdir, server_uri, node_id):
    """Points grpcio's xDS client at ``server_uri`` (insecure, xDS v3) as node ``node_id``."""
    bootstrap = os.path.join(workdir, "bootstrap.json")
    with open(bootstrap, "w") as f:
        json.dump(
            {
                "xds_servers": [
                    {
                        "server_uri": server_uri,
                        "channel_creds": [{"type": "insecure"}],
                        "server_features": ["xds_v3"],
                    }
                ],
                "node": {"id": node_id, "locality": {"zone": "z"}},
            },
            f,
        )
    os.environ["GRPC_XDS_BOOTSTRAP"] = bootstrap


def requests(plane):
    """The client's requests in the control plane's recording, as JSON messages."""
    lines = [json.loads(line) for line in plane.records().splitlines()]
    return [l["message"] for l in lines if l.get("dir") == "C->S"]


def test_grpcio_xds_client_through_the_control_plane_breaks_no_rule():
    backend_1, port_1 = start_backend("backend-1")
    backend_2, port_2 = start_backend("backend-2")
    with ControlPlane() as plane, tempfile.TemporaryDirectory() as workdir:
        for message in [listener(), route(), cluster(), endpoints(port_1)]:
            plane.set_resource(message)
        use_bootstrap(workdir, plane.address, "xds-sansio-python-test")
        channel = grpc.insecure_channel(f"xds:///{TARGET}")
        try:
            # 1. The whole chain LDS -> RDS -> CDS -> EDS resolves to backend-1.
            wait_for("an RPC to backend-1", lambda: call(channel) == "backend-1")
            # 2. An endpoint change moves the traffic.
            plane.set(EDS, endpoints(port_2).SerializeToString())
            wait_for("an RPC to backend-2", lambda: call(channel) == "backend-2")
            # 3. An invalid Cluster is NACKed; the client keeps the last good one.
            plane.set(CDS, cluster(valid=False).SerializeToString())
            wait_for(
                "the client's NACK of the STATIC Cluster",
                lambda: any(
                    r.get("typeUrl") == CDS and "errorDetail" in r for r in requests(plane)
                ),
            )
            assert call(channel) == "backend-2"
            # 4. The fix is ACKed.
            plane.set(CDS, cluster().SerializeToString())
            wait_for(
                "the ACK of the fixed Cluster",
                lambda: (lambda r: r and "errorDetail" not in r[-1])(
                    [r for r in requests(plane) if r.get("typeUrl") == CDS]
                ),
            )
            assert call(channel) == "backend-2"
        finally:
            channel.close()
            backend_1.stop(None)
            backend_2.stop(None)
        plane.stop()
        seen = {r.get("typeUrl") for r in requests(plane)}
        assert {LDS, RDS, CDS, EDS} <= seen, seen
        findings = plane.findings()
        assert findings == [], "\n".join(f"{f.side} line {f.line}: {f.rule}: {f.detail}" for f in findings)

        # The same recording with one of grpcio's ACKs made to name a nonce never sent:
        # the checker must see it, so the clean verdict above is not a checker that is
        # never able to fail.
        lines = plane.records().splitlines()
        for index, line in enumerate(lines):
            entry = json.loads(line)
            if entry.get("dir") == "C->S" and entry["message"].get("responseNonce"):
                entry["message"]["responseNonce"] = "never-sent"
                lines[index] = json.dumps(entry)
                break
        broken = xds_sansio.check("\n".join(lines), side="client")
        assert [(f.rule, f.line) for f in broken] == [("nonce-unknown", index + 1)]
        assert broken[0].passage


def test_grpcio_xds_client_through_a_faulty_control_plane_breaks_no_rule():
    """The test control plane's faults: endpoints duplicated, half the responses late, every
    stream closed after six responses. grpcio still resolves and follows a change."""
    backend_1, port_1 = start_backend("backend-1")
    backend_2, port_2 = start_backend("backend-2")
    faults = "duplicate type=eds\ndelay ms=100 p=0.5\nclose after=6 status=UNAVAILABLE\n"
    with ControlPlane(faults=faults, seed=7) as plane, tempfile.TemporaryDirectory() as workdir:
        for message in [listener(), route(), cluster(), endpoints(port_1)]:
            plane.set_resource(message)
        use_bootstrap(workdir, plane.address, "xds-sansio-python-faults")
        channel = grpc.insecure_channel(f"xds:///{TARGET}")
        try:
            wait_for("an RPC to backend-1", lambda: call(channel) == "backend-1")
            plane.set(EDS, endpoints(port_2).SerializeToString())
            wait_for("an RPC to backend-2", lambda: call(channel) == "backend-2")
        finally:
            channel.close()
            backend_1.stop(None)
            backend_2.stop(None)
        plane.stop()
        responses = [
            json.loads(line)["message"]
            for line in plane.records().splitlines()
            if json.loads(line).get("dir") == "S->C"
        ]
        eds = [r["nonce"] for r in responses if r.get("typeUrl") == EDS]
        assert len(eds) != len(set(eds)), "no EDS response was duplicated"
        findings = plane.findings(side="client")
        assert findings == [], "\n".join(f"line {f.line}: {f.rule}: {f.detail}" for f in findings)


def test_calls_from_several_threads_take_turns():
    errors = []
    with ControlPlane() as plane:
        def publish(port):
            try:
                for _ in range(20):
                    plane.set_resource(endpoints(port))
                    plane.records()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=publish, args=(port,)) for port in (1, 2, 3, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=WAIT)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        # Only changes are recorded: the same body set again publishes nothing.
        assert plane.records().count('"store"') >= 4
        assert plane.findings() == []


def test_a_malformed_record_raises_naming_its_line():
    good = '{"record":"xds-sansio","version":1}'
    with pytest.raises(XdsSansioError) as error:
        xds_sansio.check(good + '\n{"dir":"C->S","message":{}}\n{oops\n')
    assert (error.value.kind, error.value.line) == ("record", 3)
    assert "line 3" in str(error.value)


def test_replay_draws_the_scenario_and_names_a_bad_line():
    scenario = (
        "title: Simple ACK\nmodel: both\nvariant: sotw\n\n"
        "client subscribe EDS foo\nserver set EDS foo:a\n"
        "C->S (V=,R={foo},N=,T=EDS)\nS->C (V=X,R={foo:a},N=A,T=EDS)\n"
        "C->S (V=X,R={foo},N=A,T=EDS) [ack]\n"
    )
    report = xds_sansio.replay(scenario, "ack.xds")
    assert report.passed and "=> PASS" in report.diagram
    assert not xds_sansio.replay(scenario.replace("N=A,T=EDS) [ack]", "N=B,T=EDS) [ack]")).passed
    with pytest.raises(XdsSansioError) as error:
        xds_sansio.replay("model: both\n\nclient frobnicate EDS foo\n")
    assert (error.value.kind, error.value.line) == ("scenario", 3)


def test_the_stepper_speaks_the_generated_messages():
    client = Stepper(role="client", node_id="n")
    server = Stepper(role="server")
    server.set(EDS, endpoints(1234).SerializeToString())
    client.subscribe(EDS, ["cluster-1"])
    (first,) = client.connected().messages
    request = discovery_pb2.DiscoveryRequest.FromString(first.data)
    assert (request.node.id, list(request.resource_names)) == ("n", ["cluster-1"])
    (answer,) = server.handle(request).messages  # a generated message, or its bytes
    response = discovery_pb2.DiscoveryResponse.FromString(answer.data)
    assert [r.type_url for r in response.resources] == [EDS]
    step = client.handle(answer.data)
    assert "Upserted" in [e.kind for e in step.events]
    ack = discovery_pb2.DiscoveryRequest.FromString(step.messages[0].data)
    assert (ack.response_nonce, ack.version_info) == (response.nonce, response.version_info)
    assert "Acked" in [e.kind for e in server.handle(step.messages[0].data).events]
    with pytest.raises(XdsSansioError) as error:
        server.handle(b"\xff\xff")
    assert error.value.kind == "message"
    with pytest.raises(XdsSansioError):
        Stepper(role="server").subscribe(EDS)
