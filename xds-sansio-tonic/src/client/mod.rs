//! The client: [`XdsClient`], a driver that owns the connections to the management
//! servers of a gRPC bootstrap and serves [`ConfigWatch`]es (a listener's complete
//! configuration) and [`Watch`]es (one resource as it is), on the core's
//! [`Client`](xds_sansio::Client) state machines and its dependency manager.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use xds_sansio_tonic::client::{Bootstrap, ConfigEvent, XdsClient};
//!
//! let client = XdsClient::builder(Bootstrap::from_env()?).build()?;
//! let mut watch = client.watch_listener("listener-1")?;
//! while let Some(event) = watch.next().await {
//!     if let ConfigEvent::Changed(config) = event {
//!         // The listener, its route configuration, clusters and endpoints, all held.
//!         for held in &config.resources {
//!             println!("{} version {}", held.key, held.version);
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # What it does, and where each rule lives
//!
//! - **Bootstrap** ([`bootstrap`]): gRPC's file, from `GRPC_XDS_BOOTSTRAP` or built in
//!   code; what it says and its rules are the core's
//!   ([`xds_sansio::client::session::bootstrap::file`]).
//! - **Connections** (`driver.rs`, one tokio task, on [`crate::call`]): the streams the
//!   core's [`Session`] asks for, ADS or per type ([`XdsClientBuilder::per_type_streams`]), SotW or
//!   incremental ([`XdsClientBuilder::variant`]), TLS through tonic (feature `tls`), HTTP/2
//!   keepalive on demand ([`XdsClientBuilder::keepalive`]); the session hears a stream is up once
//!   its connection is (gRPC A57: no does-not-exist timer runs while connecting).
//! - **Which server, when, and what a watcher is told**: the [`Session`]'s, with
//!   federation by authority (gRPC A47), fallback and revert (A71), the per-stream
//!   jittered backoff (seeded from the OS per client: [`os_seed`]), the view the
//!   watchers are served from, and the dependency managers behind [`ConfigWatch`]es
//!   (A74: a listener and everything it reaches, one manager per listener watched and
//!   one for [`XdsClient::watch_all_config`]; [`XdsClient::dependencies`] says what they
//!   wait for). ACK and NACK are the core's verdicts, with the application's validator
//!   per type ([`XdsClientBuilder::validator`]) and gRPC's NACK semantics (A46).
//! - **Watches** ([`Watch`]): the driver hands each the session's events for it; the
//!   newest state wins, values and errors apart (gRPC A88).
//! - **Status** ([`XdsClient::dump`]): the session's per-resource status and body of what
//!   the watchers are served, the material of the CSDS service ([`crate::csds`]).
//!
//! No protocol rule lives here: the driver moves bytes and time.
//!
//! [`run_stream`] ([`crate::call`]) drives one core `Client` over one gRPC call, for
//! programs that run their own loop.

pub mod bootstrap;
mod driver;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use xds_sansio::client::session::{self, Session, SessionConfig};
use xds_sansio::client::{SharedStr, Validator};
use xds_sansio::types::LISTENER;
use xds_sansio::{ClientConfig, Variant};

pub use crate::call::{run_stream, Io, StreamCommand, StreamEnd, Tap};
pub use bootstrap::{Authority, Bootstrap, BootstrapError, ManagementServer};
pub use watch::{ConfigEvent, ConfigWatch, Watch, WatchError, WatchEvent};
pub use xds_sansio::client::deps::{
    ClusterConfig, DepsConfig, DepsStatus, Failure, ListenerConfig, Resolved, ResourceKey,
};
/// The state of one server of the top-level authority, from [`XdsClient::servers`]: its
/// `server_uri`, whether it is in use and whether a stream to it is up.
pub use xds_sansio::client::session::ServerUse as ServerState;
pub use xds_sansio::client::session::{os_seed, Backoff, BackoffConfig};
pub use xds_sansio::client::session::{DumpEntry, WatchRefused};

use crate::call::ConnectOptions;
use crate::fail_static::CacheDir;
use driver::Op;
use watch::Sink;

/// Why [`XdsClientBuilder::build`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `build` must run inside a tokio runtime (the driver is a task of it).
    NoRuntime,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("XdsClient::builder(..).build() must be called inside a tokio runtime")
    }
}

impl std::error::Error for BuildError {}

/// Configures an [`XdsClient`]: the core's [`SessionConfig`] and how connections are made.
pub struct XdsClientBuilder {
    bootstrap: Bootstrap,
    session: SessionConfig,
    /// A fixed backoff seed (tests); `None`: drawn from the OS at `build`.
    seed: Option<u64>,
    keepalive: Option<(Duration, Duration)>,
    tap: Option<Arc<dyn Tap>>,
    cache: Option<CacheDir>,
}

impl XdsClientBuilder {
    /// SotW (the default, as gRPC) or incremental.
    pub fn variant(mut self, variant: Variant) -> Self {
        self.session.variant = variant;
        self
    }

    /// One stream per type instead of ADS (the default).
    pub fn per_type_streams(mut self, on: bool) -> Self {
        self.session.per_type_streams = on;
        self
    }

    /// The reconnection backoff (default: gRPC's).
    pub fn backoff(mut self, config: BackoffConfig) -> Self {
        self.session.backoff = config;
        self
    }

    /// Fixed backoff seeds, for tests only: clients sharing a seed reconnect in lockstep.
    /// By default each stream's backoff is seeded from the OS.
    pub fn backoff_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The content validator of `type_url`: a rejected resource is NACKed and its watchers
    /// get [`WatchError::Rejected`] while the previous value stays in use.
    pub fn validator(mut self, type_url: &str, validator: impl Validator + 'static) -> Self {
        let validator: Arc<dyn Validator> = Arc::new(validator);
        self.session.validators.push((type_url.into(), validator));
        self
    }

    /// Adjusts the core's configuration of every client the driver makes
    /// (does-not-exist timeout, NACK policy, limits, ...); variant, transport and node are
    /// the driver's, and `ignore_resource_deletion` comes from each server's features.
    pub fn client_config(mut self, f: impl Fn(&mut ClientConfig) + Send + Sync + 'static) -> Self {
        self.session.client_config = Some(Arc::new(f));
        self
    }

    /// HTTP/2 keepalive: a PING every `interval`, the connection dropped when one is not
    /// answered within `timeout` (so a server that stalls is noticed). Off by default, as
    /// in gRPC: servers may refuse frequent pings (gRPC A8).
    pub fn keepalive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.keepalive = Some((interval, timeout));
        self
    }

    /// Sees every message of every stream, under the stream's number.
    pub fn tap(mut self, tap: Arc<dyn Tap>) -> Self {
        self.tap = Some(tap);
        self
    }

    /// How the dependency manager behind [`XdsClient::watch_listener`] behaves (default:
    /// names no configuration reaches any more are unsubscribed after 30 s).
    pub fn dependency_config(mut self, config: DepsConfig) -> Self {
        self.session.deps = config;
        self
    }

    /// Keeps what the watchers are served in `cache`, served at the next start if every
    /// server fails before any answers ([`crate::fail_static`]).
    pub fn fail_static(mut self, cache: CacheDir) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Starts the driver task on the current tokio runtime. Nothing connects until the
    /// first watch.
    pub fn build(self) -> Result<XdsClient, BuildError> {
        tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let mut config = self.session;
        config.backoff_seed = self.seed.unwrap_or_else(os_seed);
        config.node = self.bootstrap.node.clone();
        let connect = driver::Connect {
            options: ConnectOptions {
                timeout: config.backoff.min_connect_timeout,
                keepalive: self.keepalive,
            },
            tap: self.tap,
        };
        let session = Session::new(self.bootstrap.model(), config);
        let servers = self.bootstrap.servers_by_id(&session);
        let (ops, rx) = mpsc::unbounded_channel();
        let model = Arc::new(session.bootstrap().clone());
        driver::spawn(session, servers, connect, self.cache, rx);
        Ok(XdsClient {
            ops,
            bootstrap: Arc::new(self.bootstrap),
            model,
        })
    }
}

/// An xDS client: connections to the bootstrap's management servers (with backoff and
/// fallback), watches, and a status dump. Cheap to clone: every clone is a handle on the
/// same driver, which runs while a handle or a watch is alive. See the
/// [module docs](self).
#[derive(Clone)]
pub struct XdsClient {
    ops: mpsc::UnboundedSender<Op>,
    bootstrap: Arc<Bootstrap>,
    /// The core's model of it, to check watches before they reach the driver.
    model: Arc<session::BootstrapServers>,
}

impl std::fmt::Debug for XdsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsClient")
            .field("servers", &self.bootstrap.servers)
            .finish_non_exhaustive()
    }
}

impl XdsClient {
    /// A builder: SotW over ADS, gRPC's backoff, no validators.
    pub fn builder(bootstrap: Bootstrap) -> XdsClientBuilder {
        let node = bootstrap.node.clone();
        XdsClientBuilder {
            bootstrap,
            session: SessionConfig::new(Variant::Sotw, node, 0),
            seed: None,
            keepalive: None,
            tap: None,
            cache: None,
        }
    }

    /// Watches listener `name` and everything it reaches (its route configuration,
    /// clusters, their endpoints and secrets, subscribed as references lead to them), and
    /// delivers each complete configuration it resolves to (gRPC A74): the usual way to
    /// watch a listener. The first event is the configuration delivered already, if any.
    /// See [`ConfigWatch`].
    pub fn watch_listener(&self, name: &str) -> Result<ConfigWatch, WatchRefused> {
        let (name, _) = self.model.check_watch(LISTENER.type_url, Some(name))?;
        self.start_config_watch(Some(name))
    }

    /// Envoy's shape: every listener and every cluster (legacy wildcards), each listener's
    /// complete configuration delivered as for [`XdsClient::watch_listener`]; a listener
    /// that goes away is delivered as not existing. Each listener is resolved after every
    /// change, so this costs what the listeners hold.
    pub fn watch_all_config(&self) -> Result<ConfigWatch, WatchRefused> {
        self.start_config_watch(None)
    }

    fn start_config_watch(&self, listener: Option<SharedStr>) -> Result<ConfigWatch, WatchRefused> {
        self.start(|id, sink| Op::WatchConfig { id, listener, sink })
    }

    /// Hands a new watch's sink to the driver.
    fn start<E>(&self, op: impl FnOnce(u64, Arc<Sink<E>>) -> Op) -> Result<Watch<E>, WatchRefused> {
        let id = driver::next_watch_id();
        let sink = Arc::new(Sink::default());
        self.ops
            .send(op(id, sink.clone()))
            .map_err(|_| WatchRefused::Closed)?;
        Ok(Watch {
            id,
            sink,
            unwatch: Box::new(self.ops.clone()),
        })
    }

    /// Watches resource `name` of `type_url`, as it is: no reference is followed (for a
    /// listener's complete configuration, [`XdsClient::watch_listener`]). The first event
    /// is what the client already knows of it, if anything; an `xdstp://` name goes to
    /// its authority's servers.
    pub fn watch(&self, type_url: &str, name: &str) -> Result<Watch, WatchRefused> {
        self.start_watch(type_url, Some(name))
    }

    /// Watches every resource of `type_url` (a wildcard subscription: the legacy form for
    /// listeners and clusters, `*` for the others).
    pub fn watch_all(&self, type_url: &str) -> Result<Watch, WatchRefused> {
        self.start_watch(type_url, None)
    }

    fn start_watch(&self, type_url: &str, name: Option<&str>) -> Result<Watch, WatchRefused> {
        let (canonical, _) = self.model.check_watch(type_url, name)?;
        let name = name.map(|_| canonical);
        let type_url = SharedStr::from(type_url);
        self.start(|id, sink| Op::Watch {
            id,
            type_url,
            name,
            sink,
        })
    }

    /// Every resource the watchers are served, with the core's status from the client of
    /// the server whose data is in use, sorted by type and name (empty once shut down).
    pub async fn dump(&self) -> Vec<DumpEntry> {
        self.ask(Session::dump).await
    }

    /// What the dependency managers behind the configuration watches know of each
    /// resource: held, waited for or failed, and what needs it; manager by manager (the
    /// listeners watched by name in name order, then [`XdsClient::watch_all_config`]'s),
    /// so a resource several listeners reach is listed once for each (empty once shut
    /// down).
    pub async fn dependencies(&self) -> Vec<DepsStatus> {
        self.ask(Session::deps_dump).await
    }

    /// The top-level servers, primary first: which are in use and connected.
    pub async fn servers(&self) -> Vec<ServerState> {
        self.ask(Session::servers).await
    }

    /// Asks the driver; empty once it has shut down.
    async fn ask<T: Send + 'static>(&self, read: fn(&Session) -> Vec<T>) -> Vec<T> {
        let (tx, rx) = oneshot::channel();
        let op = Op::Read(Box::new(move |session| {
            let _ = tx.send(read(session));
        }));
        if self.ops.send(op).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// The bootstrap it runs on (its node as sent, with the client's fields).
    pub fn bootstrap(&self) -> &Bootstrap {
        &self.bootstrap
    }

    /// Closes every stream and ends every watch (their `next` returns `None`).
    pub fn shutdown(&self) {
        let _ = self.ops.send(Op::Shutdown);
    }
}
