//! Server: a wildcard CDS request to the wire bytes of a 10 000-cluster response, cold and
//! hot, in process, each server through its own cache API.

use crate::common::{cluster, interleave, report, timed, Contender, CDS, median_of};
use bytes::Bytes;
use prost::Message;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{EncodedBytes, ResourceStore, ServerConfig, ServerStream};
use xds_sansio::{Instant, Request, Transport, Variant};

pub const N: usize = 10_000;
const NODE: &str = "envoy-0";

/// The bodies every server serves, sorted (to compare outputs whatever their order).
fn bodies() -> Vec<Bytes> {
    (0..N)
        .map(|i| Bytes::from(cluster(i, 1).encode_to_vec()))
        .collect()
}

/// Checks that `wire` is a CDS response carrying exactly `bodies` (any order).
fn check(label: &str, wire: &[u8], bodies: &[Bytes]) {
    let resp = DiscoveryResponse::decode(wire).expect(label);
    let mut got: Vec<&[u8]> = resp.resources.iter().map(|a| &a.value[..]).collect();
    got.sort_unstable();
    let mut want: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
    want.sort_unstable();
    assert!(got == want, "{label}: not the same bodies");
    assert_eq!(resp.type_url, CDS, "{label}");
}

// ---- xds-sansio ----

fn our_store(bodies: &[Bytes]) -> ResourceStore {
    let mut store = ResourceStore::new();
    for (i, b) in bodies.iter().enumerate() {
        store
            .set(CDS, &format!("cluster-{i:05}"), b.clone())
            .unwrap();
    }
    store
}

fn our_request() -> Request {
    Request::Sotw(DiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            ..Node::default()
        }),
        type_url: CDS.into(),
        ..DiscoveryRequest::default()
    })
}

/// Request in, wire bytes out, on a new ADS stream.
/// The span of one request on a new stream; `contiguous`: it includes making the output one
/// buffer (`to_bytes`, a copy of a shared full state), what a codec that cannot take chunks
/// pays. The output is made contiguous untimed otherwise (for the check only).
fn our_span(store: &ResourceStore, contiguous: bool) -> (Duration, Bytes) {
    let mut stream = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    let request = our_request();
    let (d, out) = timed(|| {
        stream.handle_request(Instant::ZERO, request);
        let bytes = stream
            .poll_response_encoded(Instant::ZERO, store)
            .expect("a response")
            .bytes;
        if contiguous {
            EncodedBytes::from(bytes.to_bytes())
        } else {
            bytes
        }
    });
    drop(stream);
    (d, out.to_bytes())
}

/// [`our_span`] on a store loaded just before (untimed), the request the first it serves;
/// the output and the store are dropped after the span.
fn our_cold(bodies: &[Bytes], contiguous: bool) -> Duration {
    let store = our_store(bodies);
    let (d, out) = our_span(&store, contiguous);
    drop(out);
    drop(store);
    d
}

// ---- rust-control-plane 0.1.2 ----

mod rcp {
    use super::*;
    use data_plane_api::envoy::config::cluster::v3::Cluster as RcpCluster;
    use data_plane_api::envoy::config::core::v3::Node as RcpNode;
    use data_plane_api::envoy::service::discovery::v3::DiscoveryRequest as RcpRequest;
    use prost011::Message as _;
    use rust_control_plane::cache::Cache;
    use rust_control_plane::snapshot::{Resource, Resources, Snapshot};

    pub fn typed(bodies: &[Bytes]) -> Vec<RcpCluster> {
        bodies
            .iter()
            .map(|b| RcpCluster::decode(&b[..]).unwrap())
            .collect()
    }

    pub fn snapshot_of(clusters: Vec<RcpCluster>, version: &str) -> Snapshot {
        let mut items = Resources::new(version.into());
        for c in clusters {
            items.items.insert(c.name.clone(), Resource::Cluster(c));
        }
        let mut s = Snapshot::new();
        s.insert(CDS.into(), items);
        s
    }

    pub fn snapshot(bodies: &[Bytes], version: &str) -> Snapshot {
        snapshot_of(typed(bodies), version)
    }

    pub fn request(node: &str, version: &str) -> RcpRequest {
        RcpRequest {
            node: Some(RcpNode {
                id: node.into(),
                ..Default::default()
            }),
            type_url: CDS.into(),
            version_info: version.into(),
            ..Default::default()
        }
    }

    /// A non-ADS cache: with `ads = true`, rust-control-plane 0.1.2 never answers a wildcard
    /// request (its ADS consistency check holds every request that names no resource).
    pub async fn cache(snapshot: Snapshot) -> Cache {
        let cache = Cache::new(false);
        cache.set_snapshot(NODE, snapshot).await;
        cache
    }

    /// `create_watch` (it answers at once on the channel), receive, encode.
    pub async fn span(cache: &Cache) -> (Duration, Vec<u8>) {
        let req = request(NODE, "");
        let known = HashMap::new();
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let start = std::time::Instant::now();
        let watch = cache.create_watch(&req, tx, &known).await;
        let (_, resp) = rx.recv().await.expect("a response");
        let bytes = resp.encode_to_vec();
        let d = start.elapsed();
        assert!(watch.is_none());
        drop(resp);
        (d, bytes)
    }
}

// ---- xds-server 0.1.0 (xds-cache, xds-core) ----

pub mod xs {
    use super::*;
    use xds_cache::{Cache, ShardedCache, Snapshot};
    use xds_core::{BoxResource, NodeHash, TypeUrl};

    /// A typed Cluster as an xds-server application stores it.
    #[derive(Debug)]
    pub struct Typed(pub envoy_types::pb::envoy::config::cluster::v3::Cluster);

    impl xds_core::Resource for Typed {
        fn type_url(&self) -> &str {
            CDS
        }
        fn name(&self) -> &str {
            &self.0.name
        }
        fn encode(&self) -> Result<prost_types013::Any, Box<dyn std::error::Error + Send + Sync>> {
            Ok(prost_types013::Any {
                type_url: CDS.into(),
                value: self.0.encode_to_vec(),
            })
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    /// A pre-encoded body (xds-core's own `AnyResource` is not exported).
    #[derive(Debug)]
    pub struct Raw {
        pub name: String,
        pub any: prost_types013::Any,
    }

    impl xds_core::Resource for Raw {
        fn type_url(&self) -> &str {
            CDS
        }
        fn name(&self) -> &str {
            &self.name
        }
        fn encode(&self) -> Result<prost_types013::Any, Box<dyn std::error::Error + Send + Sync>> {
            Ok(self.any.clone())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    pub type EnvoyCluster = envoy_types::pb::envoy::config::cluster::v3::Cluster;

    pub fn typed(bodies: &[Bytes]) -> Vec<EnvoyCluster> {
        bodies
            .iter()
            .map(|b| EnvoyCluster::decode(&b[..]).unwrap())
            .collect()
    }

    /// The cache loaded with owned typed clusters (the timed load of "load + request").
    pub fn cache_of(clusters: Vec<EnvoyCluster>) -> ShardedCache {
        let resources = clusters
            .into_iter()
            .map(|c| Arc::new(Typed(c)) as BoxResource);
        let snapshot = Snapshot::builder()
            .version("v1")
            .resources(TypeUrl::new(CDS), resources)
            .build();
        let cache = ShardedCache::new();
        cache.set_snapshot(NodeHash::from_id(NODE), snapshot);
        cache
    }

    pub fn cache(bodies: &[Bytes], typed: bool) -> ShardedCache {
        let resources: Vec<BoxResource> = bodies
            .iter()
            .map(|b| {
                let c =
                    envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(&b[..]).unwrap();
                if typed {
                    Arc::new(Typed(c)) as BoxResource
                } else {
                    Arc::new(Raw {
                        name: c.name,
                        any: prost_types013::Any {
                            type_url: CDS.into(),
                            value: b.to_vec(),
                        },
                    }) as BoxResource
                }
            })
            .collect();
        let snapshot = Snapshot::builder()
            .version("v1")
            .resources(TypeUrl::new(CDS), resources)
            .build();
        let cache = ShardedCache::new();
        cache.set_snapshot(NodeHash::from_id(NODE), snapshot);
        cache
    }

    /// What xds-server's (unexported) `SotwHandler::process_request` and its exported
    /// `streaming::convert_sotw_response` do for a wildcard request, through the exported
    /// cache API, then the encode tonic would do.
    pub fn span(cache: &ShardedCache) -> (Duration, Vec<u8>) {
        use prost013::Message as _;
        use xds_server::streaming::DiscoveryResponse as XsResponse;
        timed(|| {
            let snapshot = cache
                .get_snapshot(NodeHash::from_id(NODE))
                .expect("snapshot");
            let resources = snapshot
                .get_resources(TypeUrl::new(CDS))
                .expect("resources");
            let version = resources.version().to_string();
            let list = resources.to_vec();
            let nonce = xds_server::utils::generate_nonce(xds_server::utils::NoncePrefix::SotW);
            let resources = list
                .iter()
                .map(|r| {
                    r.encode().map(|e| xds_types::google::protobuf::Any {
                        type_url: e.type_url.clone(),
                        value: e.value.clone(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .expect("encode");
            XsResponse {
                version_info: version,
                resources,
                type_url: CDS.into(),
                nonce,
                canary: false,
                control_plane: None,
                resource_errors: vec![],
            }
            .encode_to_vec()
        })
    }
}

pub fn run(iterations: usize, rt: &tokio::runtime::Runtime) {
    let bodies = bodies();
    // Cold: a store / cache loaded (untimed) for each request, the request the first it
    // serves. Hot: one store / cache, already used for earlier requests.
    let hot_store = our_store(&bodies);
    let rcp_snapshot = rcp::snapshot(&bodies, "v1");
    let hot_rcp = rt.block_on(rcp::cache(rcp_snapshot.clone()));
    let hot_xs_typed = xs::cache(&bodies, true);
    let hot_xs_raw = xs::cache(&bodies, false);

    // The same bodies out of every contender.
    check("xds-sansio", &our_span(&hot_store, false).1, &bodies);
    check(
        "rust-control-plane",
        &rt.block_on(rcp::span(&hot_rcp)).1,
        &bodies,
    );
    check("xds-server typed", &xs::span(&hot_xs_typed).1, &bodies);
    check("xds-server raw", &xs::span(&hot_xs_raw).1, &bodies);

    let rcp_typed = rcp::typed(&bodies);
    let xs_typed = xs::typed(&bodies);
    let names: Vec<String> = (0..N).map(|i| format!("cluster-{i:05}")).collect();
    let mut contenders: Vec<Contender<'_>> = vec![
        (
            "xds-sansio, load + request",
            Box::new(|| {
                // Owned bodies handed in, as the peers are handed owned typed clusters.
                let input = bodies.clone();
                let (d, (store, out)) = timed(|| {
                    let mut store = ResourceStore::new();
                    for (name, b) in names.iter().zip(input) {
                        store.set(CDS, name, b).unwrap();
                    }
                    let mut stream =
                        ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
                    stream.handle_request(Instant::ZERO, our_request());
                    let out = stream
                        .poll_response_encoded(Instant::ZERO, &store)
                        .expect("a response")
                        .bytes;
                    (store, out)
                });
                drop((store, out));
                d
            }),
        ),
        (
            "rust-control-plane 0.1.2, load + request",
            Box::new(|| {
                let input = rcp_typed.clone();
                let (d, cache) = rt.block_on(async {
                    let start = std::time::Instant::now();
                    let cache = rcp::cache(rcp::snapshot_of(input, "v1")).await;
                    let (_, out) = rcp::span(&cache).await;
                    let d = start.elapsed();
                    drop(out);
                    (d, cache)
                });
                drop(cache);
                d
            }),
        ),
        (
            "xds-server 0.1.0, typed Cluster resources, load + request",
            Box::new(|| {
                let input = xs_typed.clone();
                let (d, cache) = timed(|| {
                    let cache = xs::cache_of(input);
                    drop(xs::span(&cache).1);
                    cache
                });
                drop(cache);
                d
            }),
        ),
        ("xds-sansio, cold", Box::new(|| our_cold(&bodies, false))),
        (
            "xds-sansio, cold, made contiguous",
            Box::new(|| our_cold(&bodies, true)),
        ),
        ("xds-sansio, hot", Box::new(|| our_span(&hot_store, false).0)),
        (
            "xds-sansio, hot, made contiguous",
            Box::new(|| our_span(&hot_store, true).0),
        ),
        (
            "rust-control-plane 0.1.2, cold",
            Box::new(|| {
                let cache = rt.block_on(rcp::cache(rcp_snapshot.clone()));
                let d = rt.block_on(rcp::span(&cache)).0;
                drop(cache);
                d
            }),
        ),
        (
            "rust-control-plane 0.1.2, hot",
            Box::new(|| rt.block_on(rcp::span(&hot_rcp)).0),
        ),
        (
            "xds-server 0.1.0, typed Cluster resources, cold",
            Box::new(|| {
                let cache = xs::cache(&bodies, true);
                let d = xs::span(&cache).0;
                drop(cache);
                d
            }),
        ),
        (
            "xds-server 0.1.0, typed Cluster resources, hot",
            Box::new(|| xs::span(&hot_xs_typed).0),
        ),
        (
            "xds-server 0.1.0, pre-encoded Any resources, cold",
            Box::new(|| {
                let cache = xs::cache(&bodies, false);
                let d = xs::span(&cache).0;
                drop(cache);
                d
            }),
        ),
        (
            "xds-server 0.1.0, pre-encoded Any resources, hot",
            Box::new(|| xs::span(&hot_xs_raw).0),
        ),
    ];
    let results = interleave(iterations, &mut contenders);
    report(
        "server: wildcard CDS request to the wire bytes of 10 000 clusters (medians, interleaved)",
        &results,
        "xds-sansio, cold",
    );
    let get = |label: &str| median_of(&results, label);
    println!(
        "goal >= 10x faster than rust-control-plane cold: {:.2}x (hot: {:.2}x; load + request: {:.2}x)",
        get("rust-control-plane 0.1.2, cold") / get("xds-sansio, cold"),
        get("rust-control-plane 0.1.2, hot") / get("xds-sansio, hot"),
        get("rust-control-plane 0.1.2, load + request") / get("xds-sansio, load + request"),
    );
}
