//! Soak test on loopback, bounded in time and stopping by itself.
//!
//! Many concurrent streams (SotW and delta, ADS and per-type, several node groups) while
//! the groups' stores change continuously (several types per revision), streams are killed
//! and reconnect at random, and some peers read slowly. It passes when:
//!
//! - every live stream converges to its group's latest state within [`Size::converge`]
//!   after the last change (its client's cache equals the store for what it subscribes
//!   to);
//! - the conformance checker finds no violation, on either side, in a sample of recorded
//!   streams;
//! - no response is lost or duplicated: on every live stream, the client received exactly
//!   the responses the server handed to the transport, and no SotW response repeated the
//!   version of the one before it for its type;
//! - memory stays bounded (the peak resident size is printed and checked).
//!
//! The short run is part of the test suite; `XDS_SOAK=full` runs 1 000 streams for 30 s
//! (`cargo test --release -p xds-sansio-tonic --all-features --test soak -- --nocapture`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{EncodedResponse, ResourceEntry, ResourceStore, StoreOp};
use xds_sansio::time::StdClock;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Client, ClientConfig, Transport, Variant};
use xds_sansio_conformance::check::{check, CheckSide};
use xds_sansio_tonic::client::Tap;
use xds_sansio_tonic::record::Recorder;
use xds_sansio_tonic::wire::{method_path, WireRequest, WireResponse};
use xds_sansio_tonic::{Callbacks, StreamInfo, XdsServer};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

/// How big a run is.
#[derive(Clone, Copy, Debug)]
struct Size {
    streams: usize,
    groups: usize,
    clusters: usize,
    /// How long the stores change.
    changing: Duration,
    /// The bound on convergence after the last change.
    converge: Duration,
    /// One stream in this many is recorded and checked.
    sample_every: usize,
    /// The bound on the peak resident size, MiB.
    max_rss_mib: u64,
}

const SHORT: Size = Size {
    streams: 120,
    groups: 3,
    clusters: 30,
    changing: Duration::from_secs(3),
    converge: Duration::from_secs(15),
    sample_every: 10,
    max_rss_mib: 1024,
};

const FULL: Size = Size {
    streams: 1000,
    groups: 6,
    clusters: 100,
    changing: Duration::from_secs(30),
    converge: Duration::from_secs(30),
    sample_every: 25,
    max_rss_mib: 3072,
};

/// A deterministic generator (splitmix64), one per task.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

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

/// Server-side accounting: responses handed to the transport per node id (one per call),
/// and SotW responses that repeated their type's previous version on a stream.
#[derive(Default)]
struct Ledger {
    sent: Mutex<HashMap<String, u64>>,
    last_sotw: Mutex<HashMap<(u64, String), String>>,
    repeats: AtomicU64,
}

impl Callbacks for Ledger {
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        let call = stream.peer.metadata.get("x-call");
        let call = call.and_then(|v| v.to_str().ok()).unwrap_or_default();
        *self
            .sent
            .lock()
            .unwrap()
            .entry(call.to_string())
            .or_default() += 1;
        if stream.variant == Variant::Sotw {
            let key = (stream.id, response.type_url.clone());
            let mut last = self.last_sotw.lock().unwrap();
            if last.get(&key) == Some(&response.version) {
                self.repeats.fetch_add(1, Ordering::Relaxed);
            }
            last.insert(key, response.version.clone());
        }
    }
}

/// What a client reports to the test.
#[derive(Default)]
struct Report {
    /// Its current call's id and how many responses that call received.
    current: Mutex<(String, u64)>,
    /// Set once its cache matches its group's final store.
    converged: AtomicBool,
    /// What differed at the last check.
    mismatch: Mutex<String>,
    /// When it converged.
    converged_at: Mutex<Option<Instant>>,
}

/// One client's set-up.
struct Peer {
    index: usize,
    variant: Variant,
    transport: Transport,
    group: String,
    /// Names it subscribes to per type (empty: wildcard).
    subscriptions: Vec<(&'static str, Vec<String>)>,
    read_delay: Duration,
}

impl Peer {
    fn new(index: usize, size: &Size, rng: &mut Rng) -> Peer {
        let variant = if index.is_multiple_of(2) {
            Variant::Sotw
        } else {
            Variant::Delta
        };
        let eds_names: Vec<String> = (0..5)
            .map(|_| format!("c{}", rng.below(size.clusters)))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let (transport, subscriptions) = match index % 4 {
            0 | 1 => (
                Transport::Aggregated,
                vec![(CDS, Vec::new()), (EDS, eds_names)],
            ),
            2 => (Transport::PerType(CDS.into()), vec![(CDS, Vec::new())]),
            _ => (Transport::PerType(EDS.into()), vec![(EDS, eds_names)]),
        };
        Peer {
            index,
            variant,
            transport,
            group: format!("g{}", index % size.groups),
            subscriptions,
            // One peer in ten reads slowly.
            read_delay: if index % 10 == 3 {
                Duration::from_millis(100)
            } else {
                Duration::ZERO
            },
        }
    }

    fn client(&self) -> Client {
        let node = Node {
            id: format!("c{}", self.index),
            cluster: self.group.clone(),
            ..Node::default()
        };
        let mut client = Client::new(ClientConfig::new(
            self.variant,
            self.transport.clone(),
            node,
        ));
        for (type_url, names) in &self.subscriptions {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            client.subscribe(type_url, &names).unwrap();
        }
        client
    }

    /// What `client` holds that differs from what `store` has for its subscriptions
    /// (`None`: nothing). A SotW client cannot learn that a resource of a type that is not
    /// full-state (EDS) left the store (the protocol has no way to say it), so for those
    /// only resources in the store count.
    fn mismatch(&self, client: &Client, store: &ResourceStore) -> Option<String> {
        for (type_url, names) in &self.subscriptions {
            let body = |name: &str| client.resource(type_url, name).map(|c| c.body_bytes());
            if names.is_empty() {
                let mut held: Vec<String> = client
                    .resource_names(type_url)
                    .iter()
                    .map(|n| n.to_string())
                    .collect();
                held.sort();
                let want: Vec<String> = store.iter(type_url).map(|r| r.name().into()).collect();
                if held != want {
                    return Some(format!("{type_url}: holds {held:?}, store {want:?}"));
                }
            }
            let names: Vec<String> = if names.is_empty() {
                store.iter(type_url).map(|r| r.name().into()).collect()
            } else {
                names.clone()
            };
            for name in &names {
                let want = store.get(type_url, name).map(|r| r.body().clone());
                let sotw_blind = self.variant == Variant::Sotw && *type_url == EDS;
                if want.is_none() && sotw_blind {
                    continue;
                }
                if body(name) != want {
                    return Some(format!(
                        "{type_url} {name}: holds {:?}, store {want:?}",
                        body(name)
                    ));
                }
            }
        }
        None
    }
}

/// A client's calls, one after another, until `done`; each call lives a random time while
/// the stores change (then it is killed and the client reconnects), for ever after.
#[allow(clippy::too_many_arguments)]
async fn run_peer(
    peer: Peer,
    channel: Channel,
    server: XdsServer,
    changing: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    report: Arc<Report>,
    recorder: Option<Arc<Recorder>>,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let mut client = peer.client();
    let clock = StdClock::new();
    let mut attempt = 0u64;
    while !done.load(Ordering::Relaxed) {
        let call_id = format!("c{}-a{attempt}", peer.index);
        *report.current.lock().unwrap() = (call_id.clone(), 0);
        let life = if changing.load(Ordering::Relaxed) && rng.below(3) == 0 {
            Some(Duration::from_millis(200 + rng.below(1500) as u64))
        } else {
            None
        };
        let stream_id = peer.index as u64 * 10_000 + attempt;
        let io = Call {
            call_id,
            channel: channel.clone(),
            clock: &clock,
            life,
            read_delay: peer.read_delay,
            tap: recorder.as_deref().map(|r| (r as &dyn Tap, stream_id)),
            peer: &peer,
            server: &server,
            changing: &changing,
            done: &done,
            report: &report,
        };
        match peer.variant {
            Variant::Sotw => {
                call::<DiscoveryRequest, DiscoveryResponse>(&mut client, io).await;
            }
            Variant::Delta => {
                call::<DeltaDiscoveryRequest, DeltaDiscoveryResponse>(&mut client, io).await;
            }
        }
        attempt += 1;
        if !done.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20 + rng.below(80) as u64)).await;
        }
    }
}

struct Call<'a> {
    call_id: String,
    channel: Channel,
    clock: &'a StdClock,
    life: Option<Duration>,
    read_delay: Duration,
    tap: Option<(&'a dyn Tap, u64)>,
    peer: &'a Peer,
    server: &'a XdsServer,
    changing: &'a AtomicBool,
    done: &'a AtomicBool,
    report: &'a Report,
}

/// One gRPC call driving `client` (the core's client contract, as the adapter's
/// `client::run_stream` does, plus a read delay, a lifetime and the convergence check).
async fn call<Req: WireRequest, Resp: WireResponse>(client: &mut Client, io: Call<'_>) {
    let Some(path) = method_path(client.config().variant, &client.config().transport) else {
        return;
    };
    let (tx, rx) = mpsc::unbounded_channel::<Req>();
    let mut grpc = tonic::client::Grpc::new(io.channel.clone());
    if grpc.ready().await.is_err() {
        return;
    }
    let flush = |client: &mut Client| {
        let now = io.clock.now();
        while let Some(request) = client.poll_request(now) {
            if let Some((tap, stream)) = io.tap {
                tap.request(stream, &request);
            }
            if let Some(message) = Req::from_request(request) {
                let _ = tx.send(message);
            }
        }
        while client.poll_event().is_some() {}
    };
    client.connected(io.clock.now());
    flush(client);
    let mut request = tonic::Request::new(tokio_stream::wrappers::UnboundedReceiverStream::new(rx));
    if let Ok(value) = io.call_id.parse() {
        request.metadata_mut().insert("x-call", value);
    }
    let call = grpc.streaming(
        request,
        PathAndQuery::from_static(path),
        ProstCodec::<Req, Resp>::default(),
    );
    let end = io.life.map(|l| tokio::time::Instant::now() + l);
    if let Ok(response) = call.await {
        let mut inbound = response.into_inner();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            flush(client);
            let deadline = client.poll_timeout().map(|t| io.clock.to_std(t));
            tokio::select! {
                message = inbound.message() => match message {
                    Ok(Some(message)) => {
                        if !io.read_delay.is_zero() {
                            tokio::time::sleep(io.read_delay).await;
                        }
                        let response = message.into_response();
                        if let Some((tap, stream)) = io.tap {
                            tap.response(stream, &response);
                        }
                        io.report.current.lock().unwrap().1 += 1;
                        client.handle_response(io.clock.now(), response);
                    }
                    _ => break,
                },
                () = sleep_until(deadline.map(tokio::time::Instant::from_std)) => {
                    client.handle_timeout(io.clock.now())
                }
                () = sleep_until(end) => break,
                _ = tick.tick() => {
                    if io.done.load(Ordering::Relaxed) {
                        break;
                    }
                    if !io.changing.load(Ordering::Relaxed)
                        && !io.report.converged.load(Ordering::Relaxed)
                    {
                        let group = io.peer.group.as_str();
                        match io.server.read(group, |store| io.peer.mismatch(client, store)) {
                            None => {
                                io.report.converged.store(true, Ordering::Relaxed);
                                *io.report.converged_at.lock().unwrap() = Some(Instant::now());
                            }
                            Some(what) => *io.report.mismatch.lock().unwrap() = what,
                        }
                    }
                }
            }
        }
    }
    client.disconnected(io.clock.now());
    flush(client);
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The peak resident set size of this process, MiB (Linux; 0 elsewhere).
fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

async fn soak(size: Size) {
    let ledger = Arc::new(Ledger::default());
    let server = XdsServer::builder()
        .node_group(|node: &Node| node.cluster.clone())
        .callbacks(ledger.clone())
        .body_checks(xds_sansio::server::BodyChecks::Off) // placeholder bodies
        .build();
    // Every group starts with its clusters and endpoints, CDS and EDS in one revision.
    for g in 0..size.groups {
        let mut ops = Vec::new();
        for c in 0..size.clusters {
            ops.push(set(CDS, &format!("c{c}"), "v0"));
            ops.push(set(EDS, &format!("c{c}"), "e0"));
        }
        server.publish(&format!("g{g}"), ops).unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    // Streams share a few connections, as proxies behind one host would.
    let mut channels = Vec::new();
    for _ in 0..16 {
        let endpoint = tonic::transport::Endpoint::from_shared(uri.clone()).unwrap();
        channels.push(endpoint.connect().await.unwrap());
    }
    let changing = Arc::new(AtomicBool::new(true));
    let done = Arc::new(AtomicBool::new(false));
    let mut rng = Rng(7);
    let mut peers = Vec::new();
    let mut recorders = Vec::new();
    for i in 0..size.streams {
        let peer = Peer::new(i, &size, &mut rng);
        let report = Arc::new(Report::default());
        let recorder = i
            .is_multiple_of(size.sample_every)
            .then(|| Arc::new(Recorder::new(None)));
        if let Some(r) = &recorder {
            recorders.push((i, r.clone()));
        }
        let task = tokio::spawn(run_peer(
            peer,
            channels[i % channels.len()].clone(),
            server.clone(),
            changing.clone(),
            done.clone(),
            report.clone(),
            recorder,
            rng.next(),
        ));
        peers.push((report, task));
    }
    // The stores change continuously: a batch every 5 ms, CDS and EDS together.
    let started = Instant::now();
    let mut revisions = 0u64;
    while started.elapsed() < size.changing {
        let g = rng.below(size.groups);
        let c = rng.below(size.clusters);
        let content = format!("r{revisions}");
        let mut ops = vec![
            set(CDS, &format!("c{c}"), &content),
            set(EDS, &format!("c{}", rng.below(size.clusters)), &content),
        ];
        if rng.below(10) == 0 {
            // A cluster and its endpoints leave (and come back in a later batch).
            let gone = format!("c{}", rng.below(size.clusters));
            if gone != format!("c{c}") {
                ops.push(StoreOp::Remove {
                    type_url: CDS.into(),
                    name: gone.clone(),
                });
                ops.push(StoreOp::Remove {
                    type_url: EDS.into(),
                    name: gone,
                });
            }
        }
        server.publish(&format!("g{g}"), ops).unwrap();
        revisions += 1;
        if revisions.is_multiple_of(500) {
            // Now and then, the server ends every stream.
            server.end_streams();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    changing.store(false, Ordering::Relaxed);
    let last_change = Instant::now();
    // Every live stream converges within the bound.
    let converged = tokio::time::timeout(size.converge, async {
        while !peers
            .iter()
            .all(|(r, _)| r.converged.load(Ordering::Relaxed))
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let lagging: Vec<usize> = peers
        .iter()
        .enumerate()
        .filter(|(_, (r, _))| !r.converged.load(Ordering::Relaxed))
        .map(|(i, _)| i)
        .collect();
    for i in lagging.iter().take(3) {
        let report = &peers[*i].0;
        eprintln!(
            "lagging {i}: {:?}: {}",
            report.current.lock().unwrap(),
            report.mismatch.lock().unwrap()
        );
    }
    assert!(
        converged.is_ok(),
        "{} streams did not converge within {:?}: {lagging:?}",
        lagging.len(),
        size.converge
    );
    let convergence = last_change.elapsed();
    let mut slowest: Vec<(Duration, usize)> = peers
        .iter()
        .enumerate()
        .map(|(i, (r, _))| {
            let at = r.converged_at.lock().unwrap().unwrap_or(last_change);
            (at.saturating_duration_since(last_change), i)
        })
        .collect();
    slowest.sort();
    slowest.reverse();
    eprintln!("slowest: {:?}", &slowest[..5.min(slowest.len())]);
    // Quiescent now: each live call received exactly what the server sent on it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    {
        let sent = ledger.sent.lock().unwrap();
        for (i, (report, _)) in peers.iter().enumerate() {
            let (node, received) = report.current.lock().unwrap().clone();
            let sent = sent.get(&node).copied().unwrap_or(0);
            assert_eq!(
                sent, received,
                "stream {i} ({node}): the server sent {sent}, the client received {received}"
            );
        }
    }
    assert_eq!(
        ledger.repeats.load(Ordering::Relaxed),
        0,
        "a SotW response repeated its type's previous version"
    );
    done.store(true, Ordering::Relaxed);
    for (_, task) in peers {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("clients stop")
            .unwrap();
    }
    // The sample of recorded streams: no violation on either side.
    let mut checked = 0;
    for (i, recorder) in &recorders {
        let entries = recorder.entries();
        let mut streams: BTreeMap<u64, Vec<_>> = BTreeMap::new();
        for entry in entries {
            let stream = match &entry {
                xds_sansio_conformance::transcript::Entry::Request { stream, .. }
                | xds_sansio_conformance::transcript::Entry::Response { stream, .. } => *stream,
                xds_sansio_conformance::transcript::Entry::Store { .. } => continue,
            };
            streams.entry(stream).or_default().push(entry);
        }
        for (stream, entries) in streams {
            for side in [CheckSide::Client, CheckSide::Server] {
                let violations = check(&entries, side);
                assert!(
                    violations.is_empty(),
                    "peer {i} stream {stream} {side:?}: {violations:#?}"
                );
            }
            checked += 1;
        }
    }
    let rss = peak_rss_mib();
    println!(
        "soak: {} streams, {} groups, {revisions} revisions in {:?}; every stream converged \
         {convergence:?} after the last change (bound {:?}); {checked} recorded calls checked; \
         peak RSS {rss} MiB",
        size.streams, size.groups, size.changing, size.converge
    );
    assert!(rss <= size.max_rss_mib, "peak RSS {rss} MiB");
    server.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(15), serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_short() {
    let size = match std::env::var("XDS_SOAK").as_deref() {
        Ok("full") => FULL,
        _ => SHORT,
    };
    tokio::time::timeout(
        size.changing + size.converge + Duration::from_secs(90),
        soak(size),
    )
    .await
    .expect("the soak test ends by itself");
}
