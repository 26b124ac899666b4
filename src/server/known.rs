//! What an incremental stream believes its client holds, per name, at the cost of what
//! differs from the store.
//!
//! A stream subscribed by wildcard has, once its first answer is out, been sent every
//! resource of the type: what it holds *is* the store, apart from what changed since. So
//! such a stream steps "in step" with the store at a revision and keeps only the names
//! whose held state differs from the store's current one: those changed after that
//! revision and not sent yet (their previous entry hash comes from the change log,
//! [`StoreChange::before`](super::StoreChange::before)), published errors and absences.
//! A hundred thousand wildcard streams over one type then cost what is in flight, not a
//! hundred thousand copies of the type's names (issue 28: "a wildcard stream in step with
//! the store: O(1) beyond what differs").
//!
//! Every other stream (by name, or wildcard before its first answer) keeps an explicit
//! entry per name, as before.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::num::NonZeroU64;

use super::packing;
use super::publication::Revision;
use super::store::{ResourceStore, StoredResource};

/// What the server believes the client holds for one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// A published error was sent in place of a body: its hash.
    Error(u64),
    /// The entry hash (name, version, TTL) of the version the client holds (told by
    /// `initial_resource_versions`, or sent): equal hashes are the same version, and the
    /// TTL is in it so a TTL change is sent. Only the hash is kept (the version string
    /// would cost about 50 bytes per resource per stream and is never read back).
    Version(u64),
    /// The client was told the name does not exist (not-found or removal).
    Absent,
}

/// One name's entry: what the client holds, or (in step only) that it holds nothing
/// although the store has the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Held(Known),
    NotHeld,
}

/// What the client holds, per resource name (or, for a name that resolves to nothing,
/// that name).
#[derive(Clone, Debug, Default)]
pub(crate) struct KnownSet {
    /// In step since this revision: every resource the store has is held as the store has
    /// it, except the names in `entries`. `None`: `entries` is everything.
    in_step: Option<Revision>,
    /// The newest change noted (in step): what a recovery need not look behind.
    noted: Revision,
    /// Boxed names (16 bytes a key, not 24); the tree is rebuilt packed after it grew a
    /// lot ([`KnownSet::pack_if_grown`]).
    entries: BTreeMap<Box<str>, Entry>,
}

impl KnownSet {
    /// Whether the client holds nothing at all (then every resource is new to it).
    pub(crate) fn holds_nothing(&self) -> bool {
        self.in_step.is_none() && self.entries.is_empty()
    }

    /// Whether the set stands in step with the store (then it holds only differences).
    pub(crate) fn is_in_step(&self) -> bool {
        self.in_step.is_some()
    }

    /// How many names are kept explicitly.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// What the store says the client holds for `name`, in step.
    fn store_view(store: &ResourceStore, type_url: &str, name: &str) -> Option<Known> {
        store
            .get(type_url, name)
            .map(|r| Known::Version(r.pair_hash()))
    }

    /// What the client holds for `name`.
    pub(crate) fn get(&self, store: &ResourceStore, type_url: &str, name: &str) -> Option<Known> {
        match self.entries.get(name) {
            Some(Entry::Held(k)) => Some(*k),
            Some(Entry::NotHeld) => None,
            None if self.in_step.is_some() => Self::store_view(store, type_url, name),
            None => None,
        }
    }

    /// Whether the client holds `r` (the store's resource named `name`) as the store has
    /// it now: same version and TTL.
    pub(crate) fn holds(&self, name: &str, r: &StoredResource) -> bool {
        match self.entries.get(name) {
            Some(Entry::Held(Known::Version(pair))) => *pair == r.pair_hash(),
            Some(_) => false,
            None => self.in_step.is_some() && r.name() == name,
        }
    }

    /// Whether an explicit entry says the client holds something for `name` (in step,
    /// the store's names are held too: ask [`KnownSet::contains`]).
    pub(crate) fn contains_explicit(&self, name: &str) -> bool {
        matches!(self.entries.get(name), Some(Entry::Held(_)))
    }

    /// A name and version the client states it holds (`initial_resource_versions`, before
    /// anything is sent).
    pub(crate) fn told(&mut self, name: &str, known: Known) {
        self.entries.insert(Box::from(name), Entry::Held(known));
    }

    /// Whether the client holds anything for `name` (a version, an error or an absence).
    pub(crate) fn contains(&self, store: &ResourceStore, type_url: &str, name: &str) -> bool {
        self.get(store, type_url, name).is_some()
    }

    /// The client now holds `known` for `name`.
    pub(crate) fn insert(
        &mut self,
        store: &ResourceStore,
        type_url: &str,
        name: &str,
        known: Known,
    ) {
        if self.in_step.is_some() && Self::store_view(store, type_url, name) == Some(known) {
            self.entries.remove(name);
        } else {
            self.entries.insert(Box::from(name), Entry::Held(known));
        }
    }

    /// The client holds nothing for `name` any more.
    pub(crate) fn remove(&mut self, store: &ResourceStore, type_url: &str, name: &str) {
        if self.in_step.is_some() && store.get(type_url, name).is_some() {
            self.entries.insert(Box::from(name), Entry::NotHeld);
        } else {
            self.entries.remove(name);
        }
    }

    /// The store changed `name` at `revision`; `before` is the entry hash it had just
    /// before (`None`: no body). In step, what the client holds stops being the store's:
    /// the first change after the set stepped in says what it was.
    pub(crate) fn store_changed(
        &mut self,
        name: &str,
        revision: Revision,
        before: Option<NonZeroU64>,
    ) {
        let Some(since) = self.in_step else {
            return;
        };
        self.noted = self.noted.max(revision);
        if revision <= since || self.entries.contains_key(name) {
            return;
        }
        let entry = before.map_or(Entry::NotHeld, |pair| {
            Entry::Held(Known::Version(pair.get()))
        });
        self.entries.insert(Box::from(name), entry);
    }

    /// Steps in with the store at `revision` (the store's current one) if the client holds
    /// every resource of the type as the store has it; keeps only what differs. Whether it
    /// did. O(names kept): done once, after a wildcard stream's full answer.
    pub(crate) fn step_in(
        &mut self,
        store: &ResourceStore,
        type_url: &str,
        revision: Revision,
    ) -> bool {
        if self.in_step.is_some() {
            return true;
        }
        let total = store.len(type_url);
        if self.entries.len() < total {
            return false;
        }
        let mut matching = 0usize;
        for (name, entry) in &self.entries {
            if let Entry::Held(known) = entry {
                if Self::store_view(store, type_url, name) == Some(*known) {
                    matching += 1;
                }
            }
        }
        if matching != total {
            return false;
        }
        // Keep what differs from the store: a held state the store no longer has.
        self.entries.retain(|name, entry| match entry {
            Entry::Held(known) => Self::store_view(store, type_url, name) != Some(*known),
            Entry::NotHeld => store.get(type_url, name).is_some(),
        });
        self.in_step = Some(revision);
        true
    }

    /// Steps in with the store at `revision` with nothing listed: the caller is sending
    /// every resource of the type, as the store has it, to a client that holds nothing.
    pub(crate) fn step_in_sending_all(&mut self, revision: Revision) {
        debug_assert!(self.entries.is_empty(), "step_in_sending_all with entries");
        self.in_step = Some(revision);
    }

    /// Leaves step: every name the client holds gets its explicit entry again (before a
    /// filter over what it holds, or when the stream stops being wildcard).
    pub(crate) fn step_out(&mut self, store: &ResourceStore, type_url: &str) {
        if self.in_step.take().is_none() {
            return;
        }
        for r in store.iter(type_url) {
            self.entries
                .entry(Box::from(r.name()))
                .or_insert(Entry::Held(Known::Version(r.pair_hash())));
        }
        self.entries.retain(|_, e| *e != Entry::NotHeld);
    }

    /// The store's change log no longer reaches back to when the set stepped in, so what
    /// the client held of the resources changed since is unknown. Recovers from what the
    /// store still says: a resource changed since is taken as not held (resent), a name
    /// removed since as held (its removal is told; a client that never held it ignores
    /// it), and the set stands in step at the store's revision. Whether it could: `false`
    /// when even the removed names no longer reach back (the stream must end).
    pub(crate) fn recover(&mut self, store: &ResourceStore, type_url: &str) -> bool {
        let Some(stepped_in) = self.in_step else {
            return true;
        };
        // Changes up to the newest one noted were read from the log already.
        let since = stepped_in.max(self.noted);
        let Ok(removed) = store.removed_since(type_url, since) else {
            return false;
        };
        for name in removed {
            if !self.entries.contains_key(name) {
                // Some version: none the store has, so the next build tells its removal.
                self.entries
                    .insert(Box::from(name), Entry::Held(Known::Version(0)));
            }
        }
        for r in store.iter(type_url) {
            if r.revision() > since && !self.entries.contains_key(r.name()) {
                self.entries.insert(Box::from(r.name()), Entry::NotHeld);
            }
        }
        self.in_step = Some(store.revision());
        true
    }

    /// The names kept explicitly that the client holds something for (in step, the
    /// store's names are the rest).
    pub(crate) fn explicit_names(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|(_, e)| **e != Entry::NotHeld)
            .map(|(n, _)| &**n)
    }

    /// Keeps the explicit names for which `keep` holds. Not in step only (in step, the
    /// store's names are not listed): [`KnownSet::step_out`] first.
    pub(crate) fn retain_explicit(&mut self, mut keep: impl FnMut(&str) -> bool) {
        debug_assert!(self.in_step.is_none(), "retain_explicit in step");
        self.entries.retain(|n, _| keep(n));
    }

    /// Rebuilds the tree packed once it more than doubled since `before` entries: names
    /// inserted in order leave its nodes about half full, and only after doubling the
    /// rebuild costs O(1) per entry inserted.
    pub(crate) fn pack_if_grown(&mut self, before: usize) {
        let len = self.entries.len();
        packing::pack_if_grown(&mut self.entries, len, before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::ResourceStore;
    use bytes::Bytes;

    const T: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    fn store_with(names: &[&str]) -> ResourceStore {
        let mut store = ResourceStore::new();
        for n in names {
            store.set(T, n, Bytes::from(n.as_bytes().to_vec())).unwrap();
        }
        store
    }

    fn pair(store: &ResourceStore, name: &str) -> u64 {
        store.get(T, name).map(|r| r.pair_hash()).unwrap()
    }

    #[test]
    fn steps_in_only_when_every_resource_is_held_as_stored() {
        let store = store_with(&["a", "b"]);
        let mut known = KnownSet::default();
        known.told("a", Known::Version(pair(&store, "a")));
        assert!(!known.step_in(&store, T, store.revision()));
        known.told("b", Known::Version(1));
        assert!(
            !known.step_in(&store, T, store.revision()),
            "b is held at another version"
        );
        known.told("b", Known::Version(pair(&store, "b")));
        known.told("gone", Known::Version(7));
        assert!(known.step_in(&store, T, store.revision()));
        // Only what differs from the store is kept.
        assert_eq!(known.len(), 1);
        assert_eq!(known.get(&store, T, "gone"), Some(Known::Version(7)));
        assert_eq!(
            known.get(&store, T, "a"),
            Some(Known::Version(pair(&store, "a")))
        );
    }

    #[test]
    fn in_step_a_change_keeps_what_was_held_until_it_is_sent() {
        let mut store = store_with(&["a", "b"]);
        let mut known = KnownSet::default();
        known.step_in_sending_all(store.revision());
        let old = pair(&store, "a");
        let rev = store.set(T, "a", Bytes::from_static(b"a2")).unwrap();
        let rev_c = store.set(T, "c", Bytes::from_static(b"c")).unwrap();
        known.store_changed("a", rev, NonZeroU64::new(old));
        known.store_changed("c", rev_c, None);
        // A second change of "a" does not overwrite what the client held.
        known.store_changed("a", rev_c, NonZeroU64::new(pair(&store, "a")));
        assert_eq!(known.get(&store, T, "a"), Some(Known::Version(old)));
        assert_eq!(known.get(&store, T, "c"), None);
        assert!(known.holds("b", store.get(T, "b").unwrap()));
        assert!(!known.holds("a", store.get(T, "a").unwrap()));
        // Sent: nothing differs any more.
        known.insert(&store, T, "a", Known::Version(pair(&store, "a")));
        known.insert(&store, T, "c", Known::Version(pair(&store, "c")));
        assert_eq!(known.len(), 0);
        // A change at or before the step-in revision is old news.
        known.store_changed("b", Revision(0), NonZeroU64::new(1));
        assert_eq!(known.len(), 0);
    }

    #[test]
    fn stepping_out_lists_every_name_held() {
        let store = store_with(&["a", "b"]);
        let mut known = KnownSet::default();
        known.step_in_sending_all(store.revision());
        known.remove(&store, T, "b");
        known.step_out(&store, T);
        assert!(!known.is_in_step());
        assert_eq!(
            known.explicit_names().collect::<alloc::vec::Vec<_>>(),
            ["a"]
        );
        assert_eq!(known.get(&store, T, "b"), None);
    }
}
