//! A connection storm against one server process, with storm protection off and on in the
//! same run (issue 28): 1 000 clusters of ~150 B (a ~150 KB full CDS state), 1 000
//! clients connected and ACKing every update, then N new clients open their streams at
//! once. Figures: the time until every new client holds the full state, and the latency
//! of the updates published during the storm to the connected clients (publish to
//! receipt, p50 / p99 / max), beside the same latency before the storm (eight updates,
//! all delivered before the storm begins).
//!
//! Three processes by default, the server's alone: the new clients run in a load process
//! of their own and the connected clients in another (this bench started again in each
//! role, `processes.rs`; both note their times on `CLOCK_MONOTONIC`, which the processes
//! share), so the clients share the machine's two cores with the server but not its
//! allocator, heap or runtime, as the "one load process" asks, and the server's
//! RSS is its own. With `XDS_STORM_SPLIT=0` every client runs in the server's process and
//! runtime (their decoding then competes with the server inside it).
//! `XDS_STORM_LOAD_NICE=N` gives the new clients' process that nice value: at 19 it takes
//! the cores only when the server and the connected clients leave them, as clients on
//! hosts of their own would. Clients are
//! raw SotW ADS streams (`xds_sansio_tonic::call`), wildcard CDS, no versions presented
//! (new clients, the case the bucket is for); `XDS_STORM_PER_CONNECTION` streams share an
//! HTTP/2 connection, connected when the storm begins (inside the measured time). A shed
//! client waits the `grpc-retry-pushback-ms` hint (1 s without one) and opens a new
//! stream. A storm client does not ACK its full state: the server then sends it nothing
//! more (the adapter waits for the ACK), so the updates during the storm go to the 1 000
//! connected clients only and what is measured is the cost of the storm, not a fan-out to
//! 1 000 + N. With `XDS_STORM_RESUMING=R` the first R new clients present a stale
//! version (they resume, yet are owed the whole state): protection admits them first. With
//! `XDS_STORM_ACK=1` a new client ACKs its full state, as a real one would (the server then
//! sends it the next update too, which it does not ACK); a window (mode `window`) needs
//! it. With `XDS_STORM_HOLD=0` a new client closes its stream once served (for
//! N beyond what the machine's memory holds open: each open stream keeps its receive and
//! send buffers).
//!
//! `cargo bench -p xds-sansio-tonic --bench storm`; environment: `XDS_STORM_ALLOCATOR`
//! (`system`; `mimalloc`: the whole process allocates with mimalloc; a split run's load
//! process inherits it unless `XDS_STORM_LOAD_ALLOCATOR` names another),
//! `XDS_STORM_SPLIT` (1), `XDS_STORM_LOAD_NICE` (0), `XDS_STORM_LIMIT_S` (300: how long
//! the connected clients may take to hold an update, the new ones to be served), `XDS_STORM_CLIENTS`
//! (5 000), `XDS_STORM_CONNECTED` (1 000), `XDS_STORM_UPDATE_MS` (1 000: one update every
//! so often), `XDS_STORM_PER_CONNECTION` (100), `XDS_STORM_RATE` / `XDS_STORM_BURST` /
//! `XDS_STORM_MAX_WAIT_MS` (protection's settings, default `Admission::default()`),
//! `XDS_STORM_MODES` (`off,on`; `window` is protection with a window of
//! `XDS_STORM_WINDOW` (64) warming streams instead of a rate, `window:N` one of N; `go`
//! and `java` are the same storm against go-control-plane's and java-control-plane's
//! servers instead of ours, `peer_server.rs`),
//! `XDS_STORM_VARIANT` (`sotw`; `delta`: every client, connected or new, is a delta ADS
//! stream subscribing to the wildcard of CDS, so an update sends the connected clients the
//! one cluster that changed instead of the whole state; a resuming client presents a stale
//! version of one cluster). A new client does not keep the state it was served (the load's
//! memory is not the server's figure). Besides the totals, each mode prints every update's
//! 99th percentile at the connected clients, those of the storm marked.
//! Figures: `benches/README.md`, "Storm".

#[path = "../../tests/support/loopback.rs"]
mod support;

mod allocator;
mod clients;
mod peer_server;
mod processes;
mod updates;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xds_sansio::server::BodyChecks;
use xds_sansio_tonic::server::Admission;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

use clients::{new_clients, set, CLUSTERS};
use peer_server::{Peer, PeerServer};
use processes::{
    connected_process, load_process, new_clients_in_a_child, rss_mib, Connected, CONNECTED_URI,
    LOAD_ALLOCATOR, LOAD_NICE, LOAD_STARTED, LOAD_URI,
};
use updates::{monotonic_ns, quantile, Updates};

/// The process's allocator, glibc's (`system`, the default) or mimalloc
/// (`XDS_STORM_ALLOCATOR=mimalloc`): chosen at the first allocation, so one allocator
/// serves every block the process allocates.
#[global_allocator]
static ALLOCATOR: allocator::Chosen = allocator::Chosen;

/// Updates published before the storm.
const BEFORE: u64 = 8;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub struct Load {
    pub clients: usize,
    pub connected: usize,
    pub per_connection: usize,
    pub update_every: Duration,
    /// Whether a new client keeps its stream open once served.
    pub hold: bool,
    /// How many of the new clients present a (stale) version.
    pub resuming: usize,
    /// Whether a new client ACKs its full state.
    pub acks: bool,
    /// Whether every client is a delta stream.
    pub delta: bool,
    /// Whether the clients run in processes of their own.
    pub split: bool,
}

struct Figures {
    served: Option<Duration>,
    median_served: Duration,
    /// When the new clients were served, sorted (those served within the limit).
    times: Vec<Duration>,
    /// When each client that presented a version was served, sorted.
    resumed: Vec<Duration>,
    sheds: usize,
    before: Vec<Duration>,
    during: Vec<Duration>,
    /// Per update, its 99th percentile at the connected clients and whether it was
    /// published during the storm.
    by_update: Vec<(Duration, bool)>,
    rss_mib: u64,
    /// The load process's and the connected clients' process's, in a split run.
    load_rss_mib: Option<u64>,
    connected_rss_mib: Option<u64>,
}

/// The storm's server: ours, with storm protection or without, or a peer's.
#[derive(Clone, Copy)]
enum Contender {
    Ours(Option<Admission>),
    Peer(Peer),
}

/// The server while the storm runs: publishes the updates, tells its RSS.
#[derive(Clone)]
enum Running {
    Ours(Box<XdsServer>),
    Peer(Arc<PeerServer>),
}

impl Running {
    async fn start(contender: Contender) -> (Running, String) {
        match contender {
            Contender::Ours(admission) => {
                let mut builder = XdsServer::builder()
                    .max_streams(None)
                    .body_checks(BodyChecks::Off);
                if let Some(admission) = admission {
                    builder = builder.admission(admission);
                }
                let server = builder.build();
                server
                    .publish(DEFAULT_GROUP, (0..CLUSTERS).map(|i| set(i, 0)).collect())
                    .unwrap();
                let uri = support::serve_on_loopback(&server).await;
                (Running::Ours(Box::new(server)), uri)
            }
            Contender::Peer(peer) => {
                let server = tokio::task::spawn_blocking(move || PeerServer::start(peer))
                    .await
                    .unwrap();
                let uri = server.uri.clone();
                (Running::Peer(Arc::new(server)), uri)
            }
        }
    }

    /// Update `tick`: cluster 0 changes.
    fn publish(&self, tick: u64) {
        match self {
            Running::Ours(server) => {
                server.publish(DEFAULT_GROUP, vec![set(0, tick)]).unwrap();
            }
            Running::Peer(server) => server.publish(tick),
        }
    }

    fn rss_mib(&self) -> u64 {
        match self {
            Running::Ours(_) => rss_mib(),
            Running::Peer(server) => server.rss_mib(),
        }
    }

    fn shutdown(self) {
        match self {
            Running::Ours(server) => server.shutdown(),
            Running::Peer(server) => Arc::into_inner(server)
                .expect("no update is being published")
                .shutdown(),
        }
    }
}

async fn storm(load: &Load, contender: Contender) -> Figures {
    let (server, uri) = Running::start(contender).await;
    let updates = Arc::new(Updates::default());
    updates.published(monotonic_ns(), false);

    // The connected clients: ACK every response, note when each update arrived.
    let connected = Connected::start(&uri, load).await;
    let limit = Duration::from_secs(env("XDS_STORM_LIMIT_S", 300));
    connected.until_all_hold(0, limit).await;

    // Updates: eight before the storm; when every connected client holds them, the storm
    // begins and updates go on until every new client is served.
    let storm_on = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(tokio::sync::Notify::new());
    let resume = Arc::new(tokio::sync::Notify::new());
    let updater = {
        let (server, updates, storm_on, stop) = (
            server.clone(),
            updates.clone(),
            storm_on.clone(),
            stop.clone(),
        );
        let (pause, resume) = (pause.clone(), resume.clone());
        let every = load.update_every;
        tokio::spawn(async move {
            let mut tick = 0u64;
            let mut next = tokio::time::Instant::now();
            while !stop.load(Ordering::Acquire) {
                if tick == BEFORE {
                    pause.notify_one();
                    resume.notified().await;
                    next = tokio::time::Instant::now();
                }
                next += every;
                tokio::time::sleep_until(next).await;
                tick += 1;
                let storm = storm_on.load(Ordering::Acquire);
                updates.published(monotonic_ns(), storm);
                server.publish(tick);
            }
        })
    };
    pause.notified().await;
    connected.until_all_hold(BEFORE, limit).await;

    // The storm: every new client at once, each group of `per_connection` on a new
    // connection.
    storm_on.store(true, Ordering::Release);
    resume.notify_one();
    let start = Instant::now();
    let (served, sheds, load_rss) = if load.split {
        new_clients_in_a_child(&uri).await
    } else {
        let (served, sheds) = new_clients(&uri, load, start).await;
        (served, sheds, None)
    };
    // When the last new client was served (in a split run, not when the load process
    // had ended and reported).
    let all = (served.len() == load.clients)
        .then(|| served.iter().map(|(at, _)| *at).max().unwrap_or_default());
    let mut times: Vec<Duration> = served.iter().map(|(t, _)| *t).collect();
    let mut resumed: Vec<Duration> = served.iter().filter(|(_, r)| *r).map(|(t, _)| *t).collect();
    resumed.sort();
    stop.store(true, Ordering::Release);
    let _ = updater.await;
    // The last updates' latencies arrive.
    tokio::time::sleep(load.update_every * 2).await;
    let rss = server.rss_mib();
    times.sort();
    let (receipts, connected_rss) = connected.finish().await;
    let latencies = updates.latencies(&receipts);
    server.shutdown();
    Figures {
        served: all,
        median_served: quantile(&times, 0.5),
        times: times.clone(),
        resumed,
        sheds,
        before: latencies.before,
        during: latencies.during,
        by_update: latencies.by_update,
        rss_mib: rss,
        load_rss_mib: load_rss,
        connected_rss_mib: connected_rss,
    }
}

fn main() {
    let load = Load {
        clients: env("XDS_STORM_CLIENTS", 5_000) as usize,
        connected: env("XDS_STORM_CONNECTED", 1_000) as usize,
        per_connection: env("XDS_STORM_PER_CONNECTION", 100).max(1) as usize,
        update_every: Duration::from_millis(env("XDS_STORM_UPDATE_MS", 1_000).max(1)),
        hold: env("XDS_STORM_HOLD", 1) != 0,
        resuming: env("XDS_STORM_RESUMING", 0) as usize,
        acks: env("XDS_STORM_ACK", 0) != 0,
        delta: match std::env::var("XDS_STORM_VARIANT").as_deref() {
            Ok("delta") => true,
            Ok("sotw") | Err(_) => false,
            Ok(other) => panic!("XDS_STORM_VARIANT: unknown variant {other:?}"),
        },
        split: env("XDS_STORM_SPLIT", 1) != 0,
    };
    if let Ok(uri) = std::env::var(LOAD_URI) {
        let started = env(LOAD_STARTED, 0);
        return load_process(&load, &uri, started);
    }
    if let Ok(uri) = std::env::var(CONNECTED_URI) {
        return connected_process(&load, &uri);
    }
    let defaults = Admission::default();
    let mut admission = Admission::new(
        env("XDS_STORM_RATE", defaults.rate.into()) as u32,
        env("XDS_STORM_BURST", defaults.burst.into()) as u32,
    );
    admission.max_wait = Duration::from_millis(env(
        "XDS_STORM_MAX_WAIT_MS",
        defaults.max_wait.as_millis() as u64,
    ));
    let modes = std::env::var("XDS_STORM_MODES").unwrap_or_else(|_| "off,on".into());
    let connections =
        load.clients.div_ceil(load.per_connection) + load.connected.div_ceil(load.per_connection);
    println!(
        "storm: {} new {} clients ({} per connection) while {} are connected, {} clusters \
         (~{} KB full state), one update every {:?}; {} connections (2 fds each when the \
         clients share the server's process: check `ulimit -n`); new clients {} their stream once served; allocator {}; \
         clients in {}",
        load.clients,
        if load.delta { "delta" } else { "SotW" },
        load.per_connection,
        load.connected,
        CLUSTERS,
        CLUSTERS * 150 / 1000,
        load.update_every,
        connections,
        if load.hold { "hold" } else { "close" },
        allocator::name(),
        if load.split {
            format!(
                "processes of their own, the new and the connected (allocator {}; the new \
                 clients' nice {})",
                std::env::var(LOAD_ALLOCATOR).unwrap_or_else(|_| allocator::name().into()),
                env(LOAD_NICE, 0),
            )
        } else {
            "the server's process".into()
        },
    );
    for mode in modes.split(',') {
        let window = |size: u64| {
            let mut a = Admission::window(size as usize);
            a.max_wait = admission.max_wait;
            a
        };
        let contender = match mode.trim() {
            "off" => Contender::Ours(None),
            "on" => Contender::Ours(Some(admission)),
            "window" => Contender::Ours(Some(window(env("XDS_STORM_WINDOW", 64)))),
            "go" => Contender::Peer(Peer::GoControlPlane),
            "java" => Contender::Peer(Peer::JavaControlPlane),
            other => match other.strip_prefix("window:").and_then(|n| n.parse().ok()) {
                Some(size) => Contender::Ours(Some(window(size))),
                None => panic!("XDS_STORM_MODES: unknown mode {other:?}"),
            },
        };
        let runtime = processes::runtime();
        let f = runtime.block_on(storm(&load, contender));
        runtime.shutdown_timeout(Duration::from_secs(5));
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!(
            "protection {mode:<6} {}: every new client served in {}, median {}, {} sheds; \
             connected clients' update latency during the storm p50 {} p99 {} max {} ({} \
             samples), before it p50 {} p99 {} ({} samples); RSS {} MiB{}",
            match contender {
                Contender::Ours(Some(a)) if a.window > 0 => {
                    format!("(window {}, max wait {:?})", a.window, a.max_wait)
                }
                Contender::Ours(Some(a)) => format!(
                    "(rate {}/s, burst {}, max wait {:?})",
                    a.rate, a.burst, a.max_wait
                ),
                Contender::Ours(None) => String::new(),
                Contender::Peer(peer) => format!("({}, none)", peer.label()),
            },
            f.served.map_or_else(
                || "NOT within the limit".into(),
                |d| format!("{:.2} s", d.as_secs_f64())
            ),
            ms(f.median_served),
            f.sheds,
            ms(quantile(&f.during, 0.5)),
            ms(quantile(&f.during, 0.99)),
            ms(f.during.last().copied().unwrap_or_default()),
            f.during.len(),
            ms(quantile(&f.before, 0.5)),
            ms(quantile(&f.before, 0.99)),
            f.before.len(),
            f.rss_mib,
            match (f.load_rss_mib, f.connected_rss_mib) {
                (Some(load), Some(connected)) => format!(
                    " (load process {load} MiB, connected clients' process {connected} MiB)"
                ),
                _ => String::new(),
            },
        );
        println!(
            "  served {} of {}; by decile: {}",
            f.times.len(),
            load.clients,
            (1..=10)
                .map(|d| format!(
                    "{:.2}",
                    quantile(&f.times, f64::from(d) / 10.0).as_secs_f64()
                ))
                .collect::<Vec<_>>()
                .join(" "),
        );
        println!(
            "  connected clients' p99 by update, ms (* during the storm): {}",
            f.by_update
                .iter()
                .map(|(p99, storm)| format!(
                    "{:.0}{}",
                    p99.as_secs_f64() * 1e3,
                    if *storm { "*" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join(" "),
        );
        if load.resuming > 0 {
            println!(
                "  of which the {} presenting a version: all served in {} (median {}, {} served)",
                load.resuming,
                ms(f.resumed.last().copied().unwrap_or_default()),
                ms(quantile(&f.resumed, 0.5)),
                f.resumed.len(),
            );
        }
    }
}
