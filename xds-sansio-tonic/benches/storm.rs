//! A connection storm against one server process, with storm protection off and on in the
//! same run (issue 28): 1 000 clusters of ~150 B (a ~150 KB full CDS state), 1 000
//! clients connected and ACKing every update, then N new clients open their streams at
//! once. Figures: the time until every new client holds the full state, and the latency
//! of the updates published during the storm to the connected clients (publish to
//! receipt, p50 / p99 / max), beside the same latency before the storm (eight updates,
//! all delivered before the storm begins).
//!
//! One process by default: the server and every client share the runtime and the
//! machine's cores (the clients' decoding competes with the server, as it would on one
//! host). With `XDS_STORM_SPLIT=1` the new clients run in a second process (this bench
//! started again as the load, reporting each client's serving time on `CLOCK_MONOTONIC`):
//! they still share the two cores, but no longer the server's allocator, heap or runtime;
//! the connected clients stay with the server, whose clock times their updates. Clients are
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
//! send buffers, client and server in one process).
//!
//! `cargo bench -p xds-sansio-tonic --bench storm`; environment: `XDS_STORM_ALLOCATOR`
//! (`system`; `mimalloc`: the whole process allocates with mimalloc; a split run's load
//! process inherits it unless `XDS_STORM_LOAD_ALLOCATOR` names another),
//! `XDS_STORM_SPLIT` (0), `XDS_STORM_CLIENTS`
//! (5 000), `XDS_STORM_CONNECTED` (1 000), `XDS_STORM_UPDATE_MS` (1 000: one update every
//! so often), `XDS_STORM_PER_CONNECTION` (100), `XDS_STORM_RATE` / `XDS_STORM_BURST` /
//! `XDS_STORM_MAX_WAIT_MS` (protection's settings, default `Admission::default()`),
//! `XDS_STORM_MODES` (`off,on`; `window` is protection with a window of
//! `XDS_STORM_WINDOW` (64) warming streams instead of a rate, `window:N` one of N),
//! `XDS_STORM_VARIANT` (`sotw`; `delta`: every client, connected or new, is a delta ADS
//! stream subscribing to the wildcard of CDS, so an update sends the connected clients the
//! one cluster that changed instead of the whole state; a resuming client presents a stale
//! version of one cluster).
//! Figures: `benches/README.md`, "Storm".

#[path = "../tests/support/loopback.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest, DiscoveryResponse};
use xds_sansio::server::{BodyChecks, ResourceEntry, StoreOp};
use xds_sansio::types::CLUSTER;
use xds_sansio::{Request, Response};
use xds_sansio_tonic::call::{connect, ConnectOptions, Inbound};
use xds_sansio_tonic::client::ManagementServer;
use xds_sansio_tonic::server::Admission;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

/// The process's allocator, glibc's (`system`, the default) or mimalloc
/// (`XDS_STORM_ALLOCATOR=mimalloc`): chosen at the first allocation, so one allocator
/// serves every block the process allocates.
#[global_allocator]
static ALLOCATOR: allocator::Chosen = allocator::Chosen;

const CDS: &str = CLUSTER.type_url;
const CLUSTERS: usize = 1_000;
/// The cluster whose body carries the update's number.
const TICKER: &str = "cluster-0000";
/// Updates published before the storm.
const BEFORE: u64 = 8;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A Cluster-shaped body of 150 bytes: the name in field 1, opaque content after it that
/// starts with the update's number.
fn body(i: usize, tick: u64) -> Bytes {
    let name = format!("cluster-{i:04}");
    let mut filler = format!("t{tick:08}-");
    // Field 2's length takes two bytes (a varint over 127).
    filler.push_str(&"x".repeat(150 - 5 - name.len() - filler.len()));
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    let len = filler.len();
    out.extend_from_slice(&[0x12, (len & 0x7f) as u8 | 0x80, (len >> 7) as u8]);
    out.extend_from_slice(filler.as_bytes());
    Bytes::from(out)
}

fn set(i: usize, tick: u64) -> StoreOp {
    StoreOp::Set {
        type_url: CDS.into(),
        entry: ResourceEntry::new(format!("cluster-{i:04}"), body(i, tick)),
    }
}

/// The update number a response carries (the ticker's body), if it carries the ticker.
fn tick_of(response: &Response) -> Option<u64> {
    let body = |value: &Bytes| value.get(2..2 + TICKER.len()) == Some(TICKER.as_bytes());
    let ticker = match response {
        Response::Sotw(r) => r.resources.iter().map(|any| &any.value).find(|v| body(v)),
        Response::Delta(r) => r
            .resources
            .iter()
            .filter_map(|resource| resource.resource.as_ref())
            .map(|any| &any.value)
            .find(|v| body(v)),
    }?;
    let content = ticker.get(5 + TICKER.len()..)?;
    std::str::from_utf8(content.get(1..9)?).ok()?.parse().ok()
}

/// Whether a response is the whole state (every cluster).
fn whole_state(response: &Response) -> bool {
    match response {
        Response::Sotw(r) => r.resources.len() == CLUSTERS,
        Response::Delta(r) => r.resources.len() == CLUSTERS,
    }
}

/// A raw ADS call asking wildcard CDS, SotW or delta, presenting `version` (none when
/// empty; delta presents it as the version of the ticker's cluster).
async fn open(
    channel: &Channel,
    version: &str,
    delta: bool,
) -> Result<(mpsc::UnboundedSender<Request>, Inbound), tonic::Status> {
    if !delta {
        return support::open_cds(channel, "storm", version).await;
    }
    let held: &[(&str, &str)] = if version.is_empty() {
        &[]
    } else {
        &[(TICKER, version)]
    };
    support::open_cds_delta(channel, "storm", held).await
}

fn ack(tx: &mpsc::UnboundedSender<Request>, response: &Response) {
    let request = match response {
        Response::Sotw(r) => sotw_ack(r),
        Response::Delta(r) => Request::Delta(DeltaDiscoveryRequest {
            type_url: CDS.into(),
            response_nonce: r.nonce.clone(),
            ..Default::default()
        }),
    };
    let _ = tx.send(request);
}

fn sotw_ack(response: &DiscoveryResponse) -> Request {
    Request::Sotw(DiscoveryRequest {
        type_url: CDS.into(),
        version_info: response.version_info.clone(),
        response_nonce: response.nonce.clone(),
        ..Default::default()
    })
}

/// When a shed client is told to come back (1 s without a hint).
fn retry_hint(status: &tonic::Status) -> Duration {
    status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis)
}

async fn channel(uri: &str) -> Channel {
    connect(
        &ManagementServer::insecure(uri.to_string()),
        &ConnectOptions::new(Duration::from_secs(60)),
    )
    .await
    .expect("connect")
}

/// When each update was published, and whether the storm was on.
#[derive(Default)]
struct Updates {
    published: Mutex<Vec<(Instant, bool)>>,
    /// Publish-to-receipt latencies at the connected clients: before the storm, during it.
    before: Mutex<Vec<Duration>>,
    during: Mutex<Vec<Duration>>,
    /// Per update, how many connected clients hold it.
    holders: Mutex<Vec<usize>>,
}

impl Updates {
    /// A connected client received the state of update `tick` at `now`, having held
    /// `held`: every update in between reached it now.
    fn received(&self, held: u64, tick: u64, now: Instant) {
        let published = self.published.lock().unwrap();
        let mut before = Vec::new();
        let mut during = Vec::new();
        for t in held + 1..=tick {
            if let Some((at, storm)) = published.get(t as usize) {
                let latency = now.saturating_duration_since(*at);
                if *storm {
                    during.push(latency)
                } else {
                    before.push(latency)
                }
            }
        }
        drop(published);
        let mut holders = self.holders.lock().unwrap();
        for t in held + 1..=tick {
            let t = t as usize;
            if holders.len() <= t {
                holders.resize(t + 1, 0);
            }
            holders[t] += 1;
        }
        drop(holders);
        self.before.lock().unwrap().extend(before);
        self.during.lock().unwrap().extend(during);
    }
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
    rss_mib: u64,
    /// The load process's, in a split run.
    load_rss_mib: Option<u64>,
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

struct Load {
    clients: usize,
    connected: usize,
    per_connection: usize,
    update_every: Duration,
    /// Whether a new client keeps its stream open once served.
    hold: bool,
    /// How many of the new clients present a (stale) version.
    resuming: usize,
    /// Whether a new client ACKs its full state.
    acks: bool,
    /// Whether every client is a delta stream.
    delta: bool,
    /// Whether the new clients run in a process of their own.
    split: bool,
}

async fn storm(load: &Load, admission: Option<Admission>) -> Figures {
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
    let updates = Arc::new(Updates::default());
    updates
        .published
        .lock()
        .unwrap()
        .push((Instant::now(), false));

    // The connected clients: ACK every response, note every update's latency.
    let ready = Arc::new(AtomicUsize::new(0));
    let mut channels = Vec::new();
    for _ in 0..load.connected.div_ceil(load.per_connection) {
        channels.push(channel(&uri).await);
    }
    for i in 0..load.connected {
        let channel = channels[i % channels.len()].clone();
        let (ready, updates) = (ready.clone(), updates.clone());
        let delta = load.delta;
        tokio::spawn(async move {
            // Protection may shed a connected client too while they all connect: it comes
            // back when told, as a storm client does.
            let (tx, mut inbound, first) = loop {
                let (tx, mut inbound) = open(&channel, "", delta)
                    .await
                    .expect("a connected client's call");
                match inbound.message().await {
                    Ok(Some(first)) => break (tx, inbound, first),
                    Ok(_) => panic!("a connected client's call ended"),
                    Err(status) => tokio::time::sleep(retry_hint(&status)).await,
                }
            };
            let mut held = None;
            let mut response = first;
            loop {
                let now = Instant::now();
                ack(&tx, &response);
                if let Some(tick) = tick_of(&response) {
                    match held {
                        None => {
                            ready.fetch_add(1, Ordering::AcqRel);
                        }
                        Some(held) => updates.received(held, tick, now),
                    }
                    held = Some(tick);
                }
                match inbound.message().await {
                    Ok(Some(next)) => response = next,
                    _ => break,
                }
            }
        });
    }
    while ready.load(Ordering::Acquire) < load.connected {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

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
                updates
                    .published
                    .lock()
                    .unwrap()
                    .push((Instant::now(), storm));
                server.publish(DEFAULT_GROUP, vec![set(0, tick)]).unwrap();
            }
        })
    };
    pause.notified().await;
    let settled = |updates: &Updates| {
        updates
            .holders
            .lock()
            .unwrap()
            .get(BEFORE as usize)
            .copied()
            == Some(load.connected)
    };
    while !settled(&updates) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

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
    let rss = rss_mib();
    times.sort();
    let mut before = updates.before.lock().unwrap().clone();
    let mut during = updates.during.lock().unwrap().clone();
    before.sort();
    during.sort();
    server.shutdown();
    Figures {
        served: all,
        median_served: quantile(&times, 0.5),
        times: times.clone(),
        resumed,
        sheds,
        before,
        during,
        rss_mib: rss,
        load_rss_mib: load_rss,
    }
}

/// Opens every new client's stream at once, each group of `per_connection` on a new
/// connection, and waits until each holds the full state or the limit passes: when each
/// was served (from `start`) and whether it presented a version, and how many times a
/// client was shed.
async fn new_clients(uri: &str, load: &Load, start: Instant) -> (Vec<(Duration, bool)>, usize) {
    // When each new client was served, and whether it presented a version.
    let served: Arc<Mutex<Vec<(Duration, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    let sheds = Arc::new(AtomicUsize::new(0));
    for first in (0..load.clients).step_by(load.per_connection) {
        let count = load.per_connection.min(load.clients - first);
        let (uri, served, sheds) = (uri.to_owned(), served.clone(), sheds.clone());
        let (hold, resuming, acks, delta) = (load.hold, load.resuming, load.acks, load.delta);
        tokio::spawn(async move {
            let channel = channel(&uri).await;
            for k in 0..count {
                let (channel, served, sheds) = (channel.clone(), served.clone(), sheds.clone());
                // A stale version: the client resumes, yet is owed the whole state.
                let version = if first + k < resuming {
                    "an-older-version"
                } else {
                    ""
                };
                tokio::spawn(async move {
                    loop {
                        let pause = match open(&channel, version, delta).await {
                            Ok((tx, mut inbound)) => match inbound.message().await {
                                Ok(Some(r)) if whole_state(&r) => {
                                    let resumed = !version.is_empty();
                                    served.lock().unwrap().push((start.elapsed(), resumed));
                                    if acks {
                                        ack(&tx, &r);
                                    }
                                    if hold {
                                        // Hold the stream open, without another ACK,
                                        // reading what comes (unread responses would
                                        // fill the connection's HTTP/2 window and stall
                                        // the other streams on it).
                                        let _tx = tx;
                                        while let Ok(Some(_)) = inbound.message().await {}
                                        std::future::pending::<()>().await;
                                    }
                                    return;
                                }
                                Ok(_) => Duration::from_secs(1),
                                Err(status) => {
                                    sheds.fetch_add(1, Ordering::AcqRel);
                                    retry_hint(&status)
                                }
                            },
                            Err(_) => Duration::from_secs(1),
                        };
                        tokio::time::sleep(pause).await;
                    }
                });
            }
        });
    }
    let limit = Duration::from_secs(env("XDS_STORM_LIMIT_S", 300));
    while served.lock().unwrap().len() < load.clients && start.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let served = served.lock().unwrap().clone();
    (served, sheds.load(Ordering::Acquire))
}

/// Runs the new clients in a child process of this bench (`XDS_STORM_SPLIT=1`), which
/// reports each client's serving time on `CLOCK_MONOTONIC` (shared by the two processes),
/// its sheds and its RSS; the storm's time starts before the child is spawned.
async fn new_clients_in_a_child(uri: &str) -> (Vec<(Duration, bool)>, usize, Option<u64>) {
    let started = monotonic_ns();
    let exe = std::env::current_exe().expect("the bench's own path");
    let uri = uri.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(exe);
        command
            .arg("--bench")
            .env(LOAD_URI, uri)
            .env(LOAD_STARTED, started.to_string())
            .stderr(std::process::Stdio::inherit());
        if let Ok(allocator) = std::env::var(LOAD_ALLOCATOR) {
            command.env("XDS_STORM_ALLOCATOR", allocator);
        }
        command.output().expect("the load process")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "the load process: {}",
        output.status
    );
    let (mut served, mut sheds, mut rss) = (Vec::new(), 0, None);
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["served", at, resumed] => {
                served.push((Duration::from_nanos(at.parse().unwrap()), *resumed == "1"))
            }
            ["sheds", n] => sheds = n.parse().unwrap(),
            ["rss", mib] => rss = Some(mib.parse().unwrap()),
            _ => {}
        }
    }
    (served, sheds, rss)
}

/// The load process's side: the new clients against the server at `uri`, each client's
/// serving time counted from `started` (the parent's `CLOCK_MONOTONIC`), printed.
fn load_process(load: &Load, uri: &str, started: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let already = Duration::from_nanos(monotonic_ns().saturating_sub(started));
    let start = Instant::now() - already;
    let (served, sheds) = runtime.block_on(new_clients(uri, load, start));
    let mut out = String::new();
    for (at, resumed) in served {
        out.push_str(&format!("served {} {}\n", at.as_nanos(), u8::from(resumed)));
    }
    out.push_str(&format!("sheds {sheds}\nrss {}\n", rss_mib()));
    print!("{out}");
    std::io::Write::flush(&mut std::io::stdout()).expect("the report reaches the bench");
    // The clients' tasks hold their streams open: leave without waiting for them.
    std::process::exit(0);
}

/// The load process's allocator, when not the server's (`XDS_STORM_ALLOCATOR`'s values).
const LOAD_ALLOCATOR: &str = "XDS_STORM_LOAD_ALLOCATOR";
/// The variables that make this bench the load process of another.
const LOAD_URI: &str = "XDS_STORM_LOAD_URI";
const LOAD_STARTED: &str = "XDS_STORM_LOAD_STARTED_NS";

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `Instant` reads, comparable between the
/// two processes of a split run.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// A global allocator chosen by the environment. glibc's malloc, shared by the server and
/// tens of thousands of clients in one process, spends about half of a 50 000-client storm
/// searching its free lists, mostly for the clients' ~150 KB receive buffers (`benches/README.md`, run W13); in
/// a deployment the clients are other processes, so the bench can run on mimalloc to
/// measure the server without that.
mod allocator {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicU8, Ordering};

    /// Serves each call from the allocator the environment names.
    pub struct Chosen;

    const UNREAD: u8 = 0;
    const SYSTEM: u8 = 1;
    const MIMALLOC: u8 = 2;
    static CHOICE: AtomicU8 = AtomicU8::new(UNREAD);

    /// The choice, read once. `getenv` does not allocate, so it can be asked from inside
    /// the allocator before anything was allocated; threads racing to read it read the
    /// same value.
    fn choice() -> u8 {
        match CHOICE.load(Ordering::Relaxed) {
            UNREAD => {
                // SAFETY: a NUL-terminated name; nothing in this process calls `setenv`,
                // so the environment does not change under the read.
                let value = unsafe { libc::getenv(c"XDS_STORM_ALLOCATOR".as_ptr()) };
                let chosen = if !value.is_null()
                    // SAFETY: getenv returns a NUL-terminated string or null.
                    && unsafe { std::ffi::CStr::from_ptr(value) } == c"mimalloc"
                {
                    MIMALLOC
                } else {
                    SYSTEM
                };
                CHOICE.store(chosen, Ordering::Relaxed);
                chosen
            }
            chosen => chosen,
        }
    }

    /// The allocator's name, for the report; an unknown value of the variable is refused
    /// here (the allocator itself must not panic).
    pub fn name() -> &'static str {
        match std::env::var("XDS_STORM_ALLOCATOR").as_deref() {
            Err(_) | Ok("system") | Ok("mimalloc") => {}
            Ok(other) => panic!("XDS_STORM_ALLOCATOR: unknown allocator {other:?}"),
        }
        match choice() {
            MIMALLOC => "mimalloc",
            _ => "system (glibc)",
        }
    }

    // SAFETY: each call goes to one of two allocators, the same one for the process's
    // whole life, which upholds `GlobalAlloc`'s contract.
    unsafe impl GlobalAlloc for Chosen {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            match choice() {
                MIMALLOC => unsafe { mimalloc::MiMalloc.alloc(layout) },
                _ => unsafe { System.alloc(layout) },
            }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            match choice() {
                MIMALLOC => unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) },
                _ => unsafe { System.dealloc(ptr, layout) },
            }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            match choice() {
                MIMALLOC => unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) },
                _ => unsafe { System.alloc_zeroed(layout) },
            }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            match choice() {
                MIMALLOC => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
                _ => unsafe { System.realloc(ptr, layout, new_size) },
            }
        }
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
        split: env("XDS_STORM_SPLIT", 0) != 0,
    };
    if let Ok(uri) = std::env::var(LOAD_URI) {
        let started = env(LOAD_STARTED, 0);
        return load_process(&load, &uri, started);
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
         (~{} KB full state), one update every {:?}; {} connections (2 fds each in one \
         process: check `ulimit -n`); new clients {} their stream once served; allocator {}; \
         new clients in {}",
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
                "a process of their own (allocator {})",
                std::env::var(LOAD_ALLOCATOR).unwrap_or_else(|_| allocator::name().into())
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
        let protection = match mode.trim() {
            "off" => None,
            "on" => Some(admission),
            "window" => Some(window(env("XDS_STORM_WINDOW", 64))),
            other => match other.strip_prefix("window:").and_then(|n| n.parse().ok()) {
                Some(size) => Some(window(size)),
                None => panic!("XDS_STORM_MODES: unknown mode {other:?}"),
            },
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let f = runtime.block_on(storm(&load, protection));
        runtime.shutdown_timeout(Duration::from_secs(5));
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!(
            "protection {mode:<6} {}: every new client served in {}, median {}, {} sheds; \
             connected clients' update latency during the storm p50 {} p99 {} max {} ({} \
             samples), before it p50 {} p99 {} ({} samples); RSS {} MiB{}",
            match protection {
                Some(a) if a.window > 0 => {
                    format!("(window {}, max wait {:?})", a.window, a.max_wait)
                }
                Some(a) => format!(
                    "(rate {}/s, burst {}, max wait {:?})",
                    a.rate, a.burst, a.max_wait
                ),
                None => String::new(),
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
            f.load_rss_mib
                .map_or_else(String::new, |mib| format!(" (load process {mib} MiB)")),
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
