//! One simulated stream between a client state machine and a server stream, either of which
//! may be missing because a script plays that side. Every harness drives its machines
//! through it: [`Pair`](super::Pair) adds latency and `drive`, the scenario runner adds
//! symbols and expectations; neither copies the drain, the timers or the reconnect.
//!
//! Decisions:
//! - The stream keeps the order of each direction, as a gRPC stream does; each message in
//!   flight carries the time it was sent, and a harness decides when it arrives.
//! - After every input, both machines are drained: requests, then client events, then the
//!   server's events and responses, until the server has nothing left to send (the call
//!   order of the crate docs).
//! - A transcript is kept per side, in the order that side saw the conversation: the client
//!   records its requests when sent and responses when received, the server the reverse.
//!   A side that a script plays records what was delivered on its behalf.
//! - Timers fire in time order, each at its own deadline, within a bounded loop: a timer
//!   that never moves forward must not hang a test.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::transcript::Entry;
use xds_sansio::client::{Client, ClientEvent};
use xds_sansio::message::{Request, Response};
use xds_sansio::server::{
    body_version, ResourceStore, Revision, ServerConfig, ServerEvent, ServerStream, StoreError,
    StoreOp,
};
use xds_sansio::time::Instant;

/// The most timer firings one call may make before it gives up (a timer livelock).
const TIMER_STEPS: u64 = 100_000;

/// What a [`Sim`] holds on the client side: a [`Client`] that is always there, or an
/// `Option<Client>` that is `None` when a script plays the client.
pub trait ClientSlot {
    /// The client state machine, if the simulation runs one.
    fn get(&self) -> Option<&Client>;
    /// The client state machine, if the simulation runs one.
    fn get_mut(&mut self) -> Option<&mut Client>;
}

impl ClientSlot for Client {
    fn get(&self) -> Option<&Client> {
        Some(self)
    }

    fn get_mut(&mut self) -> Option<&mut Client> {
        Some(self)
    }
}

impl ClientSlot for Option<Client> {
    fn get(&self) -> Option<&Client> {
        self.as_ref()
    }

    fn get_mut(&mut self) -> Option<&mut Client> {
        self.as_mut()
    }
}

/// Timers kept firing without time passing: [`Sim::fire_timers_until`] gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerLivelock {
    /// The time the timers were stuck at.
    pub at: Instant,
}

impl fmt::Display for TimerLivelock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timers keep firing without time passing (a timer livelock)")
    }
}

/// A client and a server stream on one simulated stream, with a virtual clock, the
/// messages in flight, the events of both sides and a transcript per side. `Clone` copies
/// everything, so a model checker can explore several futures of one state.
#[derive(Clone)]
pub struct Sim<C: ClientSlot = Option<Client>> {
    /// The client state machine (see [`ClientSlot`]).
    pub client: C,
    /// The server's stream: `None` while the stream is down, or when a script plays the
    /// server.
    pub server: Option<ServerStream>,
    /// What the server publishes; change it, then drain.
    pub store: ResourceStore,
    /// Client events not yet taken, with the time they happened.
    pub client_events: Vec<(Instant, ClientEvent)>,
    /// Server events not yet taken, with the time they happened.
    pub server_events: Vec<(Instant, ServerEvent)>,
    /// The configuration a new server stream is made from; `None` when a script plays the
    /// server.
    server_config: Option<ServerConfig>,
    /// Drain the server with `poll_response_encoded` and decode what it sends.
    encoded: bool,
    now: Instant,
    /// Which stream is up (counts connects, from 1).
    stream: u64,
    /// Requests in flight, with the time each was sent.
    to_server: VecDeque<(Instant, Request)>,
    /// Responses in flight, with the time each was sent.
    to_client: VecDeque<(Instant, Response)>,
    client_view: Vec<Entry>,
    server_view: Vec<Entry>,
}

fn record(view: &mut Vec<Entry>, entry: impl FnOnce(usize) -> Entry) {
    let line = view.len() + 1;
    view.push(entry(line));
}

impl<C: ClientSlot> Sim<C> {
    /// The stream up at time zero with an empty store: the client (if any) is told it is
    /// connected, a server stream is made from `server` (if any), and both are drained.
    pub fn new(client: C, server: Option<ServerConfig>) -> Sim<C> {
        let mut sim = Sim {
            client,
            server: server.clone().map(ServerStream::new),
            store: ResourceStore::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            server_config: server,
            encoded: false,
            now: Instant::ZERO,
            stream: 1,
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            client_view: Vec::new(),
            server_view: Vec::new(),
        };
        if let Some(client) = sim.client.get_mut() {
            client.connected(Instant::ZERO);
        }
        sim.drain();
        sim
    }

    /// From now on, drains the server with `poll_response_encoded` and decodes what it
    /// sends, so a harness can run the encoded path. An encoded response that does not
    /// decode ends the drain: the harness then misses the response it expects.
    pub fn encode_responses(&mut self) {
        self.encoded = true;
    }

    /// Whether the simulation runs a server (it may be down), rather than a script.
    pub fn models_server(&self) -> bool {
        self.server_config.is_some()
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Which stream is up (counts connects, from 1).
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// Messages on the wire, both directions.
    pub fn in_flight(&self) -> usize {
        self.to_server.len() + self.to_client.len()
    }

    /// The requests in flight, oldest first.
    pub fn requests(&self) -> impl Iterator<Item = &Request> {
        self.to_server.iter().map(|(_, request)| request)
    }

    /// The responses in flight, oldest first.
    pub fn responses(&self) -> impl Iterator<Item = &Response> {
        self.to_client.iter().map(|(_, response)| response)
    }

    /// When the oldest request in flight was sent.
    pub fn request_sent_at(&self) -> Option<Instant> {
        self.to_server.front().map(|(at, _)| *at)
    }

    /// When the oldest response in flight was sent.
    pub fn response_sent_at(&self) -> Option<Instant> {
        self.to_client.front().map(|(at, _)| *at)
    }

    /// Takes the oldest request off the wire, with the time it was sent, without delivering
    /// it (see [`Sim::deliver_request`]).
    pub fn take_request(&mut self) -> Option<(Instant, Request)> {
        self.to_server.pop_front()
    }

    /// Takes the oldest response off the wire, with the time it was sent, without
    /// delivering it (see [`Sim::deliver_responses`]).
    pub fn take_response(&mut self) -> Option<(Instant, Response)> {
        self.to_client.pop_front()
    }

    /// The conversation as the client saw it: requests when sent, responses when
    /// received. Check the client's side on this one.
    pub fn client_view(&self) -> &[Entry] {
        &self.client_view
    }

    /// The conversation as the server saw it: requests when received, responses when sent,
    /// store changes recorded with [`Sim::record_store`]. Check the server's side on this
    /// one.
    pub fn server_view(&self) -> &[Entry] {
        &self.server_view
    }

    /// Both transcripts, taken out: the client's view, then the server's.
    pub fn take_views(&mut self) -> (Vec<Entry>, Vec<Entry>) {
        (
            core::mem::take(&mut self.client_view),
            core::mem::take(&mut self.server_view),
        )
    }

    /// Records a store change in the server's transcript (call after changing `store`).
    pub fn record_store(&mut self, type_url: &str, name: &str) {
        let version = self.store.get(type_url, name).map(|r| r.version().into());
        record(&mut self.server_view, |line| Entry::Store {
            line,
            type_url: type_url.into(),
            name: name.into(),
            version,
        });
    }

    /// Applies `ops` to the store as one revision (see [`ResourceStore::apply`]) and records
    /// each set and removal in the server's transcript; the record has no entry for a
    /// publication. On error nothing changes and nothing is recorded.
    pub fn apply(&mut self, ops: Vec<StoreOp>) -> Result<Revision, StoreError> {
        // What each operation records, read before the store takes the operations: a set
        // records the version the store gives it (its own, or the body's hash).
        let changes: Vec<(String, String, Option<String>)> = ops
            .iter()
            .filter_map(|op| match op {
                StoreOp::Set { type_url, entry } => {
                    let version = entry
                        .version
                        .clone()
                        .unwrap_or_else(|| body_version(&entry.body));
                    Some((type_url.clone(), entry.name.clone(), Some(version)))
                }
                StoreOp::Remove { type_url, name } => Some((type_url.clone(), name.clone(), None)),
                // An error in place of a body the store holds: recorded as its removal.
                StoreOp::SetError { type_url, name, .. }
                    if self.store.get(type_url, name).is_some() =>
                {
                    Some((type_url.clone(), name.clone(), None))
                }
                StoreOp::ServeType { .. }
                | StoreOp::SetError { .. }
                | StoreOp::ClearError { .. } => None,
            })
            .collect();
        let revision = self.store.apply(ops)?;
        for (type_url, name, version) in changes {
            record(&mut self.server_view, |line| Entry::Store {
                line,
                type_url,
                name,
                version,
            });
        }
        Ok(revision)
    }

    /// Publishes an error for `name` instead of a body ([`ResourceStore::set_error`]); a
    /// body it replaces is recorded as removed in the server's transcript (the record has
    /// no entry for errors).
    pub fn set_error(
        &mut self,
        type_url: &str,
        name: &str,
        status: xds_sansio::pb::google::rpc::Status,
    ) -> Result<Revision, StoreError> {
        let held = self
            .store
            .get(type_url, name)
            .map(|r| String::from(r.name()));
        let revision = self.store.set_error(type_url, name, status)?;
        if let Some(name) = held {
            record(&mut self.server_view, |line| Entry::Store {
                line,
                type_url: type_url.into(),
                name,
                version: None,
            });
        }
        Ok(revision)
    }

    /// Takes the client events so far, with their times.
    pub fn take_client_events(&mut self) -> Vec<(Instant, ClientEvent)> {
        core::mem::take(&mut self.client_events)
    }

    /// Takes the server events so far, with their times.
    pub fn take_server_events(&mut self) -> Vec<(Instant, ServerEvent)> {
        core::mem::take(&mut self.server_events)
    }

    /// Puts every output of both sides on the wire and every event in the logs.
    pub fn drain(&mut self) {
        let now = self.now;
        if let Some(client) = self.client.get_mut() {
            while let Some(request) = client.poll_request(now) {
                let stream = self.stream;
                record(&mut self.client_view, |line| Entry::Request {
                    line,
                    stream,
                    request: request.clone(),
                });
                self.to_server.push_back((now, request));
            }
            while let Some(event) = client.poll_event() {
                match event {
                    // Batched events are logged as the per-resource events they stand for,
                    // so every harness reads one shape.
                    ClientEvent::Changed { type_url, changes } => self.client_events.extend(
                        client
                            .owned_events(&type_url, &changes)
                            .map(|event| (now, event)),
                    ),
                    event => self.client_events.push((now, event)),
                }
            }
        }
        if let Some(server) = self.server.as_mut() {
            loop {
                while let Some(event) = server.poll_event() {
                    self.server_events.push((now, event));
                }
                let response = if self.encoded {
                    server
                        .poll_response_encoded(now, &self.store)
                        .and_then(|encoded| encoded.decode().ok())
                } else {
                    server.poll_response(now, &self.store)
                };
                let Some(response) = response else { break };
                let stream = self.stream;
                record(&mut self.server_view, |line| Entry::Response {
                    line,
                    stream,
                    response: response.clone(),
                });
                self.to_client.push_back((now, response));
            }
        }
    }

    /// The earliest timer of either side.
    pub fn next_timer(&self) -> Option<Instant> {
        let client = self.client.get().and_then(Client::poll_timeout);
        let server = self.server.as_ref().and_then(ServerStream::poll_timeout);
        [client, server].into_iter().flatten().min()
    }

    /// Fires the timers due at or before `until`, in time order, each at its own deadline,
    /// then sets the clock to `until` (never backwards).
    pub fn fire_timers_until(&mut self, until: Instant) -> Result<(), TimerLivelock> {
        for _ in 0..TIMER_STEPS {
            match self.next_timer() {
                Some(deadline) if deadline <= until => {
                    self.now = self.now.max(deadline);
                    let now = self.now;
                    if let Some(client) = self.client.get_mut() {
                        client.handle_timeout(now);
                    }
                    if let Some(server) = self.server.as_mut() {
                        server.handle_timeout(now);
                    }
                    self.drain();
                }
                _ => {
                    self.now = self.now.max(until);
                    return Ok(());
                }
            }
        }
        let at = self.now;
        self.now = self.now.max(until);
        Err(TimerLivelock { at })
    }

    /// Delivers a request to the server now, records it and drains. A request a script
    /// wrote (no client runs) is recorded on the client's side too.
    pub fn deliver_request(&mut self, request: Request) {
        let stream = self.stream;
        record(&mut self.server_view, |line| Entry::Request {
            line,
            stream,
            request: request.clone(),
        });
        if self.client.get().is_none() {
            record(&mut self.client_view, |line| Entry::Request {
                line,
                stream,
                request: request.clone(),
            });
        }
        if let Some(server) = self.server.as_mut() {
            server.handle_request(self.now, request);
        }
        self.drain();
    }

    /// Delivers responses to the client now, one after the other before it is drained, then
    /// drains; each is recorded. A response a script wrote (no server runs) is recorded on
    /// the server's side too.
    pub fn deliver_responses(&mut self, responses: impl IntoIterator<Item = Response>) {
        let stream = self.stream;
        for response in responses {
            record(&mut self.client_view, |line| Entry::Response {
                line,
                stream,
                response: response.clone(),
            });
            if !self.models_server() {
                record(&mut self.server_view, |line| Entry::Response {
                    line,
                    stream,
                    response: response.clone(),
                });
            }
            if let Some(client) = self.client.get_mut() {
                client.handle_response(self.now, response);
            }
        }
        self.drain();
    }

    /// The stream breaks: what was in flight is lost; the client is told.
    pub fn break_stream(&mut self) {
        if let Some(client) = self.client.get_mut() {
            client.disconnected(self.now);
        }
        self.server = None;
        self.to_server.clear();
        self.to_client.clear();
        self.drain();
    }

    /// A new stream comes up: a new server stream (if the simulation runs a server), and
    /// the client is told.
    pub fn reconnect(&mut self) {
        self.stream += 1;
        self.server = self.server_config.clone().map(ServerStream::new);
        if let Some(client) = self.client.get_mut() {
            client.connected(self.now);
        }
        self.drain();
    }

    /// A fingerprint of the whole state that decides the future: both state machines, the
    /// store, what is in flight, the clock and the stream (not the transcripts or events).
    /// Equal states may differ in fingerprint (map order), different ones never share one
    /// except by a 64-bit hash collision.
    pub fn fingerprint(&self) -> u64 {
        use core::hash::{Hash, Hasher};
        let text = format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
            self.client.get().map(Client::debug_state),
            self.server,
            self.store,
            self.to_server,
            self.to_client,
            self.now,
            self.stream
        );
        let mut hasher = Fnv(0xcbf2_9ce4_8422_2325);
        text.hash(&mut hasher);
        hasher.finish()
    }
}

/// FNV-1a 64, a fixed hash so fingerprints are the same in every run.
struct Fnv(u64);

impl core::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
