//! One changed cluster in a 10 000-cluster CDS set, pushed over loopback to 100 and 1 000
//! SotW ADS streams (wildcard CDS), measured to the last ACK; beside it, the core alone
//! doing the same fan-out in memory (each stream builds its encoded response with
//! `poll_response_encoded` and takes the ACK), so the adapter's share (transport, HTTP/2,
//! tonic, tasks, and the clients' decoding) is the difference. Figures: `benches/README.md`.
//!
//! The same for 1 000 delta ADS streams (wildcard CDS over 1 000 clusters, 100 streams a
//! connection, the storm bench's connected clients): one changed cluster is a response of
//! one resource, so what is measured is the adapter's and the transport's cost a stream.
//!
//! `cargo bench -p xds-sansio-tonic --bench fanout -- --warm-up-time 1 --measurement-time 10`

#[path = "../tests/support/loopback.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tokio::sync::{mpsc, Notify};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceEntry, ResourceStore, StoreOp};
use xds_sansio::types::{ADS_DELTA_METHOD, ADS_SOTW_METHOD, CLUSTER};
use xds_sansio::{Request, ServerConfig, ServerStream, Transport, Variant};
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

const CDS: &str = CLUSTER.type_url;
const CLUSTERS: usize = 10_000;
/// The delta fan-out's clusters (the storm bench's).
const DELTA_CLUSTERS: usize = 1_000;

/// A Cluster-shaped body of about 60 bytes: the name in field 1, opaque content after it.
fn body(i: usize, content: &str) -> Bytes {
    let name = format!("cluster-{i:05}");
    let filler = format!("{content}-{}", "x".repeat(40));
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, filler.len() as u8]);
    out.extend_from_slice(filler.as_bytes());
    Bytes::from(out)
}

fn set(i: usize, content: &str) -> StoreOp {
    StoreOp::Set {
        type_url: CDS.into(),
        entry: ResourceEntry::new(format!("cluster-{i:05}"), body(i, content)),
    }
}

fn node() -> Node {
    Node {
        id: "bench".into(),
        ..Node::default()
    }
}

/// `streams` clients on loopback, each ACKing every response at once.
struct Loopback {
    /// Which cluster a push changes.
    changed: usize,
    server: XdsServer,
    acks: Arc<AtomicUsize>,
    done: Arc<Notify>,
    target: Arc<AtomicUsize>,
    round: usize,
}

impl Loopback {
    /// SotW streams over 16 connections, 10 000 clusters.
    async fn start(streams: usize) -> Loopback {
        Self::start_with(streams, CLUSTERS, 16, |channel, on_response| {
            tokio::spawn(sotw_client(channel, on_response));
        })
        .await
    }

    /// Delta streams, 100 a connection, 1 000 clusters.
    async fn start_delta(streams: usize) -> Loopback {
        Self::start_with(
            streams,
            DELTA_CLUSTERS,
            streams.div_ceil(100),
            |channel, on_response| {
                tokio::spawn(delta_client(channel, on_response));
            },
        )
        .await
    }

    async fn start_with(
        streams: usize,
        clusters: usize,
        connections: usize,
        spawn: impl Fn(tonic::transport::Channel, Box<dyn Fn() + Send>),
    ) -> Loopback {
        let server = XdsServer::builder()
            .max_streams(Some(streams + 16))
            .body_checks(xds_sansio::server::BodyChecks::Off) // placeholder bodies, as before
            .build();
        server
            .publish(DEFAULT_GROUP, (0..clusters).map(|i| set(i, "v0")).collect())
            .unwrap();
        let uri = support::serve_on_loopback(&server).await;
        let acks = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(Notify::new());
        let target = Arc::new(AtomicUsize::new(streams));
        let mut channels = Vec::new();
        for _ in 0..connections {
            let endpoint = tonic::transport::Endpoint::from_shared(uri.clone()).unwrap();
            channels.push(endpoint.connect().await.unwrap());
        }
        for i in 0..streams {
            let channel = channels[i % channels.len()].clone();
            let (acks, done, target) = (acks.clone(), done.clone(), target.clone());
            spawn(
                channel,
                Box::new(move || {
                    if acks.fetch_add(1, Ordering::AcqRel) + 1 == target.load(Ordering::Acquire) {
                        done.notify_one();
                    }
                }),
            );
        }
        let mut me = Loopback {
            changed: clusters / 2,
            server,
            acks,
            done,
            target,
            round: 0,
        };
        // The first full state reaches everyone.
        me.wait(streams).await;
        me
    }

    async fn wait(&mut self, target: usize) {
        self.target.store(target, Ordering::Release);
        while self.acks.load(Ordering::Acquire) < target {
            let _ = tokio::time::timeout(Duration::from_millis(50), self.done.notified()).await;
        }
    }

    /// Changes one cluster; returns the time until every stream ACKed it.
    async fn push(&mut self, streams: usize) -> Duration {
        self.round += 1;
        let before = self.acks.load(Ordering::Acquire);
        let start = Instant::now();
        self.server
            .publish(
                DEFAULT_GROUP,
                vec![set(self.changed, &format!("r{}", self.round))],
            )
            .unwrap();
        self.wait(before + streams).await;
        start.elapsed()
    }
}

/// An ADS call on `channel` at `path` whose first request is `first`: the sender of the
/// later requests and the responses.
async fn ads_call<Req, Resp>(
    channel: tonic::transport::Channel,
    path: &'static str,
    first: Req,
) -> (mpsc::UnboundedSender<Req>, tonic::Streaming<Resp>)
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(first).unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let inbound = grpc
        .streaming(
            tonic::Request::new(UnboundedReceiverStream::new(rx)),
            PathAndQuery::from_static(path),
            ProstCodec::<Req, Resp>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    (tx, inbound)
}

/// A wildcard CDS SotW client that ACKs each full state (checked whole) and counts it.
async fn sotw_client(channel: tonic::transport::Channel, acked: Box<dyn Fn() + Send>) {
    let first = DiscoveryRequest {
        node: Some(node()),
        type_url: CDS.into(),
        ..Default::default()
    };
    let (tx, mut inbound) = ads_call::<_, DiscoveryResponse>(channel, ADS_SOTW_METHOD, first).await;
    while let Ok(Some(response)) = inbound.message().await {
        assert_eq!(response.resources.len(), CLUSTERS);
        let _ = tx.send(DiscoveryRequest {
            type_url: CDS.into(),
            version_info: response.version_info,
            response_nonce: response.nonce,
            ..Default::default()
        });
        acked();
    }
}

/// A wildcard CDS delta client that ACKs each response and counts it.
async fn delta_client(channel: tonic::transport::Channel, acked: Box<dyn Fn() + Send>) {
    let first = DeltaDiscoveryRequest {
        node: Some(node()),
        type_url: CDS.into(),
        resource_names_subscribe: vec!["*".into()],
        ..Default::default()
    };
    let (tx, mut inbound) =
        ads_call::<_, DeltaDiscoveryResponse>(channel, ADS_DELTA_METHOD, first).await;
    while let Ok(Some(response)) = inbound.message().await {
        assert!(!response.resources.is_empty());
        let _ = tx.send(DeltaDiscoveryRequest {
            type_url: CDS.into(),
            response_nonce: response.nonce,
            ..Default::default()
        });
        acked();
    }
}

/// The core alone: `streams` SotW ADS streams on one store, each answering the change with
/// its encoded response and taking the ACK.
struct CoreOnly {
    store: ResourceStore,
    streams: Vec<ServerStream>,
    round: usize,
}

impl CoreOnly {
    fn new(streams: usize) -> CoreOnly {
        let mut store = ResourceStore::new();
        store
            .apply((0..CLUSTERS).map(|i| set(i, "v0")).collect())
            .unwrap();
        let config = {
            let mut c = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
            c.await_ack = true;
            c
        };
        let mut me = CoreOnly {
            store,
            streams: (0..streams)
                .map(|_| ServerStream::new(config.clone()))
                .collect(),
            round: 0,
        };
        for s in &mut me.streams {
            s.handle_request(
                xds_sansio::Instant::ZERO,
                Request::Sotw(DiscoveryRequest {
                    node: Some(node()),
                    type_url: CDS.into(),
                    ..Default::default()
                }),
            );
        }
        me.fan_out();
        me
    }

    fn fan_out(&mut self) {
        let now = xds_sansio::Instant::ZERO;
        for s in &mut self.streams {
            while s.poll_event().is_some() {}
            while let Some(r) = s.poll_response_encoded(now, &self.store) {
                std::hint::black_box(&r.bytes);
                s.handle_request(
                    now,
                    Request::Sotw(DiscoveryRequest {
                        type_url: CDS.into(),
                        version_info: r.version,
                        response_nonce: r.nonce,
                        ..Default::default()
                    }),
                );
            }
        }
    }

    fn push(&mut self) -> Duration {
        self.round += 1;
        let start = Instant::now();
        self.store
            .apply(vec![set(4242, &format!("r{}", self.round))])
            .unwrap();
        self.fan_out();
        start.elapsed()
    }
}

fn fanout(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("adapter_fanout_10k_cds");
    group.sample_size(10);
    for streams in [100usize, 1000] {
        let mut core = CoreOnly::new(streams);
        group.bench_with_input(BenchmarkId::new("core_only", streams), &streams, |b, _| {
            b.iter_custom(|iters| (0..iters).map(|_| core.push()).sum())
        });
        // The clients' own work, in memory: decode each stream's response and build its
        // ACK (what the loopback clients do besides waiting on the network).
        let encoded = {
            let mut one = CoreOnly::new(1);
            one.round += 1;
            one.store.apply(vec![set(4242, "decode")]).unwrap();
            let now = xds_sansio::Instant::ZERO;
            one.streams[0]
                .poll_response_encoded(now, &one.store)
                .unwrap()
                .bytes
        };
        group.bench_with_input(
            BenchmarkId::new("clients_only", streams),
            &streams,
            |b, &n| {
                b.iter(|| {
                    for _ in 0..n {
                        let response =
                            <DiscoveryResponse as prost::Message>::decode(encoded.clone()).unwrap();
                        std::hint::black_box(DiscoveryRequest {
                            type_url: CDS.into(),
                            version_info: response.version_info,
                            response_nonce: response.nonce,
                            ..Default::default()
                        });
                    }
                })
            },
        );
        drop(core);
        let loopback = runtime.block_on(Loopback::start(streams));
        to_last_ack(&mut group, &runtime, loopback, streams);
    }
    group.finish();

    let mut group = c.benchmark_group("adapter_fanout_delta_1k_cds");
    group.sample_size(20);
    let streams = 1000usize;
    let loopback = runtime.block_on(Loopback::start_delta(streams));
    to_last_ack(&mut group, &runtime, loopback, streams);
    group.finish();
}

/// `loopback_to_last_ack`: a push, timed until every one of the `streams` ACKed it; then
/// the server shuts down.
fn to_last_ack(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    runtime: &tokio::runtime::Runtime,
    mut loopback: Loopback,
    streams: usize,
) {
    group.bench_with_input(
        BenchmarkId::new("loopback_to_last_ack", streams),
        &streams,
        |b, &n| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += loopback.push(n).await;
                    }
                    total
                })
            })
        },
    );
    runtime.block_on(async { loopback.server.shutdown() });
}

criterion_group!(benches, fanout);
criterion_main!(benches);
