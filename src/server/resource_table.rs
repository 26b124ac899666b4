//! The resources of one type: a B-tree in name order (iteration, `xdstp://` ranges, the
//! full state built in name order) and a hash table of the same resources by name, so a
//! lookup is one probe. Found through the tree alone, a name in a million-resource type
//! was about 40 string comparisons, each reading a name out of a body elsewhere in memory
//! (a cache miss or two apiece): a new stream's 100 named EDS subscriptions cost more in
//! lookups than in everything else (`benches/README.md`, "Named subscriptions at scale").
//!
//! Both structures point at the same boxed resources. The tree owns them ([`Owned`], a box
//! held as a raw pointer so that moving it within the tree asserts nothing about
//! uniqueness); the table holds copies of those pointers ([`Slot`]), each dereferenced
//! only through `&ResourceTable` while its owner is in the tree. Every method that adds to
//! or takes from the tree does the same to the table, and a clone rebuilds the table from
//! its own tree: that is the whole invariant, kept in this one module.
//!
//! Cost: a slot of 8 bytes and a control byte per bucket, 10 to 19 bytes a resource as the
//! table's load moves between its doublings (`benches/README.md`, "Named subscriptions at
//! scale": the store at 123 / 120 / 118 bytes a resource at 10 000 / 100 000 / 1 000 000).

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::cmp::Ordering;
use core::fmt;
use core::hash::BuildHasher;
use core::ops::Bound;
use core::ptr::NonNull;
use hashbrown::{DefaultHashBuilder, HashTable};

use super::packing;
use super::prefetch::find_many;

/// What the table holds: anything with a name (the store's resources).
pub(super) trait Named: Clone {
    /// The name it is ordered and found by; the same for as long as it is held.
    fn name(&self) -> &str;
}

/// A boxed resource the tree owns, ordered by name.
struct Owned<T>(NonNull<T>);

// SAFETY: `Owned` is a uniquely owned box of a `T`; it gives out only shared references
// tied to its own borrow, so it is `Send` and `Sync` as a `Box<T>` would be.
unsafe impl<T: Send + Sync> Send for Owned<T> {}
unsafe impl<T: Send + Sync> Sync for Owned<T> {}

impl<T: Named> Owned<T> {
    fn new(resource: Box<T>) -> Owned<T> {
        Owned(NonNull::from(Box::leak(resource)))
    }

    fn get(&self) -> &T {
        // SAFETY: the pointer came from `Box::leak` and is freed only by `drop` or
        // `into_box`, which consume the owner.
        unsafe { self.0.as_ref() }
    }

    fn into_box(self) -> Box<T> {
        let pointer = self.0;
        core::mem::forget(self);
        // SAFETY: as in `get`; `forget` keeps `drop` from freeing it a second time.
        unsafe { Box::from_raw(pointer.as_ptr()) }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: as in `get`; this is the owner's last use.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

impl<T: Named> Clone for Owned<T> {
    fn clone(&self) -> Owned<T> {
        Owned::new(Box::new(self.get().clone()))
    }
}

impl<T: Named> PartialEq for Owned<T> {
    fn eq(&self, other: &Owned<T>) -> bool {
        self.get().name() == other.get().name()
    }
}

impl<T: Named> Eq for Owned<T> {}

impl<T: Named> PartialOrd for Owned<T> {
    fn partial_cmp(&self, other: &Owned<T>) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Named> Ord for Owned<T> {
    #[inline]
    fn cmp(&self, other: &Owned<T>) -> Ordering {
        self.get().name().cmp(other.get().name())
    }
}

impl<T: Named> Borrow<str> for Owned<T> {
    #[inline]
    fn borrow(&self) -> &str {
        self.get().name()
    }
}

/// The table's copy of an owner's pointer.
struct Slot<T>(NonNull<T>);

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Slot<T> {
        *self
    }
}

impl<T> Copy for Slot<T> {}

// SAFETY: a slot is read only through `&ResourceTable`, like the owner it copies.
unsafe impl<T: Send + Sync> Send for Slot<T> {}
unsafe impl<T: Send + Sync> Sync for Slot<T> {}

impl<T: Named> Slot<T> {
    /// The name of the item it points at; the table calls it on its own slots only, whose
    /// owners are in its tree (the module's invariant), when probing and rehashing.
    fn name(&self) -> &str {
        // SAFETY: as in `ResourceTable::read`.
        unsafe { self.0.as_ref() }.name()
    }
}

/// The resources of one type, ordered and hashed by name.
pub(super) struct ResourceTable<T> {
    order: BTreeSet<Owned<T>>,
    index: HashTable<Slot<T>>,
    hasher: DefaultHashBuilder,
    /// How many resources the tree held when it was last rebuilt packed.
    packed: usize,
}

impl<T> Default for ResourceTable<T> {
    fn default() -> ResourceTable<T> {
        ResourceTable {
            order: BTreeSet::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            packed: 0,
        }
    }
}

impl<T: Named> Clone for ResourceTable<T> {
    fn clone(&self) -> ResourceTable<T> {
        let mut copy = ResourceTable {
            order: self.order.clone(),
            index: HashTable::with_capacity(self.order.len()),
            hasher: self.hasher.clone(),
            packed: self.packed,
        };
        // The copy's slots point at the copy's boxes, never at this table's.
        let ResourceTable {
            order,
            index,
            hasher,
            ..
        } = &mut copy;
        for owned in order.iter() {
            let hash = hasher.hash_one(owned.get().name());
            index.insert_unique(hash, Slot(owned.0), |s| hasher.hash_one(s.name()));
        }
        copy
    }
}

impl<T: Named + fmt::Debug> fmt::Debug for ResourceTable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Named> ResourceTable<T> {
    /// Reads a slot: valid while its owner is in `order` (this module's invariant).
    fn read(&self, slot: Slot<T>) -> &T {
        // SAFETY: every slot in `index` copies the pointer of an owner in `order`; an owner
        // leaves `order` only after its slot left `index` (`replace`, `take`), and `&self`
        // keeps both as they are for the returned borrow.
        unsafe { slot.0.as_ref() }
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The resource named `name`: one hash probe.
    pub(super) fn get(&self, name: &str) -> Option<&T> {
        let slot = *self
            .index
            .find(self.hash(name), |slot| slot.name() == name)?;
        Some(self.read(slot))
    }

    /// Each of `names` looked up, in order, as [`ResourceTable::get`] would. A lookup of
    /// one name in a large table is a chain of four cache misses, each needing the one
    /// before: the control bytes, the slot they point to, the resource, its name in the
    /// body. Here each link is a pass over every name that starts the next link's read for
    /// all of them ([`find_many`]) before any is waited for, so the misses of a hundred
    /// names overlap instead of following one another (a reconnect storm's first answers,
    /// issue 28). A slot is taken by its hash bits alone and its name compared last; a slot
    /// of another name with the same bits is looked up again in full.
    pub(super) fn get_many<'n>(
        &self,
        names: impl Iterator<Item = &'n str> + Clone,
    ) -> Vec<Option<&T>> {
        let hashes: Vec<u64> = names.clone().map(|name| self.hash(name)).collect();
        find_many(
            &self.index,
            &hashes,
            names,
            |slot| self.read(*slot),
            T::name,
            |name| self.get(name),
        )
    }

    /// Holds `resource`; the one of the same name it replaces, if any.
    pub(super) fn replace(&mut self, resource: Box<T>) -> Option<Box<T>> {
        let hash = self.hash(resource.name());
        let owned = Owned::new(resource);
        let slot = Slot(owned.0);
        let old = match self.find_slot(hash, owned.get().name()) {
            Some(at) => {
                // The new box takes the old one's bucket before the old box leaves the tree.
                *at = slot;
                self.order.replace(owned)
            }
            None => {
                let hasher = &self.hasher;
                self.index
                    .insert_unique(hash, slot, |s| hasher.hash_one(s.name()));
                self.order.insert(owned);
                None
            }
        };
        let len = self.order.len();
        if packing::pack_if_grown(&mut self.order, len, self.packed) {
            self.packed = len;
        }
        old.map(Owned::into_box)
    }

    /// The bucket of the slot named `name`.
    fn find_slot(&mut self, hash: u64, name: &str) -> Option<&mut Slot<T>> {
        self.index.find_mut(hash, |slot| slot.name() == name)
    }

    /// Takes the resource named `name` out.
    pub(super) fn take(&mut self, name: &str) -> Option<Box<T>> {
        let hash = self.hash(name);
        let entry = self
            .index
            .find_entry(hash, |slot| slot.name() == name)
            .ok()?;
        // The slot leaves the table before its owner leaves the tree.
        entry.remove();
        self.order.take(name).map(Owned::into_box)
    }

    /// Every resource, in name order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.order.iter().map(Owned::get)
    }

    /// The resources named `start` or after it, in name order.
    pub(super) fn from(&self, start: &str) -> impl Iterator<Item = &T> {
        self.order
            .range::<str, _>((Bound::Included(start), Bound::Unbounded))
            .map(Owned::get)
    }

    /// How many resources it holds.
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it holds none.
    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::String;

    /// A named item with a version, as the store's resources have.
    #[derive(Clone, Debug)]
    struct Item {
        name: String,
        version: u32,
    }

    impl Named for Item {
        fn name(&self) -> &str {
            &self.name
        }
    }

    fn item(name: &str, version: u32) -> Box<Item> {
        Box::new(Item {
            name: String::from(name),
            version,
        })
    }

    #[test]
    fn tree_and_table_agree_through_inserts_replacements_removals_and_clones() {
        let names: Vec<String> = (0..300)
            .map(|i| format!("c-{:03}", (i * 7) % 300))
            .collect();
        let mut table = ResourceTable::default();
        for name in &names {
            assert!(table.replace(item(name, 1)).is_none());
        }
        for name in &names[..100] {
            let old = table.replace(item(name, 2)).expect("replaced");
            assert_eq!(old.version, 1);
        }
        for name in names.iter().step_by(3) {
            assert!(table.take(name).is_some());
            assert!(table.take(name).is_none());
        }
        let copy = table.clone();
        drop(table);
        let sorted: Vec<&str> = copy.iter().map(Item::name).collect();
        let mut expected: Vec<&str> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, n)| n.as_str())
            .collect();
        expected.sort_unstable();
        assert_eq!(sorted, expected);
        assert_eq!(copy.len(), expected.len());
        for (i, name) in names.iter().enumerate() {
            let found = copy.get(name);
            assert_eq!(found.is_some(), i % 3 != 0, "{name}");
            if let Some(r) = found {
                assert_eq!(r.name(), name);
                assert_eq!(r.version, if i < 100 { 2 } else { 1 });
            }
        }
        let tail: Vec<&str> = copy.from("c-290").map(Item::name).collect();
        assert_eq!(tail, expected[expected.len() - tail.len()..]);
        assert_eq!(
            tail.len(),
            expected.iter().filter(|n| **n >= "c-290").count()
        );
    }

    /// `get_many` answers as `get` for names held and not held, including those whose
    /// hash bits lead first to another name's slot (looked up again in full): the test
    /// checks that it met such names, so the path is exercised, not assumed.
    #[test]
    fn many_names_found_in_passes_are_found_as_one_by_one() {
        let mut table = ResourceTable::default();
        for i in 0..2_000 {
            table.replace(item(&format!("held-{i}"), i));
        }
        let names: Vec<String> = (0..2_000)
            .map(|i| format!("held-{i}"))
            .chain((0..20_000).map(|i| format!("absent-{i}")))
            .collect();
        let found = table.get_many(names.iter().map(String::as_str));
        assert_eq!(found.len(), names.len());
        let mut taken_by_another = 0;
        for (name, found) in names.iter().zip(&found) {
            let one = table.get(name);
            assert_eq!(found.map(|f| f.version), one.map(|f| f.version), "{name}");
            assert_eq!(found.map(|f| f.name()), one.map(|f| f.name()), "{name}");
            let first = table.index.find(table.hash(name), |_| true);
            if first.is_some_and(|slot| slot.name() != name) {
                taken_by_another += 1;
            }
        }
        assert!(taken_by_another > 0, "no name met another's slot first");
    }
}
