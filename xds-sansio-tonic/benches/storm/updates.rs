//! The updates published to the connected clients and what those clients received: each
//! update's latency, publish to receipt, on `CLOCK_MONOTONIC` (so a receipt noted in
//! another process counts the same).

use std::sync::Mutex;
use std::time::Duration;

/// A connected client received update `tick` at `at_ns`, having held `held` (`None`: its
/// first state): every update in between reached it then.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Receipt {
    pub held: Option<u64>,
    pub tick: u64,
    pub at_ns: u64,
}

impl Receipt {
    /// The updates this receipt brought to its client: every one after what it held.
    pub fn brought(self) -> std::ops::RangeInclusive<u64> {
        self.held.map_or(0, |h| h + 1)..=self.tick
    }

    /// As a line of a connected clients' process's report.
    pub fn to_line(self) -> String {
        let held = self.held.map_or_else(|| "-".into(), |h| h.to_string());
        format!("receipt {held} {} {}", self.tick, self.at_ns)
    }

    /// Read back from [`Receipt::to_line`]'s fields after the word `receipt`.
    pub fn from_fields(fields: &[&str]) -> Option<Receipt> {
        let [held, tick, at_ns] = fields else {
            return None;
        };
        Some(Receipt {
            held: match *held {
                "-" => None,
                h => Some(h.parse().ok()?),
            },
            tick: tick.parse().ok()?,
            at_ns: at_ns.parse().ok()?,
        })
    }
}

/// Every receipt of the connected clients, and how many of them hold each update.
#[derive(Default)]
pub struct Receipts {
    all: Mutex<Vec<Receipt>>,
    holders: Mutex<Vec<usize>>,
}

impl Receipts {
    pub fn note(&self, receipt: Receipt) {
        let mut holders = self.holders.lock().unwrap();
        for t in receipt.brought() {
            let t = t as usize;
            if holders.len() <= t {
                holders.resize(t + 1, 0);
            }
            holders[t] += 1;
        }
        drop(holders);
        self.all.lock().unwrap().push(receipt);
    }

    /// How many connected clients hold update `tick` (0: the first full state).
    pub fn holders(&self, tick: u64) -> usize {
        let holders = self.holders.lock().unwrap();
        holders.get(tick as usize).copied().unwrap_or(0)
    }

    pub fn take(&self) -> Vec<Receipt> {
        std::mem::take(&mut self.all.lock().unwrap())
    }
}

/// The updates published: when (`CLOCK_MONOTONIC`), and whether during the storm.
#[derive(Default)]
pub struct Updates {
    published: Mutex<Vec<(u64, bool)>>,
}

/// The connected clients' latencies: all of those published before the storm and all of
/// those during it, each sorted; per update, its 99th percentile and whether it was the
/// storm's.
pub struct Latencies {
    pub before: Vec<Duration>,
    pub during: Vec<Duration>,
    pub by_update: Vec<(Duration, bool)>,
}

impl Updates {
    /// Update number `len()` was published at `at_ns`.
    pub fn published(&self, at_ns: u64, storm: bool) {
        self.published.lock().unwrap().push((at_ns, storm));
    }

    /// The latencies `receipts` tell of.
    pub fn latencies(&self, receipts: &[Receipt]) -> Latencies {
        let published = self.published.lock().unwrap();
        let mut each: Vec<Vec<Duration>> = vec![Vec::new(); published.len()];
        for receipt in receipts {
            // A first state is no update's latency.
            if receipt.held.is_none() {
                continue;
            }
            for t in receipt.brought() {
                if let Some((at_ns, _)) = published.get(t as usize) {
                    let latency = receipt.at_ns.saturating_sub(*at_ns);
                    each[t as usize].push(Duration::from_nanos(latency));
                }
            }
        }
        let (mut before, mut during, mut by_update) = (Vec::new(), Vec::new(), Vec::new());
        for ((_, storm), mut these) in published.iter().zip(each).skip(1) {
            if these.is_empty() {
                continue;
            }
            these.sort();
            by_update.push((quantile(&these, 0.99), *storm));
            if *storm { &mut during } else { &mut before }.extend(these);
        }
        before.sort();
        during.sort();
        Latencies {
            before,
            during,
            by_update,
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `Instant` reads, comparable between the
/// processes of a split run.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// The `q` quantile of `sorted` (zero when empty).
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}
