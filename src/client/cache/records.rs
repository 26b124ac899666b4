//! The per-name records of one type ([`Records`]), stored densely: the records in one
//! vector, and a hash table of 4-byte indices into it keyed by the record's name.
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
    entries: Vec<(SharedStr, Record)>,
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
            entries.get(i as usize).is_some_and(|(n, _)| n == name)
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
                .map_or(0, |(n, _)| hasher.hash_one(n.as_str()))
        });
    }

    #[inline]
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<&Record> {
        let at = self.position(name)?;
        self.entries.get(at).map(|(_, r)| r)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Record> {
        let at = self.position(name)?;
        self.entries.get_mut(at).map(|(_, r)| r)
    }

    /// The record of `name`, a new [`Record::requested`] if there was none. `None` only
    /// if an index went wrong, which no sequence of calls does.
    pub(crate) fn get_or_insert(&mut self, name: &SharedStr) -> Option<&mut Record> {
        self.get_or_insert_at(name).map(|(_, r)| r)
    }

    /// [`Records::get_or_insert`], with the record's position for
    /// [`Records::replace_key_at`] (valid until the next removal).
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
        debug_assert_eq!(hash, self.hash(name), "a hash by another hasher");
        let (entries, hasher) = (&mut self.entries, &self.hasher);
        // An index beyond u32 would need 4 billion records of 56 bytes each: memory runs
        // out first.
        let next = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        let at = match self.index.entry(
            hash,
            |&i| entries.get(i as usize).is_some_and(|(n, _)| n == name),
            |&i| {
                entries
                    .get(i as usize)
                    .map_or(0, |(n, _)| hasher.hash_one(n.as_str()))
            },
        ) {
            Entry::Occupied(entry) => *entry.get() as usize,
            Entry::Vacant(entry) => {
                entry.insert(next);
                entries.push((name.clone(), Record::requested()));
                entries.len().saturating_sub(1)
            }
        };
        entries.get_mut(at).map(|(_, r)| (at, r))
    }

    /// The record at `at`.
    pub(crate) fn at(&self, at: usize) -> Option<&Record> {
        self.entries.get(at).map(|(_, r)| r)
    }

    /// The record at `at` if its key is `name` (a handle to the same bytes is recognised
    /// without reading them).
    #[inline]
    pub(crate) fn at_keyed(&self, at: usize, name: &SharedStr) -> Option<&Record> {
        self.entries
            .get(at)
            .filter(|(key, _)| key == name)
            .map(|(_, r)| r)
    }

    /// The record at `at` and its key, which may only be replaced by an equal string.
    pub(crate) fn at_mut(&mut self, at: usize) -> Option<(&mut SharedStr, &mut Record)> {
        self.entries.get_mut(at).map(|(n, r)| (n, r))
    }

    /// Keys the record at `at` with `name`, a string equal to its key in another buffer
    /// (no rehash), so the record stops holding the old one.
    pub(crate) fn replace_key_at(&mut self, at: usize, name: SharedStr) {
        if let Some((key, _)) = self.entries.get_mut(at) {
            // The caller's word that the strings are equal; the length is checked.
            if key.len() == name.len() {
                *key = name;
            }
        }
    }

    /// Removes and returns `name`'s record.
    pub(crate) fn remove(&mut self, name: &str) -> Option<Record> {
        let at = self.position(name)?;
        self.remove_at(at)
    }

    /// Removes the record at `at`: its index goes, and the last record moves into its place.
    fn remove_at(&mut self, at: usize) -> Option<Record> {
        let hash = self.hash(self.entries.get(at)?.0.as_str());
        let slot = u32::try_from(at).ok()?;
        if let Ok(entry) = self.index.find_entry(hash, |&i| i == slot) {
            entry.remove();
        }
        let (_, record) = self.entries.swap_remove(at);
        if let Some((moved, _)) = self.entries.get(at) {
            let hash = self.hash(moved.as_str());
            let last = u32::try_from(self.entries.len()).ok()?;
            if let Some(i) = self.index.find_mut(hash, |&i| i == last) {
                *i = slot;
            }
        }
        Some(record)
    }

    /// Every record, in no order to rely on.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SharedStr, &Record)> {
        self.entries.iter().map(|(n, r)| (n, r))
    }

    /// Every record with its name, in the order of [`Records::iter`].
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&SharedStr, &mut Record)> {
        self.entries.iter_mut().map(|(n, r)| (&*n, r))
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Record> {
        self.entries.iter_mut().map(|(_, r)| r)
    }

    /// Keeps only the records `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&SharedStr, &Record) -> bool) {
        let mut at = 0;
        while let Some((name, record)) = self.entries.get(at) {
            if keep(name, record) {
                at += 1;
            } else {
                self.remove_at(at);
            }
        }
    }
}
