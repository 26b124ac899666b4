//! A node group: one `ResourceStore` and the streams that read it, with an index of what
//! each stream subscribes to, so a publish wakes only the streams it concerns.
//!
//! Why no wake-up is lost: a stream records a subscription in the index *before* it reads
//! the store, and a publish changes the store and then, still holding the write lock, looks
//! the changes up in the index. If the publish took the lock before the stream's read, the
//! read sees it; if after, the index already names the stream. Waking is a
//! `Notify::notify_one`, which keeps a permit for a stream that is not waiting yet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::Notify;
use xds_sansio::server::{
    BodyChecks, Consistency, ResourceStore, Revision, ServerEvent, ServerStream, SubscriptionIndex,
};
use xds_sansio::{Instant, Request};

/// The streams of a group, and what each subscribes to (the core's index, by stream id).
#[derive(Default)]
struct WakeIndex {
    wakers: HashMap<u64, Arc<Notify>>,
    subscriptions: SubscriptionIndex<u64>,
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

    /// The wakers of the streams the changes after `since` concern (every stream of the
    /// group when the change log no longer reaches back).
    fn concerned(&self, store: &ResourceStore, since: Revision) -> Vec<Arc<Notify>> {
        let index = lock(&self.index);
        match store.changes_since(since) {
            Ok(changes) => index
                .subscriptions
                .concerned(changes)
                .iter()
                .filter_map(|id| index.wakers.get(id).cloned())
                .collect(),
            Err(_) => index.wakers.values().cloned().collect(),
        }
    }

    /// When the store last changed.
    pub(crate) fn last_publish(&self) -> Option<std::time::Instant> {
        *lock(&self.last_publish)
    }

    /// A stream joins the group with what it subscribes to already (a request may come
    /// before its node is known).
    pub(crate) fn join(&self, id: u64, waker: Arc<Notify>, subscriptions: &[(String, String)]) {
        let mut index = lock(&self.index);
        index.wakers.insert(id, waker);
        for (type_url, name) in subscriptions {
            index.subscriptions.subscribe(id, type_url, name);
        }
    }

    /// A stream leaves the group, with every subscription it had.
    pub(crate) fn leave(&self, id: u64, subscriptions: &[(String, String)]) {
        let mut index = lock(&self.index);
        index.wakers.remove(&id);
        index.subscriptions.remove(id, subscriptions);
    }

    /// Whether no stream reads the group and nothing was ever published to it.
    pub(crate) fn is_unused(&self) -> bool {
        lock(&self.index).wakers.is_empty() && self.read().revision() == Revision(0)
    }

    /// Hands `request` to `stream`, a stream of the group: a name it newly subscribes to
    /// is kept as the copy the group's index keeps, so a name that many of the group's
    /// streams subscribe to is kept once (the index is locked while the request applies).
    pub(crate) fn handle_request(&self, stream: &mut ServerStream, now: Instant, request: Request) {
        let index = lock(&self.index);
        stream.handle_request_sharing(now, request, &index.subscriptions);
    }

    /// Follows one event of stream `id`: its subscriptions change the index (other events
    /// do not take the lock).
    pub(crate) fn follow(&self, id: u64, event: &ServerEvent) {
        if matches!(
            event,
            ServerEvent::Subscribed { .. } | ServerEvent::Unsubscribed { .. }
        ) {
            lock(&self.index).subscriptions.follow(id, event);
        }
    }
}
