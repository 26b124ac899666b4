"""Interop: the `hello` example (the README's first server) <-> the gRPC C-core xDS client.

Starts an echo backend, the hello example pointed at it, and a gRPC channel to
xds:///hello whose bootstrap names the example; an RPC must reach the backend through the
listener -> route -> cluster -> endpoints chain the example publishes. Bounded; exits
non-zero on failure.

usage: python hello.py HELLO_BINARY WORKDIR
"""
import json
import os
import socket
import subprocess
import sys
import time
from concurrent import futures

import grpc

TIMEOUT = 30.0


def log(*args):
    print("[hello]", *args, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_backend():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"backend")
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("interop.Echo", {"Echo": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def main():
    binary, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    backend, backend_port = start_backend()
    port = free_port()
    hello = subprocess.Popen(
        [binary, f"127.0.0.1:{port}", f"127.0.0.1:{backend_port}"],
        stdout=open(os.path.join(workdir, "hello.log"), "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        bootstrap = os.path.join(workdir, "bootstrap.json")
        with open(bootstrap, "w") as f:
            json.dump(
                {
                    "xds_servers": [
                        {
                            "server_uri": f"127.0.0.1:{port}",
                            "channel_creds": [{"type": "insecure"}],
                            "server_features": ["xds_v3"],
                        }
                    ],
                    "node": {"id": "hello-grpcio"},
                },
                f,
            )
        os.environ["GRPC_XDS_BOOTSTRAP"] = bootstrap
        channel = grpc.insecure_channel("xds:///hello")
        rpc = channel.unary_unary("/interop.Echo/Echo")
        deadline = time.monotonic() + TIMEOUT
        last = None
        while time.monotonic() < deadline:
            if hello.poll() is not None:
                raise AssertionError(f"hello exited with {hello.returncode}")
            try:
                answer = rpc(b"hi", timeout=2.0).decode()
                if answer == "backend":
                    log("an RPC to xds:///hello reached the backend through the chain")
                    return 0
                last = answer
            except grpc.RpcError as e:
                last = f"{e.code().name}: {e.details()}"
            time.sleep(0.2)
        raise AssertionError(f"no RPC reached the backend within {TIMEOUT}s (last: {last})")
    finally:
        hello.terminate()
        hello.wait(timeout=10)
        backend.stop(0)


if __name__ == "__main__":
    sys.exit(main())
