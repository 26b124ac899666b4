//! Storm protection over loopback (`XdsServerBuilder::admission`): a new stream beyond the
//! rate is shed with `UNAVAILABLE` and a `grpc-retry-pushback-ms` hint, while a stream that
//! presents versions is admitted at the same moment; a new stream that finds the bucket
//! empty waits for its token and is served; with a window, a new stream waits for an
//! earlier one to acknowledge its state (or to time out). The metrics count each. Bounded
//! waits; nothing is timed.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::counting_recorder::counts;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use tonic::Code;
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::server::{ResourceEntry, StoreOp};
use xds_sansio::types::CLUSTER;
use xds_sansio::{Request, Response};
use xds_sansio_tonic::call::{connect, ConnectOptions, Inbound};
use xds_sansio_tonic::client::ManagementServer;
use xds_sansio_tonic::server::metrics::names;
use xds_sansio_tonic::server::Admission;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

const CDS: &str = CLUSTER.type_url;
const WAIT: Duration = Duration::from_secs(10);

fn cluster(name: &str) -> StoreOp {
    let mut body = vec![0x0a, name.len() as u8];
    body.extend_from_slice(name.as_bytes());
    StoreOp::Set {
        type_url: CDS.into(),
        entry: ResourceEntry::new(name, Bytes::from(body)),
    }
}

/// One raw SotW ADS call whose first request asks wildcard CDS at `version`.
async fn open(channel: &Channel, version: &str) -> (mpsc::UnboundedSender<Request>, Inbound) {
    support::loopback::open_cds(channel, "storm", version)
        .await
        .unwrap()
}

/// A server with `admission` serving two clusters, and a connection to it.
async fn serve(admission: Admission) -> (XdsServer, Channel) {
    let server = XdsServer::builder().admission(admission).build();
    server
        .publish(DEFAULT_GROUP, vec![cluster("c1"), cluster("c2")])
        .unwrap();
    let uri = support::loopback::serve_on_loopback(&server).await;
    let channel = connect(&ManagementServer::insecure(uri), &ConnectOptions::new(WAIT))
        .await
        .unwrap();
    (server, channel)
}

async fn next(inbound: &mut Inbound) -> Result<Option<Response>, tonic::Status> {
    tokio::time::timeout(WAIT, inbound.message())
        .await
        .expect("the server answered in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_stream_is_shed_with_a_hint_while_a_resuming_one_is_admitted() {
    // One new stream a second, no waiting: the second new stream of this second is shed.
    let counters = counts();
    let mut admission = Admission::new(1, 1);
    admission.max_wait = Duration::ZERO;
    let (_server, channel) = serve(admission).await;

    // The first new stream takes the token and gets the whole state.
    let (_first_tx, mut first) = open(&channel, "").await;
    let Some(Response::Sotw(response)) = next(&mut first).await.unwrap() else {
        panic!("the first stream's CDS");
    };
    assert_eq!(response.resources.len(), 2);

    // The second is shed: UNAVAILABLE, and when to come back.
    let (_second_tx, mut second) = open(&channel, "").await;
    let status = next(&mut second).await.expect_err("shed with a status");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let hint: u64 = status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .expect("the retry hint")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // Its token would be due within two intervals of a second.
    assert!(hint > 0 && hint <= 2_000, "{hint}");

    // At the same moment, a client that presents the version it holds is admitted and
    // served (the version is not the current one, so it is owed the state).
    let (_third_tx, mut third) = open(&channel, "an-older-version").await;
    let Some(Response::Sotw(response)) = next(&mut third).await.unwrap() else {
        panic!("the resuming stream's CDS");
    };
    assert_eq!(response.resources.len(), 2);
    assert!(counters.get(&format!("{}{{reason=rate}}", names::SHED)) >= 1);
    assert!(
        counters.get(&format!(
            "{}{{arrival=resuming,waited=no}}",
            names::ADMITTED
        )) >= 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_stream_that_finds_the_bucket_empty_waits_for_its_token() {
    let counters = counts();
    // Four new streams a second after a burst of one, up to 5 s of wait.
    let (_server, channel) = serve(Admission::new(4, 1)).await;
    let (_first_tx, mut first) = open(&channel, "").await;
    assert!(next(&mut first).await.unwrap().is_some());
    // The bucket is empty: the second waits a quarter of a second, then is served.
    let (_second_tx, mut second) = open(&channel, "").await;
    let Some(Response::Sotw(response)) = next(&mut second).await.unwrap() else {
        panic!("the waiting stream's CDS");
    };
    assert_eq!(response.resources.len(), 2);
    assert!(counters.get(&format!("{}{{arrival=new,waited=yes}}", names::ADMITTED)) >= 1);
}

fn ack(tx: &mpsc::UnboundedSender<Request>, response: &DiscoveryResponse) {
    tx.send(Request::Sotw(DiscoveryRequest {
        type_url: CDS.into(),
        version_info: response.version_info.clone(),
        response_nonce: response.nonce.clone(),
        ..Default::default()
    }))
    .unwrap();
}

/// Whether `inbound` stays silent for a moment (a stream that must still be waiting).
async fn silent(inbound: &mut Inbound) -> bool {
    tokio::time::timeout(Duration::from_millis(300), inbound.message())
        .await
        .is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_window_a_new_stream_waits_for_an_earlier_one_to_acknowledge() {
    let counters = counts();
    // One new stream warming at a time; a queued one waits 2 s at most.
    let mut admission = Admission::window(1);
    admission.max_wait = Duration::from_secs(2);
    let (_server, channel) = serve(admission).await;

    let (first_tx, mut first) = open(&channel, "").await;
    let Some(Response::Sotw(state)) = next(&mut first).await.unwrap() else {
        panic!("the first stream's CDS");
    };
    // The first has not acknowledged its state: the second queues.
    let (_second_tx, mut second) = open(&channel, "").await;
    assert!(silent(&mut second).await, "served before the first ACKed");
    // A resuming stream takes no place in the window: served at once.
    let (_resuming_tx, mut resuming) = open(&channel, "an-older-version").await;
    assert!(matches!(
        next(&mut resuming).await.unwrap(),
        Some(Response::Sotw(_))
    ));
    // The first ACKs: the second gets its place and its state.
    ack(&first_tx, &state);
    let Some(Response::Sotw(response)) = next(&mut second).await.unwrap() else {
        panic!("the queued stream's CDS");
    };
    assert_eq!(response.resources.len(), 2);
    // The second never acknowledges: a third waits its 2 s, then is shed with a hint.
    let (_third_tx, mut third) = open(&channel, "").await;
    let status = next(&mut third).await.expect_err("shed with a status");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.metadata().get("grpc-retry-pushback-ms").is_some());
    assert!(counters.get(&format!("{}{{reason=window}}", names::SHED)) >= 1);
    assert!(counters.get(&format!("{}{{arrival=new,waited=yes}}", names::ADMITTED)) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_never_acknowledges_gives_its_place_up_after_the_window_timeout() {
    let mut admission = Admission::window(1);
    admission.window_timeout = Duration::from_millis(500);
    let (_server, channel) = serve(admission).await;
    let (_first_tx, mut first) = open(&channel, "").await;
    assert!(next(&mut first).await.unwrap().is_some());
    // No ACK ever comes; after half a second the second is let in all the same.
    let (_second_tx, mut second) = open(&channel, "").await;
    assert!(matches!(
        next(&mut second).await.unwrap(),
        Some(Response::Sotw(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warming_stream_that_ends_lets_the_next_one_in() {
    let (_server, channel) = serve(Admission::window(1)).await;
    let (first_tx, mut first) = open(&channel, "").await;
    assert!(next(&mut first).await.unwrap().is_some());
    let (_second_tx, mut second) = open(&channel, "").await;
    assert!(silent(&mut second).await, "served before the first ended");
    // The first client goes away without an ACK.
    drop(first_tx);
    drop(first);
    assert!(matches!(
        next(&mut second).await.unwrap(),
        Some(Response::Sotw(_))
    ));
}
