//! A client state machine and a server state machine joined by a simulated stream, in the
//! style of quinn-proto's `Pair`: the [`Sim`] stream (virtual clock, drain, timers, stream
//! breaks and reconnects, a transcript per side) plus a latency per direction, so that
//! requests and responses are in flight at the same time (each direction keeps its order,
//! as gRPC does), delivery in time order (`step`, `drive`, `advance`), and a transcript of
//! every message in the scenario notation.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::ops::{Deref, DerefMut};
use core::time::Duration;

use super::sim::Sim;
use crate::transcript::notation;
use xds_sansio::client::{Client, ClientConfig};
use xds_sansio::server::ServerConfig;
use xds_sansio::time::Instant;

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

/// A client and a server on one simulated stream, with latency. `Clone` copies everything,
/// so a model checker can explore several futures of one state.
///
/// The stream itself is a [`Sim`] that the pair dereferences to: `pair.client`,
/// `pair.server`, `pair.store`, the events, the transcripts, `break_stream` and
/// `reconnect` are the stream's.
#[derive(Clone)]
pub struct Pair {
    sim: Sim<Client>,
    latency: Duration,
    notation: Vec<String>,
}

impl Deref for Pair {
    type Target = Sim<Client>;

    fn deref(&self) -> &Sim<Client> {
        &self.sim
    }
}

impl DerefMut for Pair {
    fn deref_mut(&mut self) -> &mut Sim<Client> {
        &mut self.sim
    }
}

impl Pair {
    /// A pair with the stream up at time zero and an empty store.
    pub fn new(config: PairConfig) -> Pair {
        Pair {
            sim: Sim::new(Client::new(config.client), Some(config.server)),
            latency: config.latency,
            notation: Vec::new(),
        }
    }

    /// The transcript in the scenario notation, one message a line.
    pub fn notation(&self) -> String {
        self.notation.join("\n")
    }

    /// Puts every output of both sides on the wire and every event in the logs.
    pub fn collect(&mut self) {
        self.sim.drain();
    }

    /// When the oldest request in flight arrives.
    fn request_arrives_at(&self) -> Option<Instant> {
        self.sim.request_sent_at().map(|sent| sent + self.latency)
    }

    /// When the oldest response in flight arrives.
    fn response_arrives_at(&self) -> Option<Instant> {
        self.sim.response_sent_at().map(|sent| sent + self.latency)
    }

    /// Fires the timers due at or before `until` (a message's arrival, or the end of an
    /// `advance`). A timer livelock only stops the firing: the clock still moves to
    /// `until`, and the drive's own step bound reports what keeps going.
    fn run_timers_until(&mut self, until: Instant) {
        let _stuck = self.sim.fire_timers_until(until);
    }

    /// Delivers the oldest request now (ignoring its delivery time), if any.
    pub fn deliver_to_server(&mut self) -> bool {
        let Some(at) = self.request_arrives_at() else {
            return false;
        };
        self.run_timers_until(at);
        let Some((_, request)) = self.sim.take_request() else {
            return false;
        };
        self.notation
            .push(format!("C->S {}", notation::request(&request)));
        self.sim.deliver_request(request);
        true
    }

    /// Delivers the oldest response now (ignoring its delivery time), if any.
    pub fn deliver_to_client(&mut self) -> bool {
        let Some(at) = self.response_arrives_at() else {
            return false;
        };
        self.run_timers_until(at);
        let Some((_, response)) = self.sim.take_response() else {
            return false;
        };
        self.notation
            .push(format!("S->C {}", notation::response(&response)));
        self.sim.deliver_responses([response]);
        true
    }

    /// Delivers the message due first (responses first on a tie), firing the timers due
    /// before it. `false` when nothing is in flight.
    pub fn step(&mut self) -> bool {
        self.collect();
        match (self.request_arrives_at(), self.response_arrives_at()) {
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
        let until = self.now() + duration;
        for _ in 0..100_000 {
            self.collect();
            let message = [self.request_arrives_at(), self.response_arrives_at()]
                .into_iter()
                .flatten()
                .min();
            let next = [message, self.sim.next_timer()].into_iter().flatten().min();
            match next {
                Some(at) if at <= until => {
                    if message == Some(at) {
                        self.step();
                    } else {
                        self.run_timers_until(at);
                    }
                }
                _ => {
                    self.run_timers_until(until);
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
}
