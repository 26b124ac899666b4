//! A node group: one `ResourceStore` and the streams that read it, with an index of what
//! each stream subscribes to, so a publish wakes only the streams it concerns.
//!
//! Why no wake-up is lost: a stream records a subscription in the index *before* it reads
//! the store, and a publish changes the store and then, still holding the write lock, looks
//! the changes up in the index. If the publish took the lock before the stream's read, the
//! read sees it; if after, the index already names the stream. Waking is a
//! `Notify::notify_one`, which keeps a permit for a stream that is not waiting yet.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::Notify;
use xds_sansio::server::{BodyChecks, Consistency, ResourceStore, Revision};

/// The streams of a group that subscribe to each name and to the wildcard of each type.
#[derive(Default)]
struct WakeIndex {
    wakers: HashMap<u64, Arc<Notify>>,
    types: HashMap<String, TypeWake>,
}

#[derive(Default)]
struct TypeWake {
    by_name: HashMap<String, HashSet<u64>>,
    wildcard: HashSet<u64>,
}

impl TypeWake {
    fn is_empty(&self) -> bool {
        self.by_name.is_empty() && self.wildcard.is_empty()
    }
}

/// One node group.
pub(crate) struct Group {
    pub(crate) key: Arc<str>,
    store: RwLock<ResourceStore>,
    index: Mutex<WakeIndex>,
    /// When the store last changed (for the push latency metric).
    last_publish: Mutex<Option<std::time::Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Group {
    pub(crate) fn new(key: &str, body_checks: BodyChecks, consistency: Consistency) -> Group {
        let mut store = ResourceStore::new();
        store.set_body_checks(body_checks);
        store.set_consistency(consistency);
        Group {
            key: Arc::from(key),
            store: RwLock::new(store),
            index: Mutex::new(WakeIndex::default()),
            last_publish: Mutex::new(None),
        }
    }

    /// The store, for reading. Never held across an `.await`.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ResourceStore> {
        self.store.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, ResourceStore> {
        self.store.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the store; wakes the streams whose subscriptions the changes touch (every
    /// stream of the group when the change log no longer reaches back) and says how many
    /// (`None`: nothing changed). `on_change` sees the store and the revision before, with
    /// the write lock held.
    pub(crate) fn update<R>(
        &self,
        change: impl FnOnce(&mut ResourceStore) -> R,
        on_change: impl FnOnce(&ResourceStore, Revision),
    ) -> (R, Option<usize>) {
        let mut store = self.write();
        let before = store.revision();
        let result = change(&mut store);
        if store.revision() == before {
            return (result, None);
        }
        *lock(&self.last_publish) = Some(std::time::Instant::now());
        on_change(&store, before);
        let woken = self.concerned(&store, before);
        drop(store);
        let count = woken.len();
        for waker in woken {
            waker.notify_one();
        }
        (result, Some(count))
    }

    /// The wakers of the streams the changes after `since` concern.
    fn concerned(&self, store: &ResourceStore, since: Revision) -> Vec<Arc<Notify>> {
        let index = lock(&self.index);
        let mut ids: HashSet<u64> = HashSet::new();
        match store.changes_since(since) {
            Ok(changes) => {
                for change in changes {
                    let Some(entry) = index.types.get(change.type_url.as_str()) else {
                        continue;
                    };
                    ids.extend(entry.wildcard.iter().copied());
                    if change.name.is_empty() {
                        // The type's publication concerns every subscriber of the type.
                        ids.extend(entry.by_name.values().flatten().copied());
                        continue;
                    }
                    for key in change.subscription_keys() {
                        if let Some(subscribers) = entry.by_name.get(key.as_ref()) {
                            ids.extend(subscribers.iter().copied());
                        }
                    }
                }
            }
            Err(_) => ids.extend(index.wakers.keys().copied()),
        }
        ids.iter()
            .filter_map(|id| index.wakers.get(id).cloned())
            .collect()
    }

    /// When the store last changed.
    pub(crate) fn last_publish(&self) -> Option<std::time::Instant> {
        *lock(&self.last_publish)
    }

    /// A stream joins the group.
    pub(crate) fn join(&self, id: u64, waker: Arc<Notify>) {
        lock(&self.index).wakers.insert(id, waker);
    }

    /// A stream leaves the group, with every subscription it had.
    pub(crate) fn leave(&self, id: u64, subscriptions: &[(String, String)]) {
        let mut index = lock(&self.index);
        index.wakers.remove(&id);
        for (type_url, name) in subscriptions {
            unindex(&mut index, id, type_url, name);
        }
    }

    /// Whether no stream reads the group and nothing was ever published to it.
    pub(crate) fn is_unused(&self) -> bool {
        lock(&self.index).wakers.is_empty() && self.read().revision() == Revision(0)
    }

    /// The stream subscribed to `names` of `type_url` (`*`: the wildcard).
    pub(crate) fn subscribe(&self, id: u64, type_url: &str, names: &[String]) {
        let mut index = lock(&self.index);
        let entry = index.types.entry(String::from(type_url)).or_default();
        for name in names {
            if name == "*" {
                entry.wildcard.insert(id);
            } else {
                entry.by_name.entry(name.clone()).or_default().insert(id);
            }
        }
    }

    /// The stream no longer subscribes to `names` of `type_url`.
    pub(crate) fn unsubscribe(&self, id: u64, type_url: &str, names: &[String]) {
        let mut index = lock(&self.index);
        for name in names {
            unindex(&mut index, id, type_url, name);
        }
    }
}

fn unindex(index: &mut WakeIndex, id: u64, type_url: &str, name: &str) {
    let Some(entry) = index.types.get_mut(type_url) else {
        return;
    };
    if name == "*" {
        entry.wildcard.remove(&id);
    } else if let Some(ids) = entry.by_name.get_mut(name) {
        ids.remove(&id);
        if ids.is_empty() {
            entry.by_name.remove(name);
        }
    }
    if entry.is_empty() {
        index.types.remove(type_url);
    }
}
