//! The management server: [`XdsServer`], built by [`XdsServerBuilder`].
//!
//! # Shape
//!
//! - **Node groups** (go-control-plane's `NodeHash` + `SnapshotCache`): a function maps a
//!   stream's node to a group key ([`XdsServerBuilder::node_group`]; by default every node reads
//!   [`DEFAULT_GROUP`]). Each group has its own [`ResourceStore`]; the application
//!   publishes into a group by key ([`XdsServer::publish`], [`XdsServer::update`]), and a
//!   publish wakes only the streams of that group whose subscriptions it touches (by name,
//!   alias, `xdstp://` glob or wildcard). Several types published in one call are one
//!   revision: every stream sees all of it or none of it.
//! - **One task per stream** owns its [`ServerStream`](xds_sansio::ServerStream) and
//!   drives it by the core's contract; the store is read-locked only while a response is
//!   built, never across an `.await`.
//! - **Flow control, latest state wins**: a stream builds its next response only when the
//!   one before it has left for the transport; the core keeps what changed meanwhile as
//!   state, so a slow or stalled peer never holds a queue of stale responses and never
//!   blocks the publisher or another stream.
//! - **Authorization** ([`XdsServerBuilder::authorize`]): sees the peer ([`Peer`]: address,
//!   metadata, with feature `tls` the client certificate) and the node the stream claims,
//!   and decides whether it may read the node's group; a refusal ends the stream with
//!   `PERMISSION_DENIED` before it reads anything.
//! - **Limits**, each a clear gRPC status, a tracing event and a metric, never a panic or
//!   a silent drop: streams in all (`RESOURCE_EXHAUSTED`), request size (tonic:
//!   `OUT_OF_RANGE`), response size (`RESOURCE_EXHAUSTED`), time to the first request
//!   (`DEADLINE_EXCEEDED`), and the core's [`ServerLimits`] per request and stream
//!   (`RESOURCE_EXHAUSTED`). Protocol errors end the stream with the code the core gives
//!   ([`ProtocolError::grpc_code`](xds_sansio::server::ProtocolError::grpc_code)); every
//!   reason maps to its status in one place (`ending.rs`).
//! - **Storm protection** ([`XdsServerBuilder::admission`], off by default): new streams
//!   are admitted at a rate (a token bucket) or through a window (at most so many new
//!   streams whose first response is not yet acknowledged), wait for their turn a bounded
//!   time, and past it or past a cap are shed with `UNAVAILABLE` and a
//!   `grpc-retry-pushback-ms` hint; streams that present versions go first. The decisions are [`admission`]'s, a pure
//!   type in virtual time; the stream task applies them at the first request.
//! - **Shutdown** ([`XdsServer::shutdown`], or the signal given to
//!   [`XdsServer::serve_with_shutdown`]): the listener stops accepting, the health service
//!   says `NOT_SERVING`, each stream lets its response in flight go and ends with
//!   `UNAVAILABLE`, and serving returns once the connections have closed (or after the
//!   grace period).
//! - **Observability**: a `tracing` span per stream (`xds_stream`, with id, method, peer,
//!   node and group), events for ACK, NACK, subscriptions and every ending; metrics through
//!   the `metrics` facade ([`metrics::names`]); [`Callbacks`] for the application.

pub mod admission;
mod admitting;
pub(crate) mod applied;
mod debug;
mod ending;
mod faults;
mod framing;
mod group;
mod hooks;
pub mod metrics;
#[cfg(feature = "etcd")]
mod source_health;
mod stream;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::body::Body;
use tonic::codec::CompressionEncoding;
use tonic::codegen::http;
use tonic::server::{Grpc, StreamingService};
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::{Status, Streaming};
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{
    BodyChecks, Consistency, EncodedBytes, ResourceEntry, ResourceStore, Revision, StoreError,
    StoreOp,
};
use xds_sansio::time::StdClock;
use xds_sansio::{ServerConfig, Transport, Variant};

use crate::wire::{add_every_service, route, EncodedCodec, WireRequest, SERVICES};
pub use admission::Admission;
pub use applied::{NodeApplied, TypeApplied};
use ending::Refusal;
use group::Group;
pub use hooks::{Authorize, Callbacks, Peer, StreamInfo, DEFAULT_GROUP};
pub use xds_sansio::server::ServerLimits;

/// How the server behaves; set through [`XdsServerBuilder`].
#[derive(Clone, Debug)]
struct Options {
    /// The core's per-stream configuration (variant and transport are the method's).
    stream: ServerConfig,
    max_streams: Option<usize>,
    first_request_timeout: Option<Duration>,
    max_decoding_message_size: Option<usize>,
    max_encoding_message_size: Option<usize>,
    accept_compressed: Vec<CompressionEncoding>,
    send_compressed: Vec<CompressionEncoding>,
    shutdown_grace: Duration,
    health: bool,
    /// Whether `routes` serves the per-node CSDS ([`XdsServer::csds_service`]).
    csds: bool,
    /// Whether `routes` serves the debug page ([`XdsServerBuilder::debug`]).
    debug: bool,
    /// Every group's store checks bodies (on by default: see `XdsServerBuilder::body_checks`).
    body_checks: BodyChecks,
    /// Every group's store checks references.
    consistency: Consistency,
    /// Faults injected into every stream ([`XdsServerBuilder::faults`]).
    #[cfg(feature = "faults")]
    faults: Option<Arc<xds_sansio_conformance::faults::FaultPlan>>,
    /// Storm protection ([`XdsServerBuilder::admission`]).
    admission: Option<Admission>,
}

type NodeGroupFn = dyn Fn(&Node) -> String + Send + Sync;

/// What every stream task and every handle shares.
struct Shared {
    options: Options,
    node_group: Box<NodeGroupFn>,
    authorize: Box<dyn Authorize>,
    callbacks: Box<dyn Callbacks>,
    groups: Mutex<HashMap<Arc<str>, Arc<Group>>>,
    clock: StdClock,
    /// Every open stream's applied state.
    applied: Arc<applied::Registry>,
    next_stream: AtomicU64,
    open_streams: AtomicUsize,
    /// `true` once shutdown began.
    shutdown: watch::Sender<bool>,
    /// Bumped to end every open stream.
    generation: watch::Sender<u64>,
    health: tonic_health::server::HealthReporter,
    /// Storm protection's state, when on.
    admission: Option<admitting::Admitting>,
}

impl Shared {
    fn next_stream_id(&self) -> u64 {
        self.next_stream.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts a new stream, or refuses it.
    fn acquire_stream(self: &Arc<Self>) -> Result<stream::OpenSlot, Refusal> {
        if *self.shutdown.borrow() {
            return Err(Refusal::ShuttingDown);
        }
        let limit = self.options.max_streams.unwrap_or(usize::MAX);
        self.open_streams
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .map_err(|_| Refusal::TooManyStreams(limit))?;
        Ok(stream::OpenSlot(self.clone()))
    }

    fn release_stream(&self) {
        self.open_streams.fetch_sub(1, Ordering::AcqRel);
    }

    /// A stream storm protection admitted (or told to wait, or queued) ended.
    fn release_admission(&self) {
        if let Some(admitting) = &self.admission {
            admitting.release();
        }
    }

    /// A stream warming in storm protection's window since `since` settled.
    fn settle_warming(&self, since: xds_sansio::time::Instant) {
        if let Some(admitting) = &self.admission {
            admitting.settled(self.clock.now(), since);
        }
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Group>>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The group `key`, created empty if new.
    fn group(&self, key: &str) -> Arc<Group> {
        let mut groups = self.groups();
        if let Some(group) = groups.get(key) {
            return group.clone();
        }
        let group = Arc::new(Group::new(
            key,
            self.options.body_checks,
            self.options.consistency,
        ));
        groups.insert(group.key.clone(), group.clone());
        group
    }

    /// Drops a group no stream reads and nothing was published to (created by a stream
    /// whose node maps to a key the application never used), so clients cannot make the
    /// server hold groups without end.
    fn forget_if_unused(&self, group: &Arc<Group>) {
        let mut groups = self.groups();
        if group.is_unused() {
            groups.remove(&group.key);
        }
    }

    fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }
}

/// Configures an [`XdsServer`].
pub struct XdsServerBuilder {
    options: Options,
    node_group: Box<NodeGroupFn>,
    authorize: Box<dyn Authorize>,
    callbacks: Box<dyn Callbacks>,
    transport: tonic::transport::Server,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
}

impl Default for XdsServerBuilder {
    fn default() -> Self {
        XdsServerBuilder {
            options: Options {
                // One response per type in flight: HTTP/2 buffers what is written (up to
                // hundreds of KiB per stream), so without it a slow reader would be sent a
                // queue of stale states.
                stream: {
                    let mut stream = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
                    stream.await_ack = true;
                    stream
                },
                max_streams: Some(100_000),
                first_request_timeout: Some(Duration::from_secs(60)),
                max_decoding_message_size: None,
                max_encoding_message_size: None,
                accept_compressed: Vec::new(),
                send_compressed: Vec::new(),
                shutdown_grace: Duration::from_secs(5),
                health: true,
                csds: false,
                debug: false,
                body_checks: BodyChecks::Enforce,
                consistency: Consistency::Off,
                #[cfg(feature = "faults")]
                faults: None,
                admission: None,
            },
            node_group: Box::new(|_: &Node| String::from(DEFAULT_GROUP)),
            authorize: Box::new(hooks::AllowAll),
            callbacks: Box::new(()),
            transport: tonic::transport::Server::builder(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl XdsServerBuilder {
    /// Maps a node to the key of the group it reads (go-control-plane's `NodeHash`). By
    /// default every node reads [`DEFAULT_GROUP`].
    pub fn node_group(mut self, f: impl Fn(&Node) -> String + Send + Sync + 'static) -> Self {
        self.node_group = Box::new(f);
        self
    }

    /// Decides whether a stream may read its node's group (default: every stream may).
    pub fn authorize(mut self, authorize: impl Authorize) -> Self {
        self.authorize = Box::new(authorize);
        self
    }

    /// Callbacks on streams, requests, responses, ACKs and NACKs, and publishes.
    pub fn callbacks(mut self, callbacks: impl Callbacks) -> Self {
        self.callbacks = Box::new(callbacks);
        self
    }

    /// Adjusts the core's configuration of every stream (not-found reporting, heartbeats,
    /// SotW `resource_errors`, sticky legacy wildcard, limits); the variant and transport are
    /// the gRPC method's.
    pub fn stream_config(mut self, f: impl FnOnce(&mut ServerConfig)) -> Self {
        f(&mut self.options.stream);
        self
    }

    /// The core's limits on what one client may make a stream hold (names per request,
    /// name length, types per stream); beyond them the stream ends with
    /// `RESOURCE_EXHAUSTED`.
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.options.stream.limits = limits;
        self
    }

    /// At most this many streams at once, all methods and connections together (default
    /// 100 000; `None`: no limit); a call beyond it is refused with `RESOURCE_EXHAUSTED`.
    pub fn max_streams(mut self, limit: Option<usize>) -> Self {
        self.options.max_streams = limit;
        self
    }

    /// What a publication's bodies are checked for, in every group (default
    /// [`BodyChecks::Enforce`]: a type URL outside the catalog, a body named otherwise than
    /// its entry, or one unreadable where it names other resources is refused with a
    /// [`StoreError`] naming the resource and the field, before any client sees it).
    /// [`BodyChecks::Off`] serves any bytes (placeholders in tests, opaque types).
    pub fn body_checks(mut self, checks: BodyChecks) -> Self {
        self.options.body_checks = checks;
        self
    }

    /// Whether every group refuses a publication that leaves a reference dangling
    /// ([`Consistency::Enforce`]; default off). It checks the references of the catalog's
    /// types ([`xds_sansio::refs`]) to names of any type, published or not.
    pub fn consistency(mut self, consistency: Consistency) -> Self {
        self.options.consistency = consistency;
        self
    }

    /// A stream whose first request (with its node) has not arrived this long after it
    /// opened ends with `DEADLINE_EXCEEDED` (default 60 s; `None`: wait for ever).
    pub fn first_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.options.first_request_timeout = timeout;
        self
    }

    /// The largest request accepted, in bytes (tonic's default, 4 MiB, when unset); a
    /// larger one ends the stream with `OUT_OF_RANGE`.
    pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
        self.options.max_decoding_message_size = Some(limit);
        self
    }

    /// The largest response sent, in bytes (default: no limit); a stream whose next
    /// response is larger ends with `RESOURCE_EXHAUSTED`. Clients have their own limit
    /// (gRPC's default is 4 MiB): a full-state LDS/CDS response grows with the store.
    pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
        self.options.max_encoding_message_size = Some(limit);
        self
    }

    /// Accepts requests compressed with `encoding` (features `gzip`, `zstd`).
    pub fn accept_compressed(mut self, encoding: CompressionEncoding) -> Self {
        self.options.accept_compressed.push(encoding);
        self
    }

    /// Compresses responses with `encoding` when the client accepts it (features `gzip`,
    /// `zstd`). Compression applies to the encoded bytes: responses are still never
    /// re-encoded.
    pub fn send_compressed(mut self, encoding: CompressionEncoding) -> Self {
        self.options.send_compressed.push(encoding);
        self
    }

    /// HTTP/2 keepalive: a PING every `interval`, the connection closed when one is not
    /// answered within `timeout`.
    pub fn keepalive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.transport = self
            .transport
            .http2_keepalive_interval(Some(interval))
            .http2_keepalive_timeout(Some(timeout));
        self
    }

    /// Any other setting of tonic's server (timeouts, concurrency per connection, HTTP/2
    /// windows, TCP keepalive, layers are not supported here: use [`XdsServer::routes`]).
    pub fn transport(
        mut self,
        f: impl FnOnce(tonic::transport::Server) -> tonic::transport::Server,
    ) -> Self {
        self.transport = f(self.transport);
        self
    }

    /// Serves over TLS (with a client CA in the config: mutual TLS, and [`Peer`] carries
    /// the client's certificate chain).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: tonic::transport::ServerTlsConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// How long shutdown waits for a stream's response in flight and closing status, and
    /// then for connections to close (default 5 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.options.shutdown_grace = grace;
        self
    }

    /// Whether [`XdsServer::serve`] also serves the gRPC health service
    /// (`grpc.health.v1.Health`, default on): `SERVING` for `""` and every discovery
    /// service while serving, `NOT_SERVING` once shutdown begins.
    pub fn health(mut self, on: bool) -> Self {
        self.options.health = on;
        self
    }

    /// Also serve the debug page on the server's port: `GET /debug/applied` answers
    /// [`XdsServer::applied_json`] (what each connected node applied), over HTTP/1.1 too,
    /// so `curl http://ADDR/debug/applied` reads it. Off by default: it names every node
    /// and its errors to whoever may call the port.
    pub fn debug(mut self, on: bool) -> Self {
        self.options.debug = on;
        self
    }

    /// Also serve CSDS on the server's port: what each connected node applied
    /// ([`XdsServer::applied`] through [`XdsServer::csds_service`]). Off by
    /// default: it names every node and its errors to whoever may call the port.
    pub fn csds(mut self, on: bool) -> Self {
        self.options.csds = on;
        self
    }

    /// A test control plane: every stream's responses go through `plan`'s faults (drop,
    /// delay, duplicate, reorder, wrong or stale nonces, resent NACKed responses, closes,
    /// refusals; [`xds_sansio_conformance::faults`]), deterministically from its seed.
    /// Streams are numbered from 1 as they open, for the plan's `stream=` rules. Each fault
    /// is logged (`fault injected`) and counted (`xds_faults_injected_total{fault}`). Never
    /// in production: a client of this server is meant to suffer.
    #[cfg(feature = "faults")]
    pub fn faults(mut self, plan: xds_sansio_conformance::faults::FaultPlan) -> Self {
        self.options.faults = (!plan.is_empty()).then(|| Arc::new(plan));
        self
    }

    /// Storm protection ([`admission`]; default off): new streams are admitted at
    /// `rate` per second after a `burst` (or, with [`Admission::window`], as earlier new
    /// streams acknowledge their first response), wait at most `max_wait` for their turn,
    /// and at most `max_streams` are admitted at once; a stream that presents versions in its
    /// first request (it resumes) is admitted at once and may use a reserved share of the
    /// cap. A stream shed ends with `UNAVAILABLE` and the `grpc-retry-pushback-ms` trailer
    /// (gRFC A6): when to come back, spread so the shed clients do not return together.
    /// Metrics: `xds_admission_admitted_total{arrival,waited}`,
    /// `xds_admission_shed_total{reason}`, `xds_admission_waiting`,
    /// `xds_admission_warming`.
    ///
    /// Off by default because the rate that protects depends on the size of the state a new
    /// client is owed and on the machine, which only the operator knows; a wrong default
    /// would delay the clients of a small server for nothing. [`Admission::default`] is a
    /// starting point measured on two cores with 1 000 clusters (`benches/storm/`). The
    /// builder's [`max_streams`](Self::max_streams) still bounds every call, admitted or
    /// not, before its first request.
    pub fn admission(mut self, admission: Admission) -> Self {
        self.options.admission = Some(admission);
        self
    }

    /// The server (nothing is listening yet: see [`XdsServer::serve`]).
    pub fn build(self) -> XdsServer {
        let health = tonic_health::server::HealthReporter::new();
        let admission = self.options.admission.map(admitting::Admitting::new);
        XdsServer {
            shared: Arc::new(Shared {
                admission,
                options: self.options,
                node_group: self.node_group,
                authorize: self.authorize,
                callbacks: self.callbacks,
                groups: Mutex::new(HashMap::new()),
                clock: StdClock::new(),
                applied: Arc::default(),
                next_stream: AtomicU64::new(0),
                open_streams: AtomicUsize::new(0),
                shutdown: watch::channel(false).0,
                generation: watch::channel(0).0,
                health,
            }),
            transport: self.transport,
            #[cfg(feature = "tls")]
            tls: self.tls,
        }
    }
}

/// An xDS management server: the ADS and every per-type discovery service of the catalog,
/// SotW and delta, v3 and v2, answering from node groups. Cheap to clone: every clone is a
/// handle on the same server. See the [module docs](self).
#[derive(Clone)]
pub struct XdsServer {
    shared: Arc<Shared>,
    transport: tonic::transport::Server,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
}

impl std::fmt::Debug for XdsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsServer")
            .field("streams", &self.stream_count())
            .field("groups", &self.groups())
            .finish_non_exhaustive()
    }
}

impl Default for XdsServer {
    fn default() -> Self {
        XdsServer::builder().build()
    }
}

impl XdsServer {
    /// A builder with the defaults: every node in [`DEFAULT_GROUP`], every stream allowed,
    /// health on, at most 100 000 streams.
    pub fn builder() -> XdsServerBuilder {
        XdsServerBuilder::default()
    }

    /// Applies `ops` to `group`'s store as one revision (creating the group if new): every
    /// stream of the group sees all of them or none, and only the streams whose
    /// subscriptions they touch are woken. Checked before anything changes.
    ///
    /// ```
    /// # use bytes::Bytes;
    /// # use xds_sansio::server::{ResourceEntry, StoreOp};
    /// # use xds_sansio::types::{CLUSTER, ENDPOINT};
    /// # let server = xds_sansio_tonic::XdsServer::builder().build();
    /// // Encoded resources named "c1" (a Cluster and its ClusterLoadAssignment): bodies
    /// // are checked against their type and entry (`XdsServerBuilder::body_checks`).
    /// let c1 = Bytes::from_static(b"\x0a\x02c1");
    /// server.publish("edge", vec![
    ///     StoreOp::Set { type_url: CLUSTER.type_url.into(), entry: ResourceEntry::new("c1", c1.clone()) },
    ///     StoreOp::Set { type_url: ENDPOINT.type_url.into(), entry: ResourceEntry::new("c1", c1) },
    /// ])?;
    /// # Ok::<(), xds_sansio::server::StoreError>(())
    /// ```
    pub fn publish(&self, group: &str, ops: Vec<StoreOp>) -> Result<Revision, StoreError> {
        self.update(group, |store| store.apply(ops))
    }

    /// Makes each listed type of `group` hold exactly its entries, as one revision
    /// ([`ResourceStore::replace_types`]; types not listed are left as they are): a
    /// snapshot, for example a [`ResourceSet`](xds_sansio::server::ResourceSet) of typed
    /// messages.
    pub fn publish_snapshot(
        &self,
        group: &str,
        types: impl Into<BTreeMap<String, Vec<ResourceEntry>>>,
    ) -> Result<Revision, StoreError> {
        let types = types.into();
        self.update(group, |store| store.replace_types(types))
    }

    /// Runs `change` on `group`'s store (creating the group if new) and wakes the streams
    /// the changes concern. The store is locked for writing while `change` runs: it must
    /// not block (there is no `.await` in a closure, by construction).
    pub fn update<R>(&self, group: &str, change: impl FnOnce(&mut ResourceStore) -> R) -> R {
        let group = self.shared.group(group);
        let callbacks = &self.shared.callbacks;
        let (result, woken) = group.update(change, |store, since| {
            callbacks.published(&group.key, store, since);
        });
        if let Some(woken) = woken {
            metrics::published(woken);
            tracing::debug!(group = %group.key, woken, "published");
        }
        result
    }

    /// Reads `group`'s store (an empty store if the group does not exist). The store is
    /// read-locked while `read` runs.
    pub fn read<R>(&self, group: &str, read: impl FnOnce(&ResourceStore) -> R) -> R {
        let existing = self.shared.groups().get(group).cloned();
        match existing {
            Some(group) => read(&group.read()),
            None => read(&ResourceStore::new()),
        }
    }

    /// The keys of every group (published to, or read by a stream), sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.shared.groups().keys().map(|k| k.to_string()).collect();
        keys.sort();
        keys
    }

    /// How many streams are open.
    pub fn stream_count(&self) -> usize {
        self.shared.open_streams.load(Ordering::Acquire)
    }

    /// Every open stream's applied state, by stream id: its node and group, and per type
    /// the version its client ACKed, the one it NACKed with the error, the response in
    /// flight, and when (a management server's per-node status; served as CSDS by
    /// [`XdsServer::csds_service`]).
    pub fn applied(&self) -> Vec<NodeApplied> {
        self.shared.applied.all()
    }

    /// The CSDS service of this server's connected nodes: one `ClientConfig` per open
    /// stream, its node, and per type one `GenericXdsConfig` without a name: the version
    /// its client ACKed (`ACKED`, `last_updated` when), or `NACKED` with `error_state`
    /// (the rejected version, the client's message, when), or `REQUESTED` while the first
    /// response is unanswered ([`XdsServer::applied`]). [`XdsServerBuilder::csds`] serves
    /// it on the server's own port; add it to another router where you need it there.
    pub fn csds_service(&self) -> crate::csds::CsdsService {
        crate::csds::CsdsService::of_nodes(self.shared.applied.clone())
    }

    /// [`XdsServer::applied`] as JSON, for a debug page (one object per stream; times in
    /// seconds since the Unix epoch).
    pub fn applied_json(&self) -> serde_json::Value {
        applied::to_json(&self.shared.applied.all())
    }

    /// Plays a scenario's server lines ([`script::server_timeline`]) into `group` at their
    /// times from now, telling `done` each line's outcome (a line the store refuses is
    /// skipped): the test control plane's scenario mode (feature `faults`).
    ///
    /// [`script::server_timeline`]: xds_sansio_conformance::script::server_timeline
    #[cfg(feature = "faults")]
    pub async fn play(
        &self,
        group: &str,
        steps: Vec<xds_sansio_conformance::script::ServerStep>,
        mut done: impl FnMut(usize, Result<(), String>),
    ) {
        use xds_sansio_conformance::script::ErrorOp;
        let start = tokio::time::Instant::now();
        for step in steps {
            tokio::time::sleep_until(start + step.at).await;
            let outcome = self.update(group, |store| -> Result<(), String> {
                store.apply(step.ops).map_err(|e| e.to_string())?;
                for error in step.errors {
                    match error {
                        ErrorOp::Set {
                            type_url,
                            name,
                            status,
                        } => {
                            store
                                .set_error(&type_url, &name, status)
                                .map_err(|e| e.to_string())?;
                        }
                        ErrorOp::Clear { type_url, name } => {
                            store.clear_error(&type_url, &name);
                        }
                    }
                }
                Ok(())
            });
            done(step.line, outcome);
        }
    }

    /// Ends every open stream with `UNAVAILABLE` (clients reconnect and resume with what
    /// they hold); the server goes on serving.
    pub fn end_streams(&self) {
        self.shared
            .generation
            .send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Begins a graceful shutdown: new calls are refused, every stream ends with
    /// `UNAVAILABLE` after its response in flight, and `serve` returns once connections
    /// have closed (at most about twice the grace period later).
    pub fn shutdown(&self) {
        self.shared.begin_shutdown();
    }

    /// Every discovery service (and, if on, the health service) as tonic routes, to serve
    /// beside other services or behind layers of your own. Call
    /// [`XdsServer::report_health`] when it starts serving.
    pub fn routes(&self) -> Routes {
        let s = &self.shared;
        let mut routes = Routes::builder();
        let shared = s.clone();
        add_every_service(&mut routes, move |request| answer(shared.clone(), request));
        if s.options.health {
            let service =
                tonic_health::server::HealthService::from_health_reporter(s.health.clone());
            routes.add_service(tonic_health::pb::health_server::HealthServer::new(service));
        }
        if s.options.csds {
            routes.add_service(self.csds_service());
        }
        if s.options.debug {
            routes.add_service(debug::DebugService {
                applied: s.applied.clone(),
            });
        }
        routes.routes()
    }

    /// Sets the health service's status of `""` and every discovery service: `SERVING`
    /// unless shutdown has begun.
    pub async fn report_health(&self) {
        let status = if *self.shared.shutdown.borrow() {
            tonic_health::ServingStatus::NotServing
        } else {
            tonic_health::ServingStatus::Serving
        };
        for service in std::iter::once("").chain(SERVICES) {
            self.shared.health.set_service_status(service, status).await;
        }
    }

    /// Serves on `addr` until [`XdsServer::shutdown`].
    pub async fn serve(self, addr: SocketAddr) -> Result<(), ServeError> {
        self.serve_with_shutdown(addr, std::future::pending()).await
    }

    /// Serves on `addr` until `signal` completes or [`XdsServer::shutdown`], then shuts
    /// down gracefully.
    pub async fn serve_with_shutdown(
        self,
        addr: SocketAddr,
        signal: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Bind(addr, e))?;
        self.serve_with_listener(listener, signal).await
    }

    /// Serves on a bound listener (port 0: read its address first) until `signal`
    /// completes or [`XdsServer::shutdown`], then shuts down gracefully.
    pub async fn serve_with_listener(
        self,
        listener: tokio::net::TcpListener,
        signal: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        // The debug page is read with `curl`, over HTTP/1.1 as well.
        #[allow(unused_mut)]
        let mut transport = self
            .transport
            .clone()
            .accept_http1(self.shared.options.debug);
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            transport = transport.tls_config(tls.clone())?;
        }
        self.report_health().await;
        let shared = self.shared.clone();
        let mut requested = shared.shutdown.subscribe();
        let me = self.clone();
        let stop = async move {
            tokio::select! {
                () = signal => {}
                _ = requested.wait_for(|down| *down) => {}
            }
            me.shutdown();
            me.report_health().await;
            tracing::info!("shutting down");
        };
        let mut started = shared.shutdown.subscribe();
        let grace = shared.options.shutdown_grace;
        let serving = transport
            .add_routes(self.routes())
            .serve_with_incoming_shutdown(incoming, stop);
        tokio::select! {
            result = serving => result.map_err(ServeError::from),
            // Connections that do not close (a stalled peer) do not hold the shutdown.
            _ = async {
                let _ = started.wait_for(|down| *down).await;
                tokio::time::sleep(grace * 2).await;
            } => Ok(()),
        }
    }
}

/// Why serving failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound.
    Bind(SocketAddr, std::io::Error),
    /// tonic's transport failed (TLS configuration, accept loop).
    Transport(tonic::transport::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            ServeError::Transport(e) => write!(f, "transport: {e}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Bind(_, e) => Some(e),
            ServeError::Transport(e) => Some(e),
        }
    }
}

impl From<tonic::transport::Error> for ServeError {
    fn from(e: tonic::transport::Error) -> Self {
        ServeError::Transport(e)
    }
}

/// Routes a call to a stream task, or refuses it.
async fn answer(shared: Arc<Shared>, request: http::Request<Body>) -> http::Response<Body> {
    let refuse = |refusal: Refusal| {
        refusal.trace();
        metrics::refused(refusal.label());
        refusal.status().into_http()
    };
    let path = request.uri().path();
    let Some((method, variant, transport)) = route(path) else {
        return refuse(Refusal::UnknownMethod(path.to_string()));
    };
    let slot = match shared.acquire_stream() {
        Ok(slot) => slot,
        Err(refusal) => return refuse(refusal),
    };
    let mut config = shared.options.stream.clone();
    config.variant = variant;
    config.transport = transport;
    // Uncompressed (the server sends nothing compressed): the responses go out as their
    // own buffers, not through tonic's encoder (`framing.rs`).
    let direct = shared
        .options
        .send_compressed
        .is_empty()
        .then(|| Arc::new(Mutex::new(None)));
    let handler = Handler {
        shared: shared.clone(),
        config,
        method,
        slot: Some(slot),
        direct: direct.clone(),
    };
    let response = match variant {
        Variant::Sotw => {
            let mut grpc = configure(
                &shared,
                Grpc::new(EncodedCodec::<DiscoveryRequest>::default()),
            );
            grpc.streaming(handler, request).await
        }
        Variant::Delta => {
            let codec = EncodedCodec::<DeltaDiscoveryRequest>::default();
            configure(&shared, Grpc::new(codec))
                .streaming(handler, request)
                .await
        }
    };
    // tonic answered with its headers (or refused the call: then no receiver was left).
    let taken = direct.and_then(|d| d.lock().unwrap_or_else(PoisonError::into_inner).take());
    match taken {
        Some(responses) => {
            let (parts, _unused) = response.into_parts();
            http::Response::from_parts(parts, Body::new(framing::Responses::new(responses)))
        }
        None => response,
    }
}

/// Where a handler leaves its stream's responses for `answer` to write itself.
type DirectResponses = Arc<Mutex<Option<mpsc::Receiver<Result<EncodedBytes, Status>>>>>;

/// Message sizes and compression, as the builder set them.
fn configure<C: tonic::codec::Codec>(shared: &Shared, mut grpc: Grpc<C>) -> Grpc<C> {
    let options = &shared.options;
    if let Some(limit) = options.max_decoding_message_size {
        grpc = grpc.max_decoding_message_size(limit);
    }
    for encoding in &options.accept_compressed {
        grpc = grpc.accept_compressed(*encoding);
    }
    for encoding in &options.send_compressed {
        grpc = grpc.send_compressed(*encoding);
    }
    grpc
}

struct Handler {
    shared: Arc<Shared>,
    config: ServerConfig,
    method: &'static str,
    slot: Option<stream::OpenSlot>,
    /// When set, the responses are left here and tonic is given an empty stream.
    direct: Option<DirectResponses>,
}

impl<Req: WireRequest> StreamingService<Req> for Handler {
    type Response = EncodedBytes;
    type ResponseStream = ReceiverStream<Result<EncodedBytes, Status>>;
    type Future = std::future::Ready<Result<tonic::Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: tonic::Request<Streaming<Req>>) -> Self::Future {
        // Answer with the response headers at once (some clients, junction-core among them,
        // send their first request only after them) and run the stream in its own task.
        // One slot: the next response is built only when this one has left (flow control).
        let (tx, rx) = mpsc::channel(1);
        let info = stream::info_of(&self.shared, self.method, &self.config, &request);
        if let Some(slot) = self.slot.take() {
            stream::spawn(
                self.shared.clone(),
                slot,
                info,
                self.config.clone(),
                request.into_inner(),
                tx,
            );
        }
        let rx = match &self.direct {
            Some(direct) => {
                *direct.lock().unwrap_or_else(PoisonError::into_inner) = Some(rx);
                // tonic's body is never polled: `answer` replaces it.
                mpsc::channel(1).1
            }
            None => rx,
        };
        std::future::ready(Ok(tonic::Response::new(ReceiverStream::new(rx))))
    }
}
