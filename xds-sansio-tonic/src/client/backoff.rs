//! Reconnection backoff: the core's ([`xds_sansio::client::session::Backoff`], gRPC's
//! connection backoff, every delay jittered), seeded here from the operating system.
//!
//! # Decisions
//!
//! - **Seeded from the OS per client.** [`os_seed`] draws from the standard library's
//!   OS-seeded hasher keys, a process-wide counter and the clock, so two clients (in one
//!   process or in a fleet restarted together) never share a sequence. A fixed seed would
//!   make every client of a fleet draw the same delays and reconnect in lockstep; the core
//!   takes the seed as an input so that its scenarios stay deterministic.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

pub use xds_sansio::client::session::{Backoff, BackoffConfig};

/// A seed no other client shares: the standard library's hasher keys (drawn from the
/// operating system's random source), a process-wide counter, the process id and the
/// clock, hashed together.
pub fn os_seed() -> u64 {
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

    #[test]
    fn os_seeds_differ_and_spread_a_fleet() {
        let seeds: std::collections::HashSet<u64> = (0..1000).map(|_| os_seed()).collect();
        assert_eq!(seeds.len(), 1000);
        let firsts: Vec<f64> = seeds
            .iter()
            .map(|&s| {
                Backoff::with_seed(BackoffConfig::default(), s)
                    .next_delay()
                    .as_secs_f64()
            })
            .collect();
        let min = firsts.iter().cloned().fold(f64::MAX, f64::min);
        let max = firsts.iter().cloned().fold(f64::MIN, f64::max);
        // Uniform over [0.8, 1.2]: 1000 draws cover nearly all of it.
        assert!(min < 0.82 && max > 1.18, "spread {min}..{max}");
    }
}
