"""Real bodies for the placeholders of the corpus's server scenarios, for a management
server that stores typed resources (rust-control-plane decodes every body into its Envoy
message and encodes it again): `conform server --bodies` with `--descriptors`.

Every `name[@version][:tag]` of a `server set` line (the key is `name:tag`, else
`name:version`, else `name:`, as conform looks it up) becomes a small valid message of
its type that carries the tag: a Cluster (`alt_stat_name`), a ClusterLoadAssignment (a
locality's region), a Listener (`stat_prefix`), a RouteConfiguration (a virtual host's
name). Scenarios with `deps` steps are left out (their bodies carry references).

With `--fuzz`, the bodies of what `conform --fuzz` generates instead: the names `a`, `b`,
`c`, `zz` with the tags `t0` to `t2` (xds_sansio::script::generate).

usage: python3 typed_bodies.py SCENARIO_DIR... > bodies.json
       python3 typed_bodies.py --fuzz > bodies.json
"""
import json
import os
import re
import sys

TYPES = {"CDS", "EDS", "LDS", "RDS"}
ITEM = re.compile(r'("(?:[^"\\]|\\.)*"|[^\s@:\[;]+)(?:@([^\s:\[;]+))?(?::([^\s\[;]+))?((?:\[[^\]]*\])*)')


def body(type_name, name, tag):
    if type_name == "CDS":
        return {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": name, "altStatName": tag}
    if type_name == "EDS":
        return {
            "@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            "clusterName": name,
            "endpoints": [{"locality": {"region": tag}}],
        }
    if type_name == "LDS":
        return {"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "name": name, "statPrefix": tag}
    return {
        "@type": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        "name": name,
        "virtualHosts": [{"name": tag or "vh", "domains": ["*"]}],
    }


def main():
    out = {t: {} for t in sorted(TYPES)}
    if sys.argv[1:] == ["--fuzz"]:
        for type_name in TYPES:
            for name in ("a", "b", "c", "zz"):
                for tag in ("t0", "t1", "t2"):
                    out[type_name][f"{name}:{tag}"] = body(type_name, name, tag)
        json.dump(out, sys.stdout, indent=1, sort_keys=True)
        print()
        return
    files = []
    for root in sys.argv[1:]:
        for dirpath, _, names in os.walk(root):
            files += [os.path.join(dirpath, n) for n in names if n.endswith(".xds")]
    for path in sorted(files):
        text = open(path).read()
        if not re.search(r"^model:\s*(server|both)", text, re.M) or re.search(r"^deps ", text, re.M):
            continue
        for line in text.splitlines():
            line = line.split(" #", 1)[0].strip()
            if not line.startswith("server "):
                continue
            for command in line[len("server "):].split(";"):
                words = command.strip().split(None, 2)
                if len(words) < 3 or words[0] != "set" or words[1] not in TYPES:
                    continue
                for m in ITEM.finditer(words[2]):
                    name, version, tag, attrs = m.groups()
                    if "ref=" in (attrs or ""):
                        continue
                    if name.startswith('"'):
                        name = json.loads(name)
                    key_tag = tag if tag is not None else (version or "")
                    out[words[1]][f"{name}:{key_tag}"] = body(words[1], name, key_tag)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
