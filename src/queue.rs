//! The output queues of the machines: a burst (10 000 events for a first load) must not
//! keep its memory for the machine's lifetime once it is drained.

use alloc::collections::VecDeque;

/// The room a drained queue keeps, in elements, for a queue that refills every call (the
/// client's events: one per resource of each response; keeping a few dozen saves an
/// allocation per response).
pub(crate) const KEEP_BUSY: usize = 64;

/// The room a drained server stream's event queue keeps: one event. An idle stream should
/// hold next to nothing (100 000 of them are 100 000 queues), and the few events of a
/// request cost one small allocation.
pub(crate) const KEEP_IDLE: usize = 1;

/// Called when `queue` was just drained: gives back the memory of a past burst, keeping
/// room for `keep` elements (a `VecDeque` never shrinks by itself).
pub(crate) fn shrink_after_burst<T>(queue: &mut VecDeque<T>, keep: usize) {
    if queue.is_empty() && queue.capacity() > keep {
        queue.shrink_to(keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_burst_gives_its_memory_back() {
        let mut q: VecDeque<u64> = (0..10_000).collect();
        q.clear();
        shrink_after_burst(&mut q, KEEP_BUSY);
        assert!(q.capacity() <= 2 * KEEP_BUSY, "{}", q.capacity());
        let mut idle: VecDeque<[u8; 136]> = VecDeque::with_capacity(4);
        idle.push_back([0; 136]);
        idle.clear();
        shrink_after_burst(&mut idle, KEEP_IDLE);
        assert!(idle.capacity() <= 2 * KEEP_IDLE, "{}", idle.capacity());
        let mut small: VecDeque<u64> = VecDeque::with_capacity(8);
        small.push_back(1);
        shrink_after_burst(&mut small, KEEP_BUSY);
        assert_eq!(small.len(), 1, "not drained: untouched");
    }
}
