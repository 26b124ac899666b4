"""Compares a `xds-sansio conform --junit` report with the known failures: exits 1 when a
scenario fails that tests/interop/conform_known_failures.txt does not list under the
label (`client`/`server`: the adapter's peers; otherwise the peer's name, e.g. `grpcio`).

usage: conform_verdicts.py LABEL JUNIT KNOWN_FAILURES"""
import sys
import xml.etree.ElementTree as ET

side, junit, known_path = sys.argv[1:4]
known = set()
for line in open(known_path):
    line = line.split("#", 1)[0].split()
    if len(line) == 2 and line[0] == side:
        known.add(line[1])
failed, passed = set(), 0
for case in ET.parse(junit).iter("testcase"):
    name = case.get("classname").removeprefix("tests/interop/").removeprefix("scenarios/")
    if case.find("failure") is not None or case.find("error") is not None:
        failed.add(name)
    elif case.find("skipped") is None:
        passed += 1
new = sorted(failed - known)
for name in sorted(known & failed):
    print(f"  known failure: {name}")
for name in sorted(known - failed):
    print(f"  known failure that passed this time: {name}")
print(f"conform {side}: {passed} passed, {len(failed)} failed; {len(new)} not known")
for name in new:
    print(f"  NEW FAILURE: {name}", file=sys.stderr)
sys.exit(1 if new else 0)
