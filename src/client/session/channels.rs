//! The streams to each server: one core [`Client`] per stream, its connection phase and
//! backoff; the inputs that report what the network did, and the subscription of each
//! client to what the authorities using its server want.
//!
//! # Decisions
//!
//! - **A stream is needed while a type is wanted on it**: started when the first name is
//!   subscribed, closed (and its backoff reset) when the last goes.
//! - **Failure is judged by the first response** (gRPC A57, "Handling ADS Stream
//!   Termination"): a stream that ended before any response is a failed attempt and waits
//!   its backoff delay; one that ended after a response reconnects at once with its backoff
//!   reset.
//! - **Each stream has its own backoff**, seeded from the session's seed, the stream
//!   number and the server, so streams of one client do not retry in lockstep.
//! - **The legacy wildcard for LDS and CDS** (xDS protocol, "How the client specifies what
//!   resources to return"): a wildcard watch of those types subscribes with no names,
//!   which every server understands; `*` otherwise.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::ToString;
use alloc::vec::Vec;
use core::time::Duration;

use bytes::Bytes;

use crate::client::{ClientEvent, DataErrors, NackPolicy, SharedStr, WILDCARD};
use crate::time::Instant;
use crate::types::TypeInfo;
use crate::{Client, ClientConfig, Response, Transport};

use super::{
    Backoff, ServerEntry, ServerId, Session, SessionCommand, SessionEvent, StreamEnd, StreamKey,
    FAIL_ON_DATA_ERRORS, IGNORE_RESOURCE_DELETION, RESOURCE_TIMER_IS_TRANSIENT_ERROR,
};

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

/// One stream slot of a server.
pub(super) struct Slot {
    pub(super) client: Client,
    phase: Phase,
    backoff: Backoff,
    stream: u64,
    got_response: bool,
    /// Type URLs subscribed on this client by the session.
    types: BTreeSet<SharedStr>,
    /// The server's address in use or next ([`ServerEntry::address`]).
    replica: usize,
    /// Attempts that failed since the last response (a round over every replica is one
    /// failure of the server, for fallback and watchers).
    failures: usize,
}

impl Slot {
    pub(super) fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    pub(super) fn waiting_until(&self) -> Option<Instant> {
        match self.phase {
            Phase::Waiting(at) => Some(at),
            _ => None,
        }
    }

    /// Back to idle; the stream to close, if one was open or being opened.
    pub(super) fn stop(&mut self) -> Option<u64> {
        let live = matches!(self.phase, Phase::Open | Phase::Connecting);
        self.phase = Phase::Idle;
        live.then_some(self.stream)
    }
}

/// One distinct server and its streams.
pub(super) struct Channel {
    pub(super) server: ServerEntry,
    pub(super) slots: Vec<Slot>,
}

impl Session {
    /// The connection of `key`'s stream `stream` is up and the call is being started.
    pub fn handle_connected(&mut self, now: Instant, key: StreamKey, stream: u64) {
        self.advance(now);
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
    pub fn handle_response(
        &mut self,
        now: Instant,
        key: StreamKey,
        stream: u64,
        response: Response,
    ) {
        self.advance(now);
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
        self.answered_by(key.server.0);
    }

    /// The connection attempt of `key`'s stream `stream` failed, or the stream ended
    /// (`end` says why).
    pub fn handle_ended(&mut self, now: Instant, key: StreamKey, stream: u64, end: &StreamEnd) {
        self.advance(now);
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
        // The next attempt goes to the server's next replica (a no-op with none); the
        // server has failed, for fallback and watchers, once a whole round has.
        let addresses = self
            .channels
            .get(key.server.0)
            .map_or(1, |c| c.server.address_count());
        let hint = end
            .retry_after()
            .map_or(Duration::ZERO, |h| h.min(self.config.backoff.max));
        let Some(slot) = self.slot_mut(key) else {
            return;
        };
        slot.replica = (slot.replica + 1) % addresses;
        slot.failures = if failed { slot.failures + 1 } else { 0 };
        let round_failed = failed && slot.failures % addresses == 0;
        if failed {
            // The server's hint, when longer, within the backoff's bound (`ending.rs`).
            let delay = slot.backoff.next_delay().max(hint);
            slot.phase = Phase::Waiting(now.saturating_add(delay));
            self.events.push_back(SessionEvent::StreamFailed {
                key,
                end: end.clone(),
                retry_in: delay,
            });
        } else {
            slot.phase = Phase::Idle;
            self.events.push_back(SessionEvent::StreamEnded {
                key,
                end: end.clone(),
            });
            self.start(key);
        }
        self.flush();
        if round_failed {
            self.failed(key.server.0, end);
        }
    }

    /// Fires every timer due: the clients' (does-not-exist, TTL), reconnections and the
    /// managers' graces.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        let mut due = Vec::new();
        for (c, channel) in self.channels.iter_mut().enumerate() {
            for (s, slot) in channel.slots.iter_mut().enumerate() {
                if slot.client.poll_timeout().is_some_and(|t| t <= now) {
                    slot.client.handle_timeout(now);
                }
                if let Phase::Waiting(at) = slot.phase {
                    if at <= now {
                        slot.phase = Phase::Idle;
                        due.push(StreamKey {
                            server: ServerId(c),
                            slot: s,
                        });
                    }
                }
            }
        }
        for key in due {
            self.start(key);
        }
        self.deps_timeout(now);
        self.flush();
    }

    pub(super) fn channel_of(&mut self, server: ServerEntry) -> usize {
        if let Some(i) = self.channels.iter().position(|c| c.server == server) {
            return i;
        }
        self.channels.push(Channel {
            server,
            slots: Vec::new(),
        });
        self.channels.len() - 1
    }

    fn slot_mut(&mut self, key: StreamKey) -> Option<&mut Slot> {
        self.channels.get_mut(key.server.0)?.slots.get_mut(key.slot)
    }

    /// Starts a connection for an idle slot.
    fn start(&mut self, key: StreamKey) {
        self.next_stream += 1;
        let stream = self.next_stream;
        let variant = self.config.variant;
        let Some(slot) = self.slot_mut(key) else {
            return;
        };
        if slot.phase != Phase::Idle {
            return;
        }
        slot.phase = Phase::Connecting;
        slot.stream = stream;
        slot.got_response = false;
        let transport = slot.client.config().transport.clone();
        let replica = slot.replica;
        let address = self
            .channels
            .get(key.server.0)
            .map(|c| c.server.address(replica).into())
            .unwrap_or_default();
        self.commands.push_back(SessionCommand::Connect {
            key,
            stream,
            variant,
            transport,
            address,
        });
    }

    fn new_client(&self, server: &ServerEntry, transport: Transport) -> Client {
        let mut config =
            ClientConfig::new(self.config.variant, transport, self.config.node.clone());
        // gRPC's NACK semantics (gRPC A46): keep the valid resources of a response.
        config.nack_policy = NackPolicy::KeepValid;
        config.ignore_resource_deletion = server.has_feature(IGNORE_RESOURCE_DELETION);
        // gRPC A88's server features.
        if server.has_feature(FAIL_ON_DATA_ERRORS) {
            config.data_errors = DataErrors::FailOnDataErrors;
        }
        if server.has_feature(RESOURCE_TIMER_IS_TRANSIENT_ERROR) {
            config = config.with_transient_resource_timer();
        }
        if let Some(tweak) = &self.config.client_config {
            tweak(&mut config);
        }
        let mut client = Client::new(config);
        for (type_url, validator) in &self.config.validators {
            let v = validator.clone();
            client.set_validator(
                type_url,
                alloc::boxed::Box::new(move |n: &str, ver: &str, b: &Bytes| v.validate(n, ver, b)),
            );
        }
        client
    }

    fn slot_for(&mut self, c: usize, type_url: &SharedStr) -> Option<usize> {
        let per_type = self.config.per_type_streams;
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
        let seed = self
            .config
            .backoff_seed
            .wrapping_add(self.next_stream)
            .wrapping_add(c as u64);
        let backoff = Backoff::with_seed(self.config.backoff, seed);
        // Clients of a fleet start on different replicas: drawn from the session's seed
        // (an input, so scenarios stay deterministic), the same draw for every slot of
        // one client.
        let replica = spread(self.config.backoff_seed, c) % server.address_count();
        let channel = self.channels.get_mut(c)?;
        channel.slots.push(Slot {
            client,
            phase: Phase::Idle,
            backoff,
            stream: 0,
            got_response: false,
            types: BTreeSet::new(),
            replica,
            failures: 0,
        });
        Some(channel.slots.len() - 1)
    }

    /// Re-subscribes every channel the authority may use.
    pub(super) fn sync_authority(&mut self, a: usize) {
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
    pub(super) fn sync_channel(&mut self, c: usize) {
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
            let Some(slot) = self.slot_mut(StreamKey {
                server: ServerId(c),
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
            let key = StreamKey {
                server: ServerId(c),
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
                    self.commands
                        .push_back(SessionCommand::Close { key, stream });
                }
                _ => {}
            }
        }
    }

    /// Sends what the clients queued and hands their events to the view (and through it to
    /// the dependency managers), gives the managers' subscriptions to the clients until
    /// nothing more comes, then hands complete configurations to their watchers.
    pub(super) fn flush(&mut self) {
        loop {
            self.flush_clients();
            if !self.apply_deps_commands() {
                break;
            }
        }
        self.deliver_configs();
    }

    fn flush_clients(&mut self) {
        let now = self.last_now;
        let mut events: Vec<(usize, ClientEvent)> = Vec::new();
        for (c, channel) in self.channels.iter_mut().enumerate() {
            for (s, slot) in channel.slots.iter_mut().enumerate() {
                let key = StreamKey {
                    server: ServerId(c),
                    slot: s,
                };
                if slot.phase == Phase::Open {
                    while let Some(request) = slot.client.poll_request(now) {
                        self.commands.push_back(SessionCommand::Send {
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
}

/// Makes `names` (with `*` for a wildcard) the subscription of `type_url` on `client`,
/// by the client's own rule ([`Client::set_subscription`]); a wildcard of LDS/CDS is asked
/// for in its legacy form first (understood by every server), `*` otherwise. The session
/// only subscribes checked names, so the client refuses nothing; were it to, the
/// subscription stays as it was (`set_subscription` changes nothing on error).
fn subscribe_exactly(client: &mut Client, type_url: &str, names: &BTreeSet<SharedStr>) {
    let wildcard = SharedStr::from_static(WILDCARD);
    let legacy = TypeInfo::of(type_url).legacy_wildcard();
    if legacy
        && names.contains(&wildcard)
        && !client.subscribed_names(type_url).contains(&wildcard)
        && client.subscribe(type_url, &[]).is_err()
    {
        return;
    }
    let names: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    // Refusals are misuse the session does not commit (see above): nothing to report.
    let _ = client.set_subscription(type_url, &names);
}

/// A well-mixed draw from the session's seed and a server's index (SplitMix64's finaliser),
/// so that consecutive seeds land on unrelated replicas.
fn spread(seed: u64, server: usize) -> usize {
    let mut z = seed
        .wrapping_add(server as u64)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as usize
}
