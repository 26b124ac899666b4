//! Reconnection backoff: gRPC's connection backoff (grpc/grpc `doc/connection-backoff.md`),
//! exponential with jitter, drawn from a seed the embedder supplies.
//!
//! # Decisions
//!
//! - **gRPC's parameters by default**: 1 s initial, ×1.6 per failed attempt, ±20 % jitter,
//!   120 s at most, 20 s minimum connect timeout ([`BackoffConfig::default`]).
//! - **Every delay is jittered, the first one too.** The document asks that "connection
//!   backoffs started at the same time disperse": a fleet whose server went away at one
//!   instant must not come back at one instant, so the first retry is spread as well
//!   (uniform in `[0.8 s, 1.2 s]` by default).
//! - **The seed is an input.** The core has no random source (it is deterministic: same
//!   inputs, same outputs), so [`Backoff::with_seed`] takes one. An embedder draws it from
//!   the operating system per client (`os_seed`, feature `std`, as the tokio adapter
//!   does): a fixed seed shared by a fleet would make every client draw the same delays
//!   and reconnect in lockstep. Scenarios fix it, so their delays are known.
//! - **Reset once a stream delivered a response** (gRPC A57, "Handling ADS Stream
//!   Termination"): a stream that ended after a response is no failure, and the next
//!   attempt starts at once; one that ended before any counts as a failed attempt (the
//!   session applies this, [`super`]).

use core::time::Duration;

/// The parameters of [`Backoff`]; the default is gRPC's.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BackoffConfig {
    /// The delay after the first failure (`INITIAL_BACKOFF`, 1 s).
    pub initial: Duration,
    /// The factor applied after each further failure (`MULTIPLIER`, 1.6).
    pub multiplier: f64,
    /// Each delay is multiplied by a uniform draw in `[1 - jitter, 1 + jitter]` (`JITTER`,
    /// 0.2).
    pub jitter: f64,
    /// The largest delay before jitter (`MAX_BACKOFF`, 120 s).
    pub max: Duration,
    /// The least time a connection attempt is given (`MIN_CONNECT_TIMEOUT`, 20 s).
    pub min_connect_timeout: Duration,
}

impl Default for BackoffConfig {
    fn default() -> BackoffConfig {
        BackoffConfig {
            initial: Duration::from_secs(1),
            multiplier: 1.6,
            jitter: 0.2,
            max: Duration::from_secs(120),
            min_connect_timeout: Duration::from_secs(20),
        }
    }
}

/// The delays between connection attempts of one stream. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Backoff {
    config: BackoffConfig,
    /// The next delay before jitter.
    current: Duration,
    state: u64,
}

impl Backoff {
    /// A backoff drawing from `seed`: the same seed draws the same delays. Give each client
    /// of a fleet its own (from the operating system).
    pub fn with_seed(config: BackoffConfig, seed: u64) -> Backoff {
        Backoff {
            config,
            current: config.initial,
            state: seed,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// The delay before the next attempt; each call counts one more failed attempt.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current.min(self.config.max);
        let jitter = self.config.jitter.clamp(0.0, 1.0);
        // A uniform draw in [0, 1) from the top 53 bits.
        let unit = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
        let factor = 1.0 - jitter + 2.0 * jitter * unit;
        let next = base.as_secs_f64() * self.config.multiplier.max(1.0);
        self.current = Duration::try_from_secs_f64(next)
            .unwrap_or(self.config.max)
            .min(self.config.max);
        Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(base)
    }

    /// Back to the initial delay (a stream delivered a response).
    pub fn reset(&mut self) {
        self.current = self.config.initial;
    }

    /// splitmix64: small, fast, and good enough to spread delays.
    fn next_random(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A seed no other client shares: the standard library's hasher keys (drawn from the
/// operating system's random source), a process-wide counter, the process id and the
/// clock, hashed together.
#[cfg(feature = "std")]
pub fn os_seed() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    hasher.write_u128(since_epoch.as_nanos());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn grpc_sequence_within_jitter_and_capped() {
        let config = BackoffConfig::default();
        let mut backoff = Backoff::with_seed(config, 7);
        let mut base = 1.0f64;
        for _ in 0..30 {
            let d = backoff.next_delay().as_secs_f64();
            let capped = base.min(120.0);
            assert!(
                d >= capped * 0.8 - 1e-9 && d <= capped * 1.2 + 1e-9,
                "{d} vs {capped}"
            );
            base *= 1.6;
        }
        backoff.reset();
        let d = backoff.next_delay().as_secs_f64();
        assert!((0.8..=1.2).contains(&d));
    }

    #[test]
    fn same_seed_same_delays() {
        let config = BackoffConfig::default();
        let draw = |seed| -> Vec<Duration> {
            let mut b = Backoff::with_seed(config, seed);
            (0..5).map(|_| b.next_delay()).collect()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }

    #[test]
    fn first_delays_of_distinct_seeds_spread_over_the_jitter_window() {
        let config = BackoffConfig::default();
        let firsts: Vec<f64> = (0..1000u64)
            .map(|seed| {
                Backoff::with_seed(config, seed.wrapping_mul(0x2545_F491_4F6C_DD1D))
                    .next_delay()
                    .as_secs_f64()
            })
            .collect();
        let min = firsts.iter().cloned().fold(f64::MAX, f64::min);
        let max = firsts.iter().cloned().fold(f64::MIN, f64::max);
        assert!(min < 0.82 && max > 1.18, "spread {min}..{max}");
    }

    #[cfg(feature = "std")]
    #[test]
    fn os_seeds_differ_so_a_fleet_draws_different_delays() {
        // The spread of the delays over seeds is the test above; here, that the OS gives
        // every client its own seed, hence its own first delay.
        let seeds: std::collections::HashSet<u64> = (0..1000).map(|_| os_seed()).collect();
        assert_eq!(seeds.len(), 1000);
        let firsts: std::collections::HashSet<Duration> = seeds
            .iter()
            .map(|&s| Backoff::with_seed(BackoffConfig::default(), s).next_delay())
            .collect();
        assert!(firsts.len() > 990, "{} distinct first delays", firsts.len());
    }
}
