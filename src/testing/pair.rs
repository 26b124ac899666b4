//! A client state machine and a server state machine joined by a simulated stream, in the
//! style of quinn-proto's `Pair`: a virtual clock, a latency per direction, requests and
//! responses in flight at the same time (each direction keeps its order, as gRPC does),
//! stream breaks and reconnects, and a transcript of every message in the scenario
//! notation.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::client::{Client, ClientConfig, ClientEvent};
use crate::message::{Request, Response};
use crate::script::render;
use crate::server::{ResourceStore, ServerConfig, ServerEvent, ServerStream};
use crate::time::Instant;
use crate::transcript::Entry;

/// How the pair is set up.
#[derive(Clone, Debug)]
pub struct PairConfig {
    /// The client's configuration.
    pub client: ClientConfig,
    /// The server's configuration (a new stream is made from it on every connect).
    pub server: ServerConfig,
    /// One-way delay of every message.
    pub latency: Duration,
}

/// Why a drive did not reach quiescence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stuck {
    /// Messages kept flowing for this many steps: a livelock (a NACK loop is one).
    Livelock {
        /// The step budget that ran out.
        steps: u64,
        /// The last messages, in the scenario notation.
        tail: String,
    },
}

impl fmt::Display for Stuck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stuck::Livelock { steps, tail } => {
                write!(
                    f,
                    "no quiescence after {steps} steps (livelock); last messages:\n{tail}"
                )
            }
        }
    }
}

/// A client and a server on one simulated stream. `Clone` copies everything, so a model
/// checker can explore several futures of one state.
#[derive(Clone)]
pub struct Pair {
    /// The client state machine.
    pub client: Client,
    /// The server's stream, `None` while the stream is down.
    pub server: Option<ServerStream>,
    /// What the server publishes; change it, then `step`/`drive`.
    pub store: ResourceStore,
    server_config: ServerConfig,
    now: Instant,
    latency: Duration,
    to_server: VecDeque<(Instant, Request)>,
    to_client: VecDeque<(Instant, Response)>,
    /// Client events not yet taken, with the time they happened.
    pub client_events: Vec<(Instant, ClientEvent)>,
    /// Server events not yet taken, with the time they happened.
    pub server_events: Vec<(Instant, ServerEvent)>,
    /// What the client sent and received, in its order (its requests when sent).
    client_view: Vec<Entry>,
    /// What the server received and sent, in its order, with store changes.
    server_view: Vec<Entry>,
    notation: Vec<String>,
    stream: u64,
}

fn push(view: &mut Vec<Entry>, entry: impl FnOnce(usize) -> Entry) {
    let line = view.len() + 1;
    view.push(entry(line));
}

impl Pair {
    /// A pair with the stream up at time zero and an empty store.
    pub fn new(config: PairConfig) -> Pair {
        let mut client = Client::new(config.client);
        client.connected(Instant::ZERO);
        let mut pair = Pair {
            client,
            server: Some(ServerStream::new(config.server.clone())),
            store: ResourceStore::new(),
            server_config: config.server,
            now: Instant::ZERO,
            latency: config.latency,
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            client_view: Vec::new(),
            server_view: Vec::new(),
            notation: Vec::new(),
            stream: 1,
        };
        pair.collect();
        pair
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Messages on the wire, both directions.
    pub fn in_flight(&self) -> usize {
        self.to_server.len() + self.to_client.len()
    }

    /// Which stream is up (counts connects, from 1).
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// The conversation as the client saw it: requests when sent, responses when
    /// received. Check the client's side on this one.
    pub fn client_view(&self) -> &[Entry] {
        &self.client_view
    }

    /// The conversation as the server saw it: requests when received, responses when sent,
    /// store changes recorded with [`Pair::record_store`]. Check the server's side on this
    /// one.
    pub fn server_view(&self) -> &[Entry] {
        &self.server_view
    }

    /// The transcript in the scenario notation, one message a line.
    pub fn notation(&self) -> String {
        self.notation.join("\n")
    }

    /// Records a store change in the transcript (call after changing `store`).
    pub fn record_store(&mut self, type_url: &str, name: &str) {
        let version = self.store.get(type_url, name).map(|r| r.version().into());
        push(&mut self.server_view, |line| Entry::Store {
            line,
            type_url: type_url.into(),
            name: name.into(),
            version,
        });
    }

    /// Puts every output of both sides on the wire and every event in the logs.
    pub fn collect(&mut self) {
        let at = self.now + self.latency;
        while let Some(request) = self.client.poll_request(self.now) {
            let stream = self.stream;
            push(&mut self.client_view, |line| Entry::Request {
                line,
                stream,
                request: request.clone(),
            });
            self.to_server.push_back((at, request));
        }
        while let Some(event) = self.client.poll_event() {
            self.client_events.push((self.now, event));
        }
        if let Some(server) = self.server.as_mut() {
            loop {
                while let Some(event) = server.poll_event() {
                    self.server_events.push((self.now, event));
                }
                match server.poll_response(self.now, &self.store) {
                    Some(response) => {
                        let stream = self.stream;
                        push(&mut self.server_view, |line| Entry::Response {
                            line,
                            stream,
                            response: response.clone(),
                        });
                        self.to_client.push_back((at, response));
                    }
                    None => break,
                }
            }
        }
    }

    /// The earliest timer of either side.
    fn next_timer(&self) -> Option<Instant> {
        let server = self.server.as_ref().and_then(ServerStream::poll_timeout);
        match (self.client.poll_timeout(), server) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the timers due at or before `until`, in time order, then sets the clock to
    /// `until`.
    fn run_timers_until(&mut self, until: Instant) {
        // A bounded loop: a timer that never moves forward must not hang a test.
        for _ in 0..100_000 {
            match self.next_timer() {
                Some(deadline) if deadline <= until => {
                    self.now = self.now.max(deadline);
                    self.client.handle_timeout(self.now);
                    if let Some(server) = self.server.as_mut() {
                        server.handle_timeout(self.now);
                    }
                    self.collect();
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
    }

    /// Delivers the oldest request now (ignoring its delivery time), if any.
    pub fn deliver_to_server(&mut self) -> bool {
        let Some((at, request)) = self.to_server.pop_front() else {
            return false;
        };
        self.run_timers_until(at);
        self.notation
            .push(format!("C->S {}", render::request(&request)));
        let stream = self.stream;
        push(&mut self.server_view, |line| Entry::Request {
            line,
            stream,
            request: request.clone(),
        });
        if let Some(server) = self.server.as_mut() {
            server.handle_request(self.now, request);
        }
        self.collect();
        true
    }

    /// Delivers the oldest response now (ignoring its delivery time), if any.
    pub fn deliver_to_client(&mut self) -> bool {
        let Some((at, response)) = self.to_client.pop_front() else {
            return false;
        };
        self.run_timers_until(at);
        self.notation
            .push(format!("S->C {}", render::response(&response)));
        let stream = self.stream;
        push(&mut self.client_view, |line| Entry::Response {
            line,
            stream,
            response: response.clone(),
        });
        self.client.handle_response(self.now, response);
        self.collect();
        true
    }

    /// Delivers the message due first (responses first on a tie), firing the timers due
    /// before it. `false` when nothing is in flight.
    pub fn step(&mut self) -> bool {
        self.collect();
        let request_at = self.to_server.front().map(|(at, _)| *at);
        let response_at = self.to_client.front().map(|(at, _)| *at);
        match (request_at, response_at) {
            (Some(r), Some(s)) if r < s => self.deliver_to_server(),
            (_, Some(_)) => self.deliver_to_client(),
            (Some(_), None) => self.deliver_to_server(),
            (None, None) => false,
        }
    }

    /// Steps until nothing is in flight, at most 10 000 steps.
    pub fn drive(&mut self) -> Result<u64, Stuck> {
        self.drive_bounded(10_000)
    }

    /// Steps until nothing is in flight, failing with [`Stuck::Livelock`] after `max`
    /// steps.
    pub fn drive_bounded(&mut self, max: u64) -> Result<u64, Stuck> {
        for steps in 0..max {
            if !self.step() {
                return Ok(steps);
            }
        }
        if self.in_flight() == 0 {
            return Ok(max);
        }
        let tail = self.tail();
        Err(Stuck::Livelock { steps: max, tail })
    }

    /// Lets `duration` pass: messages are delivered and timers fired in time order.
    pub fn advance(&mut self, duration: Duration) -> Result<(), Stuck> {
        let until = self.now + duration;
        for _ in 0..100_000 {
            self.collect();
            let message = [
                self.to_server.front().map(|m| m.0),
                self.to_client.front().map(|m| m.0),
            ]
            .into_iter()
            .flatten()
            .min();
            let next = [message, self.next_timer()].into_iter().flatten().min();
            match next {
                Some(at) if at <= until => {
                    if message == Some(at) {
                        self.step();
                    } else {
                        self.run_timers_until(at);
                    }
                }
                _ => {
                    self.now = self.now.max(until);
                    return Ok(());
                }
            }
        }
        let tail = self.tail();
        Err(Stuck::Livelock {
            steps: 100_000,
            tail,
        })
    }

    fn tail(&self) -> String {
        let start = self.notation.len().saturating_sub(12);
        self.notation.get(start..).unwrap_or_default().join("\n")
    }

    /// The stream breaks: what was in flight is lost; the client is told.
    pub fn break_stream(&mut self) {
        self.client.disconnected(self.now);
        self.server = None;
        self.to_server.clear();
        self.to_client.clear();
        self.collect();
    }

    /// A new stream comes up.
    pub fn reconnect(&mut self) {
        self.stream += 1;
        self.server = Some(ServerStream::new(self.server_config.clone()));
        self.client.connected(self.now);
        self.collect();
    }

    /// A fingerprint of the whole state that decides the future: both state machines, the
    /// store, what is in flight, the clock and the stream (not the transcripts or events).
    /// Equal states may differ in fingerprint (map order), different ones never share one
    /// except by a 64-bit hash collision.
    pub fn fingerprint(&self) -> u64 {
        use core::hash::{Hash, Hasher};
        let text = format!(
            "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
            self.client.debug_state(),
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

    /// Takes the client events so far, with their times.
    pub fn take_client_events(&mut self) -> Vec<(Instant, ClientEvent)> {
        core::mem::take(&mut self.client_events)
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
