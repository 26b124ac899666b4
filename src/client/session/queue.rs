//! What a watcher has not read yet: a queue in which the newest state wins.
//!
//! # Decisions
//!
//! - **The newest state wins** (gRPC A88: a watcher is told the resource as it is, not
//!   every step it went through). A watcher that reads slowly never makes the client hold
//!   a queue of stale updates: an unread event is replaced by a newer one of the same slot
//!   ([`Coalesce`]: per name, values and errors apart, so an error never hides the value
//!   in use), so what a queue holds is bounded by the names it covers. The replaced event
//!   gives up its place: the newer one is read after everything queued before it.

use alloc::collections::BTreeMap;
use alloc::format;

use super::watch::{ConfigEvent, WatchEvent};
use crate::client::SharedStr;

/// The slot of an event in a [`WatchQueue`]: the newest event replaces an unread one of the
/// same slot.
pub trait Coalesce {
    /// A name, and whether the event is state (0: a value or its absence) or an error
    /// (1), so one unread of each per name.
    fn slot(&self) -> (SharedStr, u8);
}

impl Coalesce for WatchEvent {
    fn slot(&self) -> (SharedStr, u8) {
        let class = match self {
            WatchEvent::Changed { .. } | WatchEvent::DoesNotExist { .. } => 0,
            // The end of an outage takes the outage's slot: a reader that never saw the
            // error is told only that the server answers again.
            WatchEvent::Error { .. } | WatchEvent::Reachable { .. } => 1,
        };
        (self.name().cloned().unwrap_or_default(), class)
    }
}

impl Coalesce for ConfigEvent {
    fn slot(&self) -> (SharedStr, u8) {
        match self {
            ConfigEvent::Changed(config) => (SharedStr::from(config.name.as_str()), 0),
            ConfigEvent::Error { resource, .. } => {
                let key = resource
                    .as_ref()
                    .map(|k| format!("{} {}", k.type_url, k.name))
                    .unwrap_or_default();
                (SharedStr::from(key), 1)
            }
            ConfigEvent::Reachable { .. } => (SharedStr::default(), 1),
        }
    }
}

/// The unread events of one watch, oldest first, one per slot ([`Coalesce`]).
#[derive(Debug)]
pub struct WatchQueue<E> {
    next_seq: u64,
    by_slot: BTreeMap<(SharedStr, u8), u64>,
    order: BTreeMap<u64, ((SharedStr, u8), E)>,
}

impl<E> Default for WatchQueue<E> {
    fn default() -> Self {
        WatchQueue {
            next_seq: 0,
            by_slot: BTreeMap::new(),
            order: BTreeMap::new(),
        }
    }
}

impl<E: Coalesce> WatchQueue<E> {
    /// Queues `event`, replacing the unread event of its slot.
    pub fn push(&mut self, event: E) {
        let slot = event.slot();
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(old) = self.by_slot.insert(slot.clone(), seq) {
            self.order.remove(&old);
        }
        self.order.insert(seq, (slot, event));
    }
}

impl<E> WatchQueue<E> {
    /// The oldest unread event.
    pub fn pop(&mut self) -> Option<E> {
        let (_, (slot, event)) = self.order.pop_first()?;
        self.by_slot.remove(&slot);
        Some(event)
    }

    /// How many events are unread.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is unread.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::session::WatchError;
    use bytes::Bytes;

    fn changed(name: &str, version: &str) -> WatchEvent {
        WatchEvent::Changed {
            name: name.into(),
            version: version.into(),
            body: Bytes::new(),
        }
    }

    #[test]
    fn the_newest_state_of_a_name_replaces_the_unread_one_and_errors_stay_apart() {
        let mut q = WatchQueue::default();
        q.push(changed("a", "1"));
        q.push(changed("b", "1"));
        q.push(WatchEvent::Error {
            name: Some("a".into()),
            error: WatchError::Rejected {
                version: "2".into(),
                error: "bad".into(),
            },
        });
        q.push(changed("a", "3"));
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(changed("b", "1")));
        assert!(matches!(q.pop(), Some(WatchEvent::Error { .. })));
        assert_eq!(q.pop(), Some(changed("a", "3")));
        assert!(q.is_empty());
    }
}
