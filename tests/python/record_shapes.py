"""Writes one conversation as JSON-lines recordings in the shapes other tools write
(docs/record-format.md, "Recordings made by other tools"), from the official generated
Python classes (PyPI `xds-protos`) and protobuf's own `json_format`.

The conversation: a SotW ADS stream (CDS with two clusters, EDS, a CDS update in a
`Resource` wrapper that the client NACKs), then a delta CDS stream (initial versions, a
TTL, a removal). Every resource is an `Any` written canonically (its fields beside
`"@type"`), as these libraries write it, so reading needs the resource schemas
(`--descriptors examples/data/envoy.desc`).

Shapes (one file each in OUT):
  python_json_format.jsonl             json_format.MessageToDict: lowerCamelCase, defaults
                                       omitted, int64 as strings
  python_json_format_proto_names.jsonl preserving_proto_field_name=True and
                                       always_print_fields_with_no_presence=True
  java_jsonformat.jsonl                JsonFormat.printer().includingDefaultValueFields()
                                       .omittingInsignificantWhitespace(): lowerCamelCase,
                                       defaults written; the same output as json_format
                                       with always_print_fields_with_no_presence=True
  go_protojson.jsonl                   protojson.Marshal: lowerCamelCase, defaults omitted,
                                       a space after ':' (protojson adds spaces at random so
                                       that nobody relies on its bytes), no header line
  go_protojson_unpopulated.jsonl       protojson.MarshalOptions{UseProtoNames: true,
                                       EmitUnpopulated: true}: original names, defaults
                                       written, and `null` for every unset message field
                                       outside a oneof (protojson's documented rule)

The Java and Go shapes are json_format's output rewritten by those documented rules
(neither toolchain is needed here); the Python shapes are json_format's own.

usage: python record_shapes.py OUT_DIR
"""

import json
import os
import sys

from google.protobuf import any_pb2, duration_pb2, json_format, symbol_database
from google.protobuf.descriptor import FieldDescriptor as FD

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2 as d
from google.rpc import status_pb2

CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
DB = symbol_database.Default()


def packed(message):
    any_ = any_pb2.Any()
    any_.Pack(message)
    return any_


def cluster(name, timeout, ring=False):
    c = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    c.connect_timeout.FromNanoseconds(int(timeout * 1e9))
    c.eds_cluster_config.eds_config.ads.SetInParent()
    c.eds_cluster_config.eds_config.resource_api_version = config_source_pb2.V3
    if ring:
        c.lb_policy = cluster_pb2.Cluster.RING_HASH
        c.ring_hash_lb_config.minimum_ring_size.value = 1024  # UInt64Value: a string
    return c


def assignment(name, address, port, weight):
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
    lb = cla.endpoints.add().lb_endpoints.add()
    lb.endpoint.address.socket_address.address = address
    lb.endpoint.address.socket_address.port_value = port
    lb.load_balancing_weight.value = weight
    return cla


def conversation():
    """(dir, stream, variant, time in seconds, message), in the order the server saw them."""
    node = base_pb2.Node(id="envoy-1", cluster="edge", user_agent_name="envoy")
    node.metadata.update({"zone": "a"})
    a1, b1 = cluster("a", 0.25, ring=True), cluster("b", 1)
    a2 = cluster("a", 0.5, ring=True)
    wrapped_a2 = d.Resource(name="a", version="2", resource=packed(a2))
    ttl = duration_pb2.Duration(seconds=30)
    return [
        ("C->S", 1, "sotw", 0.0, d.DiscoveryRequest(node=node, type_url=CDS)),
        ("S->C", 1, "sotw", 0.004, d.DiscoveryResponse(
            version_info="1", resources=[packed(a1), packed(b1)], type_url=CDS, nonce="1",
            control_plane=base_pb2.ControlPlane(identifier="cp-1"))),
        ("C->S", 1, "sotw", 0.011, d.DiscoveryRequest(
            version_info="1", type_url=CDS, response_nonce="1")),
        ("C->S", 1, "sotw", 0.012, d.DiscoveryRequest(resource_names=["a", "b"], type_url=EDS)),
        ("S->C", 1, "sotw", 0.015, d.DiscoveryResponse(
            version_info="7", type_url=EDS, nonce="2",
            resources=[packed(assignment("a", "10.0.0.1", 8080, 3)),
                       packed(assignment("b", "10.0.0.2", 8081, 1))])),
        ("C->S", 1, "sotw", 0.021, d.DiscoveryRequest(
            version_info="7", resource_names=["a", "b"], type_url=EDS, response_nonce="2")),
        ("S->C", 1, "sotw", 5.0, d.DiscoveryResponse(
            version_info="2", resources=[packed(wrapped_a2), packed(b1)], type_url=CDS,
            nonce="3")),
        ("C->S", 1, "sotw", 5.003, d.DiscoveryRequest(
            version_info="1", type_url=CDS, response_nonce="3",
            error_detail=status_pb2.Status(code=3, message="cluster a: connect_timeout too long"))),
        ("C->S", 2, "delta", 9.0, d.DeltaDiscoveryRequest(
            node=node, type_url=CDS, resource_names_subscribe=["a", "b"],
            initial_resource_versions={"a": "1"})),
        ("S->C", 2, "delta", 9.002, d.DeltaDiscoveryResponse(
            system_version_info="3", type_url=CDS, nonce="d1",
            resources=[d.Resource(name="a", version="2", resource=packed(a2)),
                       d.Resource(name="b", version="1", resource=packed(b1), ttl=ttl)])),
        ("C->S", 2, "delta", 9.010, d.DeltaDiscoveryRequest(type_url=CDS, response_nonce="d1")),
        ("S->C", 2, "delta", 12.0, d.DeltaDiscoveryResponse(
            system_version_info="4", type_url=CDS, nonce="d2", removed_resources=["b"])),
        ("C->S", 2, "delta", 12.001, d.DeltaDiscoveryRequest(type_url=CDS, response_nonce="d2")),
    ]


# Well-known types with a JSON form of their own: never expanded field by field.
SPECIAL = {
    "google.protobuf.Any", "google.protobuf.Duration", "google.protobuf.Timestamp",
    "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
    "google.protobuf.FieldMask", "google.protobuf.Empty",
    "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
}


def emit_unpopulated(message, obj):
    """Adds protojson's EmitUnpopulated nulls to `obj`, json_format's dict of `message`
    (original names, defaults printed): `null` for each unset singular message field that
    is in no oneof, recursively, also inside canonically written Anys."""
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Any":
        inner = DB.GetSymbol(message.TypeName())()
        message.Unpack(inner)
        emit_unpopulated(inner, obj)
        return
    if name in SPECIAL:
        return
    for field in message.DESCRIPTOR.fields:
        if field.type != FD.TYPE_MESSAGE:
            continue
        value = getattr(message, field.name)
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == FD.TYPE_MESSAGE:
                for key, item in value.items():
                    emit_unpopulated(item, obj[field.name][str(key)])
        elif field.is_repeated:
            for item, item_obj in zip(value, obj[field.name]):
                emit_unpopulated(item, item_obj)
        elif message.HasField(field.name):
            emit_unpopulated(value, obj[field.name])
        elif field.containing_oneof is None:
            obj[field.name] = None


def python_default(message):
    return json_format.MessageToDict(message)


def python_proto_names(message):
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def java_defaults(message):
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


def go_unpopulated(message):
    obj = python_proto_names(message)
    emit_unpopulated(message, obj)
    return obj


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def go_spaced(value):
    return json.dumps(value, separators=(",", ": "), ensure_ascii=False)


def timestamp(seconds):
    whole = int(seconds)
    return "2024-05-01T10:00:%02d.%03dZ" % (whole, round((seconds - whole) * 1000))


HEADER = {"record": "xds-sansio", "version": 1, "view": "server"}

SHAPES = {
    # file: (header or None, message -> dict, line writer, time -> JSON value)
    "python_json_format.jsonl": (dict(HEADER, writer="python json_format"), python_default, compact, lambda t: t),
    "python_json_format_proto_names.jsonl": (dict(HEADER, writer="python json_format"), python_proto_names, compact, lambda t: t),
    "java_jsonformat.jsonl": (dict(HEADER, writer="java JsonFormat"), java_defaults, compact, timestamp),
    "go_protojson.jsonl": (None, python_default, go_spaced, lambda t: t),
    "go_protojson_unpopulated.jsonl": (dict(HEADER, writer="go protojson"), go_unpopulated, compact, lambda t: t),
}


def main(out):
    os.makedirs(out, exist_ok=True)
    lines = conversation()
    for file, (header, shape, write, when) in SHAPES.items():
        with open(os.path.join(out, file), "w", encoding="utf-8") as f:
            if header is not None:
                f.write(compact(header) + "\n")
            for direction, stream, variant, time, message in lines:
                line = {"dir": direction, "stream": stream, "variant": variant,
                        "time": when(time), "message": shape(message)}
                f.write(write(line) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
