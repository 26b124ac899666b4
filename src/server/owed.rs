//! The resources one incremental SotW response owes, in name order: collected as a list
//! (a map of a hundred entries cost a tree search per name twice, the largest part of a
//! named subscription's first answer in a reconnect storm, issue 28) and sorted only when
//! they did not come in order.

use alloc::vec::Vec;
use core::cmp::Ordering;

use super::names::SharedName;
use super::store::StoredResource;

/// One resource owed: with its body, or as a TTL heartbeat; with the subscription's copy of
/// its name when the caller has it at hand (else the record of what was sent looks it up).
pub(crate) struct OwedResource<'s> {
    pub(crate) resource: &'s StoredResource,
    pub(crate) with_body: bool,
    pub(crate) name: Option<SharedName>,
}

/// Resources owed, one per name; the first added for a name is the one kept.
pub(crate) struct Owed<'s> {
    items: Vec<OwedResource<'s>>,
    /// Whether `items` is sorted by name with no name twice.
    in_order: bool,
    /// How many leading items [`Owed::contains`] searches (sorted, each name once).
    searchable: usize,
}

impl<'s> Owed<'s> {
    /// None owed.
    pub(crate) fn new() -> Self {
        Owed {
            items: Vec::new(),
            in_order: true,
            searchable: 0,
        }
    }

    /// Room for `more` resources beyond those added.
    pub(crate) fn reserve(&mut self, more: usize) {
        self.items.reserve(more);
    }

    /// Adds `resource`, unless the name is the last one added (the first is kept); one
    /// comparison when resources come in name order.
    pub(crate) fn push(
        &mut self,
        resource: &'s StoredResource,
        with_body: bool,
        name: Option<SharedName>,
    ) {
        if let Some(last) = self.items.last() {
            match resource.name().cmp(last.resource.name()) {
                Ordering::Greater => {}
                Ordering::Equal => return,
                Ordering::Less => self.in_order = false,
            }
        }
        self.items.push(OwedResource {
            resource,
            with_body,
            name,
        });
    }

    /// Sorts by name, keeping the first added of a name, and makes every item searchable.
    pub(crate) fn sort(&mut self) {
        if !self.in_order {
            // Stable: of equal names, the first added stays first and is the one kept.
            self.items
                .sort_by(|a, b| a.resource.name().cmp(b.resource.name()));
            self.items
                .dedup_by(|later, kept| later.resource.name() == kept.resource.name());
            self.in_order = true;
        }
        self.searchable = self.items.len();
    }

    /// Whether `name` is owed among the items sorted by the last [`Owed::sort`] (those
    /// added since are not searched).
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.items.get(..self.searchable).is_some_and(|sorted| {
            sorted
                .binary_search_by(|item| item.resource.name().cmp(name))
                .is_ok()
        })
    }

    /// Whether none is owed.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many are owed.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Takes the resources owed out.
    pub(crate) fn into_items(self) -> Vec<OwedResource<'s>> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::ResourceStore;
    use alloc::string::String;
    use bytes::Bytes;

    const T: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

    fn store(names: &[&str]) -> ResourceStore {
        let mut store = ResourceStore::new();
        for n in names {
            store
                .set(T, n, Bytes::from(n.as_bytes().to_vec()))
                .expect("set");
        }
        store
    }

    fn names(owed: Owed<'_>) -> Vec<(String, bool)> {
        owed.into_items()
            .iter()
            .map(|o| (String::from(o.resource.name()), o.with_body))
            .collect()
    }

    #[test]
    fn in_order_items_stay_as_added_and_a_repeat_of_the_last_is_dropped() {
        let s = store(&["a", "b", "c"]);
        let get = |n| s.get(T, n).expect("stored");
        let mut owed = Owed::new();
        owed.push(get("a"), true, None);
        owed.push(get("b"), true, None);
        owed.push(get("b"), false, None);
        owed.push(get("c"), true, None);
        owed.sort();
        assert!(owed.contains("b") && !owed.contains("bb"));
        assert_eq!(
            names(owed),
            [
                (String::from("a"), true),
                (String::from("b"), true),
                (String::from("c"), true)
            ]
        );
    }

    #[test]
    fn out_of_order_items_are_sorted_keeping_the_first_added_of_a_name() {
        let s = store(&["a", "b", "c"]);
        let get = |n| s.get(T, n).expect("stored");
        let mut owed = Owed::new();
        owed.push(get("c"), true, None);
        owed.push(get("a"), true, None);
        owed.push(get("c"), false, None);
        owed.push(get("b"), false, None);
        owed.push(get("a"), false, None);
        assert_eq!(owed.len(), 5);
        owed.sort();
        assert_eq!(
            names(owed),
            [
                (String::from("a"), true),
                (String::from("b"), false),
                (String::from("c"), true)
            ]
        );
    }

    #[test]
    fn contains_searches_only_what_the_last_sort_covered() {
        let s = store(&["a", "b"]);
        let get = |n| s.get(T, n).expect("stored");
        let mut owed = Owed::new();
        owed.push(get("b"), true, None);
        assert!(!owed.contains("b"));
        owed.sort();
        owed.push(get("a"), true, None);
        assert!(owed.contains("b") && !owed.contains("a"));
        owed.sort();
        assert!(owed.contains("a") && owed.contains("b"));
    }
}
