//! The driver's state, without I/O: one core [`Client`] per stream to each management
//! server in use, the authorities and their fallback position, the watches and the view
//! they are served from. The driver task (`driver.rs`) feeds it what the network did and
//! carries out the [`Action`]s it asks for; tests drive it directly.
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
//!   lowest in use again and the ones below are closed.
//! - **Whose data a watcher sees**: one view per authority, each entry marked with the
//!   position of the server it came from. A server's update or deletion applies only to
//!   entries from the same or a lower-priority server (A71: "whenever we have a resource
//!   already cached from the primary, we want to use that"); so a fallback server never
//!   overrides or deletes what the primary gave, and a does-not-exist verdict of a
//!   fallback never reaches a name the primary delivered. On reverting, entries from lower
//!   servers take the reverting server's held value or verdict at once, and otherwise stay
//!   until it speaks.
//! - **Connectivity errors reach watchers once per outage**, when the lowest server in use
//!   fails and no further server is started (every server failed, or nothing was missing);
//!   a value held stays in use (gRPC A88: an ambient error).
//! - **Backoff per stream** ([`Backoff`]): reset by a response; a stream that ended after a
//!   response is restarted at once, a failed attempt waits its jittered delay.
//! - **Federation (gRPC A47)**: an `xdstp://` name belongs to its authority (servers from
//!   the bootstrap's `authorities`); other names to the top-level servers. A server listed
//!   by several authorities is one connection with the union of their names.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use xds_sansio::client::{
    ClientEvent, RemovalReason, ResourceState, SharedStr, StatusEntry, Validator, WILDCARD,
};
use xds_sansio::name::{canonicalize, XdstpName, XDSTP_SCHEME};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::time::Instant;
use xds_sansio::types::TypeInfo;
use xds_sansio::{Client, ClientConfig, Request, Response, Transport, Variant};

use super::backoff::{Backoff, BackoffConfig};
use super::bootstrap::{Bootstrap, ManagementServer, IGNORE_RESOURCE_DELETION};
use super::watch::{Sink, WatchError, WatchEvent};

/// A stream slot: server (channel) and stream (slot) within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SlotKey {
    pub(crate) channel: usize,
    pub(crate) slot: usize,
}

/// What the I/O side must do. Actions live only until the driver drains them, so a
/// large request in place costs less than a box per request.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Action {
    /// Connect to `server` and, once connected, report `connected(key, stream)`.
    Connect {
        key: SlotKey,
        stream: u64,
        server: ManagementServer,
        variant: Variant,
        transport: Transport,
    },
    /// Send on the stream.
    Send {
        key: SlotKey,
        stream: u64,
        request: Request,
    },
    /// Close the stream (nothing more will be reported for it).
    Close { key: SlotKey, stream: u64 },
}

/// How the pool builds its clients.
#[derive(Clone)]
pub(crate) struct Options {
    pub(crate) variant: Variant,
    pub(crate) per_type: bool,
    pub(crate) node: Node,
    pub(crate) backoff: BackoffConfig,
    /// Fixed backoff seeds (tests); `None`: from the OS, per stream.
    pub(crate) seed: Option<u64>,
    pub(crate) tweak: Arc<dyn Fn(&mut ClientConfig) + Send + Sync>,
    pub(crate) validators: Vec<(String, Arc<dyn Validator>)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not in use.
    Idle,
    /// Waiting to reconnect.
    Waiting(Instant),
    /// A connection attempt is under way.
    Connecting,
    /// The stream is up.
    Open,
}

struct Slot {
    client: Client,
    phase: Phase,
    backoff: Backoff,
    stream: u64,
    got_response: bool,
    /// Type URLs subscribed on this client by the pool.
    types: BTreeSet<SharedStr>,
}

struct Channel {
    server: ManagementServer,
    slots: Vec<Slot>,
}

#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Held { version: SharedStr, body: Bytes },
    Absent,
}

#[derive(Clone, Debug)]
struct ViewEntry {
    /// The position (in the authority's server list) of the server it came from.
    source: usize,
    seen: Seen,
}

type Key = (SharedStr, SharedStr);

struct Authority {
    name: String,
    /// Channel indices, primary first.
    channels: Vec<usize>,
    /// Positions `0..=depth` are in use.
    depth: usize,
    /// Per type: name (or `*`) -> number of watches.
    interest: BTreeMap<SharedStr, BTreeMap<SharedStr, usize>>,
    view: HashMap<Key, ViewEntry>,
    /// Types a wildcard was answered for.
    answered: BTreeSet<SharedStr>,
    /// An outage was reported to the watchers and nothing answered since.
    unreachable: bool,
}

struct WatchEntry {
    authority: usize,
    type_url: SharedStr,
    /// The name, or `*`.
    name: SharedStr,
    sink: Arc<Sink>,
}

/// Why a watch cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchRefused {
    /// An empty type URL or name.
    Empty,
    /// A malformed `xdstp://` name.
    MalformedName(String),
    /// An `xdstp://` name whose authority the bootstrap does not list (gRPC A47).
    UnknownAuthority(String),
    /// The client has shut down.
    Closed,
}

impl std::fmt::Display for WatchRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchRefused::Empty => f.write_str("empty type URL or resource name"),
            WatchRefused::MalformedName(e) => write!(f, "malformed xdstp name: {e}"),
            WatchRefused::UnknownAuthority(a) => {
                write!(f, "the bootstrap lists no authority {a:?}")
            }
            WatchRefused::Closed => f.write_str("the client has shut down"),
        }
    }
}

impl std::error::Error for WatchRefused {}

/// One resource as the client holds it, for a status dump (CSDS).
#[derive(Clone, Debug, PartialEq)]
pub struct DumpEntry {
    /// The core's status of it, from the client of the server whose data is in use.
    pub status: StatusEntry,
    /// Its body, when held.
    pub body: Option<Bytes>,
    /// The server it came from (`server_uri`).
    pub server: String,
}

/// The authority a (canonical) name belongs to: `""` for old-style names.
pub(crate) fn authority_of(name: &str) -> Option<String> {
    if !name.starts_with(XDSTP_SCHEME) {
        return Some(String::new());
    }
    XdstpName::parse(name).ok().map(|n| n.authority)
}

/// Checks a watch's name and gives its canonical form and authority.
pub(crate) fn check_watch(
    bootstrap: &Bootstrap,
    type_url: &str,
    name: Option<&str>,
) -> Result<(SharedStr, String), WatchRefused> {
    if type_url.is_empty() {
        return Err(WatchRefused::Empty);
    }
    let Some(name) = name else {
        return Ok((SharedStr::from_static(WILDCARD), String::new()));
    };
    if name.is_empty() {
        return Err(WatchRefused::Empty);
    }
    let canonical = if name.starts_with(XDSTP_SCHEME) {
        canonicalize(name).map_err(|e| WatchRefused::MalformedName(e.to_string()))?
    } else {
        name.to_string()
    };
    let authority = authority_of(&canonical).unwrap_or_default();
    if bootstrap.servers_of(&authority).is_none() {
        return Err(WatchRefused::UnknownAuthority(authority));
    }
    Ok((SharedStr::from(canonical), authority))
}

/// The driver's state. See the [module docs](self).
pub(crate) struct Pool {
    options: Options,
    channels: Vec<Channel>,
    authorities: Vec<Authority>,
    authority_index: BTreeMap<String, usize>,
    watches: BTreeMap<u64, WatchEntry>,
    /// (authority, type, name or `*`) -> watches.
    watchers: HashMap<(usize, SharedStr, SharedStr), BTreeSet<u64>>,
    actions: VecDeque<Action>,
    next_stream: u64,
    last_now: Instant,
}

impl Pool {
    pub(crate) fn new(bootstrap: &Bootstrap, options: Options) -> Pool {
        let mut pool = Pool {
            options,
            channels: Vec::new(),
            authorities: Vec::new(),
            authority_index: BTreeMap::new(),
            watches: BTreeMap::new(),
            watchers: HashMap::new(),
            actions: VecDeque::new(),
            next_stream: 0,
            last_now: Instant::ZERO,
        };
        let mut named: Vec<(String, Vec<ManagementServer>)> =
            vec![(String::new(), bootstrap.servers.clone())];
        for name in bootstrap.authorities.keys() {
            let servers = bootstrap.servers_of(name).unwrap_or_default().to_vec();
            named.push((name.clone(), servers));
        }
        for (name, servers) in named {
            let channels = servers.into_iter().map(|s| pool.channel_of(s)).collect();
            pool.authority_index
                .insert(name.clone(), pool.authorities.len());
            pool.authorities.push(Authority {
                name,
                channels,
                depth: 0,
                interest: BTreeMap::new(),
                view: HashMap::new(),
                answered: BTreeSet::new(),
                unreachable: false,
            });
        }
        pool
    }

    fn channel_of(&mut self, server: ManagementServer) -> usize {
        if let Some(i) = self.channels.iter().position(|c| c.server == server) {
            return i;
        }
        self.channels.push(Channel {
            server,
            slots: Vec::new(),
        });
        self.channels.len() - 1
    }

    // ---------------------------------------------------------------- commands

    /// Adds a watch (checked by [`check_watch`]); its sink gets what is known at once.
    pub(crate) fn watch(
        &mut self,
        now: Instant,
        id: u64,
        type_url: SharedStr,
        name: SharedStr,
        authority: &str,
        sink: Arc<Sink>,
    ) {
        self.last_now = self.last_now.max(now);
        let Some(&a) = self.authority_index.get(authority) else {
            sink.close();
            return;
        };
        let Some(auth) = self.authorities.get_mut(a) else {
            sink.close();
            return;
        };
        let wildcard = name.as_str() == WILDCARD;
        // What is known already.
        if wildcard {
            let mut held: Vec<(&Key, &ViewEntry)> = auth
                .view
                .iter()
                .filter(|((t, _), _)| *t == type_url)
                .collect();
            held.sort_by(|x, y| x.0.cmp(y.0));
            for ((_, n), entry) in held {
                if let Seen::Held { version, body } = &entry.seen {
                    sink.push(WatchEvent::Changed {
                        name: n.clone(),
                        version: version.clone(),
                        body: body.clone(),
                    });
                }
            }
        } else if let Some(entry) = auth.view.get(&(type_url.clone(), name.clone())) {
            sink.push(state_event(&name, &entry.seen));
        }
        let count = auth
            .interest
            .entry(type_url.clone())
            .or_default()
            .entry(name.clone())
            .or_insert(0);
        *count += 1;
        let first = *count == 1;
        self.watchers
            .entry((a, type_url.clone(), name.clone()))
            .or_default()
            .insert(id);
        self.watches.insert(
            id,
            WatchEntry {
                authority: a,
                type_url,
                name,
                sink,
            },
        );
        if first {
            self.sync_authority(a);
        }
        self.flush();
    }

    /// Removes a watch; its name is unsubscribed once no watch is left.
    pub(crate) fn unwatch(&mut self, now: Instant, id: u64) {
        self.last_now = self.last_now.max(now);
        let Some(w) = self.watches.remove(&id) else {
            return;
        };
        w.sink.close();
        let key = (w.authority, w.type_url.clone(), w.name.clone());
        if let Some(set) = self.watchers.get_mut(&key) {
            set.remove(&id);
            if set.is_empty() {
                self.watchers.remove(&key);
            }
        }
        let Some(auth) = self.authorities.get_mut(w.authority) else {
            return;
        };
        let mut last = false;
        if let Some(names) = auth.interest.get_mut(&w.type_url) {
            if let Some(count) = names.get_mut(&w.name) {
                *count -= 1;
                if *count == 0 {
                    names.remove(&w.name);
                    last = true;
                }
            }
            if names.is_empty() {
                auth.interest.remove(&w.type_url);
            }
        }
        if last {
            let wildcard_left = auth
                .interest
                .get(&w.type_url)
                .is_some_and(|n| n.contains_key(WILDCARD));
            if w.name.as_str() == WILDCARD {
                let named = auth.interest.get(&w.type_url).cloned().unwrap_or_default();
                auth.view
                    .retain(|(t, n), _| *t != w.type_url || named.contains_key(n));
                auth.answered.remove(&w.type_url);
            } else if !wildcard_left {
                auth.view.remove(&(w.type_url.clone(), w.name.clone()));
            }
            self.sync_authority(w.authority);
        }
        self.flush();
    }

    /// Closes every watch (the client shuts down).
    pub(crate) fn close_all(&mut self) {
        for w in self.watches.values() {
            w.sink.close();
        }
        for (c, channel) in self.channels.iter_mut().enumerate() {
            for (s, slot) in channel.slots.iter_mut().enumerate() {
                if matches!(slot.phase, Phase::Open | Phase::Connecting) {
                    self.actions.push_back(Action::Close {
                        key: SlotKey {
                            channel: c,
                            slot: s,
                        },
                        stream: slot.stream,
                    });
                }
                slot.phase = Phase::Idle;
            }
        }
    }

    // ---------------------------------------------------------------- inputs

    /// The connection of `key`'s stream `stream` is up and the call is being started.
    pub(crate) fn connected(&mut self, now: Instant, key: SlotKey, stream: u64) {
        self.last_now = self.last_now.max(now);
        let Some(slot) = self.slot_mut(key) else {
            return;
        };
        if slot.stream != stream || slot.phase != Phase::Connecting {
            return;
        }
        slot.phase = Phase::Open;
        slot.got_response = false;
        slot.client.connected(now);
        self.flush();
    }

    /// A response on `key`'s stream `stream`.
    pub(crate) fn response(&mut self, now: Instant, key: SlotKey, stream: u64, response: Response) {
        self.last_now = self.last_now.max(now);
        let Some(slot) = self.slot_mut(key) else {
            return;
        };
        if slot.stream != stream || slot.phase != Phase::Open {
            return;
        }
        slot.got_response = true;
        slot.backoff.reset();
        slot.client.handle_response(now, response);
        self.flush();
        self.answered_by(key.channel);
    }

    /// The connection attempt failed, or the stream ended (`error` says why).
    pub(crate) fn ended(&mut self, now: Instant, key: SlotKey, stream: u64, error: String) {
        self.last_now = self.last_now.max(now);
        let Some(slot) = self.slot_mut(key) else {
            return;
        };
        if slot.stream != stream || !matches!(slot.phase, Phase::Open | Phase::Connecting) {
            return;
        }
        if slot.phase == Phase::Open {
            slot.client.disconnected(now);
        }
        let failed = !slot.got_response;
        if failed {
            let delay = slot.backoff.next_delay();
            slot.phase = Phase::Waiting(now.saturating_add(delay));
            tracing::info!(%error, ?delay, "xDS stream failed; retrying after backoff");
        } else {
            tracing::info!(%error, "xDS stream ended after responses; reconnecting");
            slot.phase = Phase::Idle;
            self.start(key);
        }
        self.flush();
        if failed {
            self.failed(key.channel, &error);
        }
    }

    /// Fires every timer due: the clients' (does-not-exist, TTL) and reconnections.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        let mut due = Vec::new();
        for (c, channel) in self.channels.iter_mut().enumerate() {
            for (s, slot) in channel.slots.iter_mut().enumerate() {
                if slot.client.poll_timeout().is_some_and(|t| t <= now) {
                    slot.client.handle_timeout(now);
                }
                if let Phase::Waiting(at) = slot.phase {
                    if at <= now {
                        slot.phase = Phase::Idle;
                        due.push(SlotKey {
                            channel: c,
                            slot: s,
                        });
                    }
                }
            }
        }
        for key in due {
            self.start(key);
        }
        self.flush();
    }

    // ---------------------------------------------------------------- outputs

    pub(crate) fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if !self.actions.is_empty() {
            return Some(self.last_now);
        }
        self.channels
            .iter()
            .flat_map(|c| c.slots.iter())
            .flat_map(|s| {
                let wait = match s.phase {
                    Phase::Waiting(at) => Some(at),
                    _ => None,
                };
                [s.client.poll_timeout(), wait]
            })
            .flatten()
            .min()
    }

    // ---------------------------------------------------------------- reads

    /// Every resource the watchers are served, with the status of the client it came from.
    pub(crate) fn dump(&self) -> Vec<DumpEntry> {
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
                            .map(|r| r.body.clone());
                        out.push(DumpEntry {
                            status: entry,
                            body,
                            server: channel.server.server_uri.clone(),
                        });
                    }
                }
            }
        }
        out.sort_by(|a, b| {
            (&a.status.type_url, &a.status.name).cmp(&(&b.status.type_url, &b.status.name))
        });
        out
    }

    /// The servers of the top-level authority and whether each is in use and connected.
    pub(crate) fn servers(&self) -> Vec<(String, bool, bool)> {
        let Some(auth) = self.authorities.first() else {
            return Vec::new();
        };
        auth.channels
            .iter()
            .enumerate()
            .filter_map(|(p, &c)| {
                let ch = self.channels.get(c)?;
                let open = ch.slots.iter().any(|s| s.phase == Phase::Open);
                Some((ch.server.server_uri.clone(), p <= auth.depth, open))
            })
            .collect()
    }

    // ---------------------------------------------------------------- internals

    fn slot_mut(&mut self, key: SlotKey) -> Option<&mut Slot> {
        self.channels.get_mut(key.channel)?.slots.get_mut(key.slot)
    }

    /// Starts a connection for an idle slot.
    fn start(&mut self, key: SlotKey) {
        self.next_stream += 1;
        let stream = self.next_stream;
        let variant = self.options.variant;
        let Some(channel) = self.channels.get_mut(key.channel) else {
            return;
        };
        let server = channel.server.clone();
        let Some(slot) = channel.slots.get_mut(key.slot) else {
            return;
        };
        if slot.phase != Phase::Idle {
            return;
        }
        slot.phase = Phase::Connecting;
        slot.stream = stream;
        slot.got_response = false;
        let transport = slot.client.config().transport.clone();
        self.actions.push_back(Action::Connect {
            key,
            stream,
            server,
            variant,
            transport,
        });
    }

    fn new_client(&self, server: &ManagementServer, transport: Transport) -> Client {
        let mut config =
            ClientConfig::new(self.options.variant, transport, self.options.node.clone());
        // gRPC's NACK semantics (gRPC A46): keep the valid resources of a response.
        config.nack_policy = xds_sansio::client::NackPolicy::KeepValid;
        config.ignore_resource_deletion = server.has_feature(IGNORE_RESOURCE_DELETION);
        (self.options.tweak)(&mut config);
        let mut client = Client::new(config);
        for (type_url, validator) in &self.options.validators {
            let v = validator.clone();
            client.set_validator(
                type_url,
                Box::new(move |n: &str, ver: &str, b: &Bytes| v.validate(n, ver, b)),
            );
        }
        client
    }

    fn slot_for(&mut self, c: usize, type_url: &SharedStr) -> Option<usize> {
        let per_type = self.options.per_type;
        let channel = self.channels.get(c)?;
        let found = channel.slots.iter().position(|s| {
            !per_type || s.client.config().transport == Transport::PerType(type_url.to_string())
        });
        if let Some(i) = found {
            return Some(i);
        }
        let transport = if per_type {
            Transport::PerType(type_url.to_string())
        } else {
            Transport::Aggregated
        };
        let server = channel.server.clone();
        let client = self.new_client(&server, transport);
        let backoff = match self.options.seed {
            Some(seed) => Backoff::with_seed(
                self.options.backoff,
                seed.wrapping_add(self.next_stream).wrapping_add(c as u64),
            ),
            None => Backoff::new(self.options.backoff),
        };
        let channel = self.channels.get_mut(c)?;
        channel.slots.push(Slot {
            client,
            phase: Phase::Idle,
            backoff,
            stream: 0,
            got_response: false,
            types: BTreeSet::new(),
        });
        Some(channel.slots.len() - 1)
    }

    /// Re-subscribes every channel the authority may use.
    fn sync_authority(&mut self, a: usize) {
        let channels = self
            .authorities
            .get(a)
            .map(|x| x.channels.clone())
            .unwrap_or_default();
        for c in channels {
            self.sync_channel(c);
        }
    }

    /// Makes each client of channel `c` subscribe to the union of what the authorities
    /// using it want, and starts or closes its streams accordingly.
    fn sync_channel(&mut self, c: usize) {
        let mut wanted: BTreeMap<SharedStr, BTreeSet<SharedStr>> = BTreeMap::new();
        for auth in &self.authorities {
            let in_use = auth.channels.iter().take(auth.depth + 1).any(|&x| x == c);
            if !in_use {
                continue;
            }
            for (type_url, names) in &auth.interest {
                wanted
                    .entry(type_url.clone())
                    .or_default()
                    .extend(names.keys().cloned());
            }
        }
        let mut types: BTreeSet<SharedStr> = wanted.keys().cloned().collect();
        if let Some(channel) = self.channels.get(c) {
            for slot in &channel.slots {
                types.extend(slot.types.iter().cloned());
            }
        }
        for type_url in types {
            let names = wanted.remove(&type_url).unwrap_or_default();
            let Some(s) = (if names.is_empty() {
                self.channels.get(c).and_then(|ch| {
                    ch.slots
                        .iter()
                        .position(|slot| slot.types.contains(&type_url))
                })
            } else {
                self.slot_for(c, &type_url)
            }) else {
                continue;
            };
            let Some(slot) = self.slot_mut(SlotKey {
                channel: c,
                slot: s,
            }) else {
                continue;
            };
            subscribe_exactly(&mut slot.client, &type_url, &names);
            if names.is_empty() {
                slot.types.remove(&type_url);
            } else {
                slot.types.insert(type_url);
            }
        }
        let count = self.channels.get(c).map_or(0, |ch| ch.slots.len());
        let now = self.last_now;
        for s in 0..count {
            let key = SlotKey {
                channel: c,
                slot: s,
            };
            let Some(slot) = self.slot_mut(key) else {
                continue;
            };
            let needed = !slot.types.is_empty();
            match (needed, slot.phase) {
                (true, Phase::Idle) => self.start(key),
                (false, Phase::Open | Phase::Connecting | Phase::Waiting(_)) => {
                    if slot.phase == Phase::Open {
                        slot.client.disconnected(now);
                    }
                    let stream = slot.stream;
                    slot.phase = Phase::Idle;
                    slot.backoff.reset();
                    self.actions.push_back(Action::Close { key, stream });
                }
                _ => {}
            }
        }
    }

    /// Sends what the clients queued and hands their events to the view.
    fn flush(&mut self) {
        let now = self.last_now;
        let mut events = Vec::new();
        for (c, channel) in self.channels.iter_mut().enumerate() {
            for (s, slot) in channel.slots.iter_mut().enumerate() {
                let key = SlotKey {
                    channel: c,
                    slot: s,
                };
                if slot.phase == Phase::Open {
                    while let Some(request) = slot.client.poll_request(now) {
                        self.actions.push_back(Action::Send {
                            key,
                            stream: slot.stream,
                            request,
                        });
                    }
                }
                while let Some(event) = slot.client.poll_event() {
                    events.push((c, event));
                }
            }
        }
        for (c, event) in events {
            self.on_event(c, event);
        }
    }

    /// The position of channel `c` among authority `a`'s servers, if in use.
    fn position(&self, a: usize, c: usize) -> Option<usize> {
        let auth = self.authorities.get(a)?;
        auth.channels
            .iter()
            .take(auth.depth + 1)
            .position(|&x| x == c)
    }

    fn on_event(&mut self, c: usize, event: ClientEvent) {
        let (type_url, name) = match &event {
            ClientEvent::Upserted { type_url, name, .. }
            | ClientEvent::Removed { type_url, name, .. }
            | ClientEvent::DoesNotExist { type_url, name }
            | ClientEvent::ResourceError { type_url, name, .. }
            | ClientEvent::DeletionIgnored { type_url, name } => (type_url.clone(), name.clone()),
            ClientEvent::Nacked { type_url, .. } | ClientEvent::Ready { type_url } => {
                (type_url.clone(), SharedStr::default())
            }
            ClientEvent::Acked { .. }
            | ClientEvent::ValidationNeeded { .. }
            | ClientEvent::Ignored { .. } => return,
        };
        let authority = if name.is_empty() || name.as_str() == WILDCARD {
            Some(String::new())
        } else {
            authority_of(&name)
        };
        let Some(&a) = authority
            .and_then(|x| self.authority_index.get(&x).copied())
            .as_ref()
        else {
            return;
        };
        let Some(p) = self.position(a, c) else {
            return;
        };
        match event {
            ClientEvent::Upserted { version, body, .. } => {
                self.set_view(a, p, (type_url, name), Seen::Held { version, body });
            }
            ClientEvent::Removed { reason, .. } if reason != RemovalReason::Unsubscribed => {
                self.set_view(a, p, (type_url, name), Seen::Absent);
            }
            ClientEvent::DoesNotExist { .. } => {
                self.set_view(a, p, (type_url, name), Seen::Absent);
            }
            ClientEvent::DeletionIgnored { .. } => {
                tracing::warn!(%type_url, %name, "the server deleted a resource in use; kept (ignore_resource_deletion)");
            }
            ClientEvent::ResourceError { code, message, .. } => {
                let key = (type_url.clone(), name.clone());
                if self.overrides(a, p, &key) {
                    let whole =
                        name.is_empty() || name.as_str() == WILDCARD || name.ends_with("/*");
                    let target = if whole { None } else { Some(name.clone()) };
                    let event = WatchEvent::Error {
                        name: target.clone(),
                        error: WatchError::Server { code, message },
                    };
                    match target {
                        Some(n) => self.notify(a, &type_url, &n, &event),
                        None => self.notify_type(a, &type_url, &event),
                    }
                }
            }
            ClientEvent::Nacked {
                version,
                error,
                rejected,
                ..
            } => {
                let event_of = |n: Option<SharedStr>| WatchEvent::Error {
                    name: n,
                    error: WatchError::Rejected {
                        version: version.clone(),
                        error: error.clone(),
                    },
                };
                if rejected.is_empty() {
                    self.notify_type(a, &type_url, &event_of(None));
                } else {
                    for n in rejected {
                        let Some(a) =
                            authority_of(&n).and_then(|x| self.authority_index.get(&x).copied())
                        else {
                            continue;
                        };
                        if self.position(a, c).is_some() {
                            self.notify(a, &type_url, &n, &event_of(Some(n.clone())));
                        }
                    }
                }
            }
            ClientEvent::Ready { .. } => {
                if let Some(auth) = self.authorities.get_mut(a) {
                    auth.answered.insert(type_url);
                }
            }
            _ => {}
        }
    }

    /// Whether an update from position `p` may replace the view's entry for `key`.
    fn overrides(&self, a: usize, p: usize, key: &Key) -> bool {
        self.authorities
            .get(a)
            .and_then(|auth| auth.view.get(key))
            .is_none_or(|e| e.source >= p)
    }

    fn set_view(&mut self, a: usize, p: usize, key: Key, seen: Seen) {
        if !self.overrides(a, p, &key) {
            return;
        }
        let Some(auth) = self.authorities.get_mut(a) else {
            return;
        };
        let wanted = auth
            .interest
            .get(&key.0)
            .is_some_and(|n| n.contains_key(&key.1) || n.contains_key(WILDCARD));
        if !wanted {
            auth.view.remove(&key);
            return;
        }
        let unchanged = auth.view.get(&key).is_some_and(|e| e.seen == seen);
        if seen == Seen::Absent
            && !auth
                .interest
                .get(&key.0)
                .is_some_and(|n| n.contains_key(&key.1))
        {
            // A wildcard-only resource that went away: forget it.
            let had = auth
                .view
                .remove(&key)
                .is_some_and(|e| matches!(e.seen, Seen::Held { .. }));
            if had {
                self.notify(
                    a,
                    &key.0,
                    &key.1,
                    &WatchEvent::DoesNotExist {
                        name: key.1.clone(),
                    },
                );
            }
            return;
        }
        auth.view.insert(
            key.clone(),
            ViewEntry {
                source: p,
                seen: seen.clone(),
            },
        );
        if !unchanged {
            self.notify(a, &key.0, &key.1, &state_event(&key.1, &seen));
        }
    }

    /// To the watchers of `name` and the wildcard watchers of its type.
    fn notify(&self, a: usize, type_url: &SharedStr, name: &SharedStr, event: &WatchEvent) {
        for n in [name.clone(), SharedStr::from_static(WILDCARD)] {
            if let Some(ids) = self.watchers.get(&(a, type_url.clone(), n)) {
                for id in ids {
                    if let Some(w) = self.watches.get(id) {
                        w.sink.push(event.clone());
                    }
                }
            }
        }
    }

    /// To every watcher of the type in the authority.
    fn notify_type(&self, a: usize, type_url: &SharedStr, event: &WatchEvent) {
        for w in self.watches.values() {
            if w.authority == a && w.type_url == *type_url {
                w.sink.push(event.clone());
            }
        }
    }

    /// A response arrived on channel `c`: the authorities using it below the lowest
    /// server in use revert to it (A71), and an outage is over.
    fn answered_by(&mut self, c: usize) {
        for a in 0..self.authorities.len() {
            let Some(p) = self.position(a, c) else {
                continue;
            };
            let Some(auth) = self.authorities.get_mut(a) else {
                continue;
            };
            auth.unreachable = false;
            if p >= auth.depth {
                continue;
            }
            tracing::info!(authority = %auth.name, server = p, "a higher-priority server answered; reverting to it");
            let released: Vec<usize> = auth
                .channels
                .iter()
                .skip(p + 1)
                .take(auth.depth - p)
                .copied()
                .collect();
            auth.depth = p;
            // Entries from the servers given up take the reverting server's word now.
            let stale: Vec<Key> = auth
                .view
                .iter()
                .filter(|(_, e)| e.source > p)
                .map(|(k, _)| k.clone())
                .collect();
            for key in stale {
                let Some(channel) = self.channels.get(c) else {
                    continue;
                };
                let held = channel.slots.iter().find_map(|s| {
                    let r = s.client.resource(&key.0, &key.1)?;
                    Some(Seen::Held {
                        version: r.version.clone(),
                        body: r.body.clone(),
                    })
                });
                let absent = channel.slots.iter().any(|s| {
                    s.client
                        .status(&key.0, &key.1)
                        .is_some_and(|st| st.state == ResourceState::DoesNotExist)
                });
                match (held, absent) {
                    (Some(seen), _) => self.set_view(a, p, key, seen),
                    (None, true) => self.set_view(a, p, key, Seen::Absent),
                    (None, false) => {
                        // Stays until the reverting server speaks: mark it as ours so
                        // its word applies.
                        if let Some(entry) = self
                            .authorities
                            .get_mut(a)
                            .and_then(|x| x.view.get_mut(&key))
                        {
                            entry.source = p;
                        }
                    }
                }
            }
            for channel in released {
                self.sync_channel(channel);
            }
        }
        self.flush();
    }

    /// Channel `c` failed before answering: fall back (A71) or tell the watchers (A57).
    fn failed(&mut self, c: usize, error: &str) {
        for a in 0..self.authorities.len() {
            let Some(p) = self.position(a, c) else {
                continue;
            };
            let Some(auth) = self.authorities.get(a) else {
                continue;
            };
            if p != auth.depth || auth.interest.is_empty() {
                continue;
            }
            let missing = auth.interest.iter().any(|(type_url, names)| {
                names.keys().any(|n| {
                    if n.as_str() == WILDCARD {
                        !auth.answered.contains(type_url)
                    } else {
                        !auth.view.contains_key(&(type_url.clone(), n.clone()))
                    }
                })
            });
            if missing && p + 1 < auth.channels.len() {
                let next = auth.channels.get(p + 1).copied();
                tracing::warn!(authority = %auth.name, server = p, %error, "xDS server unreachable with resources missing; falling back to the next server (gRPC A71)");
                if let Some(auth) = self.authorities.get_mut(a) {
                    auth.depth = p + 1;
                }
                if let Some(next) = next {
                    self.sync_channel(next);
                }
                continue;
            }
            if !auth.unreachable {
                let server = self
                    .channels
                    .get(c)
                    .map(|ch| ch.server.server_uri.clone())
                    .unwrap_or_default();
                if let Some(auth) = self.authorities.get_mut(a) {
                    auth.unreachable = true;
                }
                let event = WatchEvent::Error {
                    name: None,
                    error: WatchError::Unreachable {
                        server,
                        error: error.to_string(),
                    },
                };
                for w in self.watches.values() {
                    if w.authority == a {
                        w.sink.push(event.clone());
                    }
                }
            }
        }
        self.flush();
    }
}

fn state_event(name: &SharedStr, seen: &Seen) -> WatchEvent {
    match seen {
        Seen::Held { version, body } => WatchEvent::Changed {
            name: name.clone(),
            version: version.clone(),
            body: body.clone(),
        },
        Seen::Absent => WatchEvent::DoesNotExist { name: name.clone() },
    }
}

/// Makes `names` (with `*` for a wildcard) the subscription of `type_url` on `client`:
/// the legacy wildcard for LDS/CDS (understood by every server), `*` otherwise.
fn subscribe_exactly(client: &mut Client, type_url: &str, names: &BTreeSet<SharedStr>) {
    let current: BTreeSet<SharedStr> = client.subscribed_names(type_url).into_iter().collect();
    let legacy = TypeInfo::of(type_url).legacy_wildcard();
    let added: Vec<&str> = names
        .iter()
        .filter(|n| !current.contains(*n))
        .map(|n| n.as_str())
        .collect();
    let removed: Vec<&str> = current
        .iter()
        .filter(|n| !names.contains(*n))
        .map(|n| n.as_str())
        .collect();
    let result = (|| {
        if added.contains(&WILDCARD) && legacy {
            client.subscribe(type_url, &[])?;
        }
        let plain: Vec<&str> = added
            .iter()
            .copied()
            .filter(|n| !(legacy && *n == WILDCARD))
            .collect();
        if !plain.is_empty() {
            client.subscribe(type_url, &plain)?;
        }
        if !removed.is_empty() {
            client.unsubscribe(type_url, &removed)?;
        }
        Ok::<(), xds_sansio::ClientError>(())
    })();
    if let Err(e) = result {
        tracing::warn!(%type_url, error = %e, "subscription refused by the client");
    }
}
