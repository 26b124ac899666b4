"""Cross-language wire check against the official generated Python classes (xds-protos).

Both sides build, from their own descriptors and with the same deterministic rule, one
instance per (message, variant) with every field set (`fill` below; the Rust twin is
`fill` in tests/wire_python.rs). If the two schemas agree in names, numbers and types, the
instances are equal, and each side must decode and parse exactly what the other writes.

  wire_check.py generate DIR   write DIR/python_cases.json (binary + JSON of every case)
  wire_check.py check DIR      read DIR/rust_cases.json and DIR/rust_results.json, compare
                               with our own instances, exit 1 listing every mismatch
"""

import base64
import json
import sys

from google.protobuf import json_format, symbol_database
from google.protobuf.descriptor import FieldDescriptor as FD

# Importing registers the messages in the default symbol database.
from envoy.service.discovery.v3 import ads_pb2, discovery_pb2  # noqa: F401
from envoy.config.core.v3 import base_pb2, address_pb2  # noqa: F401
from envoy.type.v3 import semantic_version_pb2  # noqa: F401
from xds.core.v3 import context_params_pb2  # noqa: F401
from google.rpc import status_pb2  # noqa: F401

DB = symbol_database.Default()
VARIANTS = 4
MAX_DEPTH = 3
ANY_FILLING = "envoy.config.core.v3.ControlPlane"


def message_class(full_name):
    return DB.GetSymbol(full_name)


def scalar(field, variant, index):
    n = field.number
    t = field.type
    if t == FD.TYPE_STRING:
        return f"{field.name}-{variant}-{index}"
    if t == FD.TYPE_BYTES:
        return f"{field.name}:{variant}:{index}".encode()
    if t == FD.TYPE_BOOL:
        return True
    if t in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
        return -(100 * n + variant + index)
    if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return 100 * n + variant + index
    if t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return -(1 << 40) - n - variant - index
    if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return (1 << 40) + n + variant + index
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return n + 0.5
    if t == FD.TYPE_ENUM:
        return field.enum_type.values[-1].number
    raise ValueError(f"unhandled type {t} of {field.full_name}")


def fill_well_known(msg, field, variant):
    name = msg.DESCRIPTOR.full_name
    if name == "google.protobuf.Any":
        inner = message_class(ANY_FILLING)(identifier=f"any-{field.name}-{variant}")
        msg.Pack(inner)
    elif name == "google.protobuf.Struct":
        msg.update({"s": f"{field.name}-{variant}", "n": 1.5, "b": True, "l": ["x", 2.0], "o": {"k": None}})
    elif name == "google.protobuf.Duration":
        msg.seconds = field.number + variant
        msg.nanos = 500000000
    else:
        raise ValueError(f"unhandled well-known type {name}")


def is_repeated(field):
    # protobuf >= 7 has is_repeated; older releases only label.
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FD.LABEL_REPEATED


def fill(msg, variant, depth):
    """Sets every field of msg (one member per oneof, chosen by variant)."""
    desc = msg.DESCRIPTOR
    chosen = {o.name: o.fields[variant % len(o.fields)].name for o in desc.oneofs}
    for field in sorted(desc.fields, key=lambda f: f.number):
        oneof = field.containing_oneof
        if oneof is not None and chosen[oneof.name] != field.name:
            continue
        is_message = field.type == FD.TYPE_MESSAGE
        if is_message and field.message_type.GetOptions().map_entry:
            key_field = field.message_type.fields_by_name["key"]
            value_field = field.message_type.fields_by_name["value"]
            target = getattr(msg, field.name)
            for i in range(2):
                key = f"k{i}" if key_field.type == FD.TYPE_STRING else i
                if value_field.type == FD.TYPE_MESSAGE:
                    fill_child(target[key], value_field, variant, depth)
                else:
                    target[key] = scalar(value_field, variant, i)
            continue
        if is_message and depth >= MAX_DEPTH:
            continue
        if is_repeated(field):
            target = getattr(msg, field.name)
            for i in range(2):
                if is_message:
                    fill_child(target.add(), field, variant, depth)
                else:
                    target.append(scalar(field, variant, i))
        elif is_message:
            fill_child(getattr(msg, field.name), field, variant, depth)
            # An empty message must still be present.
            getattr(msg, field.name).SetInParent()
        else:
            setattr(msg, field.name, scalar(field, variant, 0))


def fill_child(child, field, variant, depth):
    if child.DESCRIPTOR.full_name.startswith("google.protobuf."):
        fill_well_known(child, field, variant)
    else:
        fill(child, variant, depth + 1)
        child.SetInParent()


def instance(full_name, variant):
    msg = message_class(full_name)()
    fill(msg, variant, 0)
    return msg


def to_json(msg):
    return json_format.MessageToJson(msg, indent=None)


def generate(directory, names):
    cases = []
    for name in names:
        for variant in range(VARIANTS):
            msg = instance(name, variant)
            cases.append({
                "message": name,
                "variant": variant,
                "binary": base64.b64encode(msg.SerializeToString()).decode(),
                "json": to_json(msg),
            })
    with open(f"{directory}/python_cases.json", "w") as out:
        json.dump(cases, out)


def check(directory):
    failures = []

    def expect(what, name, variant, parse):
        want = instance(name, variant)
        try:
            got = parse(message_class(name)())
        except Exception as error:  # noqa: BLE001 - every failure is reported
            failures.append(f"{what} {name}#{variant}: {error}")
            return
        if got != want:
            failures.append(f"{what} {name}#{variant}: got {got} want {want}")

    def from_binary(b64):
        def parse(msg):
            msg.ParseFromString(base64.b64decode(b64))
            return msg
        return parse

    def from_json(text):
        def parse(msg):
            return json_format.Parse(text, msg)
        return parse

    with open(f"{directory}/rust_cases.json") as f:
        rust_cases = json.load(f)
    with open(f"{directory}/rust_results.json") as f:
        results = json.load(f)
    for case in rust_cases:
        name, variant = case["message"], case["variant"]
        expect("rust-built binary", name, variant, from_binary(case["binary"]))
        expect("rust-built json", name, variant, from_json(case["json"]))
    for case in results:
        name, variant = case["message"], case["variant"]
        expect("python binary decoded+re-encoded by rust", name, variant, from_binary(case["reencoded"]))
        expect("python binary decoded by rust, as json", name, variant, from_json(case["json_of_binary"]))
        expect("python json parsed by rust, re-encoded", name, variant, from_binary(case["binary_of_json"]))
    checked = len(rust_cases) * 2 + len(results) * 3
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"python wire check: {checked - len(failures)} of {checked} comparisons agree")
    return 1 if failures else 0


if __name__ == "__main__":
    command, directory = sys.argv[1], sys.argv[2]
    if command == "generate":
        generate(directory, sys.argv[3].split(","))
        sys.exit(0)
    sys.exit(check(directory))
