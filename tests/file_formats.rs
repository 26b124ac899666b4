//! Every message of our descriptors, with every field set (one instance per oneof member),
//! through every file format and back; malformed input in every format names its position.
//!
//! The instance builder (`fill` and friends) follows the one in `tests/wire_python.rs`, so
//! both tests cover the same instances.
#![cfg(all(feature = "json", feature = "yaml", feature = "textproto"))]

use bytes::Bytes;
use prost::{Message, Name};
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};
use xds_sansio::file::{FileCodec, Format, FormatError, Position};
use xds_sansio::json::JsonCodec;
use xds_sansio::pb;

const VARIANTS: u32 = 4;
const MAX_DEPTH: u32 = 3;
const OUR_PACKAGES: &[&str] = &[
    "envoy.service.discovery.v3",
    "envoy.config.core.v3",
    "envoy.type.v3",
    "xds.core.v3",
    "google.rpc",
];
const FORMATS: [Format; 4] = [Format::Binary, Format::Json, Format::Yaml, Format::Text];

fn scalar(field: &FieldDescriptor, variant: u32, index: u32) -> Value {
    let n = field.number();
    let (n, v, i) = (i64::from(n), i64::from(variant), i64::from(index));
    match field.kind() {
        Kind::String => Value::String(format!("{}-{variant}-{index}", field.name())),
        Kind::Bytes => Value::Bytes(
            format!("{}:{variant}:{index}", field.name())
                .into_bytes()
                .into(),
        ),
        Kind::Bool => Value::Bool(true),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(-(100 * n + v + i) as i32),
        Kind::Uint32 | Kind::Fixed32 => Value::U32((100 * n + v + i) as u32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(-(1 << 40) - n - v - i),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(((1 << 40) + n + v + i) as u64),
        Kind::Double => Value::F64(n as f64 + 0.5),
        Kind::Float => Value::F32(n as f32 + 0.5),
        Kind::Enum(e) => Value::EnumNumber(e.values().last().expect("enum values").number()),
        Kind::Message(m) => panic!("{} is not a scalar", m.full_name()),
    }
}

fn well_known(desc: &MessageDescriptor, field: &FieldDescriptor, variant: u32) -> DynamicMessage {
    use prost_types::value::Kind as V;
    let encoded = match desc.full_name() {
        "google.protobuf.Any" => {
            pb::google::protobuf::Any::from_msg(&pb::envoy::config::core::v3::ControlPlane {
                identifier: format!("any-{}-{variant}", field.name()),
            })
            .encode_to_vec()
        }
        "google.protobuf.Struct" => {
            let value = |kind| prost_types::Value { kind: Some(kind) };
            let mut fields = std::collections::BTreeMap::new();
            fields.insert(
                "s".into(),
                value(V::StringValue(format!("{}-{variant}", field.name()))),
            );
            fields.insert("n".into(), value(V::NumberValue(1.5)));
            fields.insert("b".into(), value(V::BoolValue(true)));
            fields.insert(
                "l".into(),
                value(V::ListValue(prost_types::ListValue {
                    values: vec![
                        value(V::StringValue("x".into())),
                        value(V::NumberValue(2.0)),
                    ],
                })),
            );
            let mut inner = std::collections::BTreeMap::new();
            inner.insert("k".into(), value(V::NullValue(0)));
            fields.insert(
                "o".into(),
                value(V::StructValue(prost_types::Struct { fields: inner })),
            );
            prost_types::Struct { fields }.encode_to_vec()
        }
        "google.protobuf.Duration" => prost_types::Duration {
            seconds: i64::from(field.number() + variant),
            nanos: 500_000_000,
        }
        .encode_to_vec(),
        other => panic!("unhandled well-known type {other}"),
    };
    DynamicMessage::decode(desc.clone(), encoded.as_slice()).expect("well-known type")
}

fn child(desc: &MessageDescriptor, field: &FieldDescriptor, variant: u32, depth: u32) -> Value {
    if desc.package_name() == "google.protobuf" {
        Value::Message(well_known(desc, field, variant))
    } else {
        let mut msg = DynamicMessage::new(desc.clone());
        fill(&mut msg, variant, depth + 1);
        Value::Message(msg)
    }
}

/// Sets every field of `msg`, one member per oneof chosen by `variant`: the twin of
/// `fill` in wire_check.py.
fn fill(msg: &mut DynamicMessage, variant: u32, depth: u32) {
    let desc = msg.descriptor();
    let chosen: Vec<String> = desc
        .oneofs()
        .map(|o| {
            let fields: Vec<_> = o.fields().collect();
            fields[variant as usize % fields.len()].name().to_string()
        })
        .collect();
    let mut fields: Vec<_> = desc.fields().collect();
    fields.sort_by_key(|f| f.number());
    for field in fields {
        if field.containing_oneof().is_some() && !chosen.contains(&field.name().to_string()) {
            continue;
        }
        let value = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                unreachable!()
            };
            let (key_field, value_field) =
                (entry.map_entry_key_field(), entry.map_entry_value_field());
            let map = (0..2)
                .map(|i| {
                    let key = match key_field.kind() {
                        Kind::String => MapKey::String(format!("k{i}")),
                        other => panic!("unhandled map key {other:?}"),
                    };
                    let value = match value_field.kind() {
                        Kind::Message(m) => child(&m, &value_field, variant, depth),
                        _ => scalar(&value_field, variant, i),
                    };
                    (key, value)
                })
                .collect();
            Value::Map(map)
        } else if let Kind::Message(m) = field.kind() {
            if depth >= MAX_DEPTH {
                continue;
            }
            if field.is_list() {
                Value::List((0..2).map(|_| child(&m, &field, variant, depth)).collect())
            } else {
                child(&m, &field, variant, depth)
            }
        } else if field.is_list() {
            Value::List((0..2).map(|i| scalar(&field, variant, i)).collect())
        } else {
            scalar(&field, variant, 0)
        };
        msg.set_field(&field, value);
    }
}

/// Round-trips one typed message through every format.
fn round_trip<M: Message + Name + Default + PartialEq + std::fmt::Debug>(
    codec: &FileCodec,
    message: &M,
) {
    for format in FORMATS {
        let written = codec
            .encode(format, message)
            .unwrap_or_else(|e| panic!("{} as {format}: {e}", M::full_name()));
        let back: M = codec
            .decode(format, Bytes::from(written.clone()))
            .unwrap_or_else(|e| {
                panic!(
                    "{} from {format}: {e}\n{}",
                    M::full_name(),
                    String::from_utf8_lossy(&written)
                )
            });
        assert_eq!(&back, message, "{} through {format}", M::full_name());
    }
}

macro_rules! typed {
    ($($t:ty),* $(,)?) => {
        fn typed_names() -> Vec<String> {
            vec![$(<$t as Name>::full_name()),*]
        }

        fn round_trip_by_name(codec: &FileCodec, name: &str, binary: &[u8]) {
            $(
                if name == <$t as Name>::full_name() {
                    let message = <$t>::decode(binary).expect(name);
                    round_trip(codec, &message);
                    return;
                }
            )*
            panic!("no typed entry for {name}")
        }
    };
}

use pb::discovery as d;
use pb::envoy::config::core::v3 as core;
typed!(
    d::AdsDummy,
    d::ResourceLocator,
    d::ResourceName,
    d::DynamicParameterConstraints,
    d::dynamic_parameter_constraints::SingleConstraint,
    d::dynamic_parameter_constraints::single_constraint::Exists,
    d::dynamic_parameter_constraints::ConstraintList,
    d::ResourceError,
    d::DiscoveryRequest,
    d::DiscoveryResponse,
    d::DeltaDiscoveryRequest,
    d::DeltaDiscoveryResponse,
    d::Resource,
    d::resource::CacheControl,
    core::Locality,
    core::BuildVersion,
    core::Extension,
    core::Metadata,
    core::Node,
    core::ControlPlane,
    core::Pipe,
    core::EnvoyInternalAddress,
    core::SocketAddress,
    core::Address,
    pb::envoy::r#type::v3::SemanticVersion,
    pb::xds::core::v3::ContextParams,
    pb::google::rpc::Status,
);

#[test]
fn every_message_round_trips_through_every_format() {
    let json = JsonCodec::new();
    let codec = FileCodec::with_json_codec(json.clone(), false);
    let mut names: Vec<String> = json
        .pool()
        .all_messages()
        .filter(|m| OUR_PACKAGES.contains(&m.package_name()) && !m.is_map_entry())
        .map(|m| m.full_name().to_string())
        .collect();
    names.sort();
    let mut typed = typed_names();
    typed.sort();
    assert_eq!(names, typed, "every message of ours is listed");
    let mut checked = 0;
    for name in &names {
        let desc = json.pool().get_message_by_name(name).expect(name);
        for variant in 0..VARIANTS {
            let mut msg = DynamicMessage::new(desc.clone());
            fill(&mut msg, variant, 0);
            round_trip_by_name(&codec, name, &msg.encode_to_vec());
            checked += 1;
        }
    }
    assert!(checked >= 27 * 4);
}

fn sample_response() -> d::DiscoveryResponse {
    d::DiscoveryResponse {
        version_info: "v1".into(),
        type_url: xds_sansio::types::CLUSTER.type_url.into(),
        nonce: "n".into(),
        resources: vec![pb::google::protobuf::Any {
            type_url: xds_sansio::types::CLUSTER.type_url.into(),
            value: Bytes::from_static(b"\x0a\x03foo"),
        }],
        ..Default::default()
    }
}

fn malformed(format: Format, input: &[u8]) -> (Option<Position>, String) {
    let codec = FileCodec::with_json_codec(JsonCodec::new(), false);
    match codec.decode::<d::DiscoveryResponse>(format, Bytes::copy_from_slice(input)) {
        Err(FormatError::Malformed {
            format: f,
            position,
            message,
        }) => {
            assert_eq!(f, format);
            (position, message)
        }
        other => panic!("{format}: expected a malformed error, got {other:?}"),
    }
}

fn lc(line: usize, column: usize) -> Option<Position> {
    Some(Position::LineColumn { line, column })
}

#[test]
fn malformed_binary_names_the_byte_offset() {
    let good = sample_response().encode_to_vec();
    // Cut inside the second record (the resources Any): the record starts after
    // version_info (2 + 2 bytes).
    let cut = &good[..9];
    let (position, message) = malformed(Format::Binary, cut);
    assert_eq!(position, Some(Position::Byte(4)), "{message}");
    assert!(message.contains("field 2"), "{message}");
    // An invalid wire type after a valid first record.
    let mut bad = good[..4].to_vec();
    bad.push(0x0f); // field 1, wire type 7
    let (position, message) = malformed(Format::Binary, &bad);
    assert_eq!(position, Some(Position::Byte(4)), "{message}");
    assert!(message.contains("wire type 7"), "{message}");
    // Invalid UTF-8 in a string field: the record's offset.
    let mut bad = good.clone();
    bad.extend_from_slice(&[0x22, 0x02, 0xff, 0xfe]); // field 4 (type_url), bad UTF-8
    let (position, message) = malformed(Format::Binary, &bad);
    assert_eq!(position, Some(Position::Byte(good.len())), "{message}");
    // A truncated key.
    let (position, _) = malformed(Format::Binary, &[0x80]);
    assert_eq!(position, Some(Position::Byte(0)));
}

#[test]
fn malformed_json_names_line_and_column() {
    // Syntax error.
    let (position, message) = malformed(Format::Json, b"{\n  \"versionInfo\": \"1\",\n  oops\n}");
    assert_eq!(position, lc(3, 3), "{message}");
    // Schema error: a number where a string belongs.
    let (position, message) = malformed(
        Format::Json,
        b"{\n  \"versionInfo\": \"1\",\n  \"nonce\": 7\n}",
    );
    assert_eq!(position, lc(3, 12), "{message}");
    assert!(message.contains("string"), "{message}");
    // Unknown field.
    let (position, message) = malformed(Format::Json, b"{\"versionInfo\": \"1\", \"bogus\": 1}");
    assert!(position.is_some(), "{message}");
    assert!(message.contains("bogus"), "{message}");
    // Invalid UTF-8: byte offset.
    let (position, _) = malformed(Format::Json, b"{\"nonce\": \"\xff\"}");
    assert_eq!(position, Some(Position::Byte(11)));
    // Empty input.
    let (position, _) = malformed(Format::Json, b"");
    assert!(position.is_some());
}

#[test]
fn malformed_yaml_names_line_and_column() {
    let (position, message) = malformed(Format::Yaml, b"version_info: \"1\"\nresources: [\n");
    assert!(
        matches!(position, Some(Position::LineColumn { .. })),
        "{message}"
    );
    let (position, message) = malformed(Format::Yaml, b"version_info: \"1\"\nnonce: [1, 2]\n");
    assert_eq!(
        position.map(|p| matches!(p, Position::LineColumn { line: 2, .. })),
        Some(true),
        "{position:?} {message}"
    );
    let (position, message) = malformed(Format::Yaml, b"version_info: \"1\"\n  bad indent: x\n");
    assert!(
        matches!(position, Some(Position::LineColumn { .. })),
        "{message}"
    );
}

#[test]
fn malformed_text_names_line_and_column() {
    let (position, message) = malformed(Format::Text, b"version_info: \"1\"\nnonce: 7 7\n");
    assert_eq!(
        position.map(|p| matches!(p, Position::LineColumn { line: 2, .. })),
        Some(true),
        "{position:?} {message}"
    );
    let (position, message) = malformed(Format::Text, b"version_info: \"1\"\nno_such_field: 1\n");
    assert_eq!(position, lc(2, 1), "{message}");
    let (position, message) = malformed(Format::Text, b"version_info: \"1\"\nresources {\n");
    assert!(
        matches!(position, Some(Position::LineColumn { line: 3, .. })),
        "{position:?} {message}"
    );
}

#[test]
fn formats_by_extension_and_explicit_choice() {
    let codec = FileCodec::with_json_codec(JsonCodec::new(), false);
    let response = sample_response();
    for (path, format) in [
        ("cds.pb", Format::Binary),
        ("cds.bin", Format::Binary),
        ("cds.json", Format::Json),
        ("cds.yaml", Format::Yaml),
        ("cds.YML", Format::Yaml),
        ("cds.textproto", Format::Text),
        ("cds.txtpb", Format::Text),
        ("cds.pb.txt", Format::Text),
        ("cds.pb_text", Format::Text),
    ] {
        assert_eq!(Format::from_path(path), Some(format), "{path}");
        let bytes = codec.encode(format, &response).unwrap();
        let back: d::DiscoveryResponse = codec.decode(format, Bytes::from(bytes)).unwrap();
        assert_eq!(back, response, "{path}");
    }
    assert_eq!(Format::from_path("cds.conf"), None);
    // The same bytes read as another format are malformed, not silently misread.
    let json = codec.encode(Format::Json, &response).unwrap();
    assert!(codec
        .decode::<d::DiscoveryResponse>(Format::Binary, Bytes::from(json))
        .is_err());
}

#[test]
fn hand_written_files_in_each_text_format() {
    let codec = FileCodec::with_json_codec(JsonCodec::new(), false);
    let expected = sample_response();
    let json = br#"{"versionInfo": "v1", "typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
        "nonce": "n", "resources": [{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "value": "CgNmb28="}]}"#;
    let yaml = b"version_info: v1\ntype_url: type.googleapis.com/envoy.config.cluster.v3.Cluster\nnonce: n\nresources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  value: CgNmb28=\n";
    let text = b"version_info: \"v1\"\ntype_url: \"type.googleapis.com/envoy.config.cluster.v3.Cluster\"\nnonce: \"n\"\nresources {\n  type_url: \"type.googleapis.com/envoy.config.cluster.v3.Cluster\"\n  value: \"\\n\\003foo\"\n}\n";
    for (format, bytes) in [
        (Format::Json, &json[..]),
        (Format::Yaml, &yaml[..]),
        (Format::Text, &text[..]),
    ] {
        let got: d::DiscoveryResponse = codec
            .decode(format, Bytes::copy_from_slice(bytes))
            .unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(got, expected, "{format}");
    }
}

#[test]
fn binary_bodies_are_slices_of_the_input() {
    let codec = FileCodec::new();
    let bytes = Bytes::from(sample_response().encode_to_vec());
    let got: d::DiscoveryResponse = codec.decode(Format::Binary, bytes.clone()).unwrap();
    let body = &got.resources[0].value;
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    assert!(range.contains(&(body.as_ptr() as usize)));
}

/// Whatever the bytes, decoding returns a value or a typed error, never a panic; and a
/// binary error always names a byte offset inside the input.
#[test]
fn arbitrary_bytes_never_panic_in_any_format() {
    static CODEC: std::sync::OnceLock<FileCodec> = std::sync::OnceLock::new();
    fn prop(bytes: Vec<u8>, text: String) -> bool {
        let codec = CODEC.get_or_init(|| FileCodec::with_json_codec(JsonCodec::new(), false));
        for format in FORMATS {
            for input in [bytes.clone(), text.clone().into_bytes()] {
                let len = input.len();
                match codec.decode::<d::DiscoveryResponse>(format, Bytes::from(input)) {
                    Ok(_) => {}
                    Err(FormatError::Malformed {
                        position: Some(Position::Byte(offset)),
                        ..
                    }) if offset > len => return false,
                    Err(FormatError::Malformed { .. }) => {}
                    Err(other) => panic!("{other:?}"),
                }
            }
        }
        true
    }
    quickcheck::QuickCheck::new().quickcheck(prop as fn(Vec<u8>, String) -> bool);
}

/// Mutations of a valid binary file: every failure names an offset inside the input.
#[test]
fn mutated_binary_files_name_an_offset_inside_the_input() {
    fn prop(flips: Vec<(u8, u8)>, cut: u8) -> bool {
        let codec = FileCodec::new();
        let mut bytes = sample_response().encode_to_vec();
        for (at, value) in flips {
            let i = at as usize % bytes.len();
            bytes[i] = value;
        }
        bytes.truncate(bytes.len().saturating_sub(cut as usize % 4));
        let len = bytes.len();
        match codec.decode::<d::DiscoveryResponse>(Format::Binary, Bytes::from(bytes)) {
            Ok(_) => true,
            Err(FormatError::Malformed {
                position: Some(Position::Byte(offset)),
                ..
            }) => offset <= len,
            Err(FormatError::Malformed { position: None, .. }) => true,
            Err(other) => panic!("{other:?}"),
        }
    }
    quickcheck::QuickCheck::new().quickcheck(prop as fn(Vec<(u8, u8)>, u8) -> bool);
}
