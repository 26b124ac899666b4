//! The same SotW rules through both non-streaming paths: REST-JSON polling
//! (`RestClient`, bodies as canonical JSON over a 200) and filesystem subscriptions
//! (`FileSubscription`, the file in each of the four formats in turn). Each rule is one
//! scenario written once and run through every path.
#![cfg(all(feature = "json", feature = "yaml", feature = "textproto"))]

use std::time::Duration;

use bytes::Bytes;
use xds_sansio::client::{ClientConfig, ClientEvent, RemovalReason, Validator};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::codec::{FileCodec, Format};
use xds_sansio::file::{FileError, FileEvent, FileSubscription};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::rest::{RestClient, RestConfig, RestError, RestEvent};
use xds_sansio::single_type::SingleTypeError;
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER};
use xds_sansio::{Instant, Transport, Variant};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
const LDS: &str = LISTENER.type_url;

/// A resource body: field 1 is the name (as in every catalog type), field 2 some content.
fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

fn response(type_url: &str, version: &str, resources: &[(&str, &str)]) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: version.into(),
        type_url: type_url.into(),
        resources: resources
            .iter()
            .map(|(n, c)| Any {
                type_url: type_url.into(),
                value: body(n, c),
            })
            .collect(),
        ..Default::default()
    }
}

/// What one update did, in the terms both paths share.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    accepted: Option<String>,
    rejected: Option<(String, Vec<String>)>,
    upserted: Vec<String>,
    removed: Vec<(String, RemovalReason)>,
}

impl Outcome {
    fn client(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Upserted { name, .. } => self.upserted.push(name.to_string()),
            ClientEvent::Removed { name, reason, .. } => {
                self.removed.push((name.to_string(), reason))
            }
            ClientEvent::Acked { version, .. } => self.accepted = Some(version.to_string()),
            ClientEvent::Nacked {
                version, rejected, ..
            } => {
                self.rejected = Some((
                    version.to_string(),
                    rejected.iter().map(|n| n.to_string()).collect(),
                ))
            }
            ClientEvent::Ignored { .. } => {
                self.rejected = Some(("ignored".into(), Vec::new()));
            }
            _ => {}
        }
    }
}

/// One way configuration arrives.
trait Path {
    fn name(&self) -> String;
    fn set_validator(&mut self, validator: Box<dyn Validator>);
    fn deliver(&mut self, response: &DiscoveryResponse) -> Outcome;
    fn names(&self) -> Vec<String>;
    fn version(&self) -> Option<String>;
    fn content(&self, name: &str) -> Option<Bytes>;
}

struct Rest {
    client: RestClient,
    now: u64,
}

impl Rest {
    fn new(type_url: &str) -> Rest {
        let node = Node {
            id: "n".into(),
            ..Default::default()
        };
        let mut client = RestClient::new(
            RestConfig::new(type_url, node, Duration::from_secs(1)),
            JsonCodec::new(),
        )
        .unwrap();
        let names: &[&str] = if type_url == EDS { &["*"] } else { &[] };
        client.subscribe(names).unwrap();
        Rest { client, now: 0 }
    }
}

impl Path for Rest {
    fn name(&self) -> String {
        "rest".into()
    }
    fn set_validator(&mut self, validator: Box<dyn Validator>) {
        self.client.set_validator(validator);
    }
    fn deliver(&mut self, response: &DiscoveryResponse) -> Outcome {
        self.now += 1;
        let now = Instant::from_secs(self.now);
        let request = self.client.poll_request(now).expect("a poll is due");
        let body = JsonCodec::new().to_string(response).unwrap();
        self.client
            .handle_response(now, request.id, 200, body.as_bytes());
        let mut outcome = Outcome::default();
        while let Some(event) = self.client.poll_event() {
            match event {
                RestEvent::Client(e) => outcome.client(e),
                other => panic!("unexpected {other:?}"),
            }
        }
        outcome
    }
    fn names(&self) -> Vec<String> {
        self.client
            .resource_names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }
    fn version(&self) -> Option<String> {
        self.client.version().map(String::from)
    }
    fn content(&self, name: &str) -> Option<Bytes> {
        self.client.resource(name).map(|r| r.body_bytes())
    }
}

struct File {
    sub: FileSubscription,
    format: Format,
    codec: FileCodec,
}

impl File {
    fn new(type_url: &str, format: Format) -> File {
        File {
            sub: FileSubscription::new(type_url, ClientConfig::default()).unwrap(),
            format,
            codec: FileCodec::with_json_codec(JsonCodec::new(), false),
        }
    }
}

impl Path for File {
    fn name(&self) -> String {
        format!("file ({})", self.format)
    }
    fn set_validator(&mut self, validator: Box<dyn Validator>) {
        self.sub.set_validator(validator);
    }
    fn deliver(&mut self, response: &DiscoveryResponse) -> Outcome {
        let bytes = self.codec.encode(self.format, response).unwrap();
        self.sub
            .handle_bytes(Instant::from_secs(1), self.format, Bytes::from(bytes));
        let mut outcome = Outcome::default();
        while let Some(event) = self.sub.poll_event() {
            match event {
                FileEvent::Client(e) => outcome.client(e),
                FileEvent::Accepted { version } => outcome.accepted = Some(version.to_string()),
                FileEvent::Rejected {
                    version, rejected, ..
                } => {
                    outcome.rejected = Some((
                        version.to_string(),
                        rejected.iter().map(|n| n.to_string()).collect(),
                    ))
                }
                FileEvent::Malformed(e) => panic!("malformed: {e}"),
                other => panic!("an event this test does not know: {other:?}"),
            }
        }
        outcome
    }
    fn names(&self) -> Vec<String> {
        self.sub
            .resource_names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }
    fn version(&self) -> Option<String> {
        self.sub.version().map(String::from)
    }
    fn content(&self, name: &str) -> Option<Bytes> {
        self.sub.resource(name).map(|r| r.body_bytes())
    }
}

fn paths(type_url: &str) -> Vec<Box<dyn Path>> {
    let mut out: Vec<Box<dyn Path>> = vec![Box::new(Rest::new(type_url))];
    for format in [Format::Binary, Format::Json, Format::Yaml, Format::Text] {
        out.push(Box::new(File::new(type_url, format)));
    }
    out
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn full_state_types_delete_what_the_update_omits() {
    for mut p in paths(CDS) {
        let o = p.deliver(&response(CDS, "1", &[("a", "x"), ("b", "x")]));
        assert_eq!(o.accepted.as_deref(), Some("1"), "{}", p.name());
        assert_eq!(o.upserted, strings(&["a", "b"]), "{}", p.name());
        let o = p.deliver(&response(CDS, "2", &[("a", "x")]));
        assert_eq!(o.accepted.as_deref(), Some("2"), "{}", p.name());
        assert_eq!(
            o.removed,
            vec![("b".to_string(), RemovalReason::AbsentFromResponse)],
            "{}",
            p.name()
        );
        assert!(
            o.upserted.is_empty(),
            "unchanged body not re-emitted: {}",
            p.name()
        );
        assert_eq!(p.names(), strings(&["a"]), "{}", p.name());
        let o = p.deliver(&response(CDS, "3", &[]));
        assert_eq!(
            o.removed.len(),
            1,
            "an empty full-state update removes all: {}",
            p.name()
        );
        assert!(p.names().is_empty(), "{}", p.name());
    }
}

#[test]
fn other_types_keep_what_the_update_omits() {
    for mut p in paths(EDS) {
        p.deliver(&response(EDS, "1", &[("a", "x"), ("b", "x")]));
        let o = p.deliver(&response(EDS, "2", &[("a", "y")]));
        assert_eq!(o.upserted, strings(&["a"]), "{}", p.name());
        assert!(o.removed.is_empty(), "{}", p.name());
        assert_eq!(p.names(), strings(&["a", "b"]), "{}", p.name());
    }
}

#[test]
fn duplicate_names_are_rejected_and_the_last_valid_config_stays() {
    for mut p in paths(CDS) {
        p.deliver(&response(CDS, "1", &[("a", "x")]));
        let o = p.deliver(&response(CDS, "2", &[("a", "y"), ("a", "z"), ("b", "x")]));
        assert_eq!(o.accepted, None, "{}", p.name());
        assert_eq!(
            o.rejected.as_ref().map(|r| r.0.as_str()),
            Some("2"),
            "{}",
            p.name()
        );
        assert!(
            o.upserted.is_empty() && o.removed.is_empty(),
            "{}",
            p.name()
        );
        assert_eq!(p.version().as_deref(), Some("1"), "{}", p.name());
        assert_eq!(p.names(), strings(&["a"]), "{}", p.name());
        assert_eq!(p.content("a"), Some(body("a", "x")), "{}", p.name());
    }
}

#[test]
fn a_resource_of_another_type_is_rejected() {
    for mut p in paths(CDS) {
        p.deliver(&response(CDS, "1", &[("a", "x")]));
        let mut bad = response(CDS, "2", &[("a", "y")]);
        bad.resources[0].type_url = LDS.into();
        let o = p.deliver(&bad);
        assert_eq!(
            o.rejected.as_ref().map(|r| r.0.as_str()),
            Some("2"),
            "{}",
            p.name()
        );
        assert_eq!(p.content("a"), Some(body("a", "x")), "{}", p.name());
        assert_eq!(p.version().as_deref(), Some("1"), "{}", p.name());
    }
}

#[test]
fn an_update_for_another_type_changes_nothing() {
    for mut p in paths(CDS) {
        p.deliver(&response(CDS, "1", &[("a", "x")]));
        let o = p.deliver(&response(LDS, "2", &[("l", "x")]));
        assert!(o.rejected.is_some(), "{}", p.name());
        assert_eq!(o.accepted, None, "{}", p.name());
        assert_eq!(p.names(), strings(&["a"]), "{}", p.name());
        assert_eq!(p.version().as_deref(), Some("1"), "{}", p.name());
    }
}

#[test]
fn an_empty_type_url_means_the_subscription_type() {
    for mut p in paths(CDS) {
        let mut r = response(CDS, "1", &[("a", "x")]);
        r.type_url.clear();
        let o = p.deliver(&r);
        assert_eq!(o.accepted.as_deref(), Some("1"), "{}", p.name());
    }
}

#[test]
fn validator_rejection_keeps_the_last_valid_config() {
    for mut p in paths(CDS) {
        p.set_validator(Box::new(|_n: &str, _v: &str, b: &Bytes| {
            if b.windows(3).any(|w| w == b"bad") {
                Err("bad cluster".to_string())
            } else {
                Ok(())
            }
        }));
        p.deliver(&response(CDS, "1", &[("a", "x"), ("b", "x")]));
        let o = p.deliver(&response(CDS, "2", &[("a", "new"), ("b", "bad")]));
        assert_eq!(
            o.rejected,
            Some(("2".to_string(), strings(&["b"]))),
            "{}",
            p.name()
        );
        assert!(
            o.upserted.is_empty() && o.removed.is_empty(),
            "{}",
            p.name()
        );
        assert_eq!(p.content("a"), Some(body("a", "x")), "{}", p.name());
        assert_eq!(p.version().as_deref(), Some("1"), "{}", p.name());
        // The next good update applies.
        let o = p.deliver(&response(CDS, "3", &[("a", "new")]));
        assert_eq!(o.accepted.as_deref(), Some("3"), "{}", p.name());
        assert_eq!(p.names(), strings(&["a"]), "{}", p.name());
    }
}

#[test]
fn an_incremental_configuration_is_refused_by_both() {
    // Files hold and REST-JSON carries DiscoveryResponses: both refuse a delta client
    // configuration with an error, neither overrides it.
    let node = Node {
        id: "n".into(),
        ..Default::default()
    };
    let mut rest = RestConfig::new(CDS, node.clone(), Duration::from_secs(1));
    rest.client.variant = Variant::Delta;
    assert_eq!(
        RestClient::new(rest, JsonCodec::new()).unwrap_err(),
        RestError::DeltaNotAvailable
    );
    let delta = ClientConfig::new(Variant::Delta, Transport::PerType(CDS.into()), node);
    assert_eq!(
        FileSubscription::new(CDS, delta.clone()).unwrap_err(),
        FileError::Config(SingleTypeError::DeltaNotAvailable)
    );
    assert_eq!(
        FileSubscription::with_codec(CDS, delta, FileCodec::new()).unwrap_err(),
        FileError::Config(SingleTypeError::DeltaNotAvailable)
    );
    // An empty type is refused by both too.
    assert_eq!(
        FileSubscription::new("", ClientConfig::default()).unwrap_err(),
        FileError::Config(SingleTypeError::EmptyTypeUrl)
    );
    assert_eq!(
        RestClient::new(
            RestConfig::new("", Node::default(), Duration::from_secs(1)),
            JsonCodec::new()
        )
        .unwrap_err(),
        RestError::EmptyTypeUrl
    );
}
