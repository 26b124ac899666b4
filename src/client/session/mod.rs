//! The client's multi-server session: every management server of a bootstrap, the
//! authorities and their fallback position, the watches and the view they are served
//! from, all in virtual time. One core [`Client`](crate::Client) per stream to each server in use; the
//! embedder opens the connections the session asks for ([`SessionCommand`]), reports what
//! the network did, and hands the watchers what the session tells them ([`SessionEvent`]).
//! The tokio adapter (`xds-sansio-tonic`'s `XdsClient`) is one such embedder; the scenario
//! runner (`xds_sansio_conformance::script`) another.
//!
//! # Method kinds
//!
//! - **inputs** (`handle_*`, never an error): [`Session::handle_connected`],
//!   [`Session::handle_response`], [`Session::handle_ended`],
//!   [`Session::handle_timeout`];
//! - **commands** (a typed error, state unchanged on `Err`): [`Session::watch`],
//!   [`Session::watch_config`], [`Session::unwatch`], [`Session::close_all`];
//! - **outputs**: [`Session::poll_command`] (connect, send, close), then
//!   [`Session::poll_event`], then [`Session::poll_timeout`], drained after every input
//!   or command;
//! - **reads**: [`Session::dump`], [`Session::deps_dump`], [`Session::servers`],
//!   [`Session::in_use`], [`Session::server`].
//!
//! A stream is named by a [`StreamKey`] (its server and its slot there) and a stream
//! number: the session asks for stream `n` with [`SessionCommand::Connect`], and ignores
//! what is reported for any other number, so a late report of a stream it gave up never
//! changes anything.
//!
//! # Decisions
//!
//! - **One core client per stream.** ADS: one per server; per-type streams: one per server
//!   and type. A client outlives its streams, so versions and cache survive reconnects
//!   (the core's rule); subscriptions follow the watches.
//! - **Fallback (gRPC A71, "Change XdsClient to support fallback within each xDS
//!   authority")**: an authority's servers are in priority order and the first
//!   `depth + 1` of them are in use. A server in use fails (the connection cannot be made,
//!   or the stream ends before its first response: gRPC A57, "Handling ADS Stream
//!   Termination"); if it is the lowest in use and a watched resource is not cached
//!   (neither held nor known not to exist; a wildcard whose type never answered), the next
//!   server is started and subscribed to every watched name. Servers above keep retrying
//!   with their own backoff; the first response from a higher-priority server makes it the
//!   lowest in use again and the ones below are closed (`fallback.rs`).
//! - **Whose data a watcher sees**: one view per authority, each entry marked with the
//!   position of the server it came from. A server's update or deletion applies only to
//!   entries from the same or a lower-priority server (A71: "whenever we have a resource
//!   already cached from the primary, we want to use that"); so a fallback server never
//!   overrides or deletes what the primary gave, and a does-not-exist verdict of a
//!   fallback never reaches a name the primary delivered. On reverting, entries from lower
//!   servers take the reverting server's held value or verdict at once, and otherwise stay
//!   until it speaks (`view.rs`).
//! - **Connectivity errors reach watchers once per outage**, when the lowest server in use
//!   fails and no further server is started (every server failed, or nothing was missing);
//!   a value held stays in use (gRPC A88: an ambient error).
//! - **Replicas of one server** ([`ServerEntry::replicas`]: several addresses serving the
//!   same data with the same versions, such as replicas fed from one etcd): one server
//!   for everything above, with one core client per stream, so what it holds survives a
//!   move and is not sent again where the protocol lets it say so (incremental
//!   `initial_resource_versions`; SotW `version_info`). Each stream starts on a replica
//!   drawn from the session's seed, so a fleet of clients spreads over them, and moves to
//!   the next replica whenever its stream fails or ends (after the usual backoff when it
//!   failed before a response, at once otherwise: gRPC A57). The server counts as failed
//!   for fallback and for watchers only once a whole round of replicas has failed, since a
//!   dead replica says nothing about the others.
//! - **Backoff per stream** ([`Backoff`]): reset by a response; a stream that ended after a
//!   response is restarted at once, a failed attempt waits its jittered delay. Each
//!   stream's seed is derived from [`SessionConfig::backoff_seed`], an input, so the same
//!   inputs give the same delays (`channels.rs`).
//! - **Federation (gRPC A47)**: an `xdstp://` name belongs to its authority (servers from
//!   the bootstrap's `authorities`); other names to the top-level servers. A server listed
//!   by several authorities is one connection with the union of their names.
//! - **Configuration watches** (gRPC A74): the core's
//!   [`DependencyManager`](crate::client::deps::DependencyManager)s fed what the watchers
//!   see (`deps.rs`).
//! - **Determinism**: the view and every index are ordered maps, so the order of events
//!   never depends on hashing.

pub mod backoff;
pub mod bootstrap;
mod channels;
mod deps;
pub mod ending;
pub mod fail_static;
mod fallback;
pub mod queue;
mod view;
pub mod watch;

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::client::deps::DepsConfig;
use crate::client::{ResourceState, ResourceStatus, SharedStr, StatusEntry, Validator};
use crate::pb::envoy::config::core::v3::Node;
use crate::time::Instant;
use crate::{ClientConfig, Request, Transport, Variant};

#[cfg(feature = "std")]
pub use backoff::os_seed;
pub use backoff::{Backoff, BackoffConfig};
pub use bootstrap::{
    authority_of, default_listener_template, listener_name, servers_of_authority, BootstrapServers,
    ServerEntry, WatchRefused, FAIL_ON_DATA_ERRORS, IGNORE_RESOURCE_DELETION,
    RESOURCE_TIMER_IS_TRANSIENT_ERROR,
};
pub use ending::StreamEnd;
pub use fail_static::RestoredResource;
pub use queue::{Coalesce, WatchQueue};
pub use watch::{ConfigEvent, DumpEntry, ServerUse, WatchError, WatchEvent};

use channels::Channel;
use view::{Authority, WatchEntry};

/// A server of the session: its index among the distinct servers of the bootstrap, in
/// order of first appearance (the top-level servers, then each authority's, by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerId(pub usize);

/// A stream slot: a server, and a stream to it (one for ADS, one per type otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    /// The server.
    pub server: ServerId,
    /// The slot among its streams.
    pub slot: usize,
}

/// What the embedder must do. See the [module docs](self).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
#[non_exhaustive]
pub enum SessionCommand {
    /// Connect to `key.server` and start the call; once the connection is up, report
    /// [`Session::handle_connected`] with this `stream`; if it cannot be made,
    /// [`Session::handle_ended`].
    Connect {
        /// The slot.
        key: StreamKey,
        /// The stream's number.
        stream: u64,
        /// SotW or incremental.
        variant: Variant,
        /// ADS, or the type of a per-type stream.
        transport: Transport,
        /// The address to connect to: the server's `server_uri`, or one of its replicas
        /// ([`ServerEntry::address`]).
        address: String,
    },
    /// Send `request` on the stream.
    Send {
        /// The slot.
        key: StreamKey,
        /// The stream's number.
        stream: u64,
        /// What to send.
        request: Request,
    },
    /// Close the stream (nothing more will be read from it).
    Close {
        /// The slot.
        key: StreamKey,
        /// The stream's number.
        stream: u64,
    },
}

/// What the session tells the application. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// For watch `id`.
    Watch {
        /// The watch.
        id: u64,
        /// What it is told.
        event: WatchEvent,
    },
    /// For configuration watch `id`.
    Config {
        /// The watch.
        id: u64,
        /// What it is told.
        event: ConfigEvent,
    },
    /// A stream failed before its first response; it is retried after `retry_in`.
    StreamFailed {
        /// The slot.
        key: StreamKey,
        /// Why, as reported.
        end: StreamEnd,
        /// The backoff delay.
        retry_in: Duration,
    },
    /// A stream that had answered ended; it is restarted at once (gRPC A57).
    StreamEnded {
        /// The slot.
        key: StreamKey,
        /// Why, as reported.
        end: StreamEnd,
    },
    /// An authority fell back to its next server (gRPC A71).
    FellBack {
        /// The authority (`""`: the top-level servers).
        authority: String,
        /// The server that failed.
        from: ServerId,
        /// The server now in use below it.
        to: ServerId,
    },
    /// A higher-priority server answered: the authority reverted to it and closed the ones
    /// below (gRPC A71).
    Reverted {
        /// The authority.
        authority: String,
        /// The server in use again.
        to: ServerId,
    },
    /// A server deleted a resource in use; kept (gRPC A53, `ignore_resource_deletion`).
    DeletionIgnored {
        /// Its type.
        type_url: SharedStr,
        /// Its name.
        name: SharedStr,
    },
}

/// A change the application makes to each client's configuration, last.
pub type ClientConfigHook = Arc<dyn Fn(&mut ClientConfig) + Send + Sync>;

/// How the session builds its clients.
#[derive(Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// SotW or incremental.
    pub variant: Variant,
    /// One stream per type instead of ADS.
    pub per_type_streams: bool,
    /// The node every client presents.
    pub node: Node,
    /// The reconnection backoff.
    pub backoff: BackoffConfig,
    /// The seed every stream's backoff is derived from: an input, so the delays are
    /// reproducible; draw it from the operating system per client in production.
    pub backoff_seed: u64,
    /// Applied to each client's configuration last.
    pub client_config: Option<ClientConfigHook>,
    /// Validators per type URL, given to every client.
    pub validators: Vec<(String, Arc<dyn Validator>)>,
    /// The dependency managers' configuration.
    pub deps: DepsConfig,
}

impl SessionConfig {
    /// ADS of `variant` presenting `node`, backoff seeded by `backoff_seed`, the rest
    /// default.
    pub fn new(variant: Variant, node: Node, backoff_seed: u64) -> SessionConfig {
        SessionConfig {
            variant,
            per_type_streams: false,
            node,
            backoff: BackoffConfig::default(),
            backoff_seed,
            client_config: None,
            validators: Vec::new(),
            deps: DepsConfig::default(),
        }
    }
}

impl fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionConfig")
            .field("variant", &self.variant)
            .field("per_type_streams", &self.per_type_streams)
            .field("backoff", &self.backoff)
            .field("backoff_seed", &self.backoff_seed)
            .finish_non_exhaustive()
    }
}

/// The multi-server session. See the [module docs](self).
pub struct Session {
    config: SessionConfig,
    bootstrap: BootstrapServers,
    channels: Vec<Channel>,
    authorities: Vec<Authority>,
    authority_index: BTreeMap<String, usize>,
    watches: BTreeMap<u64, WatchEntry>,
    /// (authority, type, name or `*`) -> watches.
    watchers: BTreeMap<(usize, SharedStr, SharedStr), BTreeSet<u64>>,
    commands: VecDeque<SessionCommand>,
    events: VecDeque<SessionEvent>,
    next_stream: u64,
    last_now: Instant,
    /// The dependency managers of the configuration watches: one per listener watched by
    /// name (gRPC's shape), one for every listener (Envoy's shape) while such a watch lives.
    managers: BTreeMap<deps::Root, deps::Deps>,
    config_watches: BTreeMap<u64, deps::Root>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("servers", &self.channels.len())
            .field("authorities", &self.authorities.len())
            .field("watches", &self.watches.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session over `bootstrap`'s servers; nothing is connected until something is
    /// watched.
    pub fn new(bootstrap: BootstrapServers, config: SessionConfig) -> Session {
        let mut session = Session {
            config,
            bootstrap: BootstrapServers::default(),
            channels: Vec::new(),
            authorities: Vec::new(),
            authority_index: BTreeMap::new(),
            watches: BTreeMap::new(),
            watchers: BTreeMap::new(),
            commands: VecDeque::new(),
            events: VecDeque::new(),
            next_stream: 0,
            last_now: Instant::ZERO,
            managers: BTreeMap::new(),
            config_watches: BTreeMap::new(),
        };
        let mut named: Vec<(String, Vec<ServerEntry>)> =
            alloc::vec![(String::new(), bootstrap.servers.clone())];
        for name in bootstrap.authorities.keys() {
            let servers = bootstrap.servers_of(name).unwrap_or_default().to_vec();
            named.push((name.clone(), servers));
        }
        for (name, servers) in named {
            let channels = servers.into_iter().map(|s| session.channel_of(s)).collect();
            session
                .authority_index
                .insert(name.clone(), session.authorities.len());
            session.authorities.push(Authority::new(name, channels));
        }
        session.bootstrap = bootstrap;
        session
    }

    /// The bootstrap the session was made with.
    pub fn bootstrap(&self) -> &BootstrapServers {
        &self.bootstrap
    }

    /// Every distinct server, by [`ServerId`].
    pub fn server_ids(&self) -> impl Iterator<Item = ServerId> {
        (0..self.channels.len()).map(ServerId)
    }

    /// Server `id`'s configuration.
    pub fn server(&self, id: ServerId) -> Option<&ServerEntry> {
        self.channels.get(id.0).map(|c| &c.server)
    }

    /// The next thing the embedder must do. Call after every input and command, until
    /// `None`.
    pub fn poll_command(&mut self) -> Option<SessionCommand> {
        self.commands.pop_front()
    }

    /// The next thing to tell the application. Call after draining
    /// [`Session::poll_command`], until `None`.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// When [`Session::handle_timeout`] is due: the clients' timers (does-not-exist, TTL),
    /// reconnections and the managers' graces; the last `now` while output is queued.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.commands.is_empty() || !self.events.is_empty() {
            return Some(self.last_now);
        }
        self.channels
            .iter()
            .flat_map(|c| c.slots.iter())
            .flat_map(|s| [s.client.poll_timeout(), s.waiting_until()])
            .flatten()
            .chain(self.deps_poll_timeout())
            .min()
    }

    /// Every resource the watchers are served, with the status of the client it came from.
    pub fn dump(&self) -> Vec<DumpEntry> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for auth in &self.authorities {
            for (position, &c) in auth.channels.iter().enumerate().take(auth.depth + 1) {
                let Some(channel) = self.channels.get(c) else {
                    continue;
                };
                for slot in &channel.slots {
                    for entry in slot.client.dump() {
                        if authority_of(&entry.name).as_deref() != Some(auth.name.as_str()) {
                            continue;
                        }
                        let key = (entry.type_url.clone(), entry.name.clone());
                        let source = auth.view.get(&key).map(|v| v.source);
                        // The server whose data is in use; else the highest in use.
                        if source.is_some_and(|s| s != position) || !seen.insert(key) {
                            continue;
                        }
                        let body = slot
                            .client
                            .resource(&entry.type_url, &entry.name)
                            .map(|r| r.body_bytes());
                        out.push(DumpEntry {
                            status: entry,
                            body,
                            server: channel.server.server_uri.clone(),
                            restored: false,
                        });
                    }
                }
            }
            // What the fail-static cache serves.
            for ((type_url, name), entry) in &auth.view {
                let view::Seen::Held { version, body } = &entry.seen else {
                    continue;
                };
                if entry.source != fail_static::RESTORED
                    || !seen.insert((type_url.clone(), name.clone()))
                {
                    continue;
                }
                out.push(DumpEntry {
                    status: StatusEntry {
                        type_url: type_url.clone(),
                        name: name.clone(),
                        status: ResourceStatus {
                            state: ResourceState::Acked,
                            version: Some(version.clone()),
                            rejected: None,
                            ttl_deadline: None,
                            server_error: None,
                            deletion_ignored: false,
                        },
                        control_plane: None,
                    },
                    body: Some(body.clone()),
                    server: String::new(),
                    restored: true,
                });
            }
        }
        watch::sort_dump(&mut out);
        out
    }

    /// The servers of the top-level authority, primary first, whether each is in use and
    /// connected.
    pub fn servers(&self) -> Vec<ServerUse> {
        let Some(auth) = self.authorities.first() else {
            return Vec::new();
        };
        auth.channels
            .iter()
            .enumerate()
            .filter_map(|(p, &c)| {
                let ch = self.channels.get(c)?;
                Some(ServerUse {
                    server_uri: ch.server.server_uri.clone(),
                    in_use: p <= auth.depth,
                    connected: ch.slots.iter().any(|s| s.is_open()),
                })
            })
            .collect()
    }

    /// The servers `authority` uses now (`""`: the top-level ones), primary first: the
    /// primary and the fallbacks it fell back to (gRPC A71); `None` for an authority the
    /// bootstrap lacks.
    pub fn in_use(&self, authority: &str) -> Option<Vec<ServerId>> {
        let auth = self
            .authorities
            .get(*self.authority_index.get(authority)?)?;
        Some(
            auth.channels
                .iter()
                .take(auth.depth + 1)
                .map(|&c| ServerId(c))
                .collect(),
        )
    }

    /// Closes every watch and stream (the client shuts down); the streams open or being
    /// opened are closed by [`SessionCommand::Close`].
    pub fn close_all(&mut self) {
        self.watches.clear();
        self.watchers.clear();
        self.config_watches.clear();
        for (c, channel) in self.channels.iter_mut().enumerate() {
            for (s, slot) in channel.slots.iter_mut().enumerate() {
                if let Some(stream) = slot.stop() {
                    self.commands.push_back(SessionCommand::Close {
                        key: StreamKey {
                            server: ServerId(c),
                            slot: s,
                        },
                        stream,
                    });
                }
            }
        }
    }

    fn advance(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
    }
}

#[cfg(test)]
mod tests;
