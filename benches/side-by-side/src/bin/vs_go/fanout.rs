//! Fan-out: cluster 0 of the 10 000 changes; timed from `store.set` to the wire bytes of
//! every one of the 1 000 streams' responses (`StreamSet::sync`, then `poll_ready` /
//! `poll_response_encoded`); the ACKs that follow are fed untimed. The same three
//! workloads as the Go side: SotW wildcard, SotW by name (stream s: cluster 0 and
//! clusters 10s+1 .. 10s+9), delta wildcard. 1 000 streams of one node, as the Go side.

use crate::bodies::{base, changed, name};
use crate::common::{interleave, timed, Contender, CDS};
use prost::Message;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, StreamId, StreamSet};
use xds_sansio::{Instant, Request, Transport, Variant};

const STREAMS: usize = 1_000;

fn by_name(s: usize) -> Vec<String> {
    std::iter::once(name(0))
        .chain((1..=9).map(|k| name(10 * s + k)))
        .collect()
}

struct Fleet {
    store: ResourceStore,
    set: StreamSet,
    variant: Variant,
    round: usize,
    acks: Vec<(StreamId, String, String)>,
    /// What each stream subscribes to by name (SotW by name; empty otherwise).
    names: HashMap<StreamId, Vec<String>>,
    /// Every response's wire bytes of the last timed round (kept to check them).
    out: Vec<bytes::Bytes>,
}

impl Fleet {
    fn new(workload: &str) -> Fleet {
        let variant = if workload == "delta" {
            Variant::Delta
        } else {
            Variant::Sotw
        };
        let store = crate::server::store(&base());
        let mut set = StreamSet::new();
        let mut names = HashMap::with_capacity(STREAMS);
        for s in 0..STREAMS {
            let id = set.insert(ServerConfig::new(variant, Transport::Aggregated));
            let node = Some(Node {
                id: "envoy-0".into(),
                ..Node::default()
            });
            let subscribed = if workload == "sotw-names" {
                by_name(s)
            } else {
                Vec::new()
            };
            let request = match variant {
                Variant::Sotw => Request::Sotw(DiscoveryRequest {
                    node,
                    type_url: CDS.into(),
                    resource_names: subscribed.clone(),
                    ..DiscoveryRequest::default()
                }),
                Variant::Delta => Request::Delta(DeltaDiscoveryRequest {
                    node,
                    type_url: CDS.into(),
                    resource_names_subscribe: vec!["*".into()],
                    ..DeltaDiscoveryRequest::default()
                }),
            };
            names.insert(id, subscribed);
            set.handle_request(id, Instant::ZERO, request).unwrap();
        }
        let mut fleet = Fleet {
            store,
            set,
            variant,
            round: 0,
            acks: Vec::with_capacity(STREAMS),
            names,
            out: Vec::with_capacity(STREAMS),
        };
        assert_eq!(fleet.drain(false), STREAMS, "first responses");
        fleet.ack();
        fleet
    }

    /// Every ready stream's responses, encoded (kept when `keep`, to check them).
    fn drain(&mut self, keep: bool) -> usize {
        let mut sent = 0;
        while let Some(id) = self.set.poll_ready() {
            while let Some(r) = self
                .set
                .poll_response_encoded(id, Instant::ZERO, &self.store)
            {
                self.acks.push((id, r.nonce, r.version));
                if keep {
                    self.out.push(r.bytes.to_bytes());
                } else {
                    std::hint::black_box(&r.bytes);
                }
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
                    resource_names: self.names[&id].clone(),
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

    fn round(&mut self, keep: bool) -> Duration {
        self.round += 1;
        let body = changed(self.round);
        self.out.clear();
        let (d, sent) = timed(|| {
            self.store.set(CDS, &name(0), body).unwrap();
            self.set.sync(&self.store);
            self.drain(keep)
        });
        assert_eq!(sent, STREAMS);
        self.ack();
        d
    }
}

pub fn run(iterations: usize) {
    for (workload, want) in [("sotw-wildcard", 10_000), ("sotw-names", 10), ("delta", 1)] {
        let fleet = RefCell::new(Fleet::new(workload));
        // One round checked: every response decoded, its number of resources counted.
        {
            let mut f = fleet.borrow_mut();
            f.round(true);
            for wire in &f.out {
                let n = if f.variant == Variant::Delta {
                    DeltaDiscoveryResponse::decode(wire.clone())
                        .unwrap()
                        .resources
                        .len()
                } else {
                    DiscoveryResponse::decode(wire.clone())
                        .unwrap()
                        .resources
                        .len()
                };
                assert_eq!(n, want, "{workload}: resources in a response");
            }
        }
        let mut contenders: Vec<Contender<'_>> =
            vec![("ours", Box::new(|| fleet.borrow_mut().round(false)))];
        crate::out::results(
            &format!("fanout.{workload}"),
            &interleave(iterations, &mut contenders),
        );
    }
}
