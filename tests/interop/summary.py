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
]


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
        for whose, name in (("our", "our-violations.txt"), ("the peer's", "peer-violations.txt")):
            violations = os.path.join(workdir, folder, name)
            if os.path.exists(violations):
                with open(violations) as f:
                    lines = [l for l in f.read().splitlines() if l.strip()]
                out.append(f"- checker on {whose} messages: {lines[-1] if lines else 'no output'}")
                out += [f"  - {l.strip()}" for l in lines[:-1] if not l.startswith(" ")]
        if folder in ("xds_server", "rust_control_plane"):
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
