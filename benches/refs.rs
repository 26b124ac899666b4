//! References: the reader against a full prost decode of the same bodies (envoy-types'
//! generated Envoy messages), the dependency manager's cost of one route update that
//! switches 10 clusters, and the server's consistency check of a full publication, on a
//! 10k-cluster, 1k-route configuration. Every figure is a ratio against the prost decode
//! measured in the same run (criterion groups, plus interleaved medians printed at the end).

#[path = "../tests/envoy_bodies/mod.rs"]
mod envoy_bodies;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use envoy_bodies as envoy;
use prost::Message;
use std::hint::black_box;
use xds_sansio::client::deps::{DependencyManager, DepsConfig};
use xds_sansio::client::ClientEvent;
use xds_sansio::refs::references;
use xds_sansio::server::{ResourceEntry, ResourceStore, StoreOp};
use xds_sansio::text::SharedStr;
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET};
use xds_sansio::Instant;

const ROUTES: usize = 1_000;
const PER_ROUTE: usize = 10;

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:05}")
}

fn route_body(route: usize, first_cluster: usize) -> Bytes {
    let names: Vec<String> = (first_cluster..first_cluster + PER_ROUTE)
        .map(cluster_name)
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    envoy::route(&format!("route-{route:04}"), &refs, &[])
}

/// 1k listeners (gRPC's shape), each naming its route; 1k routes of 10 clusters each;
/// 10k EDS clusters (half with an upstream TLS secret naming one of 100 secrets); 10k
/// endpoint sets.
struct Config {
    secrets: Vec<(String, Bytes)>,
    listeners: Vec<(String, Bytes)>,
    routes: Vec<(String, Bytes)>,
    clusters: Vec<(String, Bytes)>,
    endpoints: Vec<(String, Bytes)>,
}

fn config() -> Config {
    let total = ROUTES * PER_ROUTE;
    Config {
        secrets: (0..100)
            .map(|i| {
                let name = format!("secret-{i}");
                let mut body = Vec::new();
                prost::encoding::string::encode(1, &name, &mut body);
                (name, Bytes::from(body))
            })
            .collect(),
        listeners: (0..ROUTES)
            .map(|i| {
                let name = format!("listener-{i:04}");
                let body = envoy::api_listener(&name, &format!("route-{i:04}"));
                (name, body)
            })
            .collect(),
        routes: (0..ROUTES)
            .map(|i| (format!("route-{i:04}"), route_body(i, i * PER_ROUTE)))
            .collect(),
        clusters: (0..total)
            .map(|i| {
                let name = cluster_name(i);
                let secret = (i % 2 == 0).then(|| format!("secret-{}", i % 100));
                let body = envoy::eds_cluster(&name, None, secret.as_deref());
                (name, body)
            })
            .collect(),
        endpoints: (0..total)
            .map(|i| (cluster_name(i), envoy::endpoints(&cluster_name(i), 2)))
            .collect(),
    }
}

fn upsert(type_url: &str, name: &str, body: &Bytes) -> ClientEvent {
    ClientEvent::Upserted {
        type_url: SharedStr::from(type_url),
        name: SharedStr::from(name),
        version: SharedStr::from("1"),
        body: body.clone(),
        aliases: Vec::new(),
    }
}

/// A manager holding the whole configuration, complete.
fn loaded_manager(config: &Config) -> DependencyManager {
    let mut deps = DependencyManager::new(DepsConfig::default());
    let now = Instant::ZERO;
    for (name, _) in &config.listeners {
        deps.watch_listener(now, name).unwrap();
    }
    for (type_url, set) in [
        (LISTENER.type_url, &config.listeners),
        (ROUTE.type_url, &config.routes),
        (CLUSTER.type_url, &config.clusters),
        (ENDPOINT.type_url, &config.endpoints),
        (SECRET.type_url, &config.secrets),
    ] {
        for (name, body) in set {
            deps.handle_event(now, &upsert(type_url, name, body));
        }
    }
    while deps.poll_command().is_some() {}
    assert!(deps.poll_snapshot().is_some(), "complete");
    while deps.poll_snapshot().is_some() {}
    deps
}

fn store_of(config: &Config) -> ResourceStore {
    let mut store = ResourceStore::new();
    let mut ops = Vec::new();
    for (type_url, set) in [
        (LISTENER.type_url, &config.listeners),
        (ROUTE.type_url, &config.routes),
        (CLUSTER.type_url, &config.clusters),
        (ENDPOINT.type_url, &config.endpoints),
        (SECRET.type_url, &config.secrets),
    ] {
        for (name, body) in set {
            ops.push(StoreOp::Set {
                type_url: type_url.into(),
                entry: ResourceEntry::new(name.clone(), body.clone()),
            });
        }
    }
    store.apply(ops).unwrap();
    store
}

/// The full decode of a listener, with the connection manager in its `Any` (where its
/// references are: the reader reads it too).
fn decode_listener(body: &Bytes) {
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
    let listener = envoy::Listener::decode(body.clone()).unwrap();
    let any = listener.api_listener.unwrap().api_listener.unwrap();
    black_box(HttpConnectionManager::decode(any.value.as_slice()).unwrap());
}

/// The full decode of a cluster, with the TLS context in its transport socket's `Any`.
fn decode_cluster(body: &Bytes) {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
    let cluster = envoy::Cluster::decode(body.clone()).unwrap();
    if let Some(ConfigType::TypedConfig(any)) = cluster
        .transport_socket
        .as_ref()
        .and_then(|t| t.config_type.as_ref())
    {
        black_box(UpstreamTlsContext::decode(any.value.as_slice()).unwrap());
    }
    black_box(cluster);
}

fn decode_route(body: &Bytes) {
    black_box(envoy::RouteConfiguration::decode(body.clone()).unwrap());
}

/// Full decode of every listener, route configuration and cluster (what the consistency
/// check reads), with envoy-types' messages and the `Any` configurations that hold names.
fn decode_publication(config: &Config) {
    for (_, body) in &config.listeners {
        decode_listener(body);
    }
    for (_, body) in &config.routes {
        decode_route(body);
    }
    for (_, body) in &config.clusters {
        decode_cluster(body);
    }
}

fn bench(cr: &mut Criterion) {
    let config = config();
    let route_a = route_body(0, 0);
    let route_b = route_body(0, ROUTES * PER_ROUTE); // ten clusters not held yet
    let cluster = config.clusters[0].1.clone();
    let listener = config.listeners[0].1.clone();

    let mut group = cr.benchmark_group("reader_vs_decode");
    group.bench_function("route_prost_decode", |b| b.iter(|| decode_route(&route_a)));
    group.bench_function("route_refs", |b| {
        b.iter(|| black_box(references(ROUTE.type_url, &route_a).unwrap()))
    });
    group.bench_function("cluster_prost_decode", |b| {
        b.iter(|| decode_cluster(&cluster))
    });
    group.bench_function("cluster_refs", |b| {
        b.iter(|| black_box(references(CLUSTER.type_url, &cluster).unwrap()))
    });
    group.bench_function("listener_prost_decode", |b| {
        b.iter(|| decode_listener(&listener))
    });
    group.bench_function("listener_refs", |b| {
        b.iter(|| black_box(references(LISTENER.type_url, &listener).unwrap()))
    });
    group.finish();

    let mut group = cr.benchmark_group("deps_route_switch");
    let mut deps = loaded_manager(&config);
    let (a, b) = (
        upsert(ROUTE.type_url, "route-0000", &route_a),
        upsert(ROUTE.type_url, "route-0000", &route_b),
    );
    let mut flip = false;
    group.bench_function("switch_10_clusters", |bch| {
        bch.iter(|| {
            flip = !flip;
            deps.handle_event(Instant::ZERO, if flip { &b } else { &a });
            while let Some(c) = deps.poll_command() {
                black_box(c);
            }
            while let Some(s) = deps.poll_snapshot() {
                black_box(s);
            }
        })
    });
    group.bench_function("route_prost_decode", |b| b.iter(|| decode_route(&route_b)));
    group.finish();

    let store = store_of(&config);
    let mut group = cr.benchmark_group("consistency_full_publication");
    group.sample_size(10);
    group.bench_function("check", |b| b.iter(|| black_box(store.consistency())));
    group.bench_function("prost_decode_all", |b| {
        b.iter(|| decode_publication(&config))
    });
    group.finish();

    interleaved(&config, &route_a, &route_b);
}

/// Medians of alternated runs, less sensitive to load changes between criterion groups.
fn interleaved(config: &Config, route_a: &Bytes, route_b: &Bytes) {
    use std::time::Instant as Clock;
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let time = |f: &mut dyn FnMut()| {
        let start = Clock::now();
        f();
        start.elapsed().as_secs_f64()
    };
    let mut deps = loaded_manager(config);
    let (a, b) = (
        upsert(ROUTE.type_url, "route-0000", route_a),
        upsert(ROUTE.type_url, "route-0000", route_b),
    );
    let (mut decode, mut switch) = (Vec::new(), Vec::new());
    for i in 0..2001 {
        decode.push(time(&mut || decode_route(route_b)));
        let event = if i % 2 == 0 { &b } else { &a };
        switch.push(time(&mut || {
            deps.handle_event(Instant::ZERO, event);
            while let Some(c) = deps.poll_command() {
                black_box(c);
            }
            while let Some(s) = deps.poll_snapshot() {
                black_box(s);
            }
        }));
    }
    let (d, s) = (median(decode), median(switch));
    println!(
        "interleaved route switch: prost decode {:.2} us, manager {:.2} us = {:.2}x decode",
        d * 1e6,
        s * 1e6,
        s / d
    );
    let store = store_of(config);
    let (mut decode, mut check) = (Vec::new(), Vec::new());
    for _ in 0..11 {
        decode.push(time(&mut || decode_publication(config)));
        check.push(time(&mut || {
            black_box(store.consistency());
        }));
    }
    let (d, c) = (median(decode), median(check));
    println!(
        "interleaved full publication ({} listeners, {} routes, {} clusters): prost decode {:.1} ms, consistency check {:.1} ms = {:.2}x decode",
        config.listeners.len(),
        config.routes.len(),
        config.clusters.len(),
        d * 1e3,
        c * 1e3,
        c / d
    );
    for (label, type_url, body) in [
        ("route", ROUTE.type_url, route_a.clone()),
        ("cluster", CLUSTER.type_url, config.clusters[0].1.clone()),
        ("listener", LISTENER.type_url, config.listeners[0].1.clone()),
    ] {
        let (mut decode, mut refs) = (Vec::new(), Vec::new());
        for _ in 0..2001 {
            decode.push(time(&mut || match label {
                "route" => decode_route(&body),
                "cluster" => decode_cluster(&body),
                _ => decode_listener(&body),
            }));
            refs.push(time(&mut || {
                black_box(references(type_url, &body).unwrap());
            }));
        }
        let (d, r) = (median(decode), median(refs));
        println!(
            "interleaved {label} ({} bytes): prost decode {:.2} us, references {:.2} us: reader is {:.1}x cheaper",
            body.len(),
            d * 1e6,
            r * 1e6,
            d / r
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
