"""Writes an encoded FileDescriptorSet of the Envoy resource types the interop tests serve
(Listener, RouteConfiguration, Cluster, ClusterLoadAssignment, HttpConnectionManager,
Router), with every dependency, from PyPI `xds-protos`. `ads_server --descriptors` reads
it to turn canonical proto3 JSON resources into binary bodies.

usage: python descriptors.py OUT
"""
import sys

from google.protobuf import descriptor_pb2

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2,
)

ROOTS = [
    listener_pb2,
    route_pb2,
    cluster_pb2,
    endpoint_pb2,
    http_connection_manager_pb2,
    router_pb2,
]


def main(out):
    seen = {}
    order = []

    def visit(fd):
        if fd.name in seen:
            return
        seen[fd.name] = True
        for dep in fd.dependencies:
            visit(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        order.append(proto)

    for module in ROOTS:
        visit(module.DESCRIPTOR)
    fds = descriptor_pb2.FileDescriptorSet(file=order)
    with open(out, "wb") as f:
        f.write(fds.SerializeToString())
    print(f"{len(order)} files -> {out}")


if __name__ == "__main__":
    main(sys.argv[1])
