//! Storm protection: which new stream is served now, which waits for its turn, and which
//! is told to come back later. A pure type ([`AdmissionGate`]) that takes the time as an
//! input, tested in virtual time; the server only applies its decisions.
//!
//! # Decisions
//!
//! - **Decided at the first request, not at the call.** Only the first request says
//!   whether the client resumes: SotW `version_info` non-empty, or delta
//!   `initial_resource_versions` non-empty (xDS protocol, "Resource warming" and
//!   "Incremental xDS": a reconnecting client sends what it holds). Until then a call costs
//!   a task and a few buffers, and the builder's hard `max_streams` (counted at the call)
//!   bounds those.
//! - **A token bucket for new streams** (the generic cell rate algorithm: one "theoretical
//!   arrival time" instead of a token count, so a refill is a subtraction of times, not a
//!   timer): `burst` new streams at once after a quiet time, then `rate` per second.
//! - **A new stream waits for its token, bounded.** When the bucket is empty the stream
//!   gets the next free token and waits until it is due (first come, first served, with no
//!   queue to keep: each waiter knows its own time), as long as that is at most
//!   `max_wait` away; the client sees a slow first response, not an error. Beyond
//!   `max_wait` it is shed at once.
//! - **Resuming streams go first.** A stream that presents versions is admitted at once,
//!   without waiting for a token, and may use the `reserved_for_resuming` share of
//!   `max_streams` that new streams may not. It still takes a token (going into the
//!   bucket's debt, at most as far as a new stream may wait), so the new streams behind it
//!   wait longer or are shed. Reason: it costs least. It holds a configuration already, so
//!   it is owed only what differs from what it presents; with versions computed from the
//!   content (the core's default) a client that resumes on a restarted server or another
//!   replica holding the same state is sent nothing at all; a new stream is owed the whole
//!   state (a full CDS of 1 000 clusters is ~150 KB).
//! - **A per-process cap**: at most `max_streams` streams admitted or waiting at once; a
//!   stream beyond it is shed.
//! - **Shedding says when to come back**: the stream ends with `UNAVAILABLE` (gRPC's code
//!   for "transient, retry") and the `grpc-retry-pushback-ms` trailer (gRFC A6, "Pushback")
//!   carrying [`Decision::Shed`]'s `retry_after`. Shed for the rate, the hint is when the
//!   stream's token would be due had it queued, one emission interval after the previous
//!   shed stream's: the shed clients come back spread at the admission rate, not in one
//!   second wave. Shed for the cap, the hint is `cap_retry` plus a spread over one more
//!   `cap_retry`, by the same counter (nobody knows when streams will close).
//! - **Tokens of waiters that leave are not returned**: a client that goes away while it
//!   waits wastes its token (at most `max_wait` of tokens per storm); keeping a queue to
//!   give them back would cost more than the tokens.
//! - **Or a window instead of a rate** ([`Admission::window`]): at most `window` new
//!   streams are *warming* at once, admitted and their first response not yet
//!   acknowledged (ACK or NACK: the client has it and has applied or judged it). The
//!   others queue, first come first served, and each acknowledgement lets the next one in.
//!   A rate is a number the operator must pick for the machine, the state's size and the
//!   connected clients' needs (a state ten times larger needs a rate ten times lower); a
//!   window follows what the machine and the clients actually manage, as a TCP window
//!   follows its path. A stream that never acknowledges frees its place after
//!   `window_timeout`, or when it ends. Resuming streams take no place in the window: they
//!   are admitted at once, as with the rate.
//! - **The window sheds no new stream on a guess.** A new stream queues whatever the
//!   queue's length (bounded by `max_streams`); only a stream that waited its `max_wait`
//!   is shed, told when its turn would come at the pace acknowledgements have been
//!   coming (the faster of the mean gap between the recent ones and the time a stream
//!   takes to settle over the window's size). A queued stream costs a task and a few
//!   buffers; shed on a pace measured while clients still arrive (when the server is
//!   busiest accepting them, so the pace errs slow), streams came back after those
//!   queued behind them were served, and a 5 000-client storm that needed 2.5 s took
//!   8-10 s (`benches/README.md`, runs W10 and W13).
//! - **A stream that gives up is told its own turn.** Streams give up in the order they
//!   queued (each waits the same `max_wait`), so those that gave up before it were ahead
//!   of it: its turn counts the places of the streams still queued ahead of it, not of
//!   the whole queue (counting the streams behind it, which give up too, told a whole
//!   storm to come back at once after a hole of seconds). Each hint lands one pace after
//!   the previous one, so the shed clients come back at the pace the window lets them in,
//!   but never more than two `max_wait`s later: the pace measured can come out slower
//!   than the machine's, and over tens of thousands of sheds hints one pace apart would
//!   add up to minutes of an idle server; past that, hints wrap round within its last
//!   `max_wait`, still one pace apart (`benches/README.md`, "A window instead of a
//!   rate", runs W9 and W10).

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use xds_sansio::time::Instant;

/// Storm protection's settings ([`XdsServerBuilder::admission`](super::XdsServerBuilder::admission)).
///
/// The default admits 500 new streams per second after a burst of 500, each waiting at
/// most 5 s for its turn, 100 000 streams at most of which 10 000 are kept for resuming
/// clients. A starting point measured with `benches/storm/` (figures in
/// `benches/README.md`, "Storm"): on two shared cores, new clients owed a 150 KB full
/// state each, it halves the delay a storm of 5 000 adds to the connected clients'
/// updates; 250 per second keeps them near their delay without a storm, and serves the
/// storm in twice the time. The rate to choose is what the machine can send in full states
/// beside its connected clients' updates: a larger state needs a lower rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admission {
    /// New streams admitted per second once the burst is spent (at least 1).
    pub rate: u32,
    /// New streams admitted at once after a quiet time (at least 1).
    pub burst: u32,
    /// The longest a new stream waits for its token, or for its place in the window,
    /// before it is shed instead.
    pub max_wait: Duration,
    /// Streams admitted or waiting at once; beyond it a stream is shed.
    pub max_streams: usize,
    /// Of `max_streams`, how many only resuming streams may take.
    pub reserved_for_resuming: usize,
    /// The retry hint of a stream shed for the cap (spread over one more `cap_retry`).
    pub cap_retry: Duration,
    /// New streams warming at once (admitted, first response not yet acknowledged); when
    /// not 0 it paces new streams instead of `rate` and `burst`. 0 (the default): no
    /// window.
    pub window: usize,
    /// How long a stream holds its place in the window without acknowledging anything.
    pub window_timeout: Duration,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission {
            rate: 500,
            burst: 500,
            max_wait: Duration::from_secs(5),
            max_streams: 100_000,
            reserved_for_resuming: 10_000,
            cap_retry: Duration::from_secs(5),
            window: 0,
            window_timeout: Duration::from_secs(10),
        }
    }
}

impl Admission {
    /// The defaults with this rate and burst.
    pub fn new(rate: u32, burst: u32) -> Admission {
        Admission {
            rate,
            burst,
            ..Admission::default()
        }
    }

    /// The defaults with a window of `window` warming streams instead of a rate.
    pub fn window(window: usize) -> Admission {
        Admission {
            window: window.max(1),
            ..Admission::default()
        }
    }

    /// The time between two tokens, in nanoseconds.
    fn interval(&self) -> u64 {
        1_000_000_000 / u64::from(self.rate.max(1))
    }
}

/// What a stream presents in its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// No versions: it is owed the whole state.
    New,
    /// SotW `version_info` or delta `initial_resource_versions`: it holds a configuration.
    Resuming,
}

/// Why a stream was shed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShedReason {
    /// Its token would be due later than `max_wait`.
    Rate,
    /// `max_streams` (less the resuming share, for a new stream) are admitted or waiting.
    Cap,
    /// A queued stream's `max_wait` passed before its turn in the window came.
    Window,
}

impl ShedReason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            ShedReason::Rate => "rate",
            ShedReason::Cap => "cap",
            ShedReason::Window => "window",
        }
    }
}

/// What to do with a stream at its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Serve it now.
    Admit,
    /// Serve it at `until` (its token is due then); it holds a slot meanwhile.
    Wait {
        /// When its token is due.
        until: Instant,
    },
    /// Serve it once [`AdmissionGate::settled`] grants `ticket` its place in the window;
    /// it holds a slot meanwhile. At `until` it gives up ([`AdmissionGate::abandon`]) and
    /// is shed, unless its place was granted meanwhile.
    Queue {
        /// What the grant names.
        ticket: u64,
        /// When it stops waiting.
        until: Instant,
    },
    /// End it, telling the client to come back after `retry_after`.
    Shed {
        /// Why.
        reason: ShedReason,
        /// The hint (`grpc-retry-pushback-ms`).
        retry_after: Duration,
    },
}

/// The admission state of one server process. See the [module docs](self).
///
/// # Method kinds
/// A read ([`held`](Self::held)), an input that returns its decision
/// ([`admit`](Self::admit)), and [`release`](Self::release) when a stream that was admitted
/// or told to wait ends. Time never moves backwards between calls.
#[derive(Clone, Debug)]
pub struct AdmissionGate {
    config: Admission,
    /// The generic cell rate algorithm's theoretical arrival time: the bucket is full when
    /// it is not after `now`, empty when it is `burst` intervals after.
    tat: Instant,
    /// Where the last rate-shed stream's hint landed: the next one lands an interval after.
    shed_tat: Instant,
    /// Streams shed for the cap, to spread their hints.
    cap_sheds: u64,
    /// Streams admitted or waiting, not yet released.
    held: usize,
    /// New streams admitted by the window and not yet settled.
    warming: usize,
    /// The tickets queued for a place in the window are those from `first_queued` to
    /// `next_ticket` (they are handed out in order and granted in order), less those
    /// `abandoned` (skipped when their turn comes: O(1) to give up, in a queue of 50 000).
    first_queued: u64,
    next_ticket: u64,
    abandoned: HashSet<u64>,
    /// The window's pace where it is the bottleneck: when the last settles happened
    /// while streams queued (at most [`PACE_SAMPLES`], oldest first), and since when
    /// streams have queued without a break. Cleared each time a queue forms: the pace of
    /// quiet times (when settles say how fast clients arrive, not how fast they are
    /// served) or of an earlier storm says nothing of this one; and the gaps between
    /// settles, not the time since the queue formed, leave out the time the first full
    /// states took to fill the window.
    recent: VecDeque<Instant>,
    queue_since: Instant,
    /// How long a warming stream takes to settle (nanoseconds, a moving average over
    /// about the last eight): with the window full, a place frees every
    /// `latency / window` (Little's law). The second measure of the pace.
    latency: Option<u64>,
    /// Where the last window-shed stream's hint landed before it was wrapped into the
    /// horizon's last `max_wait` ([`AdmissionGate::window_hint`]): the next one lands an
    /// interval after, so hints wrapped round stay spread.
    window_shed_at: Instant,
}

impl AdmissionGate {
    /// A gate with a full bucket and nothing held.
    pub fn new(config: Admission) -> AdmissionGate {
        AdmissionGate {
            config,
            tat: Instant::ZERO,
            shed_tat: Instant::ZERO,
            cap_sheds: 0,
            held: 0,
            warming: 0,
            first_queued: 0,
            next_ticket: 0,
            abandoned: HashSet::new(),
            recent: VecDeque::new(),
            queue_since: Instant::ZERO,
            latency: None,
            window_shed_at: Instant::ZERO,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Admission {
        &self.config
    }

    /// Streams admitted or waiting, not yet released.
    pub fn held(&self) -> usize {
        self.held
    }

    /// New streams in the window: admitted, first response not yet acknowledged.
    pub fn warming(&self) -> usize {
        self.warming
    }

    /// Streams queued for a place in the window.
    pub fn queued(&self) -> usize {
        let span = self.next_ticket.saturating_sub(self.first_queued);
        usize::try_from(span)
            .unwrap_or(usize::MAX)
            .saturating_sub(self.abandoned.len())
    }

    /// Decides for a stream whose first request arrived at `now`. `Admit` and `Wait` hold a
    /// slot until [`release`](Self::release); `Shed` holds nothing.
    pub fn admit(&mut self, now: Instant, arrival: Arrival) -> Decision {
        let config = self.config;
        let cap = match arrival {
            Arrival::Resuming => config.max_streams,
            Arrival::New => config
                .max_streams
                .saturating_sub(config.reserved_for_resuming),
        };
        if self.held >= cap {
            return self.shed_for_cap();
        }
        if config.window > 0 && arrival == Arrival::New {
            return self.admit_to_window(now);
        }
        let interval = config.interval();
        let capacity = interval.saturating_mul(u64::from(config.burst.max(1)));
        let max_wait = duration_nanos(config.max_wait);
        let next = self.tat.max(now).as_nanos().saturating_add(interval);
        // When this stream's token is due: `capacity` before the bucket's new arrival time.
        let due = next.saturating_sub(capacity).max(now.as_nanos());
        match arrival {
            Arrival::Resuming => {
                // Into the bucket's debt, at most as far as a new stream may wait.
                let limit = now
                    .as_nanos()
                    .saturating_add(capacity)
                    .saturating_add(max_wait);
                self.tat = Instant::from_nanos(next.min(limit)).max(self.tat);
                self.held += 1;
                Decision::Admit
            }
            Arrival::New if due - now.as_nanos() > max_wait => {
                self.shed_tat = Instant::from_nanos(
                    self.shed_tat
                        .max(self.tat)
                        .as_nanos()
                        .saturating_add(interval),
                );
                let back = self
                    .shed_tat
                    .as_nanos()
                    .saturating_sub(capacity)
                    .saturating_sub(now.as_nanos());
                Decision::Shed {
                    reason: ShedReason::Rate,
                    retry_after: Duration::from_nanos(back).max(Duration::from_millis(1)),
                }
            }
            Arrival::New => {
                self.tat = Instant::from_nanos(next);
                self.held += 1;
                if due <= now.as_nanos() {
                    Decision::Admit
                } else {
                    Decision::Wait {
                        until: Instant::from_nanos(due),
                    }
                }
            }
        }
    }

    /// A stream that was admitted or told to wait ended.
    pub fn release(&mut self) {
        self.held = self.held.saturating_sub(1);
    }

    /// A place in the window, or the queue for one.
    fn admit_to_window(&mut self, now: Instant) -> Decision {
        if self.warming < self.config.window && self.queued() == 0 {
            self.warming += 1;
            self.held += 1;
            return Decision::Admit;
        }
        if self.queued() == 0 {
            self.queue_since = now;
            self.recent.clear();
        }
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.saturating_add(1);
        self.held += 1;
        Decision::Queue {
            ticket,
            until: Instant::from_nanos(
                now.as_nanos()
                    .saturating_add(duration_nanos(self.config.max_wait)),
            ),
        }
    }

    /// A stream warming since `since` settled at `now` (its first response acknowledged,
    /// its `window_timeout` passed, or it ended): its place goes to the first ticket
    /// queued, returned to be woken.
    pub fn settled(&mut self, now: Instant, since: Instant) -> Option<u64> {
        self.warming = self.warming.saturating_sub(1);
        let took = now.as_nanos().saturating_sub(since.as_nanos());
        self.latency = Some(match self.latency {
            None => took,
            Some(avg) => avg - avg / 8 + took / 8,
        });
        if self.queued() > 0 {
            if self.recent.len() >= PACE_SAMPLES {
                self.recent.pop_front();
            }
            self.recent
                .push_back(now.max(self.recent.back().copied().unwrap_or(now)));
        }
        self.grant_next()
    }

    /// The time between two places freeing up with the window full (nanoseconds), by
    /// two measures: the mean gap between the recent settles, and the time a stream takes
    /// to settle over the window's size. Each errs slow now and then (a stall among the
    /// recent settles; streams settling slower than the window turns over), and a pace too
    /// slow costs most: shed clients told to come back late while the server idles. A
    /// pace too fast only brings them back early, to queue or be told again. So the faster
    /// of the two.
    fn pace(&self) -> Option<u64> {
        let gaps = || {
            let (first, last) = (self.recent.front()?, self.recent.back()?);
            let gaps = u64::try_from(self.recent.len().checked_sub(1)?).ok()?;
            last.as_nanos()
                .saturating_sub(first.as_nanos())
                .checked_div(gaps)
        };
        let little = || {
            let window = u64::try_from(self.config.window.max(1)).ok()?;
            Some(self.latency? / window)
        };
        match (gaps(), little()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first ticket queued gets a place, if the window has one.
    fn grant_next(&mut self) -> Option<u64> {
        if self.warming >= self.config.window {
            return None;
        }
        while self.first_queued < self.next_ticket {
            let ticket = self.first_queued;
            self.first_queued += 1;
            if !self.abandoned.remove(&ticket) {
                self.warming += 1;
                return Some(ticket);
            }
        }
        None
    }

    /// A queued stream stops waiting at `now`. `Some(hint)`: it was still queued, holds
    /// nothing in the window now (its slot is held until [`release`](Self::release)) and
    /// is to be shed with this hint; `None`: its place was granted before, and it is
    /// warming.
    pub fn abandon(&mut self, now: Instant, ticket: u64) -> Option<Duration> {
        if !(self.first_queued..self.next_ticket).contains(&ticket) {
            return None;
        }
        // Streams give up in the order they queued: those that gave up before it were
        // ahead of it (a few that went away otherwise only make the turn come early).
        let gave_up = u64::try_from(self.abandoned.len()).unwrap_or(u64::MAX);
        let ahead = (ticket - self.first_queued).saturating_sub(gave_up);
        self.abandoned.insert(ticket);
        // Nothing settled twice in this queue: the wait itself is the best guess of a
        // place's pace.
        let interval = self
            .pace()
            .unwrap_or(now.as_nanos().saturating_sub(self.queue_since.as_nanos()));
        let turn = ahead.saturating_add(1).saturating_mul(interval);
        Some(self.window_hint(now, turn, interval))
    }

    /// A granted place its stream will never use (it ended as it was granted): it goes to
    /// the next ticket, returned to be woken.
    pub fn unclaimed(&mut self) -> Option<u64> {
        self.warming = self.warming.saturating_sub(1);
        self.grant_next()
    }

    /// The hint of a stream shed from the window whose turn would come `turn` from `now`:
    /// spread one `interval` after the previous one's, so shed clients come back at the
    /// pace the window lets them in; but never more than [`HINT_HORIZON`] `max_wait`s
    /// away. A pace measured slower than the machine's (it happens: `benches/README.md`,
    /// "A window instead of a rate") would otherwise add up, over tens of thousands of
    /// sheds, to clients sent away for minutes while the server idles; a client told to
    /// come back too early only queues, or is told again. Past the horizon the hints wrap
    /// round within its last `max_wait`, still one `interval` apart.
    fn window_hint(&mut self, now: Instant, turn: u64, interval: u64) -> Duration {
        let now = now.as_nanos();
        let max_wait = duration_nanos(self.config.max_wait).max(1);
        let horizon = now.saturating_add(max_wait.saturating_mul(HINT_HORIZON));
        let from = now.saturating_add(turn);
        let unwrapped = self
            .window_shed_at
            .as_nanos()
            .saturating_add(interval)
            .max(from);
        self.window_shed_at = Instant::from_nanos(unwrapped);
        let mut at = unwrapped;
        if at > horizon {
            let band = horizon.saturating_sub(max_wait);
            at = band.saturating_add((at - horizon) % max_wait);
        }
        Duration::from_nanos(at.saturating_sub(now)).max(Duration::from_millis(1))
    }

    fn shed_for_cap(&mut self) -> Decision {
        let base = self.config.cap_retry;
        let span = duration_nanos(base).max(1);
        let spread = self
            .cap_sheds
            .saturating_mul(self.config.interval())
            .checked_rem(span)
            .unwrap_or(0);
        self.cap_sheds += 1;
        Decision::Shed {
            reason: ShedReason::Cap,
            retry_after: base
                .saturating_add(Duration::from_nanos(spread))
                .max(Duration::from_millis(1)),
        }
    }
}

/// The farthest a window-shed stream is told to come back, in `max_wait`s.
const HINT_HORIZON: u64 = 2;

/// Settles the window's pace is the mean gap of.
const PACE_SAMPLES: usize = 64;

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at_ms(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    /// 10 per second (an interval of 100 ms), a burst of 3, 250 ms of wait at most.
    fn gate(max_streams: usize, reserved: usize) -> AdmissionGate {
        AdmissionGate::new(Admission {
            rate: 10,
            burst: 3,
            max_wait: Duration::from_millis(250),
            max_streams,
            reserved_for_resuming: reserved,
            cap_retry: Duration::from_secs(2),
            ..Admission::default()
        })
    }

    fn retry_of(decision: Decision) -> (ShedReason, Duration) {
        match decision {
            Decision::Shed {
                reason,
                retry_after,
            } => (reason, retry_after),
            other => panic!("not shed: {other:?}"),
        }
    }

    #[test]
    fn a_burst_is_admitted_at_once_then_streams_wait_for_their_token() {
        let mut g = gate(100, 0);
        let now = at_ms(10_000);
        for _ in 0..3 {
            assert_eq!(g.admit(now, Arrival::New), Decision::Admit);
        }
        // The bucket is empty: the next tokens are due one interval apart.
        assert_eq!(
            g.admit(now, Arrival::New),
            Decision::Wait {
                until: at_ms(10_100)
            }
        );
        assert_eq!(
            g.admit(now, Arrival::New),
            Decision::Wait {
                until: at_ms(10_200)
            }
        );
        assert_eq!(g.held(), 5);
        // 300 ms away is beyond the 250 ms a stream may wait.
        let (reason, _) = retry_of(g.admit(now, Arrival::New));
        assert_eq!(reason, ShedReason::Rate);
        assert_eq!(g.held(), 5);
    }

    #[test]
    fn the_bucket_refills_with_time_up_to_its_burst() {
        let mut g = gate(100, 0);
        for _ in 0..3 {
            assert_eq!(g.admit(at_ms(1_000), Arrival::New), Decision::Admit);
        }
        // 100 ms later one token is back, and only one.
        assert_eq!(g.admit(at_ms(1_100), Arrival::New), Decision::Admit);
        assert_eq!(
            g.admit(at_ms(1_100), Arrival::New),
            Decision::Wait {
                until: at_ms(1_200)
            }
        );
        // Long after, the bucket holds its burst again, no more.
        for _ in 0..3 {
            assert_eq!(g.admit(at_ms(60_000), Arrival::New), Decision::Admit);
        }
        assert!(matches!(
            g.admit(at_ms(60_000), Arrival::New),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn rate_sheds_are_told_to_come_back_spread_at_the_rate() {
        let mut g = gate(100, 0);
        let now = at_ms(5_000);
        // The burst, then a waiting line of two (due at +100 and +200 ms).
        for _ in 0..5 {
            assert!(!matches!(g.admit(now, Arrival::New), Decision::Shed { .. }));
        }
        let hints: Vec<Duration> = (0..4)
            .map(|_| retry_of(g.admit(now, Arrival::New)).1)
            .collect();
        // The first shed stream's token would have been due at +300 ms, the next ones one
        // interval (100 ms) apart.
        assert_eq!(
            hints,
            [300, 400, 500, 600].map(Duration::from_millis).to_vec()
        );
        // A shed holds nothing and takes no token: the line is where it was.
        assert_eq!(g.held(), 5);
        assert!(matches!(
            g.admit(at_ms(5_100), Arrival::New),
            Decision::Wait { until } if until == at_ms(5_300)
        ));
    }

    #[test]
    fn resuming_streams_skip_the_line_and_push_new_ones_back() {
        let mut g = gate(100, 0);
        let now = at_ms(2_000);
        for _ in 0..3 {
            assert_eq!(g.admit(now, Arrival::New), Decision::Admit);
        }
        // The bucket is empty, yet a resuming stream is served at once...
        assert_eq!(g.admit(now, Arrival::Resuming), Decision::Admit);
        // ...and took its token: the next new stream waits behind it (due at +200 ms where
        // it would have been at +100 ms).
        assert_eq!(
            g.admit(now, Arrival::New),
            Decision::Wait {
                until: at_ms(2_200)
            }
        );
        // Many resuming streams are all served; their debt stops where a new stream could
        // no longer wait, so new streams are shed, not starved for ever.
        for _ in 0..50 {
            assert_eq!(g.admit(now, Arrival::Resuming), Decision::Admit);
        }
        let (reason, hint) = retry_of(g.admit(now, Arrival::New));
        assert_eq!(reason, ShedReason::Rate);
        assert!(hint <= Duration::from_millis(250 + 100), "{hint:?}");
        // Once time has passed, new streams are admitted again.
        assert_eq!(g.admit(at_ms(3_000), Arrival::New), Decision::Admit);
    }

    #[test]
    fn the_cap_sheds_and_keeps_a_share_for_resuming_streams() {
        let mut g = gate(4, 2);
        // Two new streams fill the new streams' share (the rest is reserved).
        assert_eq!(g.admit(at_ms(0), Arrival::New), Decision::Admit);
        assert_eq!(g.admit(at_ms(0), Arrival::New), Decision::Admit);
        let (reason, hint) = retry_of(g.admit(at_ms(0), Arrival::New));
        assert_eq!((reason, hint), (ShedReason::Cap, Duration::from_secs(2)));
        // Resuming streams take the reserved share, then are shed too.
        assert_eq!(g.admit(at_ms(0), Arrival::Resuming), Decision::Admit);
        assert_eq!(g.admit(at_ms(0), Arrival::Resuming), Decision::Admit);
        let (reason, hint) = retry_of(g.admit(at_ms(0), Arrival::Resuming));
        // The second cap shed lands one interval later than the first.
        assert_eq!(
            (reason, hint),
            (ShedReason::Cap, Duration::from_millis(2_100))
        );
        // A stream that ends frees its slot.
        g.release();
        g.release();
        g.release();
        assert_eq!(g.held(), 1);
        assert_eq!(g.admit(at_ms(10_000), Arrival::New), Decision::Admit);
    }

    #[test]
    fn cap_hints_spread_over_one_more_cap_retry() {
        let mut g = gate(0, 0);
        let hints: Vec<Duration> = (0..25)
            .map(|_| retry_of(g.admit(at_ms(0), Arrival::New)).1)
            .collect();
        assert!(hints
            .iter()
            .all(|h| *h >= Duration::from_secs(2) && *h < Duration::from_secs(4)));
        // 2 s / 100 ms: the 21st hint wraps round to the first.
        assert_eq!(hints[20], hints[0]);
        assert_eq!(hints[1] - hints[0], Duration::from_nanos(100 * MS));
    }

    /// A window of 2, 1 s of wait at most.
    fn window_gate() -> AdmissionGate {
        let mut config = Admission::window(2);
        config.max_wait = Duration::from_secs(1);
        AdmissionGate::new(config)
    }

    fn ticket_of(decision: Decision) -> u64 {
        match decision {
            Decision::Queue { ticket, .. } => ticket,
            other => panic!("not queued: {other:?}"),
        }
    }

    #[test]
    fn a_window_admits_its_size_then_queues_first_come_first_served() {
        let mut g = window_gate();
        let now = at_ms(1_000);
        assert_eq!(g.admit(now, Arrival::New), Decision::Admit);
        assert_eq!(g.admit(now, Arrival::New), Decision::Admit);
        assert_eq!(g.warming(), 2);
        // No rate applies: whatever the bucket, the window decides.
        let a = g.admit(now, Arrival::New);
        assert_eq!(
            a,
            Decision::Queue {
                ticket: 0,
                until: at_ms(2_000)
            }
        );
        let b = ticket_of(g.admit(now, Arrival::New));
        assert_eq!((g.queued(), g.held()), (2, 4));
        // Each settle lets the next one in, in order.
        assert_eq!(g.settled(at_ms(0), at_ms(0)), Some(0));
        assert_eq!(g.settled(at_ms(0), at_ms(0)), Some(b));
        assert_eq!(g.settled(at_ms(0), at_ms(0)), None);
        assert_eq!((g.warming(), g.queued()), (1, 0));
        // With room in the window and nobody queued, a new stream is admitted at once.
        assert_eq!(g.admit(at_ms(1_300), Arrival::New), Decision::Admit);
    }

    #[test]
    fn resuming_streams_take_no_place_in_the_window() {
        let mut g = window_gate();
        let now = at_ms(0);
        for _ in 0..2 {
            assert_eq!(g.admit(now, Arrival::New), Decision::Admit);
        }
        for _ in 0..10 {
            assert_eq!(g.admit(now, Arrival::Resuming), Decision::Admit);
        }
        assert_eq!(g.warming(), 2);
        assert!(matches!(g.admit(now, Arrival::New), Decision::Queue { .. }));
    }

    #[test]
    fn an_abandoned_ticket_is_skipped_and_a_granted_one_cannot_be_abandoned() {
        let mut g = window_gate();
        let now = at_ms(0);
        g.admit(now, Arrival::New);
        g.admit(now, Arrival::New);
        let first = ticket_of(g.admit(now, Arrival::New));
        let second = ticket_of(g.admit(now, Arrival::New));
        let third = ticket_of(g.admit(now, Arrival::New));
        // The second gives up: it is shed with a hint, and the queue skips it.
        assert!(g.abandon(at_ms(1_000), second).is_some());
        assert_eq!(g.queued(), 2);
        assert_eq!(g.settled(at_ms(0), at_ms(0)), Some(first));
        assert_eq!(g.settled(at_ms(0), at_ms(0)), Some(third));
        // A ticket granted before its stream gave up stays granted.
        assert_eq!(g.abandon(at_ms(1_200), third), None);
        assert_eq!(g.abandon(at_ms(1_200), first), None);
        assert_eq!(g.warming(), 2);
        // A grant its stream never takes passes to the next one.
        let fourth = ticket_of(g.admit(now, Arrival::New));
        assert_eq!(g.unclaimed(), Some(fourth));
        assert_eq!(g.warming(), 2);
    }

    #[test]
    fn a_window_queues_every_new_stream_whatever_the_pace() {
        let mut g = window_gate();
        g.admit(at_ms(60_000), Arrival::New);
        g.admit(at_ms(60_000), Arrival::New);
        for _ in 0..10 {
            g.admit(at_ms(60_000), Arrival::New);
        }
        // A slow pace measured: a place frees every 100 ms.
        for k in 0..8 {
            assert!(g.settled(at_ms(60_600 + 100 * k), at_ms(60_000)).is_some());
        }
        // A thousand more arrive: at that pace their turns lie up to 100 s away, beyond
        // any wait, and each still queues (its wait bounded by `max_wait`).
        for _ in 0..1_000 {
            assert!(matches!(
                g.admit(at_ms(61_300), Arrival::New),
                Decision::Queue { .. }
            ));
        }
        assert_eq!(g.queued(), 1_002);
        // Only the cap sheds a new stream.
        let mut capped = AdmissionGate::new(Admission {
            max_streams: 4,
            reserved_for_resuming: 0,
            ..Admission::window(2)
        });
        for _ in 0..4 {
            assert!(!matches!(
                capped.admit(at_ms(0), Arrival::New),
                Decision::Shed { .. }
            ));
        }
        let (reason, _) = retry_of(capped.admit(at_ms(0), Arrival::New));
        assert_eq!(reason, ShedReason::Cap);
    }

    #[test]
    fn streams_that_give_up_are_told_their_own_turns_one_pace_apart_within_two_waits() {
        let mut g = window_gate();
        g.admit(at_ms(0), Arrival::New);
        g.admit(at_ms(0), Arrival::New);
        let tickets: Vec<u64> = (0..60)
            .map(|_| ticket_of(g.admit(at_ms(0), Arrival::New)))
            .collect();
        // A pace of 100 ms a place, measured: eight settles grant the first eight.
        for k in 0..8 {
            assert!(g.settled(at_ms(500 + 100 * k), at_ms(0)).is_some());
        }
        // The other 52 give up in the order they queued, at the end of their wait.
        let hints: Vec<Duration> = tickets[8..]
            .iter()
            .map(|&ticket| g.abandon(at_ms(1_000), ticket).expect("still queued"))
            .collect();
        // The first is next in line: its turn is one place away, not behind the 51
        // giving up after it.
        assert_eq!(hints[0], Duration::from_millis(100));
        // Each one pace after the previous one, up to the horizon of two waits (2 s) ...
        assert_eq!(hints[1], Duration::from_millis(200));
        assert_eq!(hints[19], Duration::from_secs(2));
        // ... then wrapped round within its last wait, still one pace apart.
        assert_eq!(hints[20], Duration::from_millis(1_100));
        assert!(hints
            .iter()
            .all(|h| *h >= Duration::from_millis(100) && *h <= Duration::from_secs(2)));
        let distinct: std::collections::BTreeSet<&Duration> = hints.iter().collect();
        assert_eq!(distinct.len(), 20, "{hints:?}");
        assert_eq!(g.queued(), 0);
    }

    #[test]
    fn a_stream_that_gives_up_is_told_when_its_turn_would_come() {
        let mut g = window_gate();
        g.admit(at_ms(0), Arrival::New);
        g.admit(at_ms(0), Arrival::New);
        let first = ticket_of(g.admit(at_ms(0), Arrival::New));
        let second = ticket_of(g.admit(at_ms(0), Arrival::New));
        // Nothing settled in a whole second: the wait itself is the pace guessed, and the
        // hint counts its own place only (the second is behind it).
        let hint = g.abandon(at_ms(1_000), first).expect("still queued");
        assert_eq!(hint, Duration::from_secs(1));
        // A settle grants the second its place before it gives up: it is warming.
        assert!(g.settled(at_ms(0), at_ms(0)).is_some());
        let hint = g.abandon(at_ms(1_200), second);
        assert_eq!(hint, None, "granted by that settle");
    }

    #[test]
    fn extreme_settings_never_panic() {
        let mut g = AdmissionGate::new(Admission {
            rate: 0,
            burst: 0,
            max_wait: Duration::MAX,
            max_streams: usize::MAX,
            reserved_for_resuming: usize::MAX,
            cap_retry: Duration::MAX,
            window: usize::MAX,
            window_timeout: Duration::MAX,
        });
        for arrival in [Arrival::New, Arrival::Resuming] {
            for now in [Instant::ZERO, Instant::MAX] {
                let _ = g.admit(now, arrival);
                let _ = g.settled(at_ms(0), at_ms(0));
                let _ = g.abandon(now, 0);
            }
        }
        let mut g = AdmissionGate::new(Admission {
            rate: u32::MAX,
            burst: u32::MAX,
            max_wait: Duration::ZERO,
            ..Admission::default()
        });
        for now in [Instant::ZERO, Instant::MAX] {
            let _ = g.admit(now, Arrival::New);
            let _ = g.admit(now, Arrival::Resuming);
        }
        for _ in 0..10 {
            g.release();
        }
        assert_eq!(g.held(), 0);
    }
}
