//! What an operator relies on: limits as clear statuses, graceful shutdown, the health
//! service, callbacks with the node, metrics through the facade, a publish that wakes only
//! the streams it concerns.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use support::counting_recorder::counts;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::rpc::Status as RpcStatus;
use xds_sansio::server::{BodyChecks, ResourceEntry, StoreOp};
use xds_sansio::types::{ADS_SOTW_METHOD, CLUSTER, ENDPOINT, LISTENER};
use xds_sansio_tonic::server::metrics::names;
use xds_sansio_tonic::{Callbacks, StreamInfo, XdsServer, DEFAULT_GROUP};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
const WAIT: Duration = Duration::from_secs(5);

fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

fn set(type_url: &str, name: &str, content: &str) -> StoreOp {
    StoreOp::Set {
        type_url: type_url.into(),
        entry: ResourceEntry::new(name, body(name, content)),
    }
}

async fn serve(server: &XdsServer) -> (Channel, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let serving = server.clone();
    let task = tokio::spawn(async move {
        serving
            .serve_with_listener(listener, std::future::pending())
            .await
            .unwrap();
    });
    let channel = tonic::transport::Endpoint::from_shared(uri)
        .unwrap()
        .connect()
        .await
        .unwrap();
    (channel, task)
}

/// An ADS SotW call: the request sender and the response stream (or the status it was
/// refused with).
async fn open(
    channel: &Channel,
) -> Result<(mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>), Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let (tx, rx) = mpsc::channel(8);
    let response = grpc
        .streaming(
            tonic::Request::new(ReceiverStream::new(rx)),
            PathAndQuery::from_static(ADS_SOTW_METHOD),
            ProstCodec::<DiscoveryRequest, DiscoveryResponse>::default(),
        )
        .await?;
    Ok((tx, response.into_inner()))
}

fn request(type_url: &str, names: &[&str], version: &str, nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(Node {
            id: "ops-node".into(),
            ..Node::default()
        }),
        type_url: type_url.into(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

async fn next(inbound: &mut Streaming<DiscoveryResponse>) -> Result<DiscoveryResponse, Status> {
    match tokio::time::timeout(WAIT, inbound.message()).await {
        Ok(Ok(Some(r))) => Ok(r),
        Ok(Ok(None)) => Err(Status::ok("ended")),
        Ok(Err(status)) => Err(status),
        Err(_) => Err(Status::deadline_exceeded("test: nothing arrived")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_clear_statuses() {
    let server = XdsServer::builder()
        .body_checks(BodyChecks::Off) // placeholder bodies
        .max_streams(Some(1))
        .first_request_timeout(Some(Duration::from_millis(200)))
        .max_encoding_message_size(64)
        .build();
    server
        .publish(DEFAULT_GROUP, vec![set(CDS, "c1", &"x".repeat(100))])
        .unwrap();
    let (channel, _task) = serve(&server).await;
    // A stream that says nothing is closed at the first-request deadline.
    let (_quiet, mut inbound) = open(&channel).await.unwrap();
    let status = next(&mut inbound).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    // One stream at most: the second is refused.
    let (_first, _first_inbound) = open(&channel).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = match open(&channel).await {
        Err(status) => status,
        Ok((_, mut inbound)) => next(&mut inbound).await.unwrap_err(),
    };
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    drop((_first, _first_inbound));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A response above the limit ends the stream with RESOURCE_EXHAUSTED.
    let (tx, mut inbound) = open(&channel).await.unwrap();
    tx.send(request(CDS, &[], "", "")).await.unwrap();
    let status = next(&mut inbound).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(counts().get(names::STREAMS_REFUSED) >= 1);
}

/// Callbacks see ACKs and NACKs with the node.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Callbacks for Seen {
    fn acked(&self, stream: &StreamInfo, type_url: &str, _: &str, nonce: &str) {
        let node = stream
            .node
            .as_ref()
            .map(|n| n.id.clone())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push(format!("ack {node} {type_url} {nonce}"));
    }
    fn nacked(&self, stream: &StreamInfo, type_url: &str, _: &str, nonce: &str, e: &RpcStatus) {
        let node = stream
            .node
            .as_ref()
            .map(|n| n.id.clone())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push(format!("nack {node} {type_url} {nonce} {}", e.message));
    }
    fn event(&self, _: &StreamInfo, event: &xds_sansio::server::ServerEvent) {
        if let xds_sansio::server::ServerEvent::Held { type_url } = event {
            self.0.lock().unwrap().push(format!("held {type_url}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_metrics_wakes_health_and_graceful_shutdown() {
    let counts = counts();
    let seen = Arc::new(Seen::default());
    let server = XdsServer::builder()
        .callbacks(seen.clone())
        .body_checks(BodyChecks::Off) // placeholder bodies
        .build();
    server
        .publish(
            DEFAULT_GROUP,
            vec![
                set(CDS, "c1", "a"),
                set(EDS, "e1", "a"),
                set(EDS, "e2", "a"),
            ],
        )
        .unwrap();
    let (channel, serving) = serve(&server).await;

    // Health: SERVING for the server and every discovery service.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "envoy.service.discovery.v3.AggregatedDiscoveryService"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }

    // Two streams: one on e1, one on e2.
    let (tx1, mut in1) = open(&channel).await.unwrap();
    let (tx2, mut in2) = open(&channel).await.unwrap();
    tx1.send(request(EDS, &["e1"], "", "")).await.unwrap();
    tx2.send(request(EDS, &["e2"], "", "")).await.unwrap();
    let r1 = next(&mut in1).await.unwrap();
    let r2 = next(&mut in2).await.unwrap();
    tx1.send(request(EDS, &["e1"], &r1.version_info, &r1.nonce))
        .await
        .unwrap();
    let mut nack = request(EDS, &["e2"], "", &r2.nonce);
    nack.error_detail = Some(RpcStatus {
        code: 3,
        message: "bad endpoints".into(),
        ..Default::default()
    });
    tx2.send(nack).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    {
        let seen = seen.0.lock().unwrap();
        assert!(
            seen.contains(&format!("ack ops-node {EDS} {}", r1.nonce)),
            "{seen:?}"
        );
        assert!(
            seen.contains(&format!("nack ops-node {EDS} {} bad endpoints", r2.nonce)),
            "{seen:?}"
        );
    }
    // A change to e1 wakes only the first stream.
    let woken_before = counts.get(names::STREAMS_WOKEN);
    server
        .publish(DEFAULT_GROUP, vec![set(EDS, "e1", "b")])
        .unwrap();
    let r1b = next(&mut in1).await.unwrap();
    assert_eq!(r1b.resources[0].value, body("e1", "b"));
    assert_eq!(counts.get(names::STREAMS_WOKEN) - woken_before, 1);
    assert!(counts.get(names::ACKS) >= 1 && counts.get(names::NACKS) >= 1);
    // A NACK is counted by type and group (issue 29, item 7).
    assert_eq!(
        counts.get(&format!(
            "{}{{type_url={EDS},group={DEFAULT_GROUP}}}",
            names::NACKS
        )),
        1
    );
    assert!(counts.get(names::RESPONSES) >= 3 && counts.get(names::RESPONSE_BYTES) > 0);
    tx1.send(request(EDS, &["e1"], &r1b.version_info, &r1b.nonce))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(counts.get(names::PUSH_LATENCY) >= 1, "a push was ACKed");

    // A type the group never published is held, and the hold is visible: a callback
    // event and a metric (and a log line), once for the stream and type.
    let holds_before = counts.get(names::HOLDS);
    let (tx3, mut in3) = open(&channel).await.unwrap();
    tx3.send(request(LISTENER.type_url, &["l1"], "", ""))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(counts.get(names::HOLDS) - holds_before, 1);
    assert!(seen
        .0
        .lock()
        .unwrap()
        .contains(&format!("held {}", LISTENER.type_url)));

    // Shutdown: every stream ends with UNAVAILABLE, and serving returns.
    server.shutdown();
    for inbound in [&mut in1, &mut in2, &mut in3] {
        let status = next(inbound).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    drop((tx1, tx2, tx3, health, channel));
    tokio::time::timeout(Duration::from_secs(15), serving)
        .await
        .expect("serving returns after shutdown")
        .unwrap();
    assert_eq!(server.stream_count(), 0);
}

/// By default every group checks what is published: a placeholder that is no Cluster, a
/// body named after another resource and a type outside the catalog are refused, and the
/// group is unchanged.
#[test]
fn publications_are_checked_by_default() {
    let server = XdsServer::builder().build();
    let err = server
        .publish(DEFAULT_GROUP, vec![set(CDS, "c1", "not a cluster")])
        .unwrap_err();
    assert!(
        matches!(&err, xds_sansio::server::StoreError::BadBody { name, field, .. } if name == "c1" && field == "Cluster.type"),
        "{err}"
    );
    let mismatch = StoreOp::Set {
        type_url: EDS.into(),
        entry: ResourceEntry::new("e1", body("e2", "")),
    };
    assert!(matches!(
        server.publish(DEFAULT_GROUP, vec![mismatch]),
        Err(xds_sansio::server::StoreError::NameMismatch { .. })
    ));
    assert!(matches!(
        server.publish(
            DEFAULT_GROUP,
            vec![set("type.googleapis.com/acme.Thing", "t", "")]
        ),
        Err(xds_sansio::server::StoreError::UnknownType(_))
    ));
    assert!(!server.read(DEFAULT_GROUP, |s| s.is_served(EDS)));
    // A real ClusterLoadAssignment (its name only) goes out.
    server
        .publish(
            DEFAULT_GROUP,
            vec![StoreOp::Set {
                type_url: EDS.into(),
                entry: ResourceEntry::new("e1", body("e1", "")),
            }],
        )
        .unwrap();
}
