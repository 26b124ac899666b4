//! The test control plane (issue 29, item 9): `XdsServerBuilder::faults` over real gRPC on
//! loopback. Each fault is seen on the wire by a raw ADS stream (what the client under
//! test meets), and the adapter's own client is run through the faults a flaky server or
//! network produces. Every wait is bounded.
#![cfg(feature = "faults")]

mod support;

use std::time::{Duration, Instant};

use support::*;
use tokio::sync::mpsc;
use xds_sansio::message::Response;
use xds_sansio::pb::discovery::DiscoveryRequest;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::BodyChecks;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Request, Transport, Variant};
use xds_sansio_conformance::faults::FaultPlan;
use xds_sansio_tonic::call::{connect, ConnectOptions, Inbound, Ready};
use xds_sansio_tonic::client::{BackoffConfig, Bootstrap, WatchError, WatchEvent, XdsClient};
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

/// A server with `plan`, serving c1 (CDS) and c1's endpoints (EDS) at version 1.
async fn serve(plan: &str) -> (XdsServer, String) {
    let server = XdsServer::builder()
        .body_checks(BodyChecks::Off)
        .faults(FaultPlan::parse(plan, 1).unwrap())
        .build();
    server.update(DEFAULT_GROUP, |s| {
        s.set(CDS, "c1", body("c1", "v1")).unwrap();
        s.set(EDS, "c1", body("c1", "e1")).unwrap();
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = listener.local_addr().unwrap().to_string();
    tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    (server, uri)
}

/// A raw SotW ADS stream: what a client under test sends and gets, message by message.
struct Raw {
    requests: mpsc::UnboundedSender<Request>,
    inbound: Inbound,
}

impl Raw {
    async fn open(uri: &str) -> Raw {
        let server = xds_sansio_tonic::client::ManagementServer::insecure(uri.to_string());
        let channel = connect(&server, &ConnectOptions::new(STEP)).await.unwrap();
        let ready = Ready::new(channel, Variant::Sotw, &Transport::Aggregated)
            .await
            .unwrap();
        let (requests, rx) = mpsc::unbounded_channel();
        let inbound = ready.start(rx).await.unwrap();
        Raw { requests, inbound }
    }

    fn send(&self, type_url: &str, version: &str, nonce: &str, nack: bool) {
        self.send_names(type_url, &[], version, nonce, nack);
    }

    /// Sends a request; a stream the server already ended takes none (that is the test's
    /// to see on the inbound side).
    fn send_names(&self, type_url: &str, names: &[&str], version: &str, nonce: &str, nack: bool) {
        let request = DiscoveryRequest {
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            node: Some(Node {
                id: "raw".into(),
                ..Node::default()
            }),
            type_url: type_url.to_string(),
            version_info: version.to_string(),
            response_nonce: nonce.to_string(),
            error_detail: nack.then(|| Status {
                code: 3,
                message: "refused by the test".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let _ = self.requests.send(Request::Sotw(request));
    }

    fn subscribe(&self, type_url: &str) {
        self.send(type_url, "", "", false);
    }

    /// The next response within `within`; `Ok(None)` when none came; `Err` when the stream
    /// ended with a status.
    async fn next_within(
        &mut self,
        within: Duration,
    ) -> Result<Option<(String, String, String)>, tonic::Status> {
        match tokio::time::timeout(within, self.inbound.message()).await {
            Err(_) => Ok(None),
            Ok(Ok(Some(Response::Sotw(r)))) => Ok(Some((r.type_url, r.version_info, r.nonce))),
            Ok(Ok(Some(other))) => panic!("not a SotW response: {other:?}"),
            Ok(Ok(None)) => Err(tonic::Status::ok("ended")),
            Ok(Err(status)) => Err(status),
        }
    }

    async fn next(&mut self, what: &str) -> (String, String, String) {
        match self.next_within(STEP).await {
            Ok(Some(r)) => r,
            other => panic!("{what}: no response ({other:?})"),
        }
    }
}

const SHORT: Duration = Duration::from_millis(400);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_loses_the_response_on_the_selected_stream_only() {
    let (_server, uri) = serve("drop type=cds nth=1 stream=1").await;
    let mut first = Raw::open(&uri).await;
    first.subscribe(CDS);
    assert_eq!(first.next_within(SHORT).await.unwrap(), None);
    let mut second = Raw::open(&uri).await;
    second.subscribe(CDS);
    let (type_url, version, _) = second.next("the second stream's CDS").await;
    assert_eq!(type_url, CDS);
    assert!(!version.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_holds_the_response_for_its_time() {
    let (_server, uri) = serve("delay ms=300 type=cds").await;
    let mut raw = Raw::open(&uri).await;
    let asked = Instant::now();
    raw.subscribe(CDS);
    raw.next("the delayed CDS").await;
    assert!(asked.elapsed() >= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_sends_the_response_twice_with_its_nonce() {
    let (_server, uri) = serve("duplicate type=cds").await;
    let mut raw = Raw::open(&uri).await;
    raw.subscribe(CDS);
    let once = raw.next("CDS").await;
    let twice = raw.next("CDS again").await;
    assert_eq!(once, twice);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorder_lets_endpoints_overtake_clusters() {
    let (_server, uri) = serve("reorder type=cds nth=1").await;
    let mut raw = Raw::open(&uri).await;
    raw.subscribe(CDS);
    raw.send_names(EDS, &["c1"], "", "", false);
    // Without the fault, ADS sends clusters before their endpoints (make-before-break).
    let first = raw.next("the first response").await;
    let second = raw.next("the second response").await;
    assert_eq!((first.0.as_str(), second.0.as_str()), (EDS, CDS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_nonce_is_one_the_server_never_sent() {
    let (_server, uri) = serve("wrong-nonce type=cds").await;
    let mut raw = Raw::open(&uri).await;
    raw.subscribe(CDS);
    let (_, _, nonce) = raw.next("CDS").await;
    assert!(nonce.starts_with("fault-wrong-1-"), "{nonce}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_nonce_repeats_the_previous_responses_nonce() {
    let (server, uri) = serve("stale-nonce type=cds nth=2").await;
    let mut raw = Raw::open(&uri).await;
    raw.subscribe(CDS);
    let (_, version, first_nonce) = raw.next("CDS v1").await;
    raw.send(CDS, &version, &first_nonce, false);
    server
        .update(DEFAULT_GROUP, |s| s.set(CDS, "c1", body("c1", "v2")))
        .unwrap();
    let (_, newer, nonce) = raw.next("CDS v2").await;
    assert_ne!(newer, version);
    assert_eq!(nonce, first_nonce);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resend_nacked_sends_the_refused_version_again() {
    let (_server, uri) = serve("resend-nacked type=cds").await;
    let mut raw = Raw::open(&uri).await;
    raw.subscribe(CDS);
    let (_, version, nonce) = raw.next("CDS").await;
    raw.send(CDS, "", &nonce, true);
    let (_, again, fresh) = raw.next("the NACKed CDS again").await;
    assert_eq!(again, version);
    assert!(fresh.starts_with("fault-resent-1-"), "{fresh}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_after_ends_the_stream_with_its_status() {
    let (_server, uri) = serve("close after=1 status=UNAVAILABLE message=\"going away\"").await;
    let mut raw = Raw::open(&uri).await;
    raw.subscribe(CDS);
    raw.next("the one response").await;
    let status = raw.next_within(STEP).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(status.message(), "going away");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_ends_the_selected_stream_as_it_opens() {
    let (_server, uri) = serve("refuse status=PERMISSION_DENIED stream=1").await;
    let mut first = Raw::open(&uri).await;
    first.subscribe(CDS);
    let status = first.next_within(STEP).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    let mut second = Raw::open(&uri).await;
    second.subscribe(CDS);
    second.next("the second stream's CDS").await;
}

fn client(uri: &str) -> XdsClient {
    let mut backoff = BackoffConfig::default();
    backoff.initial = Duration::from_millis(50);
    backoff.max = Duration::from_millis(200);
    let bootstrap = Bootstrap::single(
        uri.to_string(),
        Node {
            id: "faults".into(),
            ..Node::default()
        },
    );
    XdsClient::builder(bootstrap)
        .backoff(backoff)
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_secs(1)))
        .build()
        .unwrap()
}

/// The adapter's client meets a refusal: typed as refused with its status, then told the
/// server is reachable once the next stream is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_types_a_refusal_and_is_told_when_it_ends() {
    let (_server, uri) =
        serve("refuse status=PERMISSION_DENIED message=\"no token\" stream=1").await;
    let client = client(&uri);
    let mut watch = client.watch(CDS, "c1").unwrap();
    let (refused, before) = until(&mut watch, "a refusal", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;
    match refused {
        WatchEvent::Error {
            error: WatchError::Refused { code, message, .. },
            ..
        } => assert_eq!((code, message.as_str()), (7, "no token")),
        other => panic!("not a refusal: {other:?} (before: {before:?})"),
    }
    until(&mut watch, "c1", changed_to("c1", "v1")).await;
    until(&mut watch, "reachable", |e| {
        matches!(e, WatchEvent::Reachable { .. })
    })
    .await;
}

/// The adapter's client on a flaky server: every stream closes after one response, every
/// response is duplicated and some delayed, nonces are wrong. It still follows every
/// publication and never reports a resource missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_follows_publications_through_a_flaky_server() {
    let plan =
        "duplicate\ndelay ms=50 p=0.5\nwrong-nonce every=2\nclose after=1 status=UNAVAILABLE";
    let (server, uri) = serve(plan).await;
    let client = client(&uri);
    let mut watch = client.watch(CDS, "c1").unwrap();
    until(&mut watch, "c1 v1", changed_to("c1", "v1")).await;
    for version in ["v2", "v3", "v4"] {
        server
            .update(DEFAULT_GROUP, |s| s.set(CDS, "c1", body("c1", version)))
            .unwrap();
        let (_, before) = until(&mut watch, version, changed_to("c1", version)).await;
        assert!(
            !before.iter().any(is_dne("c1")),
            "a flaky server made c1 look deleted: {before:?}"
        );
    }
}
