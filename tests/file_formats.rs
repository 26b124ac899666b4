//! Every message of our descriptors, with every field set (one instance per oneof member),
//! through every file format and back; malformed input in every format names its position.
//!
//! The instances come from `tests/support/fill.rs`, the builder the Python wire check
//! uses too.
#![cfg(all(feature = "json", feature = "yaml", feature = "textproto"))]

mod support;

use bytes::Bytes;
use prost::{Message, Name};
use prost_reflect::DynamicMessage;
use support::fill::{fill, OUR_PACKAGES, VARIANTS};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::codec::{FileCodec, Format, FormatError, Position};
use xds_sansio::pb;

const FORMATS: [Format; 4] = [Format::Binary, Format::Json, Format::Yaml, Format::Text];

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
