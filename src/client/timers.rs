//! The deadlines of every type: does-not-exist and TTL, ordered by time then by a total key,
//! so expiry order is deterministic.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::text::SharedStr;
use crate::time::Instant;

/// Which timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum TimerKind {
    /// A subscribed name has not arrived in time.
    DoesNotExist,
    /// A held resource's TTL.
    Ttl,
}

/// One armed timer: when, which, the type's index in the client, the name.
pub(crate) type TimerKey = (Instant, TimerKind, usize, SharedStr);

#[derive(Clone, Debug, Default)]
pub(crate) struct Timers {
    armed: BTreeSet<TimerKey>,
}

impl Timers {
    pub(crate) fn arm(&mut self, at: Instant, kind: TimerKind, type_idx: usize, name: SharedStr) {
        self.armed.insert((at, kind, type_idx, name));
    }

    pub(crate) fn disarm(
        &mut self,
        at: Instant,
        kind: TimerKind,
        type_idx: usize,
        name: &SharedStr,
    ) {
        self.armed.remove(&(at, kind, type_idx, name.clone()));
    }

    pub(crate) fn next(&self) -> Option<Instant> {
        self.armed.first().map(|k| k.0)
    }

    /// Removes and returns every timer due at `now`, earliest first.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<TimerKey> {
        let mut due = Vec::new();
        while self.armed.first().is_some_and(|k| k.0 <= now) {
            if let Some(k) = self.armed.pop_first() {
                due.push(k);
            }
        }
        due
    }

    /// Drops every does-not-exist timer (the stream broke: gRPC A57).
    pub(crate) fn disarm_all_dne(&mut self) {
        self.armed.retain(|k| k.1 != TimerKind::DoesNotExist);
    }
}
