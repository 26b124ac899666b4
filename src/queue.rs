//! The output queues of the machines: a burst (10 000 events for a first load) must not
//! keep its memory for the machine's lifetime once it is drained.

use alloc::collections::VecDeque;

/// Above this capacity a drained queue gives its memory back.
const KEEP: usize = 64;

/// Called when `queue` was just drained: gives back the memory of a past burst, keeping
/// room for the usual trickle (a `VecDeque` never shrinks by itself).
pub(crate) fn shrink_after_burst<T>(queue: &mut VecDeque<T>) {
    if queue.is_empty() && queue.capacity() > KEEP {
        queue.shrink_to(KEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_burst_gives_its_memory_back() {
        let mut q: VecDeque<u64> = (0..10_000).collect();
        q.clear();
        shrink_after_burst(&mut q);
        assert!(q.capacity() <= 2 * KEEP, "{}", q.capacity());
        let mut small: VecDeque<u64> = VecDeque::with_capacity(8);
        small.push_back(1);
        shrink_after_burst(&mut small);
        assert_eq!(small.len(), 1, "not drained: untouched");
    }
}
