//! Filesystem subscriptions: what only files have (bytes that do not decode, no ACK/NACK,
//! a deferred verdict, TTLs of wrapped resources), on top of the shared SotW rules in
//! `rest_and_file_rules.rs`.

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::{ClientConfig, ClientEvent, RemovalReason};
use xds_sansio::codec::{Format, FormatError, Position};
use xds_sansio::file::{FileEvent, FileSubscription};
use xds_sansio::pb::discovery::{DiscoveryResponse, Resource};
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::types::{CLUSTER, RESOURCE_WRAPPER_TYPE_URL};
use xds_sansio::Instant;

const CDS: &str = CLUSTER.type_url;

fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

fn file(version: &str, resources: &[(&str, &str)]) -> Bytes {
    Bytes::from(
        DiscoveryResponse {
            version_info: version.into(),
            type_url: CDS.into(),
            resources: resources
                .iter()
                .map(|(n, c)| Any {
                    type_url: CDS.into(),
                    value: body(n, c),
                })
                .collect(),
            ..Default::default()
        }
        .encode_to_vec(),
    )
}

fn events(sub: &mut FileSubscription) -> Vec<FileEvent> {
    std::iter::from_fn(|| sub.poll_event()).collect()
}

fn cds() -> FileSubscription {
    FileSubscription::new(CDS, ClientConfig::default()).unwrap()
}

#[test]
fn a_malformed_file_keeps_the_last_valid_config() {
    let mut sub = cds();
    sub.handle_bytes(
        Instant::from_secs(1),
        Format::Binary,
        file("1", &[("a", "x")]),
    );
    assert!(events(&mut sub).contains(&FileEvent::Accepted {
        version: "1".into()
    }));
    let mut broken = file("2", &[("b", "x")]).to_vec();
    broken.truncate(broken.len() - 2);
    sub.handle_bytes(Instant::from_secs(2), Format::Binary, Bytes::from(broken));
    match events(&mut sub).as_slice() {
        [FileEvent::Malformed(FormatError::Malformed {
            format: Format::Binary,
            position: Some(Position::Byte(_)),
            ..
        })] => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(sub.version(), Some("1"));
    assert_eq!(sub.resource_names(), vec!["a"]);
}

#[test]
fn a_format_without_its_feature_is_a_typed_error() {
    let mut sub = cds();
    for (format, empty) in [
        (Format::Json, &b"{}"[..]),
        (Format::Yaml, &b"{}"[..]),
        (Format::Text, &b""[..]),
    ] {
        sub.handle_bytes(Instant::ZERO, format, Bytes::from_static(empty));
        let ev = events(&mut sub);
        if format.is_enabled() {
            assert!(
                matches!(ev.as_slice(), [FileEvent::Accepted { .. }, ..]),
                "{format}: {ev:?}"
            );
        } else {
            assert_eq!(
                ev,
                vec![FileEvent::Malformed(FormatError::NotEnabled(format))]
            );
        }
    }
}

#[test]
fn deferred_validation_waits_for_the_verdict() {
    let mut sub = cds();
    sub.set_deferred_validation(true);
    sub.handle_bytes(
        Instant::from_secs(1),
        Format::Binary,
        file("1", &[("a", "x")]),
    );
    let ticket = match events(&mut sub).as_slice() {
        [FileEvent::Client(ClientEvent::ValidationNeeded { ticket, .. })] => *ticket,
        other => panic!("{other:?}"),
    };
    assert!(
        sub.resource_names().is_empty(),
        "nothing applied before the verdict"
    );
    sub.verdict(ticket, &[("a", "no")]).unwrap();
    let ev = events(&mut sub);
    assert!(
        ev.iter()
            .any(|e| matches!(e, FileEvent::Rejected { version, rejected, .. } if version == "1" && rejected == &["a"])),
        "{ev:?}"
    );
    assert!(
        sub.verdict(ticket, &[]).is_err(),
        "a ticket is answered once"
    );
}

#[test]
fn ttl_of_a_wrapped_resource_expires_without_a_refresh() {
    let mut sub = cds();
    let wrapped = Resource {
        name: "a".into(),
        version: "r1".into(),
        ttl: Some(prost_types::Duration {
            seconds: 10,
            nanos: 0,
        }),
        resource: Some(Any {
            type_url: CDS.into(),
            value: body("a", "x"),
        }),
        ..Default::default()
    };
    let response = DiscoveryResponse {
        version_info: "1".into(),
        type_url: CDS.into(),
        resources: vec![Any {
            type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
            value: wrapped.encode_to_vec().into(),
        }],
        ..Default::default()
    };
    sub.handle_response(Instant::from_secs(0), response);
    events(&mut sub);
    assert_eq!(
        sub.resource("a").unwrap().ttl(),
        Some(Duration::from_secs(10))
    );
    assert_eq!(sub.poll_timeout(), Some(Instant::from_secs(10)));
    sub.handle_timeout(Instant::from_secs(10));
    let ev = events(&mut sub);
    assert!(
        ev.contains(&FileEvent::Client(ClientEvent::Removed {
            type_url: CDS.into(),
            name: "a".into(),
            reason: RemovalReason::Expired
        })),
        "{ev:?}"
    );
}

#[test]
fn the_same_file_twice_changes_nothing_the_second_time() {
    let mut sub = cds();
    sub.handle_bytes(Instant::ZERO, Format::Binary, file("1", &[("a", "x")]));
    events(&mut sub);
    sub.handle_bytes(Instant::ZERO, Format::Binary, file("1", &[("a", "x")]));
    assert_eq!(
        events(&mut sub),
        vec![FileEvent::Accepted {
            version: "1".into()
        }]
    );
}

/// With the application's resource schema added to the JSON layer, hand-written files name
/// resources by their fields in JSON, YAML and text format, as Envoy's files do.
#[cfg(all(feature = "yaml", feature = "textproto"))]
#[test]
fn resource_schemas_make_hand_written_files_readable() {
    use prost_types::field_descriptor_proto::{Label, Type};
    use prost_types::{
        DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
    };
    use xds_sansio::codec::json::JsonCodec;
    use xds_sansio::codec::FileCodec;

    let field = |name: &str, json: &str, number: i32, ty: Type| FieldDescriptorProto {
        name: Some(name.into()),
        json_name: Some(json.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    let set = FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("acme/widget.proto".into()),
            package: Some("acme".into()),
            syntax: Some("proto3".into()),
            message_type: vec![DescriptorProto {
                name: Some("Widget".into()),
                field: vec![
                    field("name", "name", 1, Type::String),
                    field("weight", "weight", 2, Type::Int32),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let mut json = JsonCodec::new();
    json.add_file_descriptor_set(&set.encode_to_vec()).unwrap();
    let codec = FileCodec::with_json_codec(json, false);
    const WIDGET: &str = "type.googleapis.com/acme.Widget";
    let files: [(Format, &str); 3] = [
        (
            Format::Json,
            r#"{"versionInfo": "1", "resources": [{"@type": "type.googleapis.com/acme.Widget", "name": "foo", "weight": 3}]}"#,
        ),
        (
            Format::Yaml,
            "version_info: \"1\"\nresources:\n- \"@type\": type.googleapis.com/acme.Widget\n  name: foo\n  weight: 3\n",
        ),
        (
            Format::Text,
            "version_info: \"1\"\nresources {\n  [type.googleapis.com/acme.Widget] { name: \"foo\" weight: 3 }\n}\n",
        ),
    ];
    for (format, text) in files {
        let mut sub =
            FileSubscription::with_codec(WIDGET, ClientConfig::default(), codec.clone()).unwrap();
        sub.handle_bytes(Instant::ZERO, format, Bytes::from(text.as_bytes().to_vec()));
        let ev = events(&mut sub);
        assert!(
            ev.contains(&FileEvent::Accepted {
                version: "1".into()
            }),
            "{format}: {ev:?}"
        );
        // name = "foo" (field 1), weight = 3 (field 2).
        assert_eq!(
            sub.resource("foo").map(|r| r.body_bytes()),
            Some(Bytes::from_static(b"\x0a\x03foo\x10\x03")),
            "{format}"
        );
    }
}
