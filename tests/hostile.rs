//! Hostile inputs, one row each: the typed outcome expected, the state left as it was (or
//! as specified), memory within the configured limits, and no panic.

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::{Client, ClientConfig, ClientEvent, IgnoreReason};
use xds_sansio::message::{Request, Response, Transport, Variant};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
    ResourceError, ResourceName,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::{Any, Duration as PbDuration};
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::{ResourceEntry, ResourceStore, ServerConfig, ServerEvent, ServerStream};
use xds_sansio::types::{CLUSTER, ENDPOINT, RESOURCE_WRAPPER_TYPE_URL};
use xds_sansio::Instant;

const T: &str = ENDPOINT.type_url;

fn body(name: &str) -> Bytes {
    let mut out = vec![0x0a];
    prost::encoding::encode_varint(name.len() as u64, &mut out);
    out.extend_from_slice(name.as_bytes());
    out.into()
}

fn any(name: &str) -> Any {
    Any {
        type_url: T.into(),
        value: body(name),
    }
}

/// A SotW client subscribed to EDS `a`, after its first request, with `a` at version 1.
fn client() -> Client {
    let mut client = Client::new(ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        Node {
            id: "n".into(),
            ..Default::default()
        },
    ));
    client.connected(Instant::ZERO);
    client.subscribe(T, &["a"]).unwrap();
    while client.poll_request(Instant::ZERO).is_some() {}
    client.handle_response(
        Instant::ZERO,
        Response::Sotw(DiscoveryResponse {
            version_info: "1".into(),
            resources: vec![any("a")],
            type_url: T.into(),
            nonce: "n1".into(),
            ..Default::default()
        }),
    );
    while client.poll_request(Instant::ZERO).is_some() {}
    while client.poll_event().is_some() {}
    client
}

/// Feeds a response; returns the requests and events it caused.
fn feed(client: &mut Client, response: DiscoveryResponse) -> (Vec<Request>, Vec<ClientEvent>) {
    let now = Instant::from_secs(1);
    client.handle_response(now, Response::Sotw(response));
    let mut requests = vec![];
    while let Some(r) = client.poll_request(now) {
        requests.push(r);
    }
    let mut events = vec![];
    while let Some(e) = client.poll_event() {
        events.push(e);
    }
    (requests, events)
}

/// The outcome must be a NACK at version 1 (the last accepted), and `a` still cached.
fn assert_nack(client: &Client, requests: &[Request], why: &str) {
    match requests {
        [Request::Sotw(r)] => {
            assert!(
                r.error_detail.is_some(),
                "{why}: expected a NACK, got {r:?}"
            );
            assert_eq!(
                r.version_info, "1",
                "{why}: the NACK must carry the last accepted version"
            );
            assert!(
                r.error_detail.as_ref().unwrap().message.len() <= 4096 + 32,
                "{why}: NACK message not capped"
            );
        }
        other => panic!("{why}: expected one NACK, got {other:?}"),
    }
    assert_eq!(
        client.resource(T, "a").map(|r| r.body_bytes()),
        Some(body("a")),
        "{why}: state changed"
    );
    assert_eq!(client.resource_names(T).len(), 1, "{why}: cache grew");
}

fn response(resources: Vec<Any>) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: "2".into(),
        resources,
        type_url: T.into(),
        nonce: "n2".into(),
        ..Default::default()
    }
}

fn wrapped(name: &str, ttl: Option<PbDuration>) -> Any {
    let wrapper = Resource {
        name: name.into(),
        version: "2".into(),
        resource: Some(any(name)),
        ttl,
        ..Default::default()
    };
    Any {
        type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
        value: wrapper.encode_to_vec().into(),
    }
}

#[test]
fn client_rows() {
    // 100k duplicate names.
    let mut c = client();
    let (requests, _) = feed(&mut c, response((0..100_000).map(|_| any("a")).collect()));
    assert_nack(&c, &requests, "100k duplicates");

    // A 16 MiB name.
    let mut c = client();
    let huge = "x".repeat(16 << 20);
    let (requests, _) = feed(&mut c, response(vec![any(&huge)]));
    assert_nack(&c, &requests, "16 MiB name");
    // ... and subscribing to one is caller misuse: a typed error.
    assert!(c.subscribe(T, &[&huge]).is_err());

    // A million resources in one response: over the limit, NACKed without applying.
    let mut config = ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        Node {
            id: "n".into(),
            ..Default::default()
        },
    );
    config.limits.max_resources_per_response = 1000;
    let mut c = Client::new(config);
    c.connected(Instant::ZERO);
    c.subscribe(T, &["a"]).unwrap();
    while c.poll_request(Instant::ZERO).is_some() {}
    let (requests, _) = feed(
        &mut c,
        response((0..1_000_000).map(|i| any(&i.to_string())).collect()),
    );
    assert!(
        matches!(&requests[..], [Request::Sotw(r)] if r.error_detail.is_some()),
        "a million resources"
    );
    assert!(c.resource_names(T).is_empty());

    // Negative and overflowing TTLs.
    for ttl in [
        PbDuration {
            seconds: -1,
            nanos: 0,
        },
        PbDuration {
            seconds: 0,
            nanos: -5,
        },
        PbDuration {
            seconds: i64::MAX,
            nanos: 999_999_999,
        },
        PbDuration {
            seconds: 1,
            nanos: 2_000_000_000,
        },
    ] {
        let mut c = client();
        let (requests, _) = feed(&mut c, response(vec![wrapped("a", Some(ttl))]));
        match &requests[..] {
            // Rejected as malformed ...
            [Request::Sotw(r)] if r.error_detail.is_some() => assert_nack(&c, &requests, "bad TTL"),
            // ... or accepted with a deadline that saturates instead of overflowing.
            [Request::Sotw(r)] => assert_eq!(r.version_info, "2", "TTL {ttl:?}"),
            other => panic!("TTL {ttl:?}: {other:?}"),
        }
        assert!(c.poll_timeout().is_none_or(|t| t >= Instant::from_secs(1)));
    }

    // A response before any request (nothing subscribed): ignored, no ACK.
    let mut c = Client::new(ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        Node::default(),
    ));
    c.connected(Instant::ZERO);
    let (requests, events) = feed(&mut c, response(vec![any("a")]));
    assert!(requests.is_empty());
    assert!(events.iter().any(|e| matches!(
        e,
        ClientEvent::Ignored {
            reason: IgnoreReason::NeverSubscribed,
            ..
        }
    )));

    // A mismatched type URL inside the response: NACK.
    let mut c = client();
    let (requests, _) = feed(
        &mut c,
        response(vec![Any {
            type_url: CLUSTER.type_url.into(),
            value: body("a"),
        }]),
    );
    assert_nack(&c, &requests, "mismatched type");

    // An unknown type URL that was never subscribed: ignored.
    let mut c = client();
    let mut r = response(vec![any("a")]);
    r.type_url = "type.googleapis.com/acme.Unknown".into();
    let (requests, _) = feed(&mut c, r);
    assert!(requests.is_empty(), "unknown type: {requests:?}");

    // Undecodable bodies (no readable name): NACK.
    let mut c = client();
    let (requests, _) = feed(
        &mut c,
        response(vec![Any {
            type_url: T.into(),
            value: Bytes::from_static(&[0x0a, 0xff, 0x01]),
        }]),
    );
    assert_nack(&c, &requests, "undecodable body");

    // An undecodable Resource wrapper: NACK.
    let mut c = client();
    let (requests, _) = feed(
        &mut c,
        response(vec![Any {
            type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
            value: Bytes::from_static(&[0xff]),
        }]),
    );
    assert_nack(&c, &requests, "undecodable wrapper");

    // resource_errors: a 16 MiB name is a NACK; a flood of errors for names never
    // subscribed holds nothing; an entry with no name and no status is an error for the
    // whole subscription, reported, changing nothing.
    let error = |name: Option<&str>, code: Option<i32>| ResourceError {
        resource_name: name.map(|n| ResourceName {
            name: n.into(),
            ..Default::default()
        }),
        error_detail: code.map(|code| Status {
            code,
            ..Default::default()
        }),
    };
    let mut c = client();
    let mut r = response(vec![any("a")]);
    r.resource_errors = vec![error(Some(&huge), Some(14))];
    let (requests, _) = feed(&mut c, r);
    assert_nack(&c, &requests, "16 MiB name in resource_errors");
    let mut c = client();
    let mut r = response(vec![any("a")]);
    r.resource_errors = (0..100_000)
        .map(|i| error(Some(&format!("stranger-{i}")), Some(5)))
        .chain([error(None, None)])
        .collect();
    let (requests, events) = feed(&mut c, r);
    assert!(matches!(&requests[..], [Request::Sotw(r)] if r.error_detail.is_none()));
    assert_eq!(c.resource_names(T).len(), 1);
    assert_eq!(c.dump().len(), 1, "no record for names never subscribed");
    assert!(events
        .iter()
        .any(|e| matches!(e, ClientEvent::ResourceError { name, code: 2, .. } if name.is_empty())));

    // Empty everything: an empty response (no type, no nonce).
    let mut c = client();
    let (requests, _) = feed(&mut c, DiscoveryResponse::default());
    assert!(
        requests.is_empty() || matches!(&requests[..], [Request::Sotw(r)] if r.version_info == "1")
    );
    assert_eq!(c.resource_names(T).len(), 1);
}

#[test]
fn delta_client_rows() {
    let mut c = Client::new(ClientConfig::new(
        Variant::Delta,
        Transport::Aggregated,
        Node {
            id: "n".into(),
            ..Default::default()
        },
    ));
    c.connected(Instant::ZERO);
    c.subscribe(T, &["a"]).unwrap();
    while c.poll_request(Instant::ZERO).is_some() {}
    // 100k duplicates, a removal of names never held, an empty nonce.
    let response = DeltaDiscoveryResponse {
        resources: (0..100_000)
            .map(|_| Resource {
                name: "a".into(),
                version: "1".into(),
                resource: Some(any("a")),
                ..Default::default()
            })
            .collect(),
        removed_resources: (0..10_000).map(|i| format!("ghost{i}")).collect(),
        type_url: T.into(),
        nonce: "d1".into(),
        ..Default::default()
    };
    c.handle_response(Instant::ZERO, Response::Delta(response));
    let requests: Vec<_> = std::iter::from_fn(|| c.poll_request(Instant::ZERO)).collect();
    assert!(
        matches!(&requests[..], [Request::Delta(r)] if r.error_detail.is_some() && r.response_nonce == "d1"),
        "{requests:?}"
    );
    assert!(c.resource_names(T).is_empty());
}

/// A server stream that has answered a first EDS request for `a`.
fn server() -> (ServerStream, ResourceStore) {
    let mut store = ResourceStore::new();
    store
        .set_entry(T, ResourceEntry::new("a", body("a")))
        .unwrap();
    let mut s = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    s.handle_request(
        Instant::ZERO,
        Request::Sotw(DiscoveryRequest {
            node: Some(Node {
                id: "n".into(),
                ..Default::default()
            }),
            resource_names: vec!["a".into()],
            type_url: T.into(),
            ..Default::default()
        }),
    );
    while s.poll_response(Instant::ZERO, &store).is_some() {}
    while s.poll_event().is_some() {}
    (s, store)
}

fn server_feed(
    s: &mut ServerStream,
    store: &ResourceStore,
    request: DiscoveryRequest,
) -> (Vec<Response>, Vec<ServerEvent>) {
    s.handle_request(Instant::from_secs(1), Request::Sotw(request));
    let mut events = vec![];
    let mut responses = vec![];
    loop {
        while let Some(e) = s.poll_event() {
            events.push(e);
        }
        match s.poll_response(Instant::from_secs(1), store) {
            Some(r) => responses.push(r),
            None => break,
        }
    }
    (responses, events)
}

#[test]
fn server_rows() {
    // An ACK for a nonce never sent: not an ACK, nothing sent.
    let (mut s, store) = server();
    let (responses, events) = server_feed(
        &mut s,
        &store,
        DiscoveryRequest {
            version_info: "x".into(),
            resource_names: vec!["a".into()],
            type_url: T.into(),
            response_nonce: "never".into(),
            ..Default::default()
        },
    );
    assert!(responses.is_empty());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ServerEvent::Acked { .. } | ServerEvent::Nacked { .. })),
        "{events:?}"
    );

    // A nonce flood: 100k requests with unknown nonces; no response, the stream stays open.
    let (mut s, store) = server();
    for i in 0..100_000 {
        let (responses, _) = server_feed(
            &mut s,
            &store,
            DiscoveryRequest {
                resource_names: vec!["a".into()],
                type_url: T.into(),
                response_nonce: i.to_string(),
                ..Default::default()
            },
        );
        assert!(responses.is_empty());
    }
    assert!(!s.is_closed());

    // The node changing mid-stream: a protocol error closes the stream.
    let (mut s, store) = server();
    let (_, events) = server_feed(
        &mut s,
        &store,
        DiscoveryRequest {
            node: Some(Node {
                id: "other".into(),
                ..Default::default()
            }),
            resource_names: vec!["a".into()],
            type_url: T.into(),
            ..Default::default()
        },
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, ServerEvent::ProtocolError(_))));
    assert!(s.is_closed());

    // No node on the first request: protocol error.
    let mut s = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    let (responses, events) = server_feed(
        &mut s,
        &ResourceStore::new(),
        DiscoveryRequest {
            type_url: T.into(),
            ..Default::default()
        },
    );
    assert!(
        responses.is_empty()
            && s.is_closed()
            && events
                .iter()
                .any(|e| matches!(e, ServerEvent::ProtocolError(_)))
    );

    // Unknown type URL on ADS: an opaque type, served from the store like any other.
    let (mut s, mut store) = server();
    store
        .set_entry(
            "type.googleapis.com/acme.Widget",
            ResourceEntry::new("w", body("w")),
        )
        .unwrap();
    let (responses, _) = server_feed(
        &mut s,
        &store,
        DiscoveryRequest {
            resource_names: vec!["w".into()],
            type_url: "type.googleapis.com/acme.Widget".into(),
            ..Default::default()
        },
    );
    assert_eq!(responses.len(), 1);

    // An empty type URL on ADS: protocol error.
    let (mut s, store) = server();
    let (_, events) = server_feed(&mut s, &store, DiscoveryRequest::default());
    assert!(
        s.is_closed()
            && events
                .iter()
                .any(|e| matches!(e, ServerEvent::ProtocolError(_)))
    );

    // A delta request on a SotW stream: protocol error.
    let (mut s, _) = server();
    s.handle_request(
        Instant::from_secs(1),
        Request::Delta(DeltaDiscoveryRequest {
            type_url: T.into(),
            ..Default::default()
        }),
    );
    assert!(s.is_closed());

    // A million names subscribed: beyond the configured limit, the stream is closed with a
    // typed error before anything is held; within the default limits it is served.
    let mut config = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
    config.limits.max_names_per_request = 1000;
    let mut s = ServerStream::new(config);
    let names: Vec<String> = (0..1_000_000).map(|i| i.to_string()).collect();
    let (responses, events) = server_feed(
        &mut s,
        &ResourceStore::new(),
        DiscoveryRequest {
            node: Some(Node {
                id: "n".into(),
                ..Default::default()
            }),
            resource_names: names.clone(),
            type_url: T.into(),
            ..Default::default()
        },
    );
    assert!(responses.is_empty() && s.is_closed());
    assert!(events
        .iter()
        .any(|e| matches!(e, ServerEvent::ProtocolError(p) if p.grpc_code() == 8)));
    assert!(s.subscribed_names(T).is_empty(), "nothing of it is held");
    let (mut s, store) = server();
    let (responses, _) = server_feed(
        &mut s,
        &store,
        DiscoveryRequest {
            resource_names: names,
            type_url: T.into(),
            response_nonce: String::new(),
            ..Default::default()
        },
    );
    assert!(responses.len() <= 1);
    // A flood of type URLs: beyond max_types the stream closes.
    let (mut s, store) = server();
    for i in 0..300 {
        server_feed(
            &mut s,
            &store,
            DiscoveryRequest {
                resource_names: vec!["a".into()],
                type_url: format!("type.googleapis.com/acme.T{i}"),
                ..Default::default()
            },
        );
    }
    assert!(s.is_closed());
    // A 16 MiB name in a request: closed.
    let (mut s, store) = server();
    server_feed(
        &mut s,
        &store,
        DiscoveryRequest {
            resource_names: vec!["x".repeat(16 << 20)],
            type_url: T.into(),
            ..Default::default()
        },
    );
    assert!(s.is_closed());
    let _ = Duration::ZERO;
}
