"""Collects the interop reports under target/interop into one Markdown summary.

usage: python3 summary.py WORKDIR  (writes WORKDIR/REPORT.md and prints it)
"""
import json
import os
import sys

PEERS = [
    ("grpc_python", "our server <-> gRPC C-core xDS client (PyPI grpcio)"),
    ("grpc_node", "our server <-> @grpc/grpc-js-xds (npm)"),
    ("junction", "our delta server <-> junction-core 0.3.2"),
    ("xds_client", "our server <-> xds-client 0.1.0-alpha.4"),
    ("xds_server", "our client <-> xds-server 0.1.0"),
    ("rust_control_plane", "our client <-> rust-control-plane 0.1.2"),
    ("grpc_go", "our server <-> grpc-go 1.85.0 xDS client"),
    ("grpc_java", "our server <-> grpc-java 1.85.1 xDS client (grpc-xds)"),
    ("go_control_plane_snapshot", "our client <-> go-control-plane 0.14.0 (SnapshotCache)"),
    ("go_control_plane_linear", "our client <-> go-control-plane 0.14.0 (LinearCache)"),
    ("java_control_plane", "our client <-> java-control-plane 1.0.49"),
    ("authorities", "our client, two authorities <-> two go-control-plane 0.14.0 servers"),
    ("grpc_go_gcp", "grpc-go 1.85.0 client <-> go-control-plane 0.14.0, tap between (none of ours)"),
]
# Drivers that run the checker on our side themselves (and fail on a violation of ours).
CHECKED_INSIDE = {
    "xds_server", "rust_control_plane", "go_control_plane_snapshot", "go_control_plane_linear",
    "java_control_plane", "authorities",
}


def main(workdir):
    out = ["# Interop report", ""]
    for folder, title in PEERS:
        path = os.path.join(workdir, folder, "report.json")
        out.append(f"## {title}")
        if not os.path.exists(path):
            out += ["", "NOT RUN (no report)", ""]
            continue
        with open(path) as f:
            report = json.load(f)
        out += ["", f"- peer: {report.get('peer')}", f"- result: {report.get('result')}"]
        steps = [s.get("step") for s in report.get("steps", [])]
        out.append(f"- steps: {', '.join(dict.fromkeys(steps))}")
        findings = (("our", "our-violations.txt"), ("the peer's", "peer-violations.txt"))
        if folder == "grpc_go_gcp":
            findings = (("the client's", "client-findings.txt"), ("the server's", "server-findings.txt"))
        for whose, name in findings:
            violations = os.path.join(workdir, folder, name)
            if os.path.exists(violations):
                with open(violations) as f:
                    lines = [l for l in f.read().splitlines() if l.strip()]
                out.append(f"- checker on {whose} messages: {lines[-1] if lines else 'no output'}")
                listed = [l.strip() for l in lines[:-1] if not l.startswith(" ")]
                out += [f"  - {l}" for l in listed[:10]]
                if len(listed) > 10:
                    out.append(f"  - ... and {len(listed) - 10} more (in {violations})")
        if folder in CHECKED_INSIDE:
            out.append("- checker on our messages: run inside the driver (fails on any violation)")
        deviations = report.get("deviations", [])
        out.append(f"- deviations seen: {len(deviations)}")
        out += [f"  - {d}" for d in deviations]
        out.append("")
    text = "\n".join(out)
    with open(os.path.join(workdir, "REPORT.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main(sys.argv[1])
