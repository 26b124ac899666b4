//! The record format as a public interface (`docs/record-format.md`):
//! - recordings in the shapes other tools write (`tests/fixtures/records/`: Python's
//!   `json_format`, Java's `JsonFormat`, Go's `protojson`, lowerCamelCase and original
//!   names, defaults omitted and written, `null` for unset messages) read to the same
//!   messages, with the resource schemas, through the library (the command line's
//!   reading of them is tested in `xds-sansio-cli/tests/cli.rs`);
//! - every example of the page reads as the page says;
//! - the JSON Schema of one line (`docs/record-format.schema.json`) is in step with the
//!   descriptors of the discovery messages, accepts every line the recorder writes, and
//!   agrees with the reader on lines of other tools' shapes and on broken lines.
//!
//! Python (`.venv/bin/python` made by `scripts/test.sh`, or `XDS_SANSIO_PYTHON`) runs the
//! `jsonschema` validator and re-makes the Python fixtures; without it those parts print a
//! loud SKIPPED message, and fail under `CI`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::{json, Value};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::message::Variant;
use xds_sansio_conformance::check::{check, parse_jsonl, parse_jsonl_with, CheckSide, Entry};

#[path = "support/markdown.rs"]
mod markdown;

/// The same conversation in each shape (see `tests/python/record_shapes.py`).
const FIXTURES: [&str; 5] = [
    "python_json_format.jsonl",
    "python_json_format_proto_names.jsonl",
    "java_jsonformat.jsonl",
    "go_protojson.jsonl",
    "go_protojson_unpopulated.jsonl",
];
/// The messages of that conversation.
const MESSAGES: usize = 13;
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture_dir() -> PathBuf {
    root().join("tests/fixtures/records")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_dir().join(name)).unwrap()
}

fn envoy_codec() -> JsonCodec {
    let set = std::fs::read(root().join("examples/data/envoy.desc")).unwrap();
    let mut codec = JsonCodec::new();
    codec.add_file_descriptor_set(&set).unwrap();
    codec
}

fn regenerate() -> bool {
    std::env::var_os("XDS_SANSIO_REGENERATE").is_some()
}

/// The test venv's Python, or a loud SKIPPED message (a failure under `CI`).
fn python(what: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("XDS_SANSIO_PYTHON") {
        return Some(path.into());
    }
    let venv = root().join(".venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    let message = format!(
        "{what} SKIPPED: no .venv/bin/python and no XDS_SANSIO_PYTHON (run ./scripts/test.sh, \
         or: python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt)"
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "{message}; CI must run it"
    );
    eprintln!("\n!!! {message} !!!\n");
    None
}

/// A fresh directory of its own (tests run in parallel).
fn scratch_dir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("xds-sansio-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Entries without their line numbers (the shapes differ in their header lines).
fn messages_of(entries: Vec<Entry>) -> Vec<Entry> {
    entries
        .into_iter()
        .map(|entry| match entry {
            Entry::Request {
                stream, request, ..
            } => Entry::Request {
                line: 0,
                stream,
                request,
            },
            Entry::Response {
                stream, response, ..
            } => Entry::Response {
                line: 0,
                stream,
                response,
            },
            Entry::Store {
                type_url,
                name,
                version,
                ..
            } => Entry::Store {
                line: 0,
                type_url,
                name,
                version,
            },
        })
        .collect()
}

#[test]
fn every_shape_of_the_fixture_conversation_reads_to_the_same_messages() {
    let codec = envoy_codec();
    let first =
        messages_of(parse_jsonl_with(&fixture(FIXTURES[0]), Variant::Sotw, &codec).unwrap());
    assert_eq!(first.len(), MESSAGES);
    for name in FIXTURES {
        let entries = parse_jsonl_with(&fixture(name), Variant::Sotw, &codec)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(messages_of(entries), first, "{name}");
    }
}

#[test]
fn the_fixture_conversation_is_correct_and_a_mutation_of_its_resources_is_caught() {
    let codec = envoy_codec();
    for name in FIXTURES {
        let entries = parse_jsonl_with(&fixture(name), Variant::Sotw, &codec).unwrap();
        for side in [CheckSide::Client, CheckSide::Server] {
            assert_eq!(check(&entries, side), [], "{name} ({side:?})");
        }
    }
    // The names are read from the resources' canonical fields: the second cluster
    // renamed "a" is a duplicate, at its line.
    let text = fixture("go_protojson_unpopulated.jsonl");
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = lines
        .iter()
        .position(|l| l["dir"] == "S->C" && l["message"]["type_url"] == CLUSTER)
        .unwrap();
    lines[at]["message"]["resources"][1]["name"] = json!("a");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    let entries = parse_jsonl_with(&text.join("\n"), Variant::Sotw, &codec).unwrap();
    let found: Vec<_> = check(&entries, CheckSide::Server)
        .into_iter()
        .map(|v| (v.line, v.rule.id()))
        .collect();
    assert_eq!(found, [(at + 1, "duplicate-names")]);
}

#[test]
fn without_the_schemas_a_canonical_resource_is_an_error_naming_its_line_and_type() {
    for name in FIXTURES {
        let text = fixture(name);
        let first_resources = text.lines().position(|l| l.contains(r#""@type""#)).unwrap() + 1;
        let err = parse_jsonl(&text, Variant::Sotw).unwrap_err();
        assert_eq!(err.line, first_resources, "{name}");
        assert!(err.message.contains(CLUSTER), "{name}: {err}");
    }
}

#[test]
fn the_python_fixtures_are_what_json_format_writes() {
    let Some(python) = python("the json_format fixture check") else {
        return;
    };
    let dir = scratch_dir("shapes");
    let out = Command::new(python)
        .arg(root().join("tests/python/record_shapes.py"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record_shapes.py failed (is xds-protos installed?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut stale = Vec::new();
    for name in FIXTURES {
        let made = std::fs::read_to_string(dir.join(name)).unwrap();
        if made != fixture(name) {
            if regenerate() {
                std::fs::write(fixture_dir().join(name), made).unwrap();
            }
            stale.push(name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stale.is_empty() || regenerate(),
        "{stale:?} differ from what tests/python/record_shapes.py writes; \
         XDS_SANSIO_REGENERATE=1 cargo test --all-features --test record_format rewrites them"
    );
}

// ---------------------------------------------------------------------------------------
// The schema.

fn schema_path() -> PathBuf {
    root().join("docs/record-format.schema.json")
}

/// The messages a line's `message` may hold, and what they reach.
const ROOTS: [&str; 5] = [
    "envoy.service.discovery.v3.DiscoveryRequest",
    "envoy.service.discovery.v3.DiscoveryResponse",
    "envoy.service.discovery.v3.DeltaDiscoveryRequest",
    "envoy.service.discovery.v3.DeltaDiscoveryResponse",
    "envoy.service.discovery.v3.Resource",
];

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{name}") })
}

/// The JSON of a well-known type with a form of its own (protobuf documentation,
/// "ProtoJSON Format"), or `None` for a message written field by field.
fn well_known(name: &str) -> Option<Value> {
    let scalar = |def: &str| reference(def);
    Some(match name {
        "google.protobuf.Any" => json!({
            "description": "An Any: \"@type\" and the fields of the message inside (canonical), or \"@type\" and \"value\", base64 of the message (the crate's relaxation for types without schema). An Any of the discovery Resource wrapper holds a Resource.",
            "type": "object",
            "required": ["@type"],
            "properties": { "@type": { "type": "string" } },
            "if": { "properties": { "@type": { "pattern": "/envoy\\.service\\.discovery\\.v3\\.Resource$" } } },
            "then": reference("envoy.service.discovery.v3.Resource")
        }),
        "google.protobuf.Duration" => {
            json!({ "type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$" })
        }
        "google.protobuf.Timestamp" | "google.protobuf.FieldMask" => json!({ "type": "string" }),
        "google.protobuf.Struct" | "google.protobuf.Empty" => json!({ "type": "object" }),
        "google.protobuf.ListValue" => json!({ "type": "array" }),
        "google.protobuf.Value" => json!(true),
        "google.protobuf.BoolValue" => json!({ "type": "boolean" }),
        "google.protobuf.StringValue" => json!({ "type": "string" }),
        "google.protobuf.BytesValue" => scalar("bytes"),
        "google.protobuf.Int32Value" | "google.protobuf.Int64Value" => scalar("int"),
        "google.protobuf.UInt32Value" | "google.protobuf.UInt64Value" => scalar("uint"),
        "google.protobuf.FloatValue" | "google.protobuf.DoubleValue" => scalar("float"),
        _ => return None,
    })
}

/// The schema of one value of `kind` (never null), queuing the messages and enums it
/// refers to.
fn value_schema(kind: &Kind, queue: &mut Vec<Kind>) -> Value {
    match kind {
        Kind::String => json!({ "type": "string" }),
        Kind::Bool => json!({ "type": "boolean" }),
        Kind::Int32
        | Kind::Sint32
        | Kind::Sfixed32
        | Kind::Int64
        | Kind::Sint64
        | Kind::Sfixed64 => reference("int"),
        Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => reference("uint"),
        Kind::Float | Kind::Double => reference("float"),
        Kind::Bytes => reference("bytes"),
        Kind::Enum(e) => {
            queue.push(kind.clone());
            reference(e.full_name())
        }
        Kind::Message(m) => {
            queue.push(kind.clone());
            reference(m.full_name())
        }
    }
}

/// A field: its value, a list or a map of them, or `null` (proto3 JSON reads `null` as the
/// default; Go's `protojson` writes it for unset messages with `EmitUnpopulated`).
fn field_schema(field: &prost_reflect::FieldDescriptor, queue: &mut Vec<Kind>) -> Value {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            unreachable!("a map field is a message of entries")
        };
        let value = value_schema(&entry.map_entry_value_field().kind(), queue);
        return json!({ "type": ["object", "null"], "additionalProperties": value });
    }
    let value = value_schema(&field.kind(), queue);
    if field.is_list() {
        return json!({ "type": ["array", "null"], "items": value });
    }
    match value.get("type").and_then(Value::as_str) {
        Some(simple) => json!({ "type": [simple, "null"] }),
        None => json!({ "anyOf": [value, { "type": "null" }] }),
    }
}

fn message_schema(message: &MessageDescriptor, queue: &mut Vec<Kind>) -> Value {
    let mut properties = serde_json::Map::new();
    for field in message.fields() {
        let schema = field_schema(&field, queue);
        properties.insert(field.json_name().to_string(), schema.clone());
        properties.insert(field.name().to_string(), schema);
    }
    json!({ "type": "object", "properties": properties })
}

/// The `$defs` of every message and enum the discovery messages reach, by full name.
fn generated_defs() -> BTreeMap<String, Value> {
    let codec = JsonCodec::new();
    let pool = codec.pool();
    let mut queue: Vec<Kind> = ROOTS
        .iter()
        .map(|name| Kind::Message(pool.get_message_by_name(name).unwrap()))
        .collect();
    let mut defs = BTreeMap::new();
    while let Some(kind) = queue.pop() {
        let (name, def) = match &kind {
            Kind::Message(m) if defs.contains_key(m.full_name()) => continue,
            Kind::Enum(e) if defs.contains_key(e.full_name()) => continue,
            Kind::Message(m) => {
                if m.full_name() == "google.protobuf.Any" {
                    queue.push(Kind::Message(
                        pool.get_message_by_name("envoy.service.discovery.v3.Resource")
                            .unwrap(),
                    ));
                }
                let def =
                    well_known(m.full_name()).unwrap_or_else(|| message_schema(m, &mut queue));
                (m.full_name().to_string(), def)
            }
            Kind::Enum(e) => {
                let names: Vec<String> = e.values().map(|v| v.name().to_string()).collect();
                (
                    e.full_name().to_string(),
                    json!({ "anyOf": [{ "enum": names }, { "type": "integer" }] }),
                )
            }
            _ => unreachable!("only messages and enums are queued"),
        };
        defs.insert(name, def);
    }
    defs
}

/// Where a key goes in the written schema: the keywords that say what a value is first,
/// the hand-written definitions before the generated ones, the rest in alphabetical order.
fn key_rank(key: &str) -> (usize, &str) {
    const ORDER: [&str; 33] = [
        "$schema",
        "$id",
        "title",
        "description",
        "$ref",
        "type",
        "const",
        "enum",
        "pattern",
        "minimum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "not",
        "oneOf",
        "anyOf",
        "allOf",
        "if",
        "then",
        "$defs",
        "header",
        "message_line",
        "store_line",
        "dir",
        "stream",
        "variant",
        "time",
        "message",
        "int",
        "uint",
        "float",
        "bytes",
    ];
    (
        ORDER.iter().position(|k| *k == key).unwrap_or(ORDER.len()),
        key,
    )
}

/// JSON written for people: keys in [`key_rank`] order, a value on one line when it fits.
fn pretty(value: &Value, indent: usize) -> String {
    let compact = value.to_string();
    if indent + compact.len() <= 90 || !(value.is_object() || value.is_array()) {
        return compact;
    }
    let pad = " ".repeat(indent + 2);
    let items: Vec<String> = match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(|k| key_rank(k));
            keys.into_iter()
                .map(|k| {
                    format!(
                        "{pad}{}: {}",
                        Value::from(k.as_str()),
                        pretty(&map[k], indent + 2)
                    )
                })
                .collect()
        }
        Value::Array(items) => items
            .iter()
            .map(|item| format!("{pad}{}", pretty(item, indent + 2)))
            .collect(),
        _ => unreachable!("scalars are written compact"),
    };
    let (open, close) = if value.is_object() {
        ("{", "}")
    } else {
        ("[", "]")
    };
    format!(
        "{open}\n{}\n{}{close}",
        items.join(",\n"),
        " ".repeat(indent)
    )
}

#[test]
fn the_schema_is_in_step_with_the_descriptors_of_the_discovery_messages() {
    let text = std::fs::read_to_string(schema_path()).unwrap();
    let mut schema: Value = serde_json::from_str(&text).unwrap();
    let generated = generated_defs();
    let defs = schema["$defs"].as_object_mut().unwrap();
    // Generated definitions are those named by a full protobuf name.
    let stale: Vec<String> = defs
        .keys()
        .filter(|name| name.contains('.') && !generated.contains_key(*name))
        .cloned()
        .collect();
    let differing: Vec<String> = generated
        .iter()
        .filter(|(name, def)| defs.get(*name) != Some(def))
        .map(|(name, _)| name.clone())
        .collect();
    if regenerate() {
        for name in &stale {
            defs.remove(name);
        }
        for (name, def) in generated {
            defs.insert(name, def);
        }
        std::fs::write(schema_path(), pretty(&schema, 0) + "\n").unwrap();
        return;
    }
    assert!(
        stale.is_empty() && differing.is_empty(),
        "docs/record-format.schema.json is not in step with proto/: stale {stale:?}, \
         differing {differing:?}; XDS_SANSIO_REGENERATE=1 cargo test --all-features \
         --test record_format rewrites its message definitions"
    );
}

/// Validates each line against the schema with Python's `jsonschema`: `Ok` or the errors.
fn validate(python: &Path, lines: &[String]) -> Vec<Result<(), String>> {
    let dir = scratch_dir("schema");
    std::fs::write(dir.join("lines.json"), serde_json::to_vec(lines).unwrap()).unwrap();
    let out = Command::new(python)
        .arg(root().join("tests/python/record_schema.py"))
        .arg(schema_path())
        .arg(dir.join("lines.json"))
        .arg(dir.join("results.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record_schema.py failed (is jsonschema installed?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(results.len(), lines.len());
    results
        .into_iter()
        .map(|r| match r["errors"].as_array() {
            Some(errors) if !errors.is_empty() => Err(format!("{errors:?}")),
            _ => Ok(()),
        })
        .collect()
}

/// Every line `xds-sansio replay --record` writes for every scenario, both views: the
/// same library calls the command makes (`script::run`, then `check::write_jsonl` with the
/// header of each view).
fn recorded_lines() -> Vec<(String, String)> {
    let mut files = Vec::new();
    collect_scenarios(&root().join("scenarios"), &mut files);
    files.sort();
    let codec = JsonCodec::new();
    let mut lines = Vec::new();
    for file in &files {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let scenario =
            xds_sansio_conformance::script::parse(&std::fs::read_to_string(file).unwrap(), &stem)
                .unwrap();
        let report = xds_sansio_conformance::script::run(&scenario);
        assert!(report.passed(), "{}", file.display());
        for (side, view) in [
            (CheckSide::Client, &report.client_view),
            (CheckSide::Server, &report.server_view),
        ] {
            let text =
                xds_sansio_conformance::check::write_jsonl(view, Some(side), &codec).unwrap();
            for (index, line) in text.lines().enumerate() {
                lines.push((format!("{stem}.{side:?}:{}", index + 1), line.to_string()));
            }
        }
    }
    assert!(files.len() > 75, "only {} scenarios", files.len());
    lines
}

fn collect_scenarios(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_scenarios(&path, out);
        } else if path.extension().is_some_and(|e| e == "xds") {
            out.push(path);
        }
    }
}

#[test]
fn the_schema_accepts_every_line_the_recorder_writes() {
    let Some(python) = python("the record schema check") else {
        return;
    };
    let recorded = recorded_lines();
    let texts: Vec<String> = recorded.iter().map(|(_, line)| line.clone()).collect();
    let rejected: Vec<String> = recorded
        .iter()
        .zip(validate(&python, &texts))
        .filter_map(|((at, line), result)| result.err().map(|e| format!("{at}: {e}\n    {line}")))
        .collect();
    assert!(
        rejected.is_empty(),
        "the schema rejects {} of {} recorded lines:\n{}",
        rejected.len(),
        recorded.len(),
        rejected.join("\n")
    );
    eprintln!("{} recorded lines valid", recorded.len());
}

/// Lines in the shapes of other tools, and broken lines, each with whether it is valid:
/// the schema and the reader must both say so. Broken messages say their variant: the
/// schema checks a line without one against both variants' definitions, since the
/// reader's default (`check --variant`) decides, which a schema cannot know.
fn hand_written_lines() -> Vec<(&'static str, bool, Value)> {
    let cds = CLUSTER;
    let cluster = json!({ "@type": cds, "name": "a", "connectTimeout": "1s",
        "ringHashLbConfig": { "minimumRingSize": "1024" }, "lbPolicy": "RING_HASH" });
    let wrapper = "type.googleapis.com/envoy.service.discovery.v3.Resource";
    vec![
        // Other tools' shapes.
        (
            "Go protojson request, lowerCamelCase, defaults omitted",
            true,
            json!({"dir": "C->S", "stream": 1, "message": {"node": {"id": "n", "userAgentName": "grpc-go"}, "typeUrl": cds}}),
        ),
        (
            "Python json_format request, original names, defaults written",
            true,
            json!({"dir": "C->S", "stream": 1, "variant": "sotw", "message": {"version_info": "", "node": {"id": "n", "client_features": []}, "resource_names": [], "type_url": cds, "response_nonce": ""}}),
        ),
        (
            "Go protojson EmitUnpopulated: null for unset messages",
            true,
            json!({"dir": "C->S", "message": {"version_info": "", "node": null, "resource_names": [], "type_url": cds, "response_nonce": "", "error_detail": null}}),
        ),
        (
            "int64 as a string inside a resource (UInt64Value)",
            true,
            json!({"dir": "S->C", "message": {"versionInfo": "1", "resources": [cluster], "typeUrl": cds, "nonce": "A"}}),
        ),
        (
            "int32 as a string (proto3 JSON parsers take both)",
            true,
            json!({"dir": "C->S", "message": {"responseNonce": "A", "typeUrl": cds, "errorDetail": {"code": "13", "message": "bad"}}}),
        ),
        (
            "a Resource wrapper with a canonical body and a TTL",
            true,
            json!({"dir": "S->C", "message": {"versionInfo": "1", "typeUrl": cds, "nonce": "B", "resources": [{"@type": wrapper, "name": "a", "version": "1", "ttl": "30s", "resource": cluster}]}}),
        ),
        (
            "delta, original names",
            true,
            json!({"dir": "C->S", "variant": "delta", "message": {"type_url": cds, "resource_names_subscribe": ["a"], "initial_resource_versions": {"a": "1"}}}),
        ),
        (
            "delta response",
            true,
            json!({"dir": "S->C", "variant": "delta", "message": {"systemVersionInfo": "2", "typeUrl": cds, "nonce": "C", "resources": [{"name": "a", "version": "2", "resource": cluster}], "removedResources": ["b"]}}),
        ),
        (
            "the relaxed Any form",
            true,
            json!({"dir": "S->C", "message": {"typeUrl": cds, "nonce": "D", "resources": [{"@type": cds, "value": "CgFh"}]}}),
        ),
        (
            "binary, URL-safe and unpadded",
            true,
            json!({"dir": "S->C", "binary": "CgI_Pg"}),
        ),
        (
            "stream as digits, time as a timestamp",
            true,
            json!({"dir": "S->C", "stream": "2", "time": "2024-05-01T10:00:00Z", "binary": "CgEx"}),
        ),
        (
            "a key of the writer's own",
            true,
            json!({"dir": "S->C", "binary": "", "peer": "10.0.0.1:443"}),
        ),
        (
            "header",
            true,
            json!({"record": "xds-sansio", "version": 1}),
        ),
        (
            "header with view and writer",
            true,
            json!({"record": "xds-sansio", "version": 1, "view": "server", "writer": "go protojson"}),
        ),
        (
            "store set",
            true,
            json!({"store": "set", "type_url": cds, "name": "a", "version": "1"}),
        ),
        (
            "store set without a version",
            true,
            json!({"store": "set", "type_url": cds, "name": "a"}),
        ),
        (
            "store remove",
            true,
            json!({"store": "remove", "type_url": cds, "name": "a"}),
        ),
        // Broken lines.
        (
            "another direction",
            false,
            json!({"dir": "C<-S", "binary": ""}),
        ),
        (
            "another variant",
            false,
            json!({"dir": "S->C", "variant": "both", "binary": ""}),
        ),
        (
            "a variant that is not a string",
            false,
            json!({"dir": "S->C", "variant": 1, "binary": ""}),
        ),
        (
            "a negative stream",
            false,
            json!({"dir": "S->C", "stream": -1, "binary": ""}),
        ),
        (
            "a fractional stream",
            false,
            json!({"dir": "S->C", "stream": 1.5, "binary": ""}),
        ),
        (
            "a stream that is a word",
            false,
            json!({"dir": "S->C", "stream": "two", "binary": ""}),
        ),
        (
            "a time that is neither",
            false,
            json!({"dir": "S->C", "time": true, "binary": ""}),
        ),
        (
            "both message and binary",
            false,
            json!({"dir": "S->C", "binary": "", "message": {}}),
        ),
        ("neither message nor binary", false, json!({"dir": "S->C"})),
        (
            "binary that is not a string",
            false,
            json!({"dir": "S->C", "binary": 7}),
        ),
        (
            "a message that is not an object",
            false,
            json!({"dir": "S->C", "message": []}),
        ),
        (
            "a version that is a number",
            false,
            json!({"dir": "S->C", "variant": "sotw", "message": {"versionInfo": 1}}),
        ),
        (
            "names that are not a list",
            false,
            json!({"dir": "C->S", "variant": "sotw", "message": {"resourceNames": "a"}}),
        ),
        (
            "a nonce that is a number",
            false,
            json!({"dir": "C->S", "message": {"response_nonce": 5}}),
        ),
        (
            "an Any without @type",
            false,
            json!({"dir": "S->C", "variant": "sotw", "message": {"resources": [{"name": "a"}]}}),
        ),
        (
            "a TTL that is not a duration",
            false,
            json!({"dir": "S->C", "message": {"resources": [{"@type": wrapper, "name": "a", "ttl": "soon"}]}}),
        ),
        (
            "delta removals that are not a list",
            false,
            json!({"dir": "S->C", "variant": "delta", "message": {"removedResources": "b"}}),
        ),
        (
            "a line that is both",
            false,
            json!({"dir": "S->C", "store": "set", "type_url": cds, "name": "a"}),
        ),
        (
            "another store operation",
            false,
            json!({"store": "replace", "type_url": cds, "name": "a"}),
        ),
        (
            "a store line without a name",
            false,
            json!({"store": "set", "type_url": cds}),
        ),
        (
            "a store version that is a number",
            false,
            json!({"store": "set", "type_url": cds, "name": "a", "version": 1}),
        ),
        (
            "a newer version",
            false,
            json!({"record": "xds-sansio", "version": 2}),
        ),
        (
            "another format",
            false,
            json!({"record": "other", "version": 1}),
        ),
        (
            "a header without a version",
            false,
            json!({"record": "xds-sansio"}),
        ),
        (
            "another view",
            false,
            json!({"record": "xds-sansio", "version": 1, "view": "both"}),
        ),
        (
            "a writer that is not a string",
            false,
            json!({"record": "xds-sansio", "version": 1, "writer": 5}),
        ),
        ("not an object", false, json!(["dir", "C->S"])),
    ]
}

#[test]
fn the_reader_accepts_the_hand_written_lines_it_should_and_rejects_the_broken_ones() {
    let codec = envoy_codec();
    let disagree: Vec<String> = hand_written_lines()
        .into_iter()
        .filter(|(_, valid, line)| {
            parse_jsonl_with(&line.to_string(), Variant::Sotw, &codec).is_ok() != *valid
        })
        .map(|(what, valid, line)| format!("{what} (valid: {valid}): {line}"))
        .collect();
    assert!(
        disagree.is_empty(),
        "the reader disagrees:\n{}",
        disagree.join("\n")
    );
}

/// A line to judge: where it comes from, whether it is valid, the line.
type Case = (String, bool, String);

/// The lines of the page's examples, each with whether it is valid (`jsonl` blocks) or
/// not (`jsonl-invalid`), and the text of each valid block with the line it starts at.
fn page_examples() -> (Vec<Case>, Vec<(usize, String)>) {
    let page = std::fs::read_to_string(root().join("docs/record-format.md")).unwrap();
    let blocks = markdown::fenced_blocks(&page).unwrap();
    let mut lines = Vec::new();
    let mut valid_blocks = Vec::new();
    for block in blocks {
        let valid = match block.info.as_str() {
            "jsonl" => true,
            "jsonl-invalid" => false,
            _ => continue,
        };
        for (index, line) in block.text.lines().enumerate() {
            let at = format!("docs/record-format.md:{}", block.line + 1 + index);
            lines.push((at, valid, line.to_string()));
        }
        if valid {
            valid_blocks.push((block.line, block.text));
        }
    }
    (lines, valid_blocks)
}

#[test]
fn the_examples_of_the_page_read_as_the_page_says() {
    let codec = envoy_codec();
    let (lines, blocks) = page_examples();
    assert!(lines.len() > 30, "only {} example lines", lines.len());
    assert!(
        lines.iter().any(|(_, valid, _)| !valid),
        "no jsonl-invalid example"
    );
    let wrong: Vec<String> = lines
        .iter()
        .filter(|(_, valid, line)| parse_jsonl_with(line, Variant::Sotw, &codec).is_ok() != *valid)
        .map(|(at, valid, line)| format!("{at} (valid: {valid}): {line}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "the reader disagrees with the page:\n{}",
        wrong.join("\n")
    );
    for (at, text) in blocks {
        if let Err(e) = parse_jsonl_with(&text, Variant::Sotw, &codec) {
            panic!("the block at docs/record-format.md:{at} is not a recording: {e}");
        }
    }
}

#[test]
fn the_schema_accepts_the_hand_written_lines_the_fixtures_and_the_page_and_rejects_the_broken_ones()
{
    let Some(python) = python("the record schema check") else {
        return;
    };
    let mut cases: Vec<Case> = hand_written_lines()
        .into_iter()
        .map(|(what, valid, line)| (what.to_string(), valid, line.to_string()))
        .collect();
    for name in FIXTURES {
        for (index, line) in fixture(name).lines().enumerate() {
            cases.push((format!("{name}:{}", index + 1), true, line.to_string()));
        }
    }
    cases.extend(page_examples().0);
    let lines: Vec<String> = cases.iter().map(|(_, _, line)| line.clone()).collect();
    let disagree: Vec<String> = cases
        .iter()
        .zip(validate(&python, &lines))
        .filter(|((_, valid, _), result)| result.is_ok() != *valid)
        .map(|((what, valid, line), result)| {
            format!("{what} (valid: {valid}): {result:?}\n    {line}")
        })
        .collect();
    assert!(
        disagree.is_empty(),
        "the schema disagrees:\n{}",
        disagree.join("\n")
    );
}
