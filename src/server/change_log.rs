//! The store's change log: its last changes, oldest first, so streams learn what changed
//! without rescanning everything. An entry is 40 bytes and a copy of its name; its type is
//! an index into the log's own list of type URLs, and the few entries with aliases keep
//! them apart. By default the log keeps as many changes as a quarter of the resources held
//! (at least [`MIN_SCALED`], at most [`DEFAULT_LOG_CAPACITY`]): a stream further behind
//! than that rescans its subscriptions, which then costs at most about four times what
//! reading the log would have, and a store at rest does not keep a whole load's worth of
//! entries (a 10 000-resource store kept 96 bytes a resource of them).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::num::NonZeroU64;

use super::publication::{LogTruncated, Revision, StoreChange};

/// The most changes a default log keeps, and what it keeps of the names removed (see
/// `graves.rs`) whatever the store's size.
pub const DEFAULT_LOG_CAPACITY: usize = 65_536;

/// The fewest changes a default log keeps, however few resources the store holds.
pub(crate) const MIN_SCALED: usize = 1_024;

/// A default log keeps one change per this many resources held.
const SHARE: usize = 4;

/// How many changes the log keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogCapacity {
    /// Exactly this many (the application's choice).
    Fixed(usize),
    /// A quarter of the resources held, within [`MIN_SCALED`] and [`DEFAULT_LOG_CAPACITY`].
    Scaled,
}

impl LogCapacity {
    /// The bound when the store holds `held` resources.
    pub(crate) fn at(self, held: usize) -> usize {
        match self {
            LogCapacity::Fixed(n) => n,
            LogCapacity::Scaled => (held / SHARE).clamp(MIN_SCALED, DEFAULT_LOG_CAPACITY),
        }
    }

    /// The most it can ever be: what the list of removed names keeps.
    pub(crate) fn most(self) -> usize {
        match self {
            LogCapacity::Fixed(n) => n,
            LogCapacity::Scaled => DEFAULT_LOG_CAPACITY,
        }
    }
}

/// One change as the log keeps it.
#[derive(Clone, Debug)]
struct Entry {
    revision: Revision,
    before: Option<NonZeroU64>,
    name: Box<str>,
    /// Into [`ChangeLog::types`].
    type_index: u32,
    /// Whether [`ChangeLog::aliases`] holds this entry's aliases.
    aliased: bool,
}

/// The bounded log of the store's changes.
#[derive(Clone, Debug)]
pub(crate) struct ChangeLog {
    entries: VecDeque<Entry>,
    /// The aliases of the entries that have any, with the entry's sequence number.
    aliases: VecDeque<(u64, Box<[String]>)>,
    /// Every type URL an entry has named (a handful; never dropped).
    types: Vec<Box<str>>,
    /// The sequence number of the oldest entry kept.
    first: u64,
    capacity: LogCapacity,
    /// The newest revision with a change the log dropped: it answers for later ones only.
    floor: Revision,
}

impl ChangeLog {
    pub(crate) fn new(capacity: LogCapacity) -> ChangeLog {
        ChangeLog {
            entries: VecDeque::new(),
            aliases: VecDeque::new(),
            types: Vec::new(),
            first: 0,
            capacity,
            floor: Revision(0),
        }
    }

    /// How many changes the log keeps at most.
    pub(crate) fn capacity(&self) -> LogCapacity {
        self.capacity
    }

    /// Appends a change, dropping the oldest beyond the bound for `held` resources.
    pub(crate) fn push(&mut self, held: usize, change: Change) {
        let bound = self.capacity.at(held);
        if bound == 0 {
            self.floor = change.revision;
            return;
        }
        while self.entries.len() >= bound {
            self.drop_oldest();
        }
        if self.entries.len() == self.entries.capacity() {
            // Grown by a quarter, not doubled: a log short of its bound holds at most a
            // quarter of its entries' size spare, not all of it. And never by less: a
            // scaled bound grows by one every four resources, and growing to it exactly
            // would copy the whole log each time.
            let room = (self.entries.len() / 4)
                .max(16)
                .min(self.capacity.most().saturating_sub(self.entries.len()));
            self.entries.reserve_exact(room);
        } else if self.entries.capacity() > bound.saturating_add(bound / 4).max(64) {
            // The store shrank: so does the room kept for its changes.
            self.entries.shrink_to(bound);
        }
        let type_index = self.type_index(change.type_url);
        let aliased = !change.aliases.is_empty();
        if aliased {
            let sequence = self.first + self.entries.len() as u64;
            self.aliases
                .push_back((sequence, change.aliases.into_boxed_slice()));
        }
        self.entries.push_back(Entry {
            revision: change.revision,
            before: change.before.and_then(NonZeroU64::new),
            name: change.name.into_boxed_str(),
            type_index,
            aliased,
        });
    }

    /// The changes after `since`, oldest first; `Err` when the log no longer reaches back
    /// that far.
    pub(crate) fn since(
        &self,
        since: Revision,
    ) -> Result<impl Iterator<Item = StoreChange<'_>> + '_, LogTruncated> {
        if since < self.floor {
            return Err(LogTruncated);
        }
        let skip = self.entries.partition_point(|e| e.revision <= since);
        let first = self.first + skip as u64;
        Ok(self
            .entries
            .range(skip..)
            .zip(first..)
            .map(|(entry, sequence)| self.view(sequence, entry)))
    }

    fn view<'s>(&'s self, sequence: u64, entry: &'s Entry) -> StoreChange<'s> {
        StoreChange {
            revision: entry.revision,
            type_url: self.types.get(entry.type_index as usize).map_or("", |t| t),
            name: &entry.name,
            aliases: if entry.aliased {
                self.aliases_of(sequence)
            } else {
                &[]
            },
            before: entry.before,
        }
    }

    fn aliases_of(&self, sequence: u64) -> &[String] {
        let at = self.aliases.partition_point(|(s, _)| *s < sequence);
        match self.aliases.get(at) {
            Some((s, aliases)) if *s == sequence => aliases,
            _ => &[],
        }
    }

    fn drop_oldest(&mut self) {
        if let Some(dropped) = self.entries.pop_front() {
            self.floor = dropped.revision;
            if dropped.aliased {
                self.aliases.pop_front();
            }
            self.first += 1;
        }
    }

    /// The index of `type_url` in [`ChangeLog::types`], added when new. The last entry's
    /// type is tried first: a publication changes one type at a time, mostly.
    fn type_index(&mut self, type_url: &str) -> u32 {
        if let Some(last) = self.entries.back() {
            if self.types.get(last.type_index as usize).map(|t| &**t) == Some(type_url) {
                return last.type_index;
            }
        }
        match self.types.iter().position(|t| &**t == type_url) {
            Some(at) => at as u32,
            None => {
                self.types.push(Box::from(type_url));
                (self.types.len() - 1) as u32
            }
        }
    }
}

/// A change as the store hands it to the log.
pub(crate) struct Change<'a> {
    pub(crate) revision: Revision,
    pub(crate) type_url: &'a str,
    pub(crate) name: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) before: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn change(revision: u64, name: &str, aliases: &[&str]) -> Change<'static> {
        Change {
            revision: Revision(revision),
            type_url: if revision % 2 == 0 { "even" } else { "odd" },
            name: String::from(name),
            aliases: aliases.iter().map(|a| String::from(*a)).collect(),
            before: Some(revision),
        }
    }

    /// The size the module docs count on.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_entry_is_40_bytes() {
        assert_eq!(core::mem::size_of::<Entry>(), 40);
    }

    #[test]
    fn lends_each_change_with_its_own_type_and_aliases_as_entries_are_dropped() {
        let mut log = ChangeLog::new(LogCapacity::Fixed(3));
        log.push(0, change(1, "a", &["a1"]));
        log.push(0, change(2, "b", &[]));
        log.push(0, change(3, "c", &["c1", "c2"]));
        log.push(0, change(4, "d", &["d1"]));
        assert!(log.since(Revision(0)).is_err());
        let seen: Vec<_> = log
            .since(Revision(1))
            .unwrap()
            .map(|c| {
                (
                    c.revision.0,
                    c.type_url,
                    c.name,
                    c.aliases.to_vec(),
                    c.before,
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (2, "even", "b", vec![], NonZeroU64::new(2)),
                (
                    3,
                    "odd",
                    "c",
                    vec![String::from("c1"), String::from("c2")],
                    NonZeroU64::new(3)
                ),
                (4, "even", "d", vec![String::from("d1")], NonZeroU64::new(4)),
            ]
        );
        assert_eq!(log.since(Revision(3)).unwrap().count(), 1);
        assert_eq!(log.aliases.len(), 2, "a dropped entry's aliases go with it");
    }

    #[test]
    fn a_scaled_log_keeps_a_quarter_of_the_resources_within_its_bounds() {
        assert_eq!(LogCapacity::Scaled.at(0), MIN_SCALED);
        assert_eq!(LogCapacity::Scaled.at(10_000), 2_500);
        assert_eq!(LogCapacity::Scaled.at(10_000_000), DEFAULT_LOG_CAPACITY);
        let mut log = ChangeLog::new(LogCapacity::Scaled);
        for r in 1..=5_000 {
            log.push(8_000, change(r, "n", &[]));
        }
        assert_eq!(log.entries.len(), 2_000);
        assert!(log.since(Revision(3_000)).is_ok());
        assert!(log.since(Revision(2_999)).is_err());
        // The store shrank: the log follows at its next change, and gives the room back.
        log.push(0, change(5_001, "n", &[]));
        assert_eq!(log.entries.len(), MIN_SCALED);
        assert!(log.entries.capacity() <= MIN_SCALED + MIN_SCALED / 4);
    }

    /// A scaled bound grows by one every four resources; the log's room grows by a
    /// quarter at a time, not to each new bound (which copied the whole log each time).
    #[test]
    fn a_growing_store_grows_the_log_a_quarter_at_a_time() {
        let mut log = ChangeLog::new(LogCapacity::Scaled);
        let mut capacities = Vec::new();
        for r in 1..=40_000u64 {
            log.push(r as usize, change(r, "n", &[]));
            if capacities.last() != Some(&log.entries.capacity()) {
                capacities.push(log.entries.capacity());
            }
        }
        assert_eq!(log.entries.len(), 10_000);
        assert!(capacities.len() < 40, "{} reallocations", capacities.len());
    }

    #[test]
    fn a_log_of_no_changes_answers_only_from_its_last() {
        let mut log = ChangeLog::new(LogCapacity::Fixed(0));
        log.push(0, change(7, "a", &[]));
        assert!(log.since(Revision(6)).is_err());
        assert_eq!(log.since(Revision(7)).unwrap().count(), 0);
    }
}
