//! The versions the held resources of one type are at, each kept once ([`Versions`]), so a
//! record keeps a 4-byte slot instead of a 32-byte handle.
//!
//! Decisions:
//! - A SotW response gives every resource it brings its `version_info`, and a server often
//!   gives many incremental resources one version: a run of equal versions, as a response
//!   brings them, shares the slot interned last (one comparison, usually of two handles to
//!   the same bytes). Equal versions apart from each other take slots of their own; a map
//!   from version to slot would cost a hash per resource to save that.
//! - Each slot counts the records at it and is freed with its last one, so a type keeps
//!   only versions something is held at. A version distinct per resource (some servers'
//!   incremental versions are hashes of the body) costs its slot, 36 bytes, where a handle
//!   in the record cost 32.
//! - A version is taken by value: an incremental version arrives as a buffer of its own,
//!   and a second handle to it would allocate a shared header (24 bytes) for nothing.
//! - The slots grow by a quarter, not doubled: with a version per resource a doubled table
//!   kept up to 36 bytes of spare room per resource.
//! - A count is a `u32`: more records than that would need 4 billion held resources.

use alloc::vec::Vec;

use crate::text::SharedStr;

/// Interned versions with the number of records at each. See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub(crate) struct Versions {
    /// Slot -> version (`SharedStr::EMPTY` while free).
    strings: Vec<SharedStr>,
    /// Slot -> records at it (0: free).
    counts: Vec<u32>,
    /// Free slots, reused before new ones.
    free: Vec<u32>,
    /// The slot interned last, if still in use.
    last: Option<u32>,
}

impl Versions {
    /// The version in `slot` (empty for a slot not in use, which no record holds).
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> &SharedStr {
        static EMPTY: SharedStr = SharedStr::EMPTY;
        self.strings.get(slot as usize).unwrap_or(&EMPTY)
    }

    /// A slot holding `version` for one more record.
    #[inline]
    pub(crate) fn intern(&mut self, version: SharedStr) -> u32 {
        if let Some(last) = self.join_last(&version) {
            return last;
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                if let Some(s) = self.strings.get_mut(slot as usize) {
                    *s = version;
                }
                if let Some(c) = self.counts.get_mut(slot as usize) {
                    *c = 1;
                }
                slot
            }
            None => {
                // Past u32::MAX slots the last one is shared: memory runs out long before.
                let len = self.strings.len();
                let slot = u32::try_from(len).unwrap_or(u32::MAX);
                if len == self.strings.capacity() {
                    let more = (len / 4).max(4);
                    self.strings.reserve_exact(more);
                    self.counts.reserve_exact(more);
                }
                self.strings.push(version);
                self.counts.push(1);
                slot
            }
        };
        self.last = Some(slot);
        slot
    }

    /// [`Versions::intern`] with a version lent: cloned only if it takes a slot.
    #[inline]
    pub(crate) fn intern_lent(&mut self, version: &SharedStr) -> u32 {
        match self.join_last(version) {
            Some(last) => last,
            None => self.intern(version.clone()),
        }
    }

    /// One record fewer at `slot`; the slot is freed with its last record.
    #[inline]
    pub(crate) fn release(&mut self, slot: u32) {
        let Some(count) = self.counts.get_mut(slot as usize).filter(|c| **c > 0) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            if let Some(s) = self.strings.get_mut(slot as usize) {
                *s = SharedStr::EMPTY;
            }
            if self.last == Some(slot) {
                self.last = None;
            }
            self.free.push(slot);
        }
    }

    /// Moves a record from `slot` to `version`, returning its new slot (the same slot when
    /// the version is the same).
    #[inline]
    pub(crate) fn replace(&mut self, slot: u32, version: SharedStr) -> u32 {
        if *self.get(slot) == version {
            return slot;
        }
        let new = self.intern(version);
        self.release(slot);
        new
    }

    /// [`Versions::replace`] with a version lent: cloned only if it takes a slot.
    #[inline]
    pub(crate) fn replace_lent(&mut self, slot: u32, version: &SharedStr) -> u32 {
        if self.get(slot) == version {
            return slot;
        }
        if let Some(last) = self.join_last(version) {
            self.release(slot);
            return last;
        }
        self.replace(slot, version.clone())
    }

    /// One more record at the slot interned last, if it holds `version` (a run).
    #[inline]
    fn join_last(&mut self, version: &SharedStr) -> Option<u32> {
        let last = self.last?;
        if self.get(last) != version {
            return None;
        }
        if let Some(count) = self.counts.get_mut(last as usize) {
            *count = count.saturating_add(1);
        }
        Some(last)
    }

    /// The slots in use (for tests).
    #[cfg(test)]
    fn in_use(&self) -> usize {
        self.counts.iter().filter(|&&c| c > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_version_moves_records_to_the_slot_interned_last() {
        let mut v = Versions::default();
        let one = SharedStr::from("1");
        let a = v.intern(one.clone());
        let b = v.intern(one);
        let two = SharedStr::from("2");
        let moved = v.replace_lent(a, &two);
        assert_eq!(v.replace_lent(b, &two), moved);
        assert_eq!(v.in_use(), 1);
        assert_eq!(v.get(moved), "2");
    }

    #[test]
    fn a_run_of_equal_versions_shares_one_slot_and_frees_it_with_its_last_record() {
        let mut v = Versions::default();
        let one = SharedStr::from("1");
        let slots: Vec<u32> = (0..3).map(|_| v.intern(one.clone())).collect();
        assert!(slots.iter().all(|&s| s == slots[0]));
        assert_eq!(v.get(slots[0]), "1");
        let two = v.replace(slots[0], SharedStr::from("2"));
        assert_ne!(two, slots[0]);
        assert_eq!(v.in_use(), 2);
        v.release(slots[1]);
        v.release(slots[2]);
        assert_eq!(v.in_use(), 1);
        assert_eq!(v.get(slots[0]), "", "a freed slot keeps no version");
        // The freed slot is reused.
        let three = v.intern(SharedStr::from("3"));
        assert_eq!(three, slots[0]);
        assert_eq!(v.get(three), "3");
        assert_eq!(v.get(two), "2");
    }

    #[test]
    fn replacing_with_the_same_version_keeps_the_slot() {
        let mut v = Versions::default();
        let a = v.intern(SharedStr::from("a"));
        let _b = v.intern(SharedStr::from("b"));
        assert_eq!(v.replace(a, SharedStr::from("a")), a);
        assert_eq!(v.replace_lent(a, &SharedStr::from("a")), a);
        assert_eq!(v.in_use(), 2);
    }

    #[test]
    fn releasing_a_slot_never_used_or_already_free_is_harmless() {
        let mut v = Versions::default();
        v.release(7);
        assert_eq!(v.get(7), "");
        let a = v.intern(SharedStr::from("a"));
        v.release(a);
        v.release(a);
        // Freed once: two new versions take two slots.
        let b = v.intern(SharedStr::from("b"));
        let c = v.intern(SharedStr::from("c"));
        assert_ne!(b, c);
        assert_eq!((v.get(b).as_str(), v.get(c).as_str()), ("b", "c"));
    }
}
