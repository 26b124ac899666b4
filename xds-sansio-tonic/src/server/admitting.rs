//! Storm protection as the server applies it: the [`AdmissionGate`] behind a lock, and the
//! wake-ups of the streams queued for a place in its window. The gate decides; this only
//! hands each queued stream its grant, and gives back a grant nobody is left to take.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use xds_sansio::time::Instant;

use super::admission::{Admission, AdmissionGate, Arrival, Decision};

/// The gate and its queued streams' wake-ups, under one lock (a grant and the wake-up it
/// sends are one step, so no stream misses its turn).
pub(crate) struct Admitting {
    /// The gate's settings, read without the lock (they never change).
    config: Admission,
    state: Mutex<State>,
}

struct State {
    gate: AdmissionGate,
    /// Queued tickets -> the stream waiting for its grant.
    waiters: HashMap<u64, oneshot::Sender<()>>,
}

/// A queued stream's wait: the grant arrives on `granted`.
pub(crate) struct Queued {
    pub(crate) ticket: u64,
    pub(crate) until: Instant,
    pub(crate) granted: oneshot::Receiver<()>,
}

impl Admitting {
    pub(crate) fn new(config: Admission) -> Admitting {
        Admitting {
            config,
            state: Mutex::new(State {
                gate: AdmissionGate::new(config),
                waiters: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a new stream admitted now takes a place in the window.
    pub(crate) fn windowed(&self, arrival: Arrival) -> bool {
        arrival == Arrival::New && self.config.window > 0
    }

    /// How long a warming stream holds its place without acknowledging.
    pub(crate) fn window_timeout(&self) -> Duration {
        self.config.window_timeout
    }

    /// The gate's decision at `now`; a queued stream also gets the receiver of its grant.
    pub(crate) fn admit(&self, now: Instant, arrival: Arrival) -> (Decision, Option<Queued>) {
        let mut state = self.lock();
        let decision = state.gate.admit(now, arrival);
        let queued = match decision {
            Decision::Queue { ticket, until } => {
                let (tx, granted) = oneshot::channel();
                state.waiters.insert(ticket, tx);
                Some(Queued {
                    ticket,
                    until,
                    granted,
                })
            }
            _ => None,
        };
        (decision, queued)
    }

    /// A queued stream gives up at `now`: `Some(hint)` to shed it with, or `None` when
    /// its place was granted meanwhile (it is warming).
    pub(crate) fn abandon(&self, now: Instant, ticket: u64) -> Option<Duration> {
        let mut state = self.lock();
        state.waiters.remove(&ticket);
        state.gate.abandon(now, ticket)
    }

    /// A stream warming since `since` settled at `now`: the next queued stream is let in.
    pub(crate) fn settled(&self, now: Instant, since: Instant) {
        let mut state = self.lock();
        let mut next = state.gate.settled(now, since);
        // A grant whose stream is gone is passed on at once.
        while let Some(ticket) = next {
            match state.waiters.remove(&ticket).map(|tx| tx.send(())) {
                Some(Ok(())) => return,
                _ => next = state.gate.unclaimed(),
            }
        }
    }

    /// A stream that was admitted, told to wait or queued ended.
    pub(crate) fn release(&self) {
        self.lock().gate.release();
    }
}
