//! REST-JSON polling, client side: when a poll is due, what it carries, and how every HTTP
//! outcome changes state (xDS protocol, "REST-JSON polling subscriptions").
#![cfg(feature = "json")]

use std::time::Duration;

use bytes::Bytes;
use xds_sansio::client::{ClientConfig, ClientEvent, ResourceState};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::codec::{FormatError, Position};
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::rest::{
    HttpRequest, RestClient, RestConfig, RestError, RestEvent, RestFailure, CONTENT_TYPE_JSON,
};
use xds_sansio::types::{CLUSTER, ENDPOINT, VIRTUAL_HOST};
use xds_sansio::{Instant, Transport, Variant};

const EDS: &str = ENDPOINT.type_url;
const CDS: &str = CLUSTER.type_url;
const PERIOD: Duration = Duration::from_secs(10);

fn t(secs: u64) -> Instant {
    Instant::from_secs(secs)
}

fn node() -> Node {
    Node {
        id: "envoy-1".into(),
        ..Default::default()
    }
}

fn config(type_url: &str) -> RestConfig {
    let mut c = RestConfig::new(type_url, node(), PERIOD);
    c.client.does_not_exist_timeout = None;
    c
}

fn eds(names: &[&str]) -> RestClient {
    let mut c = RestClient::new(config(EDS), JsonCodec::new()).unwrap();
    c.subscribe(names).unwrap();
    c
}

fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

fn response_json(version: &str, nonce: &str, resources: &[(&str, &str)]) -> String {
    let r = DiscoveryResponse {
        version_info: version.into(),
        nonce: nonce.into(),
        type_url: EDS.into(),
        resources: resources
            .iter()
            .map(|(n, c)| Any {
                type_url: EDS.into(),
                value: body(n, c),
            })
            .collect(),
        ..Default::default()
    };
    JsonCodec::new().to_string(&r).unwrap()
}

fn decode(request: &HttpRequest) -> DiscoveryRequest {
    JsonCodec::new().from_str(&request.body).unwrap()
}

fn events(c: &mut RestClient) -> Vec<RestEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

#[test]
fn ads_delta_and_types_without_a_path_are_refused() {
    let mut ads = config(EDS);
    ads.client.transport = Transport::Aggregated;
    assert_eq!(
        RestClient::new(ads, JsonCodec::new()).unwrap_err(),
        RestError::AggregatedNotAvailable
    );
    let mut delta = config(EDS);
    delta.client.variant = Variant::Delta;
    assert_eq!(
        RestClient::new(delta, JsonCodec::new()).unwrap_err(),
        RestError::DeltaNotAvailable
    );
    assert_eq!(
        RestClient::new(config(VIRTUAL_HOST.type_url), JsonCodec::new()).unwrap_err(),
        RestError::NoRestPath(VIRTUAL_HOST.type_url.into())
    );
    let mut custom = config("type.googleapis.com/acme.Thing");
    custom.path = Some("/v3/discovery:things".into());
    let c = RestClient::new(custom, JsonCodec::new()).unwrap();
    assert_eq!(c.path(), "/v3/discovery:things");
    assert!(RestError::AggregatedNotAvailable
        .to_string()
        .contains("ADS"));
}

#[test]
fn first_poll_leaves_at_once_as_canonical_json_on_the_type_path() {
    let mut c = eds(&["foo", "bar"]);
    assert_eq!(c.poll_timeout(), Some(t(0)));
    let r = c.poll_request(t(0)).expect("first poll");
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v3/discovery:endpoints");
    assert_eq!(r.content_type, CONTENT_TYPE_JSON);
    assert_eq!(r.supersedes, None);
    let value: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(value["typeUrl"], EDS);
    assert_eq!(value["node"]["id"], "envoy-1");
    assert!(value.get("versionInfo").is_none(), "{value}");
    let mut names = decode(&r).resource_names;
    names.sort();
    assert_eq!(names, vec!["bar", "foo"]);
}

#[test]
fn a_single_request_is_outstanding_at_a_time() {
    let mut c = eds(&["foo"]);
    let r = c.poll_request(t(0)).unwrap();
    assert_eq!(c.in_flight(), Some(r.id));
    assert_eq!(
        c.poll_request(t(100)),
        None,
        "nothing while one is in flight"
    );
    assert_eq!(c.poll_timeout(), None, "no timer without request timeout");
    c.handle_response(t(100), r.id, 304, b"");
    assert_eq!(events(&mut c), vec![RestEvent::NotModified]);
    assert_eq!(c.poll_timeout(), Some(t(110)));
    assert_eq!(c.poll_request(t(109)), None, "not before the poll period");
    let again = c.poll_request(t(110)).expect("due after the period");
    assert_ne!(again.id, r.id);
    assert_eq!(decode(&again), decode(&r), "a repeat says the same");
}

#[test]
fn ack_by_version_with_the_nonce_echoed() {
    let mut c = eds(&["foo"]);
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(
        t(1),
        r.id,
        200,
        response_json("1", "A", &[("foo", "x")]).as_bytes(),
    );
    let ev = events(&mut c);
    assert!(ev.iter().any(
        |e| matches!(e, RestEvent::Client(ClientEvent::Upserted { name, .. }) if name == "foo")
    ));
    assert!(ev.iter().any(
        |e| matches!(e, RestEvent::Client(ClientEvent::Acked { version, .. }) if version == "1")
    ));
    assert_eq!(c.version(), Some("1"));
    let ack = decode(&c.poll_request(t(11)).unwrap());
    assert_eq!(ack.version_info, "1");
    assert_eq!(ack.response_nonce, "A");
    assert!(ack.error_detail.is_none());
    assert_eq!(c.status("foo").map(|s| s.state), Some(ResourceState::Acked));
}

#[test]
fn nack_keeps_the_accepted_version_and_is_said_once() {
    let mut c = eds(&["foo"]);
    c.set_validator(Box::new(|_: &str, _: &str, b: &Bytes| {
        if b.windows(3).any(|w| w == b"bad") {
            Err("bad endpoint".to_string())
        } else {
            Ok(())
        }
    }));
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(
        t(1),
        r.id,
        200,
        response_json("1", "A", &[("foo", "x")]).as_bytes(),
    );
    events(&mut c);
    let r = c.poll_request(t(11)).unwrap();
    c.handle_response(
        t(12),
        r.id,
        200,
        response_json("2", "B", &[("foo", "bad")]).as_bytes(),
    );
    let ev = events(&mut c);
    assert!(ev.iter().any(
        |e| matches!(e, RestEvent::Client(ClientEvent::Nacked { version, .. }) if version == "2")
    ));
    assert_eq!(*c.resource("foo").unwrap().body(), body("foo", "x"));
    let nack = decode(&c.poll_request(t(22)).unwrap());
    assert_eq!(nack.version_info, "1", "the last accepted version");
    assert_eq!(nack.response_nonce, "B");
    let status = nack.error_detail.expect("a NACK carries error_detail");
    assert_eq!(status.code, 13);
    assert!(
        status.message.contains("bad endpoint"),
        "{}",
        status.message
    );
    c.handle_response(t(23), c.in_flight().unwrap(), 304, b"");
    let repeat = decode(&c.poll_request(t(33)).unwrap());
    assert_eq!(repeat.version_info, "1");
    assert_eq!(repeat.response_nonce, "B");
    assert!(repeat.error_detail.is_none(), "the NACK is not repeated");
}

#[test]
fn the_nonce_is_optional() {
    let mut c = eds(&["foo"]);
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(
        t(1),
        r.id,
        200,
        response_json("7", "", &[("foo", "x")]).as_bytes(),
    );
    assert!(events(&mut c)
        .iter()
        .any(|e| matches!(e, RestEvent::Client(ClientEvent::Acked { .. }))));
    let next = decode(&c.poll_request(t(11)).unwrap());
    assert_eq!(next.version_info, "7");
    assert_eq!(next.response_nonce, "");
}

#[test]
fn http_failures_change_nothing_and_the_next_poll_repeats_the_version() {
    let mut c = eds(&["foo"]);
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(
        t(1),
        r.id,
        200,
        response_json("1", "A", &[("foo", "x")]).as_bytes(),
    );
    events(&mut c);
    let mut now = 1;
    type Answer = Option<(u16, &'static [u8])>;
    let outcomes: Vec<(Answer, RestFailure)> = vec![
        (Some((503, b"unavailable")), RestFailure::Status(503)),
        (Some((404, b"")), RestFailure::Status(404)),
        (Some((200, b"")), RestFailure::EmptyBody),
        (Some((200, b"  \n")), RestFailure::EmptyBody),
        (None, RestFailure::Transport),
    ];
    for (answer, failure) in outcomes {
        now += 10;
        let r = c.poll_request(t(now)).expect("due");
        let sent = decode(&r);
        assert_eq!(sent.version_info, "1");
        match answer {
            Some((status, body)) => c.handle_response(t(now), r.id, status, body),
            None => c.handle_failure(t(now), r.id),
        }
        assert_eq!(events(&mut c), vec![RestEvent::Failed(failure)]);
        assert_eq!(c.version(), Some("1"));
        assert_eq!(c.resource_names(), vec!["foo"]);
        assert_eq!(c.poll_timeout(), Some(t(now + 10)));
    }
    // Malformed JSON: the parser's position is in the message.
    now += 10;
    let r = c.poll_request(t(now)).unwrap();
    c.handle_response(t(now), r.id, 200, b"{\"versionInfo\": \"2\",\n  oops}");
    match events(&mut c).as_slice() {
        [RestEvent::Failed(RestFailure::MalformedBody(FormatError::Malformed {
            position: Some(Position::LineColumn { line: 2, .. }),
            ..
        }))] => {}
        other => panic!("{other:?}"),
    }
    // Well-formed JSON that is not a DiscoveryResponse.
    now += 10;
    let r = c.poll_request(t(now)).unwrap();
    c.handle_response(t(now), r.id, 200, b"{\"resourceNamesSubscribe\": [\"x\"]}");
    assert!(matches!(
        events(&mut c).as_slice(),
        [RestEvent::Failed(RestFailure::MalformedBody(_))]
    ));
    assert_eq!(c.version(), Some("1"));
    assert_eq!(*c.resource("foo").unwrap().body(), body("foo", "x"));
}

#[test]
fn answers_for_other_exchanges_are_stale() {
    let mut c = eds(&["foo"]);
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(
        t(1),
        r.id + 5,
        200,
        response_json("1", "A", &[("foo", "x")]).as_bytes(),
    );
    assert_eq!(
        events(&mut c),
        vec![RestEvent::StaleAnswer { id: r.id + 5 }]
    );
    assert_eq!(c.in_flight(), Some(r.id));
    assert_eq!(c.version(), Some(""));
}

#[test]
fn request_timeout_ends_the_exchange() {
    let mut cfg = config(EDS);
    cfg.request_timeout = Some(Duration::from_secs(5));
    let mut c = RestClient::new(cfg, JsonCodec::new()).unwrap();
    c.subscribe(&["foo"]).unwrap();
    let r = c.poll_request(t(0)).unwrap();
    assert_eq!(c.poll_timeout(), Some(t(5)));
    c.handle_timeout(t(4));
    assert!(events(&mut c).is_empty());
    c.handle_timeout(t(5));
    assert_eq!(
        events(&mut c),
        vec![RestEvent::Failed(RestFailure::TimedOut)]
    );
    assert_eq!(c.in_flight(), None);
    c.handle_response(
        t(6),
        r.id,
        200,
        response_json("1", "A", &[("foo", "x")]).as_bytes(),
    );
    assert_eq!(events(&mut c), vec![RestEvent::StaleAnswer { id: r.id }]);
    assert_eq!(c.version(), Some(""));
    assert!(c.poll_request(t(15)).is_some());
}

#[test]
fn a_subscription_change_supersedes_a_long_poll_in_flight() {
    let mut c = eds(&["foo"]);
    let first = c.poll_request(t(0)).unwrap();
    c.subscribe(&["baz"]).unwrap();
    assert_eq!(c.poll_timeout(), Some(t(0)), "due at once");
    let second = c.poll_request(t(3)).expect("the change leaves at once");
    assert_eq!(second.supersedes, Some(first.id));
    let mut names = decode(&second).resource_names;
    names.sort();
    assert_eq!(names, vec!["baz", "foo"]);
    c.handle_response(t(4), first.id, 304, b"");
    assert_eq!(
        events(&mut c),
        vec![RestEvent::StaleAnswer { id: first.id }]
    );
    assert_eq!(c.in_flight(), Some(second.id));
}

#[test]
fn a_subscription_change_while_idle_does_not_wait_for_the_period() {
    let mut c = eds(&["foo"]);
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(t(1), r.id, 304, b"");
    assert_eq!(c.poll_request(t(2)), None);
    c.unsubscribe(&["foo"]).unwrap();
    c.subscribe(&["bar"]).unwrap();
    let r = c.poll_request(t(2)).expect("at once");
    assert_eq!(decode(&r).resource_names, vec!["bar"]);
}

#[test]
fn does_not_exist_timer_runs_across_polls() {
    let mut cfg = config(EDS);
    cfg.client.does_not_exist_timeout = Some(Duration::from_secs(15));
    let mut c = RestClient::new(cfg, JsonCodec::new()).unwrap();
    c.subscribe(&["foo"]).unwrap();
    let r = c.poll_request(t(0)).unwrap();
    c.handle_response(t(10), r.id, 304, b"");
    assert_eq!(c.poll_timeout(), Some(t(10)), "an event is waiting");
    assert_eq!(events(&mut c), vec![RestEvent::NotModified]);
    assert_eq!(
        c.poll_timeout(),
        Some(t(15)),
        "the timer, before the next poll at 20"
    );
    c.handle_timeout(t(15));
    let ev = events(&mut c);
    assert!(
        ev.iter()
            .any(|e| matches!(e, RestEvent::Client(ClientEvent::DoesNotExist { name, .. }) if name == "foo")),
        "{ev:?}"
    );
}

#[test]
fn legacy_wildcard_for_cds_sends_no_names() {
    let mut c = RestClient::new(config(CDS), JsonCodec::new()).unwrap();
    c.subscribe(&[]).unwrap();
    let r = c.poll_request(t(0)).unwrap();
    assert_eq!(r.path, "/v3/discovery:clusters");
    assert!(decode(&r).resource_names.is_empty());
    let _ = ClientConfig::default();
}

#[test]
fn unknown_response_fields_fail_unless_ignored() {
    let body = r#"{"versionInfo": "1", "typeUrl": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
  "fieldFromTheFuture": true}"#;
    let mut strict = eds(&["foo"]);
    let r = strict.poll_request(t(0)).unwrap();
    strict.handle_response(t(1), r.id, 200, body.as_bytes());
    match events(&mut strict).as_slice() {
        [RestEvent::Failed(RestFailure::MalformedBody(FormatError::Malformed {
            position: Some(Position::LineColumn { line: 2, .. }),
            message,
            ..
        }))] => assert!(message.contains("fieldFromTheFuture"), "{message}"),
        other => panic!("{other:?}"),
    }
    let mut cfg = config(EDS);
    cfg.ignore_unknown_fields = true;
    let mut lenient = RestClient::new(cfg, JsonCodec::new()).unwrap();
    lenient.subscribe(&["foo"]).unwrap();
    let r = lenient.poll_request(t(0)).unwrap();
    lenient.handle_response(t(1), r.id, 200, body.as_bytes());
    assert!(events(&mut lenient).iter().any(
        |e| matches!(e, RestEvent::Client(ClientEvent::Acked { version, .. }) if version == "1")
    ));
}
