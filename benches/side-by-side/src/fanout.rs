//! Fan-out: one changed cluster (of 100) to 1 000 wildcard CDS streams, to the wire bytes
//! of every stream's response. SotW: xds-sansio vs rust-control-plane; delta: xds-sansio
//! vs rime-xds. The ACKs that follow each round are fed untimed, to every contender.

use crate::common::{cluster_bytes, interleave, report, timed, Contender, CDS, median_of};
use bytes::Bytes;
use prost::Message;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, Resource,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::server::{ResourceStore, ServerConfig, StreamId, StreamSet};
use xds_sansio::{Instant, Request, Transport, Variant};

pub const STREAMS: usize = 1_000;
pub const CLUSTERS: usize = 100;
const NODE: &str = "envoy-fleet";

fn name(i: usize) -> String {
    format!("cluster-{i:05}")
}

/// The body of cluster 0 at round `k` (never the previous one).
fn changed(k: usize) -> Bytes {
    cluster_bytes(0, 2 + (k % 2) as u32)
}

// ---- xds-sansio ----

struct Ours {
    store: ResourceStore,
    set: StreamSet,
    variant: Variant,
    round: usize,
    acks: Vec<(StreamId, String, String)>,
}

impl Ours {
    fn new(variant: Variant) -> Ours {
        let mut store = ResourceStore::new();
        for i in 0..CLUSTERS {
            store.set(CDS, &name(i), cluster_bytes(i, 1)).unwrap();
        }
        let mut set = StreamSet::new();
        for s in 0..STREAMS {
            let id = set.insert(ServerConfig::new(variant, Transport::Aggregated));
            let node = Some(Node {
                id: format!("envoy-{s}"),
                ..Node::default()
            });
            let request = match variant {
                Variant::Sotw => Request::Sotw(DiscoveryRequest {
                    node,
                    type_url: CDS.into(),
                    ..DiscoveryRequest::default()
                }),
                Variant::Delta => Request::Delta(DeltaDiscoveryRequest {
                    node,
                    type_url: CDS.into(),
                    resource_names_subscribe: vec!["*".into()],
                    ..DeltaDiscoveryRequest::default()
                }),
            };
            set.handle_request(id, Instant::ZERO, request).unwrap();
        }
        let mut ours = Ours {
            store,
            set,
            variant,
            round: 0,
            acks: Vec::with_capacity(STREAMS),
        };
        let n = ours.drain();
        assert_eq!(n, STREAMS, "first responses");
        ours.ack();
        ours
    }

    /// Every ready stream's responses, encoded; (stream, nonce, version) kept for the ACK.
    fn drain(&mut self) -> usize {
        let mut sent = 0;
        while let Some(id) = self.set.poll_ready() {
            while let Some(r) = self
                .set
                .poll_response_encoded(id, Instant::ZERO, &self.store)
            {
                self.acks.push((id, r.nonce, r.version));
                black_box(&r.bytes);
                sent += 1;
            }
            while self.set.poll_event(id).is_some() {}
        }
        sent
    }

    fn ack(&mut self) {
        for (id, nonce, version) in self.acks.drain(..) {
            let request = match self.variant {
                Variant::Sotw => Request::Sotw(DiscoveryRequest {
                    type_url: CDS.into(),
                    version_info: version,
                    response_nonce: nonce,
                    ..DiscoveryRequest::default()
                }),
                Variant::Delta => Request::Delta(DeltaDiscoveryRequest {
                    type_url: CDS.into(),
                    response_nonce: nonce,
                    ..DeltaDiscoveryRequest::default()
                }),
            };
            self.set.handle_request(id, Instant::ZERO, request).unwrap();
            while self.set.poll_event(id).is_some() {}
        }
    }

    fn round(&mut self) -> Duration {
        self.round += 1;
        let body = changed(self.round);
        let (d, sent) = timed(|| {
            self.store.set(CDS, &name(0), body).unwrap();
            self.set.sync(&self.store);
            self.drain()
        });
        assert_eq!(sent, STREAMS);
        self.ack();
        d
    }
}

// ---- rust-control-plane 0.1.2 (SotW) ----

mod rcp {
    use super::*;
    use data_plane_api::envoy::config::cluster::v3::Cluster as RcpCluster;
    use data_plane_api::envoy::config::core::v3::Node as RcpNode;
    use data_plane_api::envoy::service::discovery::v3::{
        DiscoveryRequest as RcpRequest, DiscoveryResponse as RcpResponse,
    };
    use prost011::Message as _;
    use rust_control_plane::cache::Cache;
    use rust_control_plane::snapshot::{Resource as R, Resources, Snapshot};
    use tokio::sync::mpsc;

    type Rx = mpsc::Receiver<(RcpRequest, RcpResponse)>;

    pub struct Rcp {
        cache: Cache,
        base: HashMap<String, R>,
        version: String,
        round: usize,
        receivers: Vec<Rx>,
    }

    fn snapshot(items: HashMap<String, R>, version: &str) -> Snapshot {
        let mut clusters = Resources::new(version.into());
        clusters.items = items;
        let mut s = Snapshot::new();
        s.insert(CDS.into(), clusters);
        s
    }

    impl Rcp {
        /// 1 000 streams of one node (rust-control-plane keys snapshots and watches by node,
        /// so one `set_snapshot` reaches them all: its cheapest case), each with its watch
        /// set at the current version.
        pub async fn new() -> Rcp {
            let base: HashMap<String, R> = (0..CLUSTERS)
                .map(|i| {
                    let c = RcpCluster::decode(&cluster_bytes(i, 1)[..]).unwrap();
                    (c.name.clone(), R::Cluster(c))
                })
                .collect();
            let cache = Cache::new(false);
            cache.set_snapshot(NODE, snapshot(base.clone(), "v0")).await;
            let mut rcp = Rcp {
                cache,
                base,
                version: "v0".into(),
                round: 0,
                receivers: Vec::new(),
            };
            rcp.watch_all().await;
            rcp
        }

        /// Each stream's ACK of the current version: a watch (untimed).
        async fn watch_all(&mut self) {
            self.receivers.clear();
            let known = HashMap::new();
            for _ in 0..STREAMS {
                let (tx, rx) = mpsc::channel(1);
                let req = RcpRequest {
                    node: Some(RcpNode {
                        id: NODE.into(),
                        ..Default::default()
                    }),
                    type_url: CDS.into(),
                    version_info: self.version.clone(),
                    ..Default::default()
                };
                let w = self.cache.create_watch(&req, tx, &known).await;
                assert!(w.is_some(), "a watch");
                self.receivers.push(rx);
            }
        }

        /// The new snapshot is built untimed (the application's work); timed: set_snapshot
        /// (which answers every watch) and the encode of every response.
        pub async fn round(&mut self) -> Duration {
            self.round += 1;
            let version = format!("v{}", self.round);
            let mut items = self.base.clone();
            let c = RcpCluster::decode(&changed(self.round)[..]).unwrap();
            items.insert(c.name.clone(), R::Cluster(c));
            let snap = snapshot(items, &version);
            let start = std::time::Instant::now();
            self.cache.set_snapshot(NODE, snap).await;
            let mut sent = 0;
            for rx in &mut self.receivers {
                let (_, resp) = rx.try_recv().expect("a response");
                black_box(resp.encode_to_vec());
                sent += 1;
            }
            let d = start.elapsed();
            assert_eq!(sent, STREAMS);
            self.version = version;
            self.watch_all().await;
            d
        }
    }
}

// ---- rime-xds 0.1.0 (delta) ----

struct Rime {
    plane: rime_xds::Plane,
    subs: Vec<rime_xds::Subscriber>,
    round: usize,
    acks: Vec<(usize, String, u64)>,
}

impl Rime {
    fn new() -> Rime {
        let (mut plane, rx) = rime_xds::Plane::new();
        for i in 0..CLUSTERS {
            plane.apply(&name(i), cluster_bytes(i, 1));
        }
        let server = rime_xds::Server::new(plane.snapshot());
        let subs = (0..STREAMS)
            .map(|_| {
                let mut sub = server.subscribe(rx.clone());
                let initial = sub.initial();
                assert_eq!(initial.resources.len(), CLUSTERS);
                for (n, b) in &initial.resources {
                    sub.acknowledge(n, xxhash_rust::xxh3::xxh3_64(b));
                }
                sub
            })
            .collect();
        Rime {
            plane,
            subs,
            round: 0,
            acks: Vec::with_capacity(STREAMS),
        }
    }

    /// Timed: `apply`, then per subscriber `changed()` and the encode of its
    /// `DeltaDiscoveryResponse` (rime hands out (name, body) pairs; the version is the xxh3
    /// content hash it keys acknowledgements by, in hex).
    async fn round(&mut self) -> Duration {
        self.round += 1;
        let body = changed(self.round);
        let nonce = self.round.to_string();
        let start = std::time::Instant::now();
        self.plane.apply(&name(0), body);
        let mut sent = 0;
        for (s, sub) in self.subs.iter_mut().enumerate() {
            let update = sub.changed().await.expect("an update");
            let mut resources = Vec::with_capacity(update.resources.len());
            for (n, b) in update.resources {
                let hash = xxhash_rust::xxh3::xxh3_64(&b);
                resources.push(Resource {
                    version: format!("{hash:x}"),
                    resource: Some(Any {
                        type_url: CDS.into(),
                        value: b,
                    }),
                    name: n.clone(),
                    ..Resource::default()
                });
                self.acks.push((s, n, hash));
            }
            let resp = DeltaDiscoveryResponse {
                resources,
                removed_resources: update.removed,
                type_url: CDS.into(),
                nonce: nonce.clone(),
                ..DeltaDiscoveryResponse::default()
            };
            black_box(resp.encode_to_vec());
            sent += 1;
        }
        let d = start.elapsed();
        assert_eq!(sent, STREAMS);
        assert_eq!(self.acks.len(), STREAMS, "one resource per stream");
        for (s, n, hash) in self.acks.drain(..) {
            self.subs[s].acknowledge(&n, hash);
        }
        d
    }
}

pub fn run(iterations: usize, rt: &tokio::runtime::Runtime) {
    let ours_sotw = RefCell::new(Ours::new(Variant::Sotw));
    let ours_delta = RefCell::new(Ours::new(Variant::Delta));
    let theirs = RefCell::new(rt.block_on(rcp::Rcp::new()));
    let rime = RefCell::new(Rime::new());
    // One round each, checked: one resource per delta response, 100 per SotW response.
    {
        let mut o = ours_delta.borrow_mut();
        o.round += 1;
        let body = changed(o.round);
        let Ours {
            store, set, acks, ..
        } = &mut *o;
        store.set(CDS, &name(0), body).unwrap();
        set.sync(store);
        let id = set.poll_ready().expect("ready");
        let r = set.poll_response_encoded(id, Instant::ZERO, store).unwrap();
        let delta = DeltaDiscoveryResponse::decode(r.bytes.clone()).unwrap();
        assert_eq!(delta.resources.len(), 1, "delta: the changed cluster only");
        acks.push((id, r.nonce, r.version));
        o.drain();
        o.ack();
    }
    let mut contenders: Vec<Contender<'_>> = vec![
        (
            "xds-sansio, SotW",
            Box::new(|| ours_sotw.borrow_mut().round()),
        ),
        (
            "rust-control-plane 0.1.2, SotW",
            Box::new(|| rt.block_on(theirs.borrow_mut().round())),
        ),
        (
            "xds-sansio, delta",
            Box::new(|| ours_delta.borrow_mut().round()),
        ),
        (
            "rime-xds 0.1.0, delta",
            Box::new(|| rt.block_on(rime.borrow_mut().round())),
        ),
    ];
    let results = interleave(iterations, &mut contenders);
    report(
        "fan-out: one changed cluster (of 100) to 1 000 wildcard CDS streams, to wire bytes (medians, interleaved)",
        &results,
        "xds-sansio, SotW",
    );
    let get = |label: &str| median_of(&results, label);
    println!(
        "goal fan-out >= 20x faster than rust-control-plane (SotW): {:.2}x; delta vs rime-xds: {:.2}x",
        get("rust-control-plane 0.1.2, SotW") / get("xds-sansio, SotW"),
        get("rime-xds 0.1.0, delta") / get("xds-sansio, delta"),
    );
}
