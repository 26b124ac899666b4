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

use std::time::Duration;

use xds_sansio::time::Instant;

/// Storm protection's settings ([`XdsServerBuilder::admission`](super::XdsServerBuilder::admission)).
///
/// The default admits 500 new streams per second after a burst of 500, each waiting at
/// most 5 s for its turn, 100 000 streams at most of which 10 000 are kept for resuming
/// clients. A starting point measured with `benches/storm.rs` (figures in
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
    /// The longest a new stream waits for its token before it is shed instead.
    pub max_wait: Duration,
    /// Streams admitted or waiting at once; beyond it a stream is shed.
    pub max_streams: usize,
    /// Of `max_streams`, how many only resuming streams may take.
    pub reserved_for_resuming: usize,
    /// The retry hint of a stream shed for the cap (spread over one more `cap_retry`).
    pub cap_retry: Duration,
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
}

impl ShedReason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            ShedReason::Rate => "rate",
            ShedReason::Cap => "cap",
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

    #[test]
    fn extreme_settings_never_panic() {
        let mut g = AdmissionGate::new(Admission {
            rate: 0,
            burst: 0,
            max_wait: Duration::MAX,
            max_streams: usize::MAX,
            reserved_for_resuming: usize::MAX,
            cap_retry: Duration::MAX,
        });
        for arrival in [Arrival::New, Arrival::Resuming] {
            for now in [Instant::ZERO, Instant::MAX] {
                let _ = g.admit(now, arrival);
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
