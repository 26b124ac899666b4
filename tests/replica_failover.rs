//! Management servers run as replicas behind a load balancer; a client whose replica dies
//! reconnects to another one and resumes by protocol. Replicas fed the same publications
//! compute the same versions whatever the order of their history, so what a client holds is
//! recognised by the replica it moves to: nothing it holds is sent again where the protocol
//! lets the client say what it holds exactly (incremental `initial_resource_versions`, SotW
//! wildcard `version_info`). SotW named subscriptions are answered in full on a new stream:
//! their `version_info` need not describe what the client holds (see `src/server/mod.rs`,
//! "No identical resend"). The test counts what is sent again, by kind of subscription.
//!
//! `XDS_FAILOVER_CLIENTS` sets the number of clients (default 10 000).

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::{Client, ClientConfig};
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::resource::name_of;
use xds_sansio::server::{ResourceEntry, ResourceStore, ServerConfig, ServerStream, StoreOp};
use xds_sansio::types::{CLUSTER, ENDPOINT, RESOURCE_WRAPPER_TYPE_URL};
use xds_sansio::{Instant, Response, Transport, Variant};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
const CLUSTERS: usize = 50;

fn body(name: &str, data: &str) -> Bytes {
    let mut out = Vec::new();
    prost::encoding::string::encode(1, &name.to_string(), &mut out);
    prost::encoding::string::encode(2, &data.to_string(), &mut out);
    Bytes::from(out)
}

fn publications() -> Vec<StoreOp> {
    let mut ops = Vec::new();
    for i in 0..CLUSTERS {
        let name = format!("c{i}");
        for type_url in [CDS, EDS] {
            ops.push(StoreOp::Set {
                type_url: type_url.into(),
                entry: ResourceEntry::new(&name, body(&name, &format!("{type_url}-{i}"))),
            });
        }
    }
    ops
}

/// Three replicas with the same content, reached by different histories: in order, in
/// reverse order one operation at a time, and after changes that were undone.
fn replicas() -> Vec<ResourceStore> {
    let mut a = ResourceStore::new();
    a.apply(publications()).unwrap();
    let mut b = ResourceStore::new();
    for op in publications().into_iter().rev() {
        b.apply(vec![op]).unwrap();
    }
    let mut c = ResourceStore::new();
    c.set(CDS, "c0", body("c0", "an old body")).unwrap();
    c.set(EDS, "gone", body("gone", "x")).unwrap();
    c.apply(publications()).unwrap();
    c.remove(EDS, "gone");
    vec![a, b, c]
}

/// The kinds of client that move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// Envoy's shape: SotW ADS, wildcard CDS, named EDS.
    SotwWildcardCds,
    /// gRPC's shape: SotW ADS, named CDS and EDS.
    SotwNamed,
    /// Incremental ADS, wildcard CDS, named EDS.
    DeltaWildcardCds,
    /// Incremental ADS, named CDS and EDS.
    DeltaNamed,
}

const KINDS: [Kind; 4] = [
    Kind::SotwWildcardCds,
    Kind::SotwNamed,
    Kind::DeltaWildcardCds,
    Kind::DeltaNamed,
];

fn client(kind: Kind, i: usize) -> Client {
    let variant = match kind {
        Kind::SotwWildcardCds | Kind::SotwNamed => Variant::Sotw,
        Kind::DeltaWildcardCds | Kind::DeltaNamed => Variant::Delta,
    };
    let node = Node {
        id: format!("client-{i}"),
        ..Node::default()
    };
    let mut c = Client::new(ClientConfig::new(variant, Transport::Aggregated, node));
    let names: Vec<String> = (0..5).map(|k| format!("c{}", (i + k) % CLUSTERS)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    match kind {
        Kind::SotwWildcardCds | Kind::DeltaWildcardCds => c.subscribe(CDS, &[]).unwrap(),
        Kind::SotwNamed | Kind::DeltaNamed => c.subscribe(CDS, &names).unwrap(),
    }
    c.subscribe(EDS, &names).unwrap();
    c
}

/// What one replica sent: resources and their bytes, and how many of them the client
/// already held exactly.
#[derive(Clone, Copy, Debug, Default)]
struct Sent {
    resources: u64,
    bytes: u64,
    held_resources: u64,
    held_bytes: u64,
}

/// The resources of a response as `(type, name, version, encoded size)`.
fn resources_of(response: &Response) -> Vec<(String, String, String, u64)> {
    match response {
        Response::Sotw(r) => r
            .resources
            .iter()
            .map(|any| {
                let size = any.encoded_len() as u64;
                if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
                    let w = Resource::decode(any.value.clone()).unwrap();
                    (r.type_url.clone(), w.name, w.version, size)
                } else {
                    let name = name_of(&any.value).unwrap().to_string();
                    (r.type_url.clone(), name, r.version_info.clone(), size)
                }
            })
            .collect(),
        Response::Delta(r) => r
            .resources
            .iter()
            .map(|res| {
                (
                    r.type_url.clone(),
                    res.name.clone(),
                    res.version.clone(),
                    res.encoded_len() as u64,
                )
            })
            .collect(),
    }
}

/// Runs a client and a fresh stream of `store` until neither has anything to say.
fn converse(client: &mut Client, store: &ResourceStore, variant: Variant) -> Sent {
    let now = Instant::ZERO;
    let mut stream = ServerStream::new(ServerConfig::new(variant, Transport::Aggregated));
    let mut sent = Sent::default();
    client.connected(now);
    for _ in 0..100 {
        let mut progressed = false;
        while let Some(request) = client.poll_request(now) {
            stream.handle_request(now, request);
            progressed = true;
        }
        while client.poll_event().is_some() {}
        while stream.poll_event().is_some() {}
        while let Some(encoded) = stream.poll_response_encoded(now, store) {
            let response = match variant {
                Variant::Sotw => Response::Sotw(DiscoveryResponse::decode(encoded.bytes).unwrap()),
                Variant::Delta => {
                    Response::Delta(DeltaDiscoveryResponse::decode(encoded.bytes).unwrap())
                }
            };
            for (type_url, name, version, size) in resources_of(&response) {
                sent.resources += 1;
                sent.bytes += size;
                // SotW: a resource's version is the response's; what identifies a held
                // resource is its body, compared through the store's version of it.
                let held = client.resource(&type_url, &name).is_some_and(|c| {
                    c.version() == version.as_str()
                        || (variant == Variant::Sotw
                            && store
                                .get(&type_url, &name)
                                .is_some_and(|r| c.body() == r.body()))
                });
                if held {
                    sent.held_resources += 1;
                    sent.held_bytes += size;
                }
            }
            client.handle_response(now, response);
            progressed = true;
        }
        if !progressed {
            return sent;
        }
    }
    panic!("the conversation did not settle");
}

#[test]
fn replicas_fed_the_same_publications_compute_the_same_versions() {
    let replicas = replicas();
    for type_url in [CDS, EDS] {
        let digests: Vec<String> = replicas
            .iter()
            .map(|s| s.type_digest(type_url).to_version())
            .collect();
        assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");
        for r in replicas[0].iter(type_url) {
            for other in &replicas[1..] {
                assert_eq!(
                    other.get(type_url, r.name()).unwrap().version(),
                    r.version()
                );
            }
        }
    }
}

#[test]
fn clients_moved_from_a_killed_replica_receive_nothing_they_hold_where_they_can_say_so() {
    let clients: usize = std::env::var("XDS_FAILOVER_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let replicas = replicas();
    let mut before: BTreeMap<Kind, Sent> = BTreeMap::new();
    let mut after: BTreeMap<Kind, Sent> = BTreeMap::new();
    for i in 0..clients {
        let kind = KINDS[i % KINDS.len()];
        let variant = match kind {
            Kind::SotwWildcardCds | Kind::SotwNamed => Variant::Sotw,
            Kind::DeltaWildcardCds | Kind::DeltaNamed => Variant::Delta,
        };
        let mut c = client(kind, i);
        let first = converse(&mut c, &replicas[0], variant);
        let held = c.resource_names(CDS).len() + c.resource_names(EDS).len();
        assert!(held >= 10, "{kind:?} converged on the first replica");
        // Replica 0 dies; the client moves to one of the others.
        c.disconnected(Instant::ZERO);
        let moved = converse(&mut c, &replicas[1 + i % 2], variant);
        assert_eq!(
            c.resource_names(CDS).len() + c.resource_names(EDS).len(),
            held,
            "{kind:?} holds the same after moving"
        );
        for (map, s) in [(&mut before, first), (&mut after, moved)] {
            let e = map.entry(kind).or_default();
            e.resources += s.resources;
            e.bytes += s.bytes;
            e.held_resources += s.held_resources;
            e.held_bytes += s.held_bytes;
        }
    }
    for kind in KINDS {
        let (b, a) = (before[&kind], after[&kind]);
        println!(
            "{kind:?}: first replica sent {} resources ({} B); after the move {} resources ({} B), \
             {} of them ({} B) already held",
            b.resources, b.bytes, a.resources, a.bytes, a.held_resources, a.held_bytes
        );
    }
    // Incremental: initial_resource_versions says exactly what is held.
    for kind in [Kind::DeltaWildcardCds, Kind::DeltaNamed] {
        assert_eq!(after[&kind].held_bytes, 0, "{kind:?}");
    }
    // SotW wildcard CDS: the version names the full state held; named EDS is resent.
    let sotw = after[&Kind::SotwWildcardCds];
    let eds_per_client = 5;
    assert_eq!(
        sotw.held_resources,
        (clients / KINDS.len() + usize::from(clients % KINDS.len() > 0)) as u64 * eds_per_client,
        "only the named EDS resources are resent"
    );
}
