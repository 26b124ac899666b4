use super::*;
use crate::pb::discovery::{ResourceError, ResourceName};
use crate::pb::envoy::config::core::v3::ControlPlane;
use crate::pb::google::rpc::Status;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::{format, vec::Vec};
use quickcheck::{QuickCheck, TestResult};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn any(url: &str, value: &[u8]) -> Any {
    Any {
        type_url: TypeUrl::from(url),
        value: Bytes::copy_from_slice(value),
    }
}

/// A response with every field set, its resources of `url`.
fn response(count: usize, url: &str) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: "v7".into(),
        resources: (0..count)
            .map(|i| any(url, format!("\n\x07cluster{i}").as_bytes()))
            .collect(),
        canary: true,
        type_url: CDS.into(),
        nonce: "n3".into(),
        control_plane: Some(ControlPlane {
            identifier: "cp".into(),
        }),
        resource_errors: vec![ResourceError {
            resource_name: Some(ResourceName {
                name: "gone".into(),
                ..Default::default()
            }),
            error_detail: Some(Status {
                code: 5,
                message: "not found".into(),
                details: vec![any("x/y", b"z")],
            }),
        }],
    }
}

/// A response this module decodes, with our decode of it and a sample encoding.
trait Decoded: Resources + PartialEq + core::fmt::Debug {
    fn ours(wire: Bytes) -> Result<Self, DecodeError>;
    /// A response with every field set, `count` resources of `url`, encoded.
    fn sample(count: usize, url: &str) -> Vec<u8>;
}

impl Decoded for DiscoveryResponse {
    fn ours(wire: Bytes) -> Result<Self, DecodeError> {
        decode_discovery_response(wire)
    }
    fn sample(count: usize, url: &str) -> Vec<u8> {
        response(count, url).encode_to_vec()
    }
}

impl Decoded for DeltaDiscoveryResponse {
    fn ours(wire: Bytes) -> Result<Self, DecodeError> {
        decode_delta_discovery_response(wire)
    }
    fn sample(count: usize, url: &str) -> Vec<u8> {
        delta_response(count, url).encode_to_vec()
    }
}

fn plain_sotw(wire: &Bytes) -> Option<DiscoveryResponse> {
    plain_response::<DiscoveryResponse>(wire)
}

/// Our decode and prost's agree: the same message, or the same error.
fn agree_as<M: Decoded>(wire: &[u8]) -> Result<(), String> {
    let wire = Bytes::copy_from_slice(wire);
    match (M::ours(wire.clone()), M::decode(wire)) {
        (Ok(ours), Ok(prost)) if ours == prost => Ok(()),
        (Err(ours), Err(prost)) if ours.to_string() == prost.to_string() => Ok(()),
        (ours, prost) => Err(format!("ours {ours:?}, prost {prost:?}")),
    }
}

fn agree(wire: &[u8]) -> Result<(), String> {
    agree_as::<DiscoveryResponse>(wire)
}

/// The sample of `seed` (up to 7 resources; a catalogued type URL or one not ASCII) with
/// `edits` applied: each a position (modulo the length) and what is done there. Our
/// decode and prost's agree on it.
fn edited_agrees<M: Decoded>(seed: (u8, bool), edits: Vec<(u16, u8, u8)>) -> TestResult {
    let url = if seed.1 { CDS } else { "é/x" };
    let mut wire = M::sample(usize::from(seed.0 % 8), url);
    for (at, op, byte) in edits {
        if wire.is_empty() {
            break;
        }
        let at = usize::from(at) % wire.len();
        match op % 4 {
            0 => wire[at] = byte,
            1 => wire.truncate(at),
            2 => wire.insert(at, byte),
            _ => {
                wire.remove(at);
            }
        }
    }
    match agree_as::<M>(&wire) {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

/// Every change of one byte of a small sample to each of `bytes` is read as prost reads
/// it, and the changes reach prost's two outcomes and the plain path (the property over
/// random edits is not vacuous).
fn single_byte_changes_agree<M: Decoded>(bytes: &[u8]) {
    let wire = M::sample(3, CDS);
    let (mut ok, mut err, mut plain) = (0, 0, 0);
    for at in 0..wire.len() {
        for &byte in bytes {
            let mut changed = wire.clone();
            changed[at] = byte;
            agree_as::<M>(&changed).unwrap_or_else(|e| panic!("byte {at} = {byte:#x}: {e}"));
            let bytes = Bytes::from(changed);
            match M::decode(bytes.clone()) {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
            plain += usize::from(plain_response::<M>(&bytes).is_some());
        }
    }
    assert!(
        ok > 100 && err > 100 && plain > 100,
        "ok {ok}, err {err}, plain {plain}"
    );
}

#[test]
fn an_encoded_response_is_read_on_the_plain_path_as_prost_reads_it() {
    for url in [CDS, "type.googleapis.com/example.Unknown"] {
        let encoded = Bytes::from(response(50, url).encode_to_vec());
        let plain = plain_sotw(&encoded).expect("the plain path");
        assert_eq!(plain, DiscoveryResponse::decode(encoded.clone()).unwrap());
        // The values are slices of the wire, as prost's are.
        let range = encoded.as_ptr_range();
        assert!(plain
            .resources
            .iter()
            .all(|a| range.contains(&a.value.as_ptr())));
    }
    // A catalogued type's URL is the static string, not a slice of the wire.
    let encoded = Bytes::from(response(2, CDS).encode_to_vec());
    let plain = plain_sotw(&encoded).unwrap();
    let url = plain.resources[1].type_url.as_str();
    assert!(!encoded.as_ptr_range().contains(&url.as_ptr()));
    assert_eq!(
        decode_discovery_response(Bytes::new()).unwrap(),
        Default::default()
    );
}

#[test]
fn every_other_shape_goes_to_prost_whole_and_fails_as_prost_fails() {
    let plain_any = |url: &[u8], value: &[u8]| {
        let mut b = vec![0x0a, url.len() as u8];
        b.extend_from_slice(url);
        b.extend_from_slice(&[0x12, value.len() as u8]);
        b.extend_from_slice(value);
        b
    };
    let resource = |any: &[u8]| {
        let mut b = vec![0x12, any.len() as u8];
        b.extend_from_slice(any);
        b
    };
    let ok = resource(&plain_any(b"a/b", b"xyz"));
    let mut reversed = vec![0x12, 3];
    reversed.extend_from_slice(b"xyz");
    reversed.extend_from_slice(&[0x0a, 3]);
    reversed.extend_from_slice(b"a/b");
    let mut extra = plain_any(b"a/b", b"xyz");
    extra.extend_from_slice(&[0x18, 1]);
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("reversed Any", resource(&reversed), true),
        ("an unknown field in Any", resource(&extra), true),
        (
            "an empty value",
            resource(&[0x0a, 3, b'a', b'/', b'b']),
            true,
        ),
        ("an empty Any", resource(&[]), true),
        (
            "a non-ASCII type URL",
            resource(&plain_any("a/é".as_bytes(), b"x")),
            true,
        ),
        (
            "a type URL not UTF-8",
            resource(&plain_any(&[b'a', 0xff], b"x")),
            false,
        ),
        (
            "a group at the top",
            [&[0x5b, 0x5c][..], &ok].concat(),
            true,
        ),
        (
            "an unknown varint field",
            [&[0x40, 0x96, 0x01][..], &ok].concat(),
            true,
        ),
        ("field 2 as a varint", vec![0x10, 1], false),
        ("field 0", [&[0x02, 0][..], &ok].concat(), false),
        (
            "version twice: the last wins",
            [&[0x0a, 1, b'a'][..], &ok, &[0x0a, 1, b'b']].concat(),
            true,
        ),
        ("a truncated resource", ok[..ok.len() - 1].to_vec(), false),
        ("a truncated key", vec![0x80], false),
        (
            "an 11-byte varint",
            [vec![0x40], vec![0xff; 10], vec![0]].concat(),
            false,
        ),
        (
            "a 10-byte varint",
            [vec![0x40], vec![0xff; 9], vec![1]].concat(),
            true,
        ),
        (
            "a key beyond u32",
            [vec![0xf8], vec![0xff; 4], vec![0x1f, 0]].concat(),
            false,
        ),
        ("wire type 7", vec![0x0f], false),
    ];
    for (what, wire, decodes) in cases {
        agree(&wire).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            DiscoveryResponse::decode(&wire[..]).is_ok(),
            decodes,
            "{what}: the case tests what it names"
        );
    }
}

#[test]
fn any_change_to_an_encoded_response_is_read_as_prost_reads_it() {
    QuickCheck::new().tests(3000).quickcheck(
        edited_agrees::<DiscoveryResponse> as fn((u8, bool), Vec<(u16, u8, u8)>) -> TestResult,
    );
}

#[test]
fn single_byte_changes_reach_both_outcomes_and_the_plain_path() {
    single_byte_changes_agree::<DiscoveryResponse>(&[0x00, 0x02, 0x0a, 0x12, 0x7f, 0x80, 0xff]);
}

// The incremental response: the same properties.

/// A delta response with every field set, its resources of `url` with a version, a name
/// and (every other one) aliases.
fn delta_response(count: usize, url: &str) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        system_version_info: "v7".into(),
        resources: (0..count)
            .map(|i| Resource {
                version: format!("{i}"),
                resource: Some(any(url, format!("\n\x07cluster{i}").as_bytes())),
                name: format!("cluster{i}"),
                aliases: (0..i % 2).map(|a| format!("alias{i}-{a}")).collect(),
                ..Resource::default()
            })
            .collect(),
        type_url: CDS.into(),
        removed_resources: vec!["gone".into()],
        removed_resource_names: vec![ResourceName {
            name: "gone".into(),
            ..Default::default()
        }],
        nonce: "n3".into(),
        control_plane: Some(ControlPlane {
            identifier: "cp".into(),
        }),
        resource_errors: response(0, url).resource_errors,
    }
}

fn agree_delta(wire: &[u8]) -> Result<(), String> {
    agree_as::<DeltaDiscoveryResponse>(wire)
}

fn plain_delta(wire: &Bytes) -> Option<DeltaDiscoveryResponse> {
    plain_response::<DeltaDiscoveryResponse>(wire)
}

#[test]
fn an_encoded_delta_response_is_read_on_the_plain_path_as_prost_reads_it() {
    for url in [CDS, "type.googleapis.com/example.Unknown"] {
        let encoded = Bytes::from(delta_response(50, url).encode_to_vec());
        let plain = plain_delta(&encoded).expect("the plain path");
        assert_eq!(
            plain,
            DeltaDiscoveryResponse::decode(encoded.clone()).unwrap()
        );
        assert_eq!(plain.resources.capacity(), 50, "sized once");
        let range = encoded.as_ptr_range();
        assert!(plain
            .resources
            .iter()
            .filter_map(|r| r.resource.as_ref())
            .all(|a| range.contains(&a.value.as_ptr())));
    }
    assert_eq!(
        decode_delta_discovery_response(Bytes::new()).unwrap(),
        Default::default()
    );
}

#[test]
fn every_other_delta_resource_shape_goes_to_prost_whole() {
    let plain_any = [&[0x0a, 3][..], b"a/b", &[0x12, 3], b"xyz"].concat();
    let field = |key: u8, payload: &[u8]| [&[key, payload.len() as u8][..], payload].concat();
    let resource = |fields: &[Vec<u8>]| field(0x12, &fields.concat());
    let (version, any, name) = (
        field(0x0a, b"1"),
        field(0x12, &plain_any),
        field(0x1a, b"n"),
    );
    let alias = field(0x22, b"al");
    let ttl = field(0x32, &[0x08, 5]);
    let cases: Vec<(&str, Vec<u8>, bool, bool)> = vec![
        // (what, wire, prost decodes it, the plain path takes it)
        (
            "in order",
            resource(&[
                version.clone(),
                any.clone(),
                name.clone(),
                alias.clone(),
                alias.clone(),
            ]),
            true,
            true,
        ),
        (
            "a removal's shape: a name only",
            resource(&[name.clone()]),
            true,
            true,
        ),
        ("an empty resource", resource(&[]), true, true),
        (
            "name before version",
            resource(&[name.clone(), version.clone()]),
            true,
            false,
        ),
        (
            "version twice: the last wins",
            resource(&[version.clone(), field(0x0a, b"2")]),
            true,
            false,
        ),
        (
            "an alias before the name",
            resource(&[alias.clone(), name.clone()]),
            true,
            false,
        ),
        (
            "a TTL",
            resource(&[version.clone(), any.clone(), name.clone(), ttl]),
            true,
            false,
        ),
        (
            "an unknown field",
            resource(&[name.clone(), vec![0x78, 1]]),
            true,
            false,
        ),
        (
            "a name not UTF-8",
            resource(&[field(0x1a, &[0xff])]),
            false,
            false,
        ),
        (
            "an alias not UTF-8",
            resource(&[field(0x22, &[0xc3])]),
            false,
            false,
        ),
        (
            "a reversed Any",
            resource(&[field(
                0x12,
                &[&[0x12, 1][..], b"x", &[0x0a, 1], b"u"].concat(),
            )]),
            true,
            false,
        ),
        (
            "version as a varint",
            resource(&[vec![0x08, 1]]),
            false,
            false,
        ),
        ("a truncated name", field(0x12, &name[..2]), false, false),
    ];
    for (what, wire, decodes, plain) in cases {
        agree_delta(&wire).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            DeltaDiscoveryResponse::decode(&wire[..]).is_ok(),
            decodes,
            "{what}: the case tests what it names"
        );
        assert_eq!(
            plain_delta(&Bytes::from(wire)).is_some(),
            plain,
            "{what}: path"
        );
    }
}

#[test]
fn any_change_to_an_encoded_delta_response_is_read_as_prost_reads_it() {
    QuickCheck::new().tests(3000).quickcheck(
        edited_agrees::<DeltaDiscoveryResponse> as fn((u8, bool), Vec<(u16, u8, u8)>) -> TestResult,
    );
}

#[test]
fn single_byte_changes_of_a_delta_response_reach_both_outcomes_and_the_plain_path() {
    single_byte_changes_agree::<DeltaDiscoveryResponse>(&[
        0x00, 0x02, 0x0a, 0x12, 0x1a, 0x22, 0x7f, 0x80, 0xff,
    ]);
}
