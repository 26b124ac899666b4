//! A hint to the processor to start reading memory that a later step reads: lookups in
//! large tables made in passes, each pass issuing the next pass's reads for every name
//! before any is waited for, so that their cache misses overlap instead of following one
//! another (a reconnect storm's first answers, issue 28).

use alloc::vec::Vec;
use hashbrown::HashTable;

/// Starts loading the cache line at `address` (a no-op where there is no such hint).
#[inline(always)]
fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and faults on no address.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Starts loading every cache line `value` spans (a resource of a hundred bytes spans two
/// or three; the field read first may be in any of them).
#[inline(always)]
fn prefetch_value<T>(value: &T) {
    let start: *const u8 = (value as *const T).cast();
    let mut offset = 0;
    while offset < core::mem::size_of::<T>() {
        prefetch(start.wrapping_add(offset));
        offset += LINE;
    }
    // The last line, when the value does not start at a line's start.
    prefetch(start.wrapping_add(core::mem::size_of::<T>().saturating_sub(1)));
}

/// The cache line size this is written for (64 bytes on x86-64 and most Arm cores; where
/// it is larger, some hints are redundant, never wrong).
const LINE: usize = 64;

/// Each of `names` (hashed as `hashes`) found in `table`, in passes that each start the
/// next one's reads for every name before any is waited for: the entries taken by their
/// hash bits alone ([`candidates`]), then each entry `open`ed (what it points to, if
/// anything, prefetched), then where each keeps its name (`name_of`, prefetched), then the
/// names compared. An entry of another name with the same bits is looked up again with
/// `full`, the one-name lookup. The one home of the passes for the store's resources and
/// the subscription index's names.
pub(super) fn find_many<'t, 'n, E, V: 't>(
    table: &'t HashTable<E>,
    hashes: &[u64],
    names: impl Iterator<Item = &'n str>,
    open: impl Fn(&'t E) -> &'t V,
    name_of: impl Fn(&'t V) -> &'t str,
    full: impl Fn(&str) -> Option<&'t V>,
) -> Vec<Option<&'t V>> {
    let opened: Vec<Option<&V>> = candidates(table, hashes)
        .into_iter()
        .map(|entry| entry.map(&open))
        .inspect(|value| value.iter().for_each(|value| prefetch_value(*value)))
        .collect();
    let named: Vec<Option<(&V, &str)>> = opened
        .into_iter()
        .map(|value| value.map(|value| (value, name_of(value))))
        .inspect(|named| named.iter().for_each(|(_, name)| prefetch(name.as_ptr())))
        .collect();
    names
        .zip(named)
        .map(|(name, named)| match named? {
            (value, held) if held == name => Some(value),
            _ => full(name),
        })
        .collect()
}

/// The entry of `table` each of `hashes` leads to, taken by its hash bits alone (the
/// entry's own content is not read, only its loading started), so one pass reads only
/// control bytes. The hashes are computed before, in a pass of their own: in the same
/// loop, the work of hashing kept fewer probes in flight at once. An entry of another
/// key with the same bits may come back; the caller compares and looks that one up again.
fn candidates<'t, T>(table: &'t HashTable<T>, hashes: &[u64]) -> Vec<Option<&'t T>> {
    hashes
        .iter()
        .map(|&hash| {
            let entry = table.find(hash, |_| true);
            if let Some(entry) = entry {
                prefetch_value(entry);
            }
            entry
        })
        .collect()
}
