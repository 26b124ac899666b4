//! Filesystem subscriptions: what only files have (bytes that do not decode, no ACK/NACK,
//! a deferred verdict, TTLs of wrapped resources), on top of the shared SotW rules in
//! `rest_and_file_rules.rs`.

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::{ClientConfig, ClientEvent, RemovalReason};
use xds_sansio::file::{FileEvent, FileSubscription, Format, FormatError, Position};
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
        sub.resource("a").unwrap().ttl,
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
