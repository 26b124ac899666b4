//! The per-name records of one type ([`Records`]), stored densely: the records in one
//! vector, and a hash table of 4-byte indices into it keyed by the record's name, which
//! the record itself keeps (inside its body; see [`Record`]): no key is stored beside it.
//!
//! Decisions:
//! - A hash map of (name, record) slots keeps between 1.14 and 2.3 slots per record (its
//!   load factor moves between 7/8 and 7/16 as it doubles), each the size of a record;
//!   the index table keeps the same spare slots at 4 bytes each, and the vector holds
//!   exactly the records (a first load reserves exactly what it needs).
//! - Removal swaps the last record into the hole and re-points its index (one more hash
//!   of a name per removal), so no hole is ever left.
//! - Iteration is in vector order: deterministic, but no order to rely on (callers sort).

use alloc::vec::Vec;
use core::hash::BuildHasher;
use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};

use super::Record;
use crate::text::SharedStr;

/// Records keyed by name. See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub(crate) struct Records {
    index: HashTable<u32>,
    entries: Vec<Record>,
    hasher: DefaultHashBuilder,
}

impl Records {
    /// The hasher names' records are found by.
    pub(crate) fn hasher(&self) -> &DefaultHashBuilder {
        &self.hasher
    }

    /// The hash a name's record is found by.
    #[inline]
    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The position of `name`'s record in `entries`.
    #[inline]
    fn position(&self, name: &str) -> Option<usize> {
        let entries = &self.entries;
        let at = self.index.find(self.hash(name), |&i| {
            entries
                .get(i as usize)
                .is_some_and(|r| r.name_bytes() == name.as_bytes())
        })?;
        Some(*at as usize)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Room for `additional` more records, reserved exactly.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve_exact(additional);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index.reserve(additional, |&i| {
            entries
                .get(i as usize)
                .map_or(0, |r| hasher.hash_one(r.name()))
        });
    }

    #[inline]
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<&Record> {
        let at = self.position(name)?;
        self.entries.get(at)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Record> {
        let at = self.position(name)?;
        self.entries.get_mut(at)
    }

    /// The record of `name`, a new [`Record::requested`] if there was none. `None` only
    /// if an index went wrong, which no sequence of calls does.
    pub(crate) fn get_or_insert(&mut self, name: &SharedStr) -> Option<&mut Record> {
        self.get_or_insert_at(name).map(|(_, r)| r)
    }

    /// [`Records::get_or_insert`], with the record's position for
    /// a change's hint of where to find it again (valid until the next removal).
    #[inline]
    pub(crate) fn get_or_insert_at(&mut self, name: &SharedStr) -> Option<(usize, &mut Record)> {
        self.get_or_insert_hashed(name, self.hash(name))
    }

    /// [`Records::get_or_insert_at`] with `name`'s hash by [`Records::hash`], already made.
    #[inline]
    pub(crate) fn get_or_insert_hashed(
        &mut self,
        name: &SharedStr,
        hash: u64,
    ) -> Option<(usize, &mut Record)> {
        self.get_or_insert_with(name, hash, || Record::requested(name))
    }

    /// [`Records::get_or_insert_hashed`] for a record about to [`Record::hold`] a body
    /// that names it: a new record starts with no name of its own (a handle to the name
    /// taken, then dropped by the `hold`, cost ~48 instructions a new resource); the
    /// `hold` that must follow before anything reads the record gives it its name.
    #[inline]
    pub(crate) fn get_or_insert_to_hold(
        &mut self,
        name: &SharedStr,
        hash: u64,
    ) -> Option<(usize, &mut Record)> {
        self.get_or_insert_with(name, hash, Record::unnamed)
    }

    /// The record of `name`, inserted as `new` makes it when there is none.
    #[inline]
    fn get_or_insert_with(
        &mut self,
        name: &SharedStr,
        hash: u64,
        new: impl FnOnce() -> Record,
    ) -> Option<(usize, &mut Record)> {
        debug_assert_eq!(hash, self.hash(name), "a hash by another hasher");
        let (entries, hasher) = (&mut self.entries, &self.hasher);
        // An index beyond u32 would need 4 billion records of 56 bytes each: memory runs
        // out first.
        let next = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        let at = match self.index.entry(
            hash,
            |&i| {
                entries
                    .get(i as usize)
                    .is_some_and(|r| r.name_bytes() == name.as_bytes().as_ref())
            },
            |&i| {
                entries
                    .get(i as usize)
                    .map_or(0, |r| hasher.hash_one(r.name()))
            },
        ) {
            Entry::Occupied(entry) => *entry.get() as usize,
            Entry::Vacant(entry) => {
                entry.insert(next);
                entries.push(new());
                entries.len().saturating_sub(1)
            }
        };
        entries.get_mut(at).map(|r| (at, r))
    }

    /// The record at `at` if its name is `name`.
    #[inline]
    pub(crate) fn at_keyed(&self, at: usize, name: &str) -> Option<&Record> {
        self.entries
            .get(at)
            .filter(|r| same_bytes(r.name_bytes(), name.as_bytes()))
    }

    /// Removes and returns `name`'s record.
    pub(crate) fn remove(&mut self, name: &str) -> Option<Record> {
        let at = self.position(name)?;
        self.remove_at(at)
    }

    /// Removes the record at `at`: its index goes, and the last record moves into its place.
    fn remove_at(&mut self, at: usize) -> Option<Record> {
        let hash = self.hash(self.entries.get(at)?.name());
        let slot = u32::try_from(at).ok()?;
        if let Ok(entry) = self.index.find_entry(hash, |&i| i == slot) {
            entry.remove();
        }
        let record = self.entries.swap_remove(at);
        if let Some(moved) = self.entries.get(at) {
            let hash = self.hash(moved.name());
            let last = u32::try_from(self.entries.len()).ok()?;
            if let Some(i) = self.index.find_mut(hash, |&i| i == last) {
                *i = slot;
            }
        }
        Some(record)
    }

    /// Every record, in no order to rely on.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Record> {
        self.entries.iter()
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Record> {
        self.entries.iter_mut()
    }

    /// Keeps only the records `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Record) -> bool) {
        let mut at = 0;
        while let Some(record) = self.entries.get(at) {
            if keep(record) {
                at += 1;
            } else {
                self.remove_at(at);
            }
        }
    }
}

/// Whether `a` and `b` hold the same bytes; a slice of the same buffer is recognised without
/// reading it (a change's name and its record's, both read from the same body).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && (core::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
}
