//! Replicas on a real etcd, over real gRPC (issue 30): a 3-member etcd cluster on
//! 127.0.0.1 (Debian's `etcd-server`, installed by `scripts/etcd.sh`), three `XdsServer`
//! replicas fed by [`EtcdSource`], and 100 clients (SotW and incremental, wildcard and by
//! name) spread over them. Every publication changes every resource, so a resource that
//! arrives with the body its client already holds is a resend, whenever it happens; the
//! test counts them per kind of client over the whole run and through these failures:
//!
//! - a replica is killed: its clients move to the next replica;
//! - one etcd member is killed (quorum holds): publications still arrive;
//! - quorum is lost: replicas serve their last state and say so in health; they resume
//!   when etcd is back, resending nothing;
//! - one replica is cut off from etcd while etcd compacts past its revision: it reloads and
//!   publishes only what differs;
//! - every replica restarts at once: clients keep their configuration (no empty answer
//!   before a replica has loaded: the restart hazard).
//!
//! Zero bytes are resent to incremental clients and to SotW wildcard clients. SotW clients
//! that subscribe by name are sent their named resources again on every new stream, and
//! exactly that: a SotW request's `version_info` is the version of the last response the
//! client accepted for the type, which need not describe every name it holds (it may have
//! ignored resources that crossed its unsubscription, or kept the valid part of a NACKed
//! response, gRPC A46), so the server answers the first request with names of a stream in
//! full ("No identical resend" in the core's server docs; the xDS protocol, "How the client
//! specifies what resources to return": "the server must resend any newly requested
//! resources"). Types other than Listener and Cluster are never full state in SotW, so
//! Envoy-shaped clients (wildcard clusters) get their endpoints by name, resent too.
//!
//! The whole test is bounded (`TEST_BOUND`) and every wait has its own bound.
#![cfg(feature = "etcd")]

mod envoy_bodies;
mod etcd_support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as StdInstant};

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use etcd_support::{CutProxy, EtcdCluster};
use prost::Message;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use xds_sansio::client::{Client, ClientConfig};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::resource::name_of;
use xds_sansio::server::{Consistency, ResourceEntry};
use xds_sansio::time::StdClock;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{ClientEvent, Request, Response, Transport, Variant};
use xds_sansio_tonic::call::{self, ConnectOptions, Io, StreamCommand, Tap};
use xds_sansio_tonic::client::bootstrap::ManagementServer;
use xds_sansio_tonic::etcd::wire::{
    request_op, CompactionRequest, Member, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use xds_sansio_tonic::etcd::{self, EtcdSource, Publication, SourceConfig, HEALTH_SERVICE};
use xds_sansio_tonic::XdsServer;

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
const CLUSTERS: usize = 20;
const NAMED: usize = 5;
const REPLICAS: usize = 3;
const PREFIX: &str = "/xds/";
const GROUP: &str = xds_sansio_tonic::DEFAULT_GROUP;
/// The whole test, etcd's start included.
const TEST_BOUND: Duration = Duration::from_secs(150);
/// One wait (a publication reaching every client, a replica noticing etcd is gone).
const WAIT: Duration = Duration::from_secs(20);

// ------------------------------------------------------------------ resources

fn ads() -> Option<core::ConfigSource> {
    Some(core::ConfigSource {
        config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(
            core::AggregatedConfigSource {},
        )),
        ..Default::default()
    })
}

/// An EDS cluster whose endpoints are under its own name; `gen` in its stat name.
fn cluster_body(name: &str, gen: u32) -> Bytes {
    Bytes::from(
        cluster::Cluster {
            name: name.into(),
            alt_stat_name: format!("gen-{gen}"),
            cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
                cluster::cluster::DiscoveryType::Eds as i32,
            )),
            eds_cluster_config: Some(cluster::cluster::EdsClusterConfig {
                eds_config: ads(),
                service_name: String::new(),
            }),
            ..Default::default()
        }
        .encode_to_vec(),
    )
}

/// One endpoint, 127.0.0.1:(10000 + `gen`).
fn endpoints_body(name: &str, gen: u32) -> Bytes {
    envoy_bodies::endpoints_body(name, 10_000 + gen)
}

/// The generation a body carries.
fn gen_of(type_url: &str, body: &[u8]) -> Option<u32> {
    if type_url == CDS {
        let c = cluster::Cluster::decode(body).ok()?;
        c.alt_stat_name.strip_prefix("gen-")?.parse().ok()
    } else {
        let e = endpoint::ClusterLoadAssignment::decode(body).ok()?;
        let address = e.endpoints.first()?.lb_endpoints.first()?;
        let Some(endpoint::lb_endpoint::HostIdentifier::Endpoint(ep)) = &address.host_identifier
        else {
            return None;
        };
        let Some(core::address::Address::SocketAddress(sa)) = &ep.address.as_ref()?.address else {
            return None;
        };
        match sa.port_specifier {
            Some(core::socket_address::PortSpecifier::PortValue(p)) => Some(p - 10_000),
            _ => None,
        }
    }
}

fn cluster_name(i: usize) -> String {
    format!("c{i:02}")
}

/// Generation `gen` of the whole configuration: every cluster and its endpoints.
fn publication(gen: u32) -> Publication {
    let names: Vec<String> = (0..CLUSTERS).map(cluster_name).collect();
    let mut types = BTreeMap::new();
    types.insert(
        CDS.to_string(),
        names
            .iter()
            .map(|n| ResourceEntry::new(n, cluster_body(n, gen)))
            .collect(),
    );
    types.insert(
        EDS.to_string(),
        names
            .iter()
            .map(|n| ResourceEntry::new(n, endpoints_body(n, gen)))
            .collect(),
    );
    let mut p = Publication::new();
    p.set_group(GROUP, types).unwrap();
    p
}

async fn publish(endpoints: &[String], gen: u32) -> etcd::Published {
    etcd::publish(endpoints, PREFIX, &publication(gen), Duration::from_secs(3))
        .await
        .unwrap_or_else(|e| panic!("publishing generation {gen}: {e}"))
}

/// How many keys etcd holds under the prefix.
async fn etcd_keys(endpoint: &str) -> usize {
    let mut member = Member::connect(endpoint, Duration::from_secs(2))
        .await
        .unwrap();
    let held = member
        .range(RangeRequest {
            key: PREFIX.as_bytes().to_vec(),
            range_end: etcd::wire::prefix_end(PREFIX.as_bytes()),
            keys_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    held.kvs.len()
}

/// Writes keys as they are, in one transaction (what `publish` would refuse).
async fn raw_put(endpoint: &str, kvs: &[(&str, Bytes)]) {
    let mut member = Member::connect(endpoint, Duration::from_secs(2))
        .await
        .unwrap();
    let success = kvs
        .iter()
        .map(|(k, v)| RequestOp {
            request: Some(request_op::Request::Put(PutRequest {
                key: k.as_bytes().to_vec(),
                value: v.clone(),
            })),
        })
        .collect();
    let done = member
        .txn(TxnRequest {
            success,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(done.succeeded);
}

// ------------------------------------------------------------------ replicas

struct Replica {
    addr: SocketAddr,
    endpoints: Vec<String>,
    server: Option<XdsServer>,
    source: Option<EtcdSource>,
    serving: Option<JoinHandle<()>>,
}

impl Replica {
    async fn start(addr: SocketAddr, endpoints: Vec<String>) -> Replica {
        let mut r = Replica {
            addr,
            endpoints,
            server: None,
            source: None,
            serving: None,
        };
        r.restart().await;
        r
    }

    async fn restart(&mut self) {
        let server = XdsServer::builder()
            .consistency(Consistency::Enforce)
            .shutdown_grace(Duration::from_millis(300))
            .build();
        let deadline = StdInstant::now() + Duration::from_secs(5);
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) => {
                    assert!(StdInstant::now() < deadline, "bind {}: {e}", self.addr);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        self.addr = listener.local_addr().unwrap();
        let serving = server.clone();
        self.serving = Some(tokio::spawn(async move {
            let _ = serving
                .serve_with_listener(listener, std::future::pending())
                .await;
        }));
        let mut config = SourceConfig::new(self.endpoints.clone());
        config.call_timeout = Duration::from_secs(2);
        config.keepalive = Some((Duration::from_millis(500), Duration::from_millis(500)));
        self.source = Some(EtcdSource::start(server.clone(), config).unwrap());
        self.server = Some(server);
    }

    async fn kill(&mut self) {
        if let Some(source) = self.source.take() {
            source.stop();
        }
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
        if let Some(serving) = self.serving.take() {
            tokio::time::timeout(Duration::from_secs(5), serving)
                .await
                .expect("replica stops within 5 s")
                .unwrap();
        }
    }

    fn source(&self) -> &EtcdSource {
        self.source.as_ref().expect("replica running")
    }

    /// The health service's answer for `service`.
    async fn health(&self, service: &str) -> i32 {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
        let request = tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        };
        client.check(request).await.unwrap().into_inner().status
    }
}

const SERVING: i32 = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
const NOT_SERVING: i32 = tonic_health::pb::health_check_response::ServingStatus::NotServing as i32;

// ------------------------------------------------------------------ clients

/// The kinds of client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    SotwWildcard,
    SotwNamed,
    DeltaWildcard,
    DeltaNamed,
}

const KINDS: [Kind; 4] = [
    Kind::SotwWildcard,
    Kind::SotwNamed,
    Kind::DeltaWildcard,
    Kind::DeltaNamed,
];

impl Kind {
    fn variant(self) -> Variant {
        match self {
            Kind::SotwWildcard | Kind::SotwNamed => Variant::Sotw,
            Kind::DeltaWildcard | Kind::DeltaNamed => Variant::Delta,
        }
    }

    fn wildcard(self) -> bool {
        matches!(self, Kind::SotwWildcard | Kind::DeltaWildcard)
    }
}

/// What one client saw, shared with the test.
#[derive(Debug, Default)]
struct View {
    /// Type -> the names it must hold.
    names: BTreeMap<String, Vec<String>>,
    /// SotW types subscribed by name: on each new stream the protocol has them resent.
    sotw_named: BTreeSet<String>,
    /// Type and name -> the generation held.
    gens: BTreeMap<(String, String), u32>,
    /// Type and name -> the body held.
    held: BTreeMap<(String, String), Bytes>,
    /// Broken promises: an older generation after a newer one, a resource gone.
    violations: Vec<String>,
    /// Type -> resources that arrived with the body the client held (count, bytes).
    resent: BTreeMap<String, (u64, u64)>,
    /// Type -> what the protocol requires to be resent: every held name of a SotW type
    /// subscribed by name, on its first response on each new stream.
    required: BTreeMap<String, u64>,
    /// Types answered on each stream.
    answered: BTreeSet<(u64, String)>,
    /// Streams started.
    streams: u64,
    /// The replica it talks to (or tries).
    replica: usize,
    /// Generation -> when the client first held it everywhere (for the figures).
    arrived: BTreeMap<u32, StdInstant>,
}

impl View {
    fn holds(&self, gen: u32) -> Result<(), String> {
        for (type_url, names) in &self.names {
            for name in names {
                let got = self.gens.get(&(type_url.clone(), name.clone()));
                if got != Some(&gen) {
                    return Err(format!("{name} of {type_url} at {got:?}, not {gen}"));
                }
            }
        }
        Ok(())
    }
}

/// The resources of a response: type, name, body, encoded size.
fn resources_of(response: &Response) -> Vec<(String, String, Bytes, u64)> {
    match response {
        Response::Sotw(r) => r
            .resources
            .iter()
            .map(|any| {
                let name = name_of(&any.value).unwrap().to_string();
                (
                    r.type_url.to_string(),
                    name,
                    any.value.clone(),
                    any.encoded_len() as u64,
                )
            })
            .collect(),
        Response::Delta(r) => r
            .resources
            .iter()
            .map(|res| {
                let body = res
                    .resource
                    .as_ref()
                    .map(|a| a.value.clone())
                    .unwrap_or_default();
                (
                    r.type_url.to_string(),
                    res.name.clone(),
                    body,
                    res.encoded_len() as u64,
                )
            })
            .collect(),
    }
}

struct Observer {
    view: Arc<Mutex<View>>,
}

impl Tap for Observer {
    fn request(&self, _: u64, _: &Request) {}

    fn response(&self, stream: u64, response: &Response) {
        let mut v = self.view.lock().unwrap();
        let resources = resources_of(response);
        if let Some((type_url, ..)) = resources.first() {
            if v.answered.insert((stream, type_url.clone())) && v.sotw_named.contains(type_url) {
                let held = v.held.keys().filter(|(t, _)| t == type_url).count() as u64;
                *v.required.entry(type_url.clone()).or_default() += held;
            }
        }
        for (type_url, name, body, size) in resources {
            let key = (type_url, name);
            if v.held.get(&key) == Some(&body) {
                let e = v.resent.entry(key.0).or_default();
                e.0 += 1;
                e.1 += size;
            }
        }
    }
}

impl Observer {
    fn event(&self, event: ClientEvent) {
        let mut v = self.view.lock().unwrap();
        match event {
            ClientEvent::Upserted {
                type_url,
                name,
                body,
                ..
            } => {
                let key = (type_url.to_string(), name.to_string());
                match gen_of(&type_url, &body) {
                    Some(gen) => {
                        if let Some(&old) = v.gens.get(&key) {
                            if gen < old {
                                v.violations
                                    .push(format!("{key:?}: generation {gen} after {old}"));
                            }
                        }
                        v.gens.insert(key.clone(), gen);
                        if !v.arrived.contains_key(&gen) && v.holds(gen).is_ok() {
                            v.arrived.insert(gen, StdInstant::now());
                        }
                    }
                    None => v.violations.push(format!("{key:?}: unreadable body")),
                }
                v.held.insert(key, body);
            }
            ClientEvent::Removed {
                type_url,
                name,
                reason,
            } => {
                v.violations
                    .push(format!("{type_url} {name} removed: {reason:?}"));
            }
            ClientEvent::DoesNotExist { type_url, name } => {
                v.violations
                    .push(format!("{type_url} {name} does not exist"));
            }
            _ => {}
        }
    }
}

/// A client of `kind`: wildcard kinds subscribe to every cluster (SotW: Envoy's shape, the
/// endpoints of every cluster by name; incremental: both by wildcard), named kinds to
/// five clusters and their endpoints.
fn new_client(kind: Kind, i: usize) -> (Client, View) {
    let node = Node {
        id: format!("client-{i}"),
        ..Node::default()
    };
    let mut c = Client::new(ClientConfig::new(
        kind.variant(),
        Transport::Aggregated,
        node,
    ));
    let mut view = View::default();
    let all: Vec<String> = (0..CLUSTERS).map(cluster_name).collect();
    let some: Vec<String> = (0..NAMED)
        .map(|k| cluster_name((i + k) % CLUSTERS))
        .collect();
    let by_name = |c: &mut Client, type_url: &str, names: &[String]| {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        c.subscribe(type_url, &refs).unwrap();
    };
    match kind {
        Kind::SotwWildcard => {
            c.subscribe(CDS, &["*"]).unwrap();
            by_name(&mut c, EDS, &all);
            view.sotw_named.insert(EDS.to_string());
        }
        Kind::DeltaWildcard => {
            c.subscribe(CDS, &["*"]).unwrap();
            c.subscribe(EDS, &["*"]).unwrap();
        }
        Kind::SotwNamed | Kind::DeltaNamed => {
            by_name(&mut c, CDS, &some);
            by_name(&mut c, EDS, &some);
            if kind == Kind::SotwNamed {
                view.sotw_named.insert(CDS.to_string());
                view.sotw_named.insert(EDS.to_string());
            }
        }
    }
    let names = if kind.wildcard() { all } else { some };
    view.names.insert(CDS.to_string(), names.clone());
    view.names.insert(EDS.to_string(), names);
    (c, view)
}

/// One client: streams to its replica, moving to the next one whenever a stream ends or a
/// connection fails, with one core client across moves: the rule the core's session
/// applies to a server's `replicas` (`tests/client_replicas.rs` runs it through the
/// driver), written out here so the test can see every response and count resends.
async fn run_client(
    i: usize,
    mut client: Client,
    addrs: Arc<Vec<SocketAddr>>,
    shared: Option<Arc<Vec<tonic::transport::Channel>>>,
    view: Arc<Mutex<View>>,
    mut commands: mpsc::UnboundedReceiver<StreamCommand>,
) {
    let clock = StdClock::new();
    let observer = Observer { view: view.clone() };
    let mut replica = i % addrs.len();
    let mut stream = 0;
    let options = ConnectOptions::new(Duration::from_secs(2));
    loop {
        view.lock().unwrap().replica = replica;
        let server = ManagementServer::insecure(addrs[replica].to_string());
        let channel = match &shared {
            Some(channels) => Ok(channels[replica].clone()),
            None => call::connect(&server, &options).await,
        };
        if let Ok(channel) = channel {
            stream += 1;
            view.lock().unwrap().streams = stream;
            let mut on_event = |_: &Client, e: ClientEvent| observer.event(e);
            let io = Io {
                channel,
                clock: &clock,
                commands: &mut commands,
                on_event: &mut on_event,
                tap: Some((&observer, stream)),
            };
            if call::run_stream(&mut client, io).await.stopped {
                return;
            }
        }
        replica = (replica + 1) % addrs.len();
        tokio::time::sleep(Duration::from_millis(20 + (i as u64 * 7) % 60)).await;
    }
}

/// (kind, "CDS" | "EDS") -> (resent resources, resent bytes, required resends).
type Resent = BTreeMap<(Kind, &'static str), (u64, u64, u64)>;

fn short(type_url: &str) -> &'static str {
    if type_url == CDS {
        "CDS"
    } else {
        "EDS"
    }
}

struct Clients {
    views: Vec<(Kind, Arc<Mutex<View>>)>,
    stops: Vec<mpsc::UnboundedSender<StreamCommand>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Clients {
    /// `n` clients, each on a connection of its own.
    fn start(n: usize, addrs: Vec<SocketAddr>) -> Clients {
        Clients::start_on(n, addrs, None)
    }

    /// `n` clients; with `shared`, the streams to a replica share one connection (HTTP/2
    /// multiplexing), else each client has its own.
    fn start_on(
        n: usize,
        addrs: Vec<SocketAddr>,
        shared: Option<Arc<Vec<tonic::transport::Channel>>>,
    ) -> Clients {
        let addrs = Arc::new(addrs);
        let mut clients = Clients {
            views: Vec::new(),
            stops: Vec::new(),
            tasks: Vec::new(),
        };
        for i in 0..n {
            let kind = KINDS[i % KINDS.len()];
            // The view knows what the client must hold before its task runs, so a wait
            // never passes for a client that has not started yet.
            let (client, view) = new_client(kind, i);
            let view = Arc::new(Mutex::new(view));
            let (tx, rx) = mpsc::unbounded_channel();
            let client = run_client(i, client, addrs.clone(), shared.clone(), view.clone(), rx);
            let task = tokio::spawn(client);
            clients.views.push((kind, view));
            clients.stops.push(tx);
            clients.tasks.push(task);
        }
        clients
    }

    /// Waits until every client accepted by `filter` holds `gen` everywhere.
    async fn wait_gen(&self, gen: u32, filter: impl Fn(&View) -> bool) {
        if let Err(why) = self.try_wait_gen(gen, filter).await {
            panic!("{why}");
        }
    }

    /// Waits until every client holds `gen` everywhere; a failure also says how each
    /// replica's etcd feed stands.
    async fn wait_all_fed(&self, gen: u32, replicas: &[Replica]) {
        if let Err(why) = self.try_wait_gen(gen, |_| true).await {
            let feeds: Vec<String> = replicas
                .iter()
                .enumerate()
                .map(|(r, replica)| format!("replica {r}: {:?}", replica.source().status()))
                .collect();
            panic!("{why}\n{}", feeds.join("\n"));
        }
    }

    async fn try_wait_gen(&self, gen: u32, filter: impl Fn(&View) -> bool) -> Result<(), String> {
        let deadline = StdInstant::now() + WAIT;
        loop {
            let mut missing = None;
            for (i, (_, view)) in self.views.iter().enumerate() {
                let v = view.lock().unwrap();
                if filter(&v) {
                    if let Err(why) = v.holds(gen) {
                        missing = Some(format!(
                            "client {i} (replica {}, {} streams, answered {:?}): {why}",
                            v.replica, v.streams, v.answered
                        ));
                        break;
                    }
                }
            }
            let Some(why) = missing else { return Ok(()) };
            if StdInstant::now() >= deadline {
                return Err(format!(
                    "generation {gen} did not reach every client within {WAIT:?}: {why}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_all(&self, gen: u32) {
        self.wait_gen(gen, |_| true).await;
    }

    /// Kind and type -> (resent resources, resent bytes, required resends).
    fn resent(&self) -> Resent {
        let mut out = Resent::new();
        for (kind, view) in &self.views {
            let v = view.lock().unwrap();
            for type_url in [CDS, EDS] {
                let e = out.entry((*kind, short(type_url))).or_insert((0, 0, 0));
                let (count, bytes) = v.resent.get(type_url).copied().unwrap_or_default();
                e.0 += count;
                e.1 += bytes;
                e.2 += v.required.get(type_url).copied().unwrap_or_default();
            }
        }
        out
    }

    fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, (_, view)) in self.views.iter().enumerate() {
            for v in &view.lock().unwrap().violations {
                out.push(format!("client {i}: {v}"));
            }
        }
        out
    }

    fn on_replica(&self, replica: usize) -> usize {
        self.views
            .iter()
            .filter(|(_, v)| v.lock().unwrap().replica == replica)
            .count()
    }

    async fn stop(self) {
        for tx in &self.stops {
            let _ = tx.send(StreamCommand::Stop);
        }
        for task in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

/// Waits until `check` holds, or fails with what it said last.
async fn eventually(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = StdInstant::now() + WAIT;
    loop {
        match check() {
            Ok(()) => return,
            Err(why) => {
                assert!(
                    StdInstant::now() < deadline,
                    "{what}: not within {WAIT:?}: {why}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

fn fed(replicas: &[Replica], which: &[usize], want: bool) -> Result<(), String> {
    for &r in which {
        let s = replicas[r].source().status();
        if s.connected != want {
            return Err(format!(
                "replica {r}: connected {} ({:?})",
                s.connected, s.last_error
            ));
        }
    }
    Ok(())
}

fn print_resent(label: &str, before: &Resent, after: &Resent) {
    for (key, a) in after {
        let b = before.get(key).copied().unwrap_or_default();
        println!(
            "{label}: {:?} {}: resent {} resources, {} bytes (required by the protocol: {})",
            key.0,
            key.1,
            a.0 - b.0,
            a.1 - b.1,
            a.2 - b.2
        );
    }
}

// ------------------------------------------------------------------ the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_etcd_fail_over_and_resend_nothing() {
    tokio::time::timeout(TEST_BOUND, scenario())
        .await
        .expect("the etcd replica test finishes within its bound");
}

async fn scenario() {
    let mut etcd = EtcdCluster::start(3).await;
    let endpoints = etcd.endpoints();
    let first = publish(&endpoints, 1).await;
    assert_eq!((first.puts, first.deletes), (2 * CLUSTERS, 0));
    let again = publish(&endpoints, 1).await;
    assert_eq!(
        (again.puts, again.deletes),
        (0, 0),
        "an unchanged publication writes nothing"
    );

    // An inconsistent publication is refused before it reaches etcd: a cluster whose
    // endpoints are missing.
    let mut broken = publication(50);
    let mut types = BTreeMap::new();
    types.insert(
        CDS.to_string(),
        vec![ResourceEntry::new("lonely", cluster_body("lonely", 50))],
    );
    broken.set_group(GROUP, types).unwrap();
    let refused = etcd::publish(&endpoints, PREFIX, &broken, Duration::from_secs(3)).await;
    assert!(
        matches!(refused, Err(etcd::PublishError::Refused { .. })),
        "{refused:?}"
    );
    assert_eq!(
        etcd_keys(&endpoints[0]).await,
        2 * CLUSTERS,
        "etcd unchanged"
    );

    // Replica 2 reaches etcd only through a proxy to member 2 (to cut it off alone).
    let mut link = CutProxy::start(&etcd.endpoint(2)).await;
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut replicas = vec![
        Replica::start(any, endpoints.clone()).await,
        Replica::start(any, endpoints.clone()).await,
        Replica::start(any, vec![link.endpoint()]).await,
    ];
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    let clients = Clients::start(100, addrs);
    clients.wait_all_fed(1, &replicas).await;

    // A publication reaches every client through every replica.
    publish(&endpoints, 2).await;
    clients.wait_all_fed(2, &replicas).await;
    for r in 0..REPLICAS {
        assert!(clients.on_replica(r) >= 30, "replica {r} serves its share");
    }
    let revisions: Vec<i64> = replicas
        .iter()
        .map(|r| r.source().status().revision)
        .collect();
    assert!(revisions.windows(2).all(|w| w[0] == w[1]), "{revisions:?}");

    // Peer input: a key that does not parse and a body the checks refuse, written past
    // `publish`, are reported; replicas keep their state and clients see nothing.
    let before = clients.resent();
    raw_put(
        &endpoints[0],
        &[
            ("/xds/default/nonsense", Bytes::from_static(b"x")),
            (
                "/xds/default/envoy.config.cluster.v3.Cluster/c00",
                Bytes::from_static(b"\x0a\x03zzz"),
            ),
        ],
    )
    .await;
    eventually("replicas report what they refused", || {
        for (r, replica) in replicas.iter().enumerate() {
            let s = replica.source().status();
            let key = s
                .rejected
                .iter()
                .any(|x| matches!(x, etcd::Rejected::Key { .. }));
            let body = s
                .rejected
                .iter()
                .any(|x| matches!(x, etcd::Rejected::Publication { .. }));
            if !(key && body) {
                return Err(format!("replica {r}: {:?}", s.rejected));
            }
        }
        Ok(())
    })
    .await;
    // Publishing generation 2 again repairs etcd; the replicas reload the group and find
    // nothing to change.
    let repair = publish(&endpoints, 2).await;
    assert_eq!((repair.puts, repair.deletes), (1, 1));
    eventually("replicas apply the repair", || {
        for (r, replica) in replicas.iter().enumerate() {
            if replica.source().status().revision < repair.revision {
                return Err(format!("replica {r}"));
            }
        }
        Ok(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    clients.wait_all(2).await;
    assert_eq!(
        before,
        clients.resent(),
        "nothing sent for refused or repaired content"
    );

    // Kill a replica: its clients move to the others and are sent nothing they hold.
    let before = clients.resent();
    let moved: Vec<usize> = (0..clients.views.len())
        .filter(|&i| clients.views[i].1.lock().unwrap().replica == 0)
        .collect();
    replicas[0].kill().await;
    eventually("the clients of the killed replica move", || {
        for &i in &moved {
            let v = clients.views[i].1.lock().unwrap();
            if v.replica == 0 || v.streams < 2 {
                return Err(format!(
                    "client {i} on replica {} after {} streams",
                    v.replica, v.streams
                ));
            }
        }
        Ok(())
    })
    .await;
    // The new streams are live: the next publication arrives on them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let failover = clients.resent();
    print_resent("replica killed", &before, &failover);
    publish(&endpoints, 3).await;
    clients.wait_all(3).await;
    replicas[0].restart().await;

    // Kill one etcd member: quorum holds; replicas are fed and publications arrive.
    etcd.kill(0);
    publish(&endpoints[1..], 4).await;
    clients.wait_all(4).await;
    eventually("replicas fed with two members", || {
        fed(&replicas, &[0, 1, 2], true)
    })
    .await;

    // Kill quorum: replicas serve their last state and report it.
    etcd.kill(1);
    eventually("replicas notice etcd is lost", || {
        fed(&replicas, &[0, 1, 2], false)
    })
    .await;
    for r in &replicas {
        assert_eq!(r.health(HEALTH_SERVICE).await, NOT_SERVING);
        assert_eq!(r.health("").await, SERVING, "the replica still serves");
    }
    let gen99 = publication(99);
    let refused = etcd::publish(&endpoints[2..], PREFIX, &gen99, Duration::from_millis(500)).await;
    assert!(refused.is_err(), "no publication without quorum");
    tokio::time::sleep(Duration::from_millis(500)).await;
    clients.wait_all(4).await;

    // etcd is back: replicas resume from their revision and resend nothing.
    let before = clients.resent();
    etcd.restart(0);
    etcd.restart(1);
    etcd.wait_ready(WAIT).await;
    eventually("replicas resume", || fed(&replicas, &[0, 1, 2], true)).await;
    for r in &replicas {
        assert_eq!(r.health(HEALTH_SERVICE).await, SERVING);
        assert_eq!(r.source().status().loads, 1, "resumed, not reloaded");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resumed = clients.resent();
    print_resent("quorum back", &before, &resumed);
    assert_eq!(before, resumed, "nothing is sent when replicas resume");
    publish(&endpoints, 5).await;
    clients.wait_all(5).await;

    // Replica 2 is cut off while etcd compacts past its revision: it serves its last
    // state, then reloads and publishes only what differs.
    link.cut().await;
    eventually("replica 2 notices", || fed(&replicas, &[2], false)).await;
    publish(&endpoints, 6).await;
    let last = publish(&endpoints, 7).await;
    clients.wait_gen(7, |v| v.replica != 2).await;
    clients.wait_gen(5, |v| v.replica == 2).await;
    let mut member = Member::connect(&endpoints[0], Duration::from_secs(2))
        .await
        .unwrap();
    member
        .compact(CompactionRequest {
            revision: last.revision,
            physical: true,
        })
        .await
        .unwrap();
    let before = clients.resent();
    link.restore().await;
    clients.wait_all(7).await;
    let status = replicas[2].source().status();
    assert_eq!(status.loads, 2, "reloaded after the compaction: {status:?}");
    print_resent("compacted while cut off", &before, &clients.resent());

    // Restart every replica at once: no client loses its configuration.
    let before = clients.resent();
    let streams: Vec<u64> = clients
        .views
        .iter()
        .map(|(_, v)| v.lock().unwrap().streams)
        .collect();
    for r in replicas.iter_mut() {
        r.kill().await;
    }
    for r in replicas.iter_mut() {
        r.restart().await;
    }
    eventually("every client has a new stream", || {
        let old = clients
            .views
            .iter()
            .zip(&streams)
            .filter(|((_, v), &before)| v.lock().unwrap().streams <= before)
            .count();
        if old == 0 {
            Ok(())
        } else {
            Err(format!("{old} clients"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    clients.wait_all(7).await;
    print_resent("every replica restarted", &before, &clients.resent());
    publish(&endpoints, 8).await;
    clients.wait_all(8).await;

    // Nothing older after newer, nothing missing, and nothing resent where the protocol
    // lets a client say what it holds.
    let violations = clients.violations();
    assert!(violations.is_empty(), "{violations:#?}");
    let total = clients.resent();
    print_resent("whole run", &Resent::new(), &total);
    // Incremental: initial_resource_versions says exactly what is held.
    for kind in [Kind::DeltaWildcard, Kind::DeltaNamed] {
        for t in ["CDS", "EDS"] {
            assert_eq!(total[&(kind, t)].1, 0, "{kind:?} {t}: bytes resent");
        }
    }
    // SotW wildcard CDS: version_info is the digest of the full state held.
    assert_eq!(
        total[&(Kind::SotwWildcard, "CDS")].1,
        0,
        "SotW wildcard: bytes resent"
    );
    // SotW by name: exactly the held names, once per new stream (see the module docs).
    for key in [
        (Kind::SotwWildcard, "EDS"),
        (Kind::SotwNamed, "CDS"),
        (Kind::SotwNamed, "EDS"),
    ] {
        let (resent, _, required) = total[&key];
        assert!(required > 0, "{key:?}: clients moved");
        assert_eq!(
            resent, required,
            "{key:?}: resent what the protocol requires"
        );
    }
    assert!(failover[&(Kind::SotwNamed, "CDS")].0 > 0);

    // What etcd holds is what was published last.
    assert_eq!(etcd_keys(&endpoints[0]).await, 2 * CLUSTERS);

    clients.stop().await;
    for r in replicas.iter_mut() {
        r.kill().await;
    }
}

// ------------------------------------------------------------------ figures

/// A replica in a process of its own (`examples/etcd_replica.rs`), so that its memory can
/// be read apart from the clients'.
struct ReplicaProcess {
    child: std::process::Child,
    addr: SocketAddr,
}

impl ReplicaProcess {
    fn spawn(endpoints: &[String]) -> ReplicaProcess {
        // target/<profile>/deps/etcd_replicas-<hash> -> target/<profile>/examples/etcd_replica
        let exe = std::env::current_exe().unwrap();
        let binary = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples/etcd_replica");
        assert!(
            binary.exists(),
            "build it first: cargo build --release -p xds-sansio-tonic --features etcd --example etcd_replica ({})",
            binary.display()
        );
        let addr: SocketAddr = format!("127.0.0.1:{}", etcd_support::free_port())
            .parse()
            .unwrap();
        let child = std::process::Command::new(binary)
            .arg(addr.to_string())
            .arg(endpoints.join(","))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        ReplicaProcess { child, addr }
    }

    /// Resident memory, in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    async fn wait_fed(&self) {
        let deadline = StdInstant::now() + WAIT;
        loop {
            let fed = async {
                let channel =
                    tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
                        .ok()?
                        .connect()
                        .await
                        .ok()?;
                let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
                let request = tonic_health::pb::HealthCheckRequest {
                    service: HEALTH_SERVICE.into(),
                };
                Some(client.check(request).await.ok()?.into_inner().status == SERVING)
            };
            if fed.await == Some(true) {
                return;
            }
            assert!(
                StdInstant::now() < deadline,
                "replica {} not fed",
                self.addr
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The figures of `benches/README.md` ("Replicas on etcd"). Run in release:
///
/// ```text
/// cargo build --release -p xds-sansio-tonic --features etcd --example etcd_replica
/// cargo test --release -p xds-sansio-tonic --features etcd --test etcd_replicas -- --ignored --nocapture
/// ```
///
/// `XDS_ETCD_STREAMS_PER_REPLICA` (default 1 000), `XDS_ETCD_PUBLICATIONS` (default 30),
/// `XDS_ETCD_BIG_GROUP` (resources of the memory-per-resource group, default 10 000),
/// `XDS_ETCD_SHARED_CONNECTIONS=1` (the streams to a replica share one HTTP/2 connection,
/// else each has its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measuring program, not a test: run it in release (see its docs)"]
async fn measure_replicas_on_etcd() {
    let per_replica = env_usize("XDS_ETCD_STREAMS_PER_REPLICA", 1000);
    let publications = env_usize("XDS_ETCD_PUBLICATIONS", 30) as u32;
    let big = env_usize("XDS_ETCD_BIG_GROUP", 10_000);
    let etcd = EtcdCluster::start(3).await;
    let endpoints = etcd.endpoints();
    publish(&endpoints, 1).await;
    let mut replicas: Vec<ReplicaProcess> = (0..REPLICAS)
        .map(|_| ReplicaProcess::spawn(&endpoints))
        .collect();
    for r in &replicas {
        r.wait_fed().await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle: Vec<u64> = replicas.iter().map(ReplicaProcess::rss).collect();

    // Streams: the four kinds of client, spread evenly.
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    let shared = std::env::var("XDS_ETCD_SHARED_CONNECTIONS").is_ok_and(|v| v == "1");
    let channels = shared.then(|| {
        let lazy = |a: &SocketAddr| {
            tonic::transport::Endpoint::from_shared(format!("http://{a}"))
                .unwrap()
                .connect_lazy()
        };
        Arc::new(addrs.iter().map(lazy).collect::<Vec<_>>())
    });
    println!(
        "{} streams per replica, {}",
        per_replica,
        if shared {
            "one connection per replica"
        } else {
            "one connection per stream"
        }
    );
    let clients = Clients::start_on(per_replica * REPLICAS, addrs, channels);
    let deadline = StdInstant::now() + Duration::from_secs(300);
    while clients
        .views
        .iter()
        .any(|(_, v)| v.lock().unwrap().holds(1).is_err())
    {
        assert!(StdInstant::now() < deadline, "clients did not converge");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let busy: Vec<u64> = replicas.iter().map(ReplicaProcess::rss).collect();
    for r in 0..REPLICAS {
        println!(
            "replica {r}: {} B idle (40 resources), {} B with {per_replica} streams: {} B per stream",
            idle[r],
            busy[r],
            (busy[r].saturating_sub(idle[r])) / per_replica as u64
        );
    }

    // Time from the publish call (a read and one etcd transaction) to every client.
    let mut to_all = Vec::new();
    let mut per_client = Vec::new();
    for gen in 2..=publications + 1 {
        let t0 = StdInstant::now();
        publish(&endpoints, gen).await;
        let committed = t0.elapsed();
        let deadline = StdInstant::now() + Duration::from_secs(60);
        loop {
            let done = clients
                .views
                .iter()
                .all(|(_, v)| v.lock().unwrap().arrived.contains_key(&gen));
            if done {
                break;
            }
            assert!(
                StdInstant::now() < deadline,
                "generation {gen} did not arrive"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut last = Duration::ZERO;
        for (_, v) in &clients.views {
            let at = v.lock().unwrap().arrived[&gen].duration_since(t0);
            last = last.max(at);
            per_client.push(at);
        }
        to_all.push(last);
        if gen == 2 {
            println!("publish call returned after {committed:?}");
        }
    }
    to_all.sort();
    per_client.sort();
    println!(
        "{} publications, {} streams over {REPLICAS} replicas: to every client p50 {:?} p99 {:?} max {:?}; per client p50 {:?} p99 {:?}",
        to_all.len(),
        per_replica * REPLICAS,
        percentile(&to_all, 0.5),
        percentile(&to_all, 0.99),
        to_all.last().unwrap(),
        percentile(&per_client, 0.5),
        percentile(&per_client, 0.99),
    );

    // Failover: kill replica 0's process; its clients move; count what is resent.
    let before = clients.resent();
    let moved: Vec<usize> = (0..clients.views.len())
        .filter(|&i| clients.views[i].1.lock().unwrap().replica == 0)
        .collect();
    let streams_before: Vec<u64> = moved
        .iter()
        .map(|&i| clients.views[i].1.lock().unwrap().streams)
        .collect();
    drop(replicas.remove(0));
    let deadline = StdInstant::now() + Duration::from_secs(120);
    while moved.iter().zip(&streams_before).any(|(&i, &n)| {
        let v = clients.views[i].1.lock().unwrap();
        v.replica == 0 || v.streams <= n
    }) {
        assert!(StdInstant::now() < deadline, "clients did not move");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let gen = publications + 2;
    publish(&endpoints, gen).await;
    let deadline = StdInstant::now() + Duration::from_secs(120);
    while clients
        .views
        .iter()
        .any(|(_, v)| v.lock().unwrap().holds(gen).is_err())
    {
        assert!(
            StdInstant::now() < deadline,
            "generation {gen} after the failover"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("failover of {} clients:", moved.len());
    print_resent("replica process killed", &before, &clients.resent());
    assert!(
        clients.violations().is_empty(),
        "{:#?}",
        clients.violations()
    );

    // Memory per resource: a group of `big` resources that no client reads.
    let before: Vec<u64> = replicas.iter().map(ReplicaProcess::rss).collect();
    let mut types = BTreeMap::new();
    let names: Vec<String> = (0..big / 2).map(|i| format!("big{i:06}")).collect();
    types.insert(
        CDS.to_string(),
        names
            .iter()
            .map(|n| ResourceEntry::new(n, cluster_body(n, 1)))
            .collect(),
    );
    types.insert(
        EDS.to_string(),
        names
            .iter()
            .map(|n| ResourceEntry::new(n, endpoints_body(n, 1)))
            .collect(),
    );
    let mut p = Publication::new();
    p.set_group("big", types).unwrap();
    let written = etcd::publish(&endpoints, PREFIX, &p, Duration::from_secs(30))
        .await
        .unwrap();
    let bytes: usize = names
        .iter()
        .map(|n| cluster_body(n, 1).len() + endpoints_body(n, 1).len())
        .sum();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after: Vec<u64> = replicas.iter().map(ReplicaProcess::rss).collect();
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        println!(
            "replica {}: {} resources ({} B of bodies, etcd revision {}): {} B more, {} B per resource",
            i + 1,
            2 * names.len(),
            bytes,
            written.revision,
            a.saturating_sub(*b),
            a.saturating_sub(*b) / (2 * names.len()) as u64
        );
    }
    clients.stop().await;
}
