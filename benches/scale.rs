//! Scale of one server process (issue 19, section 3): a store of a million resources,
//! many concurrent streams, each wildcard CDS plus 100 named EDS, through one `StreamSet`.
//! Reports the memory held (counting allocator) and the time of: a reconnect storm (every
//! stream asks and is answered), one cluster changed (every stream gets the new CDS state),
//! one endpoint changed (only its subscribers), and a full replacement of CDS. Responses are
//! encoded and dropped at once, as a transport would write them. Last, a storm of as many
//! streams asking wildcard CDS only (the figure the issue sets a goal for).
//!
//! `cargo bench --bench scale` runs the full size: 10 000 clusters + 990 000 endpoints,
//! 100 000 SotW streams and `XDS_SCALE_DELTA` (default 2 000) delta streams. Smaller:
//! `XDS_SCALE_STREAMS=10000 XDS_SCALE_ENDPOINTS=90000 cargo bench --bench scale`.

use std::hint::black_box;
use std::time::Instant as Clock;

use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{
    ResourceEntry, ResourceStore, ServerConfig, StoreOp, StreamId, StreamSet,
};
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Instant, Request, Transport, Variant};

mod support;

use support::{body_filled, live};

#[global_allocator]
static ALLOCATOR: support::Counting = support::Counting;

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

fn env(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cluster(i: usize) -> String {
    format!("cluster-{i:06}")
}

fn endpoint(i: usize) -> String {
    format!("endpoints-{i:07}")
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

struct Scale {
    clusters: usize,
    endpoints: usize,
    sotw: usize,
    delta: usize,
}

/// Every stream asks (wildcard CDS, then 100 named EDS); drains every response. Returns the
/// bytes answered.
fn storm(
    set: &mut StreamSet,
    store: &ResourceStore,
    ids: &[(StreamId, Variant)],
    s: &Scale,
) -> usize {
    let node = Node {
        id: "envoy".into(),
        ..Node::default()
    };
    for (k, &(id, variant)) in ids.iter().enumerate() {
        let eds: Vec<String> = (0..100)
            .map(|j| endpoint((k * 100 + j) % s.endpoints))
            .collect();
        let requests = match variant {
            Variant::Sotw => vec![
                Request::Sotw(DiscoveryRequest {
                    node: Some(node.clone()),
                    type_url: CDS.into(),
                    ..DiscoveryRequest::default()
                }),
                Request::Sotw(DiscoveryRequest {
                    type_url: EDS.into(),
                    resource_names: eds,
                    ..DiscoveryRequest::default()
                }),
            ],
            Variant::Delta => vec![
                Request::Delta(DeltaDiscoveryRequest {
                    node: Some(node.clone()),
                    type_url: CDS.into(),
                    resource_names_subscribe: vec!["*".into()],
                    ..DeltaDiscoveryRequest::default()
                }),
                Request::Delta(DeltaDiscoveryRequest {
                    type_url: EDS.into(),
                    resource_names_subscribe: eds,
                    ..DeltaDiscoveryRequest::default()
                }),
            ],
        };
        for request in requests {
            set.handle_request(id, Instant::ZERO, request)
                .unwrap_or_default();
        }
    }
    drain(set, store)
}

/// Answers every ready stream until none is; the bytes written. The time spent answering
/// SotW and delta streams is added to `split` (sync included in neither).
fn drain_split(
    set: &mut StreamSet,
    store: &ResourceStore,
    is_delta: &dyn Fn(StreamId) -> bool,
    split: &mut [f64; 2],
) -> usize {
    set.sync(store);
    let mut bytes = 0;
    while let Some(id) = set.poll_ready() {
        let start = Clock::now();
        while let Some(response) = set.poll_response_encoded(id, Instant::ZERO, store) {
            bytes += response.bytes.len();
            black_box(response);
        }
        while set.poll_event(id).is_some() {}
        split[usize::from(is_delta(id))] += start.elapsed().as_secs_f64();
    }
    bytes
}

/// [`drain_split`] without the split.
fn drain(set: &mut StreamSet, store: &ResourceStore) -> usize {
    drain_split(set, store, &|_| false, &mut [0.0; 2])
}

/// Wildcard CDS only (the reconnect storm of the performance issue's goal): a new set of
/// `streams` SotW streams asks and is answered; the time and the memory per stream held.
fn cds_only_storm(store: &ResourceStore, streams: usize) {
    let mut set = StreamSet::new();
    let node = Node {
        id: "envoy".into(),
        ..Node::default()
    };
    let before = live();
    let bytes = timed(
        &format!("reconnect storm, {streams} SotW streams asking wildcard CDS only"),
        || {
            for _ in 0..streams {
                let id = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
                let request = Request::Sotw(DiscoveryRequest {
                    node: Some(node.clone()),
                    type_url: CDS.into(),
                    ..DiscoveryRequest::default()
                });
                set.handle_request(id, Instant::ZERO, request)
                    .unwrap_or_default();
            }
            drain(&mut set, store)
        },
    );
    println!(
        "  answered {:.0} MiB; held by the streams {:.0} B per stream",
        mib(bytes as isize),
        (live() - before) as f64 / streams.max(1) as f64
    );
    black_box(set);
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (before, start) = (live(), Clock::now());
    let out = f();
    println!(
        "{what}: {:.2} s, heap {:+.1} MiB",
        start.elapsed().as_secs_f64(),
        mib(live() - before)
    );
    out
}

fn main() {
    let s = Scale {
        clusters: env("XDS_SCALE_CLUSTERS", 10_000),
        endpoints: env("XDS_SCALE_ENDPOINTS", 990_000),
        sotw: env("XDS_SCALE_STREAMS", 100_000),
        delta: env("XDS_SCALE_DELTA", 2_000),
    };
    println!(
        "store: {} clusters (200 B) + {} endpoint sets (64 B); {} SotW + {} delta streams, each wildcard CDS + 100 named EDS",
        s.clusters, s.endpoints, s.sotw, s.delta
    );
    let store_before = live();
    let mut store = timed("publish the store", || {
        let mut store = ResourceStore::new();
        for i in 0..s.clusters {
            let name = cluster(i);
            store
                .set(CDS, &name, body_filled(&name, 200, 1))
                .unwrap_or_default();
        }
        for i in 0..s.endpoints {
            let name = endpoint(i);
            store
                .set(EDS, &name, body_filled(&name, 64, 1))
                .unwrap_or_default();
        }
        store
    });
    let store_bytes = live() - store_before;
    let mut set = StreamSet::new();
    let ids: Vec<(StreamId, Variant)> = (0..s.sotw)
        .map(|_| Variant::Sotw)
        .chain((0..s.delta).map(|_| Variant::Delta))
        .map(|v| (set.insert(ServerConfig::new(v, Transport::Aggregated)), v))
        .collect();
    let (sotw_ids, delta_ids) = ids.split_at(s.sotw);
    let before = live();
    let bytes = timed(&format!("reconnect storm, {} SotW streams", s.sotw), || {
        storm(&mut set, &store, sotw_ids, &s)
    });
    let sotw_held = live() - before;
    println!(
        "  answered {:.0} MiB; held by the SotW streams {:.0} B per stream",
        mib(bytes as isize),
        sotw_held as f64 / s.sotw.max(1) as f64
    );
    let before = live();
    let bytes = timed(
        &format!("reconnect storm, {} delta streams", s.delta),
        || storm(&mut set, &store, delta_ids, &s),
    );
    let delta_held = live() - before;
    let per_delta = delta_held as f64 / s.delta.max(1) as f64;
    println!(
        "  answered {:.0} MiB; held by the delta streams {:.0} B per stream ({:.0} B per resource tracked); 100 000 such streams would hold {:.1} GiB",
        mib(bytes as isize),
        per_delta,
        per_delta / (s.clusters + 100) as f64,
        per_delta * 100_000.0 / (1024.0 * 1024.0 * 1024.0)
    );
    println!(
        "held in all: store {:.0} MiB, streams {:.0} MiB, process heap {:.2} GiB",
        mib(store_bytes),
        mib(sotw_held + delta_held),
        live() as f64 / (1024.0 * 1024.0 * 1024.0)
    );

    // One cluster changes: every stream is a wildcard CDS subscriber.
    let name = cluster(0);
    store
        .set(CDS, &name, body_filled(&name, 200, 2))
        .unwrap_or_default();
    let bytes = timed("one cluster changed, to every stream", || {
        drain(&mut set, &store)
    });
    // In KiB: with delta streams only, one cluster to each is well under a MiB (it read
    // "0 MiB" in MiB, which looked like nothing was sent).
    println!("  answered {:.1} KiB", bytes as f64 / 1024.0);
    // One endpoint set changes: only its subscribers (about streams x 100 / endpoints).
    let name = endpoint(0);
    store
        .set(EDS, &name, body_filled(&name, 64, 2))
        .unwrap_or_default();
    let bytes = timed("one endpoint set changed, to its subscribers", || {
        drain(&mut set, &store)
    });
    println!("  answered {:.1} KiB", bytes as f64 / 1024.0);
    // Every cluster replaced at once (one revision).
    timed(
        "full replacement of CDS in the store (one revision)",
        || {
            let ops = (0..s.clusters)
                .map(|i| {
                    let name = cluster(i);
                    let body = body_filled(&name, 200, 3);
                    StoreOp::Set {
                        type_url: CDS.into(),
                        entry: ResourceEntry::new(name, body),
                    }
                })
                .collect();
            store.apply(ops).unwrap_or_default();
        },
    );
    let delta_ids: std::collections::HashSet<StreamId> =
        delta_ids.iter().map(|&(id, _)| id).collect();
    let mut split = [0.0; 2];
    let bytes = timed("full replacement of CDS, to every stream", || {
        drain_split(&mut set, &store, &|id| delta_ids.contains(&id), &mut split)
    });
    println!(
        "  answered {:.0} MiB; answering the SotW streams {:.2} s, the delta streams {:.2} s",
        mib(bytes as isize),
        split[0],
        split[1]
    );
    drop(set);
    cds_only_storm(&store, s.sotw);
    black_box(store);
}
