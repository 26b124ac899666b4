//! What SotW and delta share of one type's subscription on a stream: the names subscribed
//! explicitly (with the one rule of how a name covers a resource: by itself or through its
//! `xdstp://` glob collection), and the store changes not built into a response yet.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use super::store::{ResourceStore, StoredResource};
use crate::name::{collection_of, is_glob};

/// A subscribed name as one stream's state keeps it: one allocation that the subscription,
/// the newly subscribed set and the record of what was sent share (a reference count per
/// copy, 16 bytes a key). A storm of streams with 100 named subscriptions each holds and
/// writes these once per name instead of once per place (issue 28).
pub(crate) type SharedName = Arc<str>;

/// Where a stream finds a copy of a name that others already keep, so that a name many
/// streams subscribe to is kept once in the process: a [`super::StreamSet`] lends its
/// subscription index, whose keys are the names some stream subscribes to. A stream used
/// on its own lends [`NoNames`] and copies each name it subscribes to.
pub(crate) trait NameSource {
    /// The copies kept of names of `type_url`, if any are: looked up once per request, not
    /// once per name (a type URL is about 70 bytes to hash).
    fn of_type(&self, type_url: &str) -> Option<&dyn KeptNames>;
}

/// The copies of one type's names that others keep.
pub(crate) trait KeptNames {
    /// The kept copy of `name`, if there is one.
    fn shared(&self, name: &str) -> Option<SharedName>;

    /// The kept copy of each of `names`, if there is one: every name found before any
    /// copy's count is raised. A count is raised by an atomic instruction, which on x86
    /// lets no later load start before it ends; between the probes it kept each probe's
    /// cache misses from overlapping the next's (a reconnect storm's first requests name
    /// a hundred names each, issue 28).
    fn shared_many(&self, names: &[String]) -> Vec<Option<SharedName>>;
}

/// The kept copy of `name` from `kept`, else a new copy.
pub(crate) fn share_or_copy(kept: Option<&dyn KeptNames>, name: &str) -> SharedName {
    kept.and_then(|kept| kept.shared(name))
        .unwrap_or_else(|| SharedName::from(name))
}

/// [`share_or_copy`] of each of `names`, in order.
pub(crate) fn share_or_copy_many(
    kept: Option<&dyn KeptNames>,
    names: &[String],
) -> Vec<SharedName> {
    match kept {
        Some(kept) => kept
            .shared_many(names)
            .into_iter()
            .zip(names)
            .map(|(shared, name)| shared.unwrap_or_else(|| SharedName::from(name.as_str())))
            .collect(),
        None => names.iter().map(|n| share_or_copy(None, n)).collect(),
    }
}

/// No names to share.
pub(crate) struct NoNames;

impl NameSource for NoNames {
    fn of_type(&self, _: &str) -> Option<&dyn KeptNames> {
        None
    }
}

/// The names a stream subscribes to explicitly: resource names, aliases (delta) or
/// `xdstp://` glob collections, in canonical form.
#[derive(Clone, Debug, Default)]
pub(crate) struct Names {
    set: BTreeSet<SharedName>,
    /// Whether some name is a glob collection (so a resource name's glob is looked up).
    globs: bool,
}

impl Names {
    /// The names, sorted.
    pub(crate) fn set(&self) -> &BTreeSet<SharedName> {
        &self.set
    }

    /// The name's shared copy, if it is one of the names.
    pub(crate) fn get(&self, name: &str) -> Option<&SharedName> {
        self.set.get(name)
    }

    /// A shared copy of `name`: the names' own if it is one of them, else a new one.
    pub(crate) fn share(&self, name: &str) -> SharedName {
        self.get(name)
            .cloned()
            .unwrap_or_else(|| SharedName::from(name))
    }

    /// Whether `name` is one of the names (as written: a resource, alias or glob).
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// Whether the names subscribe to the resource `name`: by itself, or through its glob
    /// collection (xDS TP1).
    pub(crate) fn cover(&self, name: &str) -> bool {
        self.set.contains(name)
            || (self.globs && collection_of(name).is_some_and(|g| self.set.contains(&*g)))
    }

    /// Makes `set` the names.
    pub(crate) fn replace(&mut self, set: BTreeSet<SharedName>) {
        self.set = set;
        self.globs = self.set.iter().any(|n| is_glob(n));
    }

    /// Adds a name; its copy if it is new (only a new one is looked up in `kept` or
    /// copied).
    pub(crate) fn insert(
        &mut self,
        name: &str,
        kept: Option<&dyn KeptNames>,
    ) -> Option<SharedName> {
        if self.set.contains(name) {
            return None;
        }
        self.globs |= is_glob(name);
        let shared = share_or_copy(kept, name);
        self.set.insert(shared.clone());
        Some(shared)
    }

    /// Removes a name; the copy it held, if it was there.
    pub(crate) fn remove(&mut self, name: &str) -> Option<SharedName> {
        let removed = self.set.take(name);
        if removed.is_some() && self.globs && is_glob(name) {
            self.globs = self.set.iter().any(|n| is_glob(n));
        }
        removed
    }

    /// The resources of `type_url` the names subscribe to (globs expanded), sorted by name.
    pub(crate) fn resources<'s>(
        &self,
        store: &'s ResourceStore,
        type_url: &str,
    ) -> Vec<&'s StoredResource> {
        if !self.globs {
            return self
                .set
                .iter()
                .filter_map(|n| store.get(type_url, n))
                .collect();
        }
        let mut out: alloc::collections::BTreeMap<&str, &StoredResource> =
            alloc::collections::BTreeMap::new();
        for name in &self.set {
            if is_glob(name) {
                out.extend(store.members(type_url, name).map(|r| (r.name(), r)));
            } else if let Some(r) = store.get(type_url, name) {
                out.insert(r.name(), r);
            }
        }
        out.into_values().collect()
    }
}

/// The store changes a type has not built into a response yet.
#[derive(Clone, Debug, Default)]
pub(crate) struct Changes {
    /// Resources changed in the store since the last build (already filtered).
    pub(crate) dirty: BTreeSet<String>,
    /// Compare everything subscribed against what was sent (first request, lost log, a
    /// subscription change that reshapes the response).
    pub(crate) resync: bool,
    /// More names changed than [`Changes::mark_some`] lists: some resource covered when it
    /// was marked changed beyond those in `dirty`.
    pub(crate) overflow: bool,
}

impl Changes {
    /// Notes that resource `name` changed (a resync compares everything anyway).
    pub(crate) fn mark(&mut self, name: &str) {
        if !self.resync {
            self.dirty.insert(String::from(name));
        }
    }

    /// As [`Changes::mark`], listing at most `cap` names; past that only `overflow` is
    /// noted. For a response that carries everything or nothing, where the names only
    /// decide that a build is due: a full CDS replacement then costs each stream `cap`
    /// insertions, not one per cluster.
    pub(crate) fn mark_some(&mut self, name: &str, cap: usize) {
        if self.dirty.len() < cap {
            self.mark(name);
        } else {
            self.overflow = true;
        }
    }

    /// Whether there is nothing to compare.
    pub(crate) fn is_empty(&self) -> bool {
        !self.resync && !self.overflow && self.dirty.is_empty()
    }

    /// Takes what changed, leaving nothing: the changed names and whether to resync.
    pub(crate) fn take(&mut self) -> (BTreeSet<String>, bool) {
        self.overflow = false;
        (
            core::mem::take(&mut self.dirty),
            core::mem::take(&mut self.resync),
        )
    }
}
