//! The output queues of the machines: a burst (10 000 events for a first load) must not
//! keep its memory for the machine's lifetime once it is drained.

use alloc::collections::VecDeque;

/// The room a drained queue keeps, in bytes: a few small events, none of the server's
/// (320 bytes each; an idle stream should hold next to nothing, and a queue refilled
/// after each request costs one allocation).
const KEEP_BYTES: usize = 256;

/// Called when `queue` was just drained: gives back the memory of a past burst, keeping
/// room for the usual trickle (a `VecDeque` never shrinks by itself).
pub(crate) fn shrink_after_burst<T>(queue: &mut VecDeque<T>) {
    let keep = KEEP_BYTES / core::mem::size_of::<T>().max(1);
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
        shrink_after_burst(&mut q);
        assert!(q.capacity() <= 2 * KEEP_BYTES / 8, "{}", q.capacity());
        let mut big: VecDeque<[u8; 320]> = VecDeque::with_capacity(4);
        big.push_back([0; 320]);
        big.clear();
        shrink_after_burst(&mut big);
        assert_eq!(
            big.capacity(),
            0,
            "no room kept for events larger than the budget"
        );
        let mut small: VecDeque<u64> = VecDeque::with_capacity(8);
        small.push_back(1);
        shrink_after_burst(&mut small);
        assert_eq!(small.len(), 1, "not drained: untouched");
    }
}
