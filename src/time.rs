//! Time as the caller passes it in: the crate never reads a clock.
//!
//! [`Instant`] is a count of nanoseconds since an origin the caller chooses (process start,
//! a virtual clock in a test, a fuzzer's counter). The caller must never move it backwards;
//! if it does, durations saturate at zero rather than panic. Durations are
//! [`core::time::Duration`].

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in the caller's monotonic time, in nanoseconds since the caller's origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The caller's origin.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant, used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// An instant `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// An instant `secs` seconds after the origin.
    pub const fn from_secs(secs: u64) -> Instant {
        Instant(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + duration`, saturating at [`Instant::MAX`] (a deadline that never comes).
    pub fn saturating_add(self, duration: Duration) -> Instant {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

/// Maps `std::time::Instant` onto [`Instant`] for programs that drive the crate with the
/// real clock.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug)]
pub struct StdClock {
    origin: std::time::Instant,
}

#[cfg(feature = "std")]
impl StdClock {
    /// A clock whose origin is now.
    pub fn new() -> StdClock {
        StdClock {
            origin: std::time::Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.at(std::time::Instant::now())
    }

    /// `instant` on this clock (the origin if it is earlier).
    pub fn at(&self, instant: std::time::Instant) -> Instant {
        Instant::ZERO.saturating_add(instant.saturating_duration_since(self.origin))
    }

    /// The `std` instant of `instant`, for sleeping until a deadline.
    pub fn to_std(&self, instant: Instant) -> std::time::Instant {
        let offset = Duration::from_nanos(instant.as_nanos());
        self.origin
            .checked_add(offset)
            .unwrap_or_else(|| self.origin + Duration::from_secs(365 * 24 * 3600))
    }
}

#[cfg(feature = "std")]
impl Default for StdClock {
    fn default() -> Self {
        StdClock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = Instant::from_secs(10);
        assert_eq!(t + Duration::from_secs(5), Instant::from_secs(15));
        assert_eq!(Instant::from_secs(3) - t, Duration::ZERO);
        assert_eq!(t - Instant::from_secs(3), Duration::from_secs(7));
        assert_eq!(t + Duration::MAX, Instant::MAX);
        assert_eq!(Instant::from_secs(u64::MAX), Instant::MAX);
    }
}
