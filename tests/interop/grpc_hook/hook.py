"""`xds-sansio conform client`'s hook for real xDS clients (docs/conform.md, "The hook"):
a control socket that gives every scenario a fresh client process.

- `start`: a new child process whose client dials `address`: grpcio (`child.py`),
  @grpc/grpc-js-xds (`child.js`), grpc-go and grpc-java (`--child-cmd`, the programs under
  tests/interop/go and tests/interop/java) with a bootstrap (GRPC_XDS_BOOTSTRAP) naming it (gRPC's
  XdsClient is one per process, so a new process is a new client); junction-core and
  hyperium's xds-client through `conform_client_child` (tests/interop/rust_peers).
- gRPC and junction (`follows`): `subscribe LDS NAME...` is what their application does
  to watch: a channel to xds:///NAME asked to connect (the xDS resolver watches the
  listener), or a junction resolve of http://NAME/; `unsubscribe LDS NAME` closes the
  channel. A `subscribe`/`unsubscribe` of RDS, CDS or EDS is a no-op: these clients follow
  the references of what they hold on their own (gRPC A27), the scenario's line stands
  for that, and what the client sends is checked as usual.
- xds-client: every `subscribe`/`unsubscribe TYPE NAME` is a watch of that resource
  (`XdsClient::watch`), dropped on unsubscribe.
- Wildcards, `defer`/`accept`/`reject`, `publish`: answered with the reason.
- `stop`: the child is ended.

usage: python3 hook.py --control HOST:PORT --peer python|node|go|java|junction|xds-client --workdir DIR
           [--python VENV_PYTHON] (the interpreter with grpcio, for --peer python)
           [--child-cmd "COMMAND ARGS"] (grpc-go's or grpc-java's child, for --peer go|java)
           [--child-bin PATH] (conform_client_child, for --peer junction|xds-client)
"""
import argparse
import json
import os
import shlex
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
CDS_URL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
FOLLOWED = {
    "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
}


class Peer:
    def __init__(self, args):
        self.args = args
        self.child = None
        self.count = 0

    def stop(self):
        if self.child is not None:
            try:
                self.child.stdin.close()
            except OSError:
                pass
            try:
                self.child.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
            self.child = None

    def command(self, line):
        if self.child is None or self.child.poll() is not None:
            return "no client: the scenario did not start, or the client process ended"
        self.child.stdin.write(line + "\n")
        self.child.stdin.flush()
        answer = self.child.stdout.readline().strip()
        return answer or "the client process ended"

    def handle(self, event):
        hook = event.get("hook")
        if hook == "start":
            self.stop()
            variant = "delta" if self.args.peer == "junction" else "sotw"
            if event.get("variant") != variant or event.get("transport") != "ads":
                return f"this client speaks {variant} over ADS only"
            self.count += 1
            bootstrap = os.path.join(self.args.workdir, f"bootstrap-{self.count}.json")
            with open(bootstrap, "w") as f:
                json.dump(
                    {
                        "xds_servers": [
                            {
                                "server_uri": event["address"],
                                "channel_creds": [{"type": "insecure"}],
                                "server_features": ["xds_v3"],
                            }
                        ],
                        "node": {"id": "client", "cluster": "conform", "locality": {"zone": "z"}},
                    },
                    f,
                )
            env = dict(os.environ, GRPC_XDS_BOOTSTRAP=bootstrap)
            if self.args.peer == "python":
                argv = [self.args.python, "-u", os.path.join(HERE, "child.py")]
            elif self.args.peer == "node":
                argv = ["node", os.path.join(HERE, "child.js")]
            elif self.args.peer in ("go", "java"):
                # grpc-go's and grpc-java's children speak child.py's protocol.
                argv = shlex.split(self.args.child_cmd)
            else:
                argv = [self.args.child_bin, self.args.peer, event["address"]]
            log = open(os.path.join(self.args.workdir, f"client-{self.count}.log"), "w")
            self.child = subprocess.Popen(
                argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, text=True,
            )
            return self.command("ready")
        if hook in ("subscribe", "unsubscribe"):
            type_url, names = event.get("type_url"), event.get("names") or []
            follows = self.args.peer != "xds-client"
            if not names and self.args.peer == "junction" and type_url in (LDS, CDS_URL):
                return "ok"  # junction subscribes to both wildcards when it starts
            if follows and type_url in FOLLOWED and names:
                return "ok"  # the client follows the references itself
            if follows and type_url != LDS:
                return f"this client does not watch {type_url}"
            verb = "watch" if hook == "subscribe" else "unwatch"
            if "*" in names:
                return "this client has no explicit wildcard (`*`)"
            if not follows:
                # One command: xds-client's watches of one event ride on one request;
                # no names is its (legacy) wildcard.
                return self.command(" ".join([verb, type_url] + names))
            if not names:
                return "this client does not subscribe by wildcard"
            for name in names:
                answer = self.command(f"{verb} {type_url} {name}")
                if answer != "ok":
                    return answer
            return "ok"
        if hook == "stop":
            self.stop()
            return "ok"
        return f"this peer does not do {hook!r}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", required=True)
    parser.add_argument(
        "--peer", choices=["python", "node", "go", "java", "junction", "xds-client"], required=True
    )
    parser.add_argument("--child-bin")
    parser.add_argument("--child-cmd")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    host, port = args.control.rsplit(":", 1)
    listener = socket.create_server((host, int(port)))
    print(f"hook listening on {args.control}", flush=True)
    peer = Peer(args)
    while True:
        conn, _ = listener.accept()
        with conn, conn.makefile("r") as reader, conn.makefile("w") as writer:
            for line in reader:
                if not line.strip():
                    continue
                try:
                    answer = peer.handle(json.loads(line))
                except Exception as e:  # the line fails with it
                    answer = f"hook error: {e!r}"
                print(f"{line.strip()} -> {answer}", flush=True)
                writer.write(answer.replace("\n", " ") + "\n")
                writer.flush()
        peer.stop()


if __name__ == "__main__":
    main()
