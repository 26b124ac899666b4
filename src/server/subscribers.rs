//! Which stream wants which resource: the one index from `(type, name)` and from type
//! (wildcard) to the streams that subscribe, and the one rule of which streams a store
//! change concerns. [`super::StreamSet`] keeps one keyed by [`super::StreamId`]; an
//! embedding that runs streams itself (the tokio adapter's node groups) keeps one keyed by
//! its own stream ids, fed by the same [`ServerEvent::Subscribed`] and
//! [`ServerEvent::Unsubscribed`] events the stream reports to everyone, and lends it to
//! [`ServerStream::handle_request_sharing`](super::ServerStream::handle_request_sharing) so
//! that its streams keep one copy of a name they all subscribe to (the index's key).
//!
//! The rule: a change of a resource concerns the streams subscribed to its type's wildcard
//! and those subscribed to one of its [`StoreChange::subscription_keys`] (its name, its
//! aliases, its `xdstp://` glob collection); a change that names no resource (the type was
//! served) or names [`TYPE_WIDE`] (the type's own error) concerns every stream subscribed
//! to the type.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use core::hash::BuildHasher;
use hashbrown::{DefaultHashBuilder, HashMap, HashTable};

use super::event::ServerEvent;
use super::names::{KeptNames, NameSource, SharedName};
use super::prefetch::find_many;
use super::publication::StoreChange;
use super::resource_errors::TYPE_WIDE;
use crate::client::WILDCARD;

/// How a store change concerns a stream ([`SubscriptionIndex::visit`]).
#[derive(Clone, Copy, Debug)]
pub enum Concern<'v, 'c> {
    /// The stream subscribes to the wildcard of `type_url`: every change of the type.
    Wildcard {
        /// The type.
        type_url: &'c str,
        /// Every change of the type, in log order.
        changes: &'v [StoreChange<'c>],
    },
    /// The stream subscribes to a name this change concerns.
    Named(&'v StoreChange<'c>),
}

/// The streams that subscribe to one name, kept under the one copy of the name that the
/// streams of a set share ([`NameSource`]), with the name's hash: the table grows without
/// reading every name again (a storm that subscribes to a million names grows it twenty
/// times, and each name read is a cache miss, issue 28), and a lookup reads the name only
/// of an entry whose whole hash matches.
#[derive(Clone, Debug)]
struct NameSubscribers<K> {
    hash: u64,
    name: SharedName,
    keys: BTreeSet<K>,
}

impl<K> NameSubscribers<K> {
    /// Whether this is the entry of `name`, which hashes to `hash`.
    fn is(&self, hash: u64, name: &str) -> bool {
        self.hash == hash && *self.name == *name
    }
}

/// The subscribers of one type.
#[derive(Clone, Debug)]
struct TypeSubscribers<K> {
    /// By name: a table rather than a map so that [`KeptNames::shared_many`] can find a
    /// name's entry by its hash before reading the name ([`find_many`]).
    by_name: HashTable<NameSubscribers<K>>,
    hasher: DefaultHashBuilder,
    wildcard: BTreeSet<K>,
}

impl<K> Default for TypeSubscribers<K> {
    fn default() -> Self {
        TypeSubscribers {
            by_name: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            wildcard: BTreeSet::new(),
        }
    }
}

impl<K> TypeSubscribers<K> {
    fn is_empty(&self) -> bool {
        self.by_name.is_empty() && self.wildcard.is_empty()
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The streams subscribed to `name` by name.
    fn named(&self, name: &str) -> Option<&NameSubscribers<K>> {
        let hash = self.hash(name);
        self.by_name.find(hash, |entry| entry.is(hash, name))
    }
}

impl<K: Copy + Ord> TypeSubscribers<K> {
    /// Stream `key` no longer subscribes to `name` (`*`: the wildcard); a name nobody
    /// subscribes to any more leaves.
    fn unsubscribe(&mut self, key: K, name: &str) {
        if name == WILDCARD {
            self.wildcard.remove(&key);
            return;
        }
        let hash = self.hash(name);
        if let Ok(mut entry) = self.by_name.find_entry(hash, |entry| entry.is(hash, name)) {
            let keys = &mut entry.get_mut().keys;
            keys.remove(&key);
            if keys.is_empty() {
                entry.remove();
            }
        }
    }

    /// Stream `key` subscribes to `name` (`*`: the wildcard); a name new to the index is
    /// kept as the copy `copy` makes (the stream's own, when it has one).
    fn subscribe(&mut self, key: K, name: &str, copy: impl FnOnce() -> SharedName) {
        if name == WILDCARD {
            self.wildcard.insert(key);
            return;
        }
        let hash = self.hash(name);
        self.by_name
            .entry(hash, |entry| entry.is(hash, name), |entry| entry.hash)
            .or_insert_with(|| NameSubscribers {
                hash,
                name: copy(),
                keys: BTreeSet::new(),
            })
            .into_mut()
            .keys
            .insert(key);
    }
}

/// The streams (named by `K`) that subscribe to each name and to the wildcard of each type.
/// Sets are ordered, so what is visited comes in the same order on every run.
#[derive(Clone, Debug)]
pub struct SubscriptionIndex<K> {
    types: HashMap<String, TypeSubscribers<K>>,
}

impl<K> Default for SubscriptionIndex<K> {
    fn default() -> Self {
        SubscriptionIndex {
            types: HashMap::new(),
        }
    }
}

/// A name some stream subscribes to is kept once, as the index's key: a stream of the
/// same set that subscribes to it too shares that copy (a storm of streams subscribing to
/// the same names writes each name once, not once per stream).
impl<K> NameSource for SubscriptionIndex<K> {
    fn of_type(&self, type_url: &str) -> Option<&dyn KeptNames> {
        self.types.get(type_url).map(|t| t as &dyn KeptNames)
    }
}

impl<K> KeptNames for TypeSubscribers<K> {
    fn shared(&self, name: &str) -> Option<SharedName> {
        Some(self.named(name)?.name.clone())
    }

    /// In passes ([`find_many`]), as the store finds a build's pending names.
    fn shared_many(&self, names: &[String]) -> Vec<Option<SharedName>> {
        let hashes: Vec<u64> = names.iter().map(|name| self.hash(name)).collect();
        // Every name found before any copy's count is raised ([`KeptNames::shared_many`]).
        let found = find_many(
            &self.by_name,
            &hashes,
            names.iter().map(String::as_str),
            |entry| entry,
            |entry| &*entry.name,
            |name| self.named(name),
        );
        found
            .into_iter()
            .map(|entry| entry.map(|entry| entry.name.clone()))
            .collect()
    }
}

impl<K: Copy + Ord> SubscriptionIndex<K> {
    /// An empty index.
    pub fn new() -> SubscriptionIndex<K> {
        SubscriptionIndex::default()
    }

    /// Stream `key` subscribes to `name` of `type_url` (`*`: the wildcard).
    pub fn subscribe(&mut self, key: K, type_url: &str, name: &str) {
        self.type_entry(type_url)
            .subscribe(key, name, || SharedName::from(name));
    }

    /// The subscribers of `type_url`, made if there are none yet.
    fn type_entry(&mut self, type_url: &str) -> &mut TypeSubscribers<K> {
        // One hash; the type URL is copied only when the type is new.
        self.types.entry_ref(type_url).or_default()
    }

    /// Stream `key` no longer subscribes to `name` of `type_url`.
    pub fn unsubscribe(&mut self, key: K, type_url: &str, name: &str) {
        self.unsubscribe_all(key, type_url, [name]);
    }

    /// [`SubscriptionIndex::unsubscribe`] of several names of one type, the type looked up
    /// once.
    fn unsubscribe_all<'n>(
        &mut self,
        key: K,
        type_url: &str,
        names: impl IntoIterator<Item = &'n str>,
    ) {
        let Some(entry) = self.types.get_mut(type_url) else {
            return;
        };
        for name in names {
            entry.unsubscribe(key, name);
        }
        if entry.is_empty() {
            self.types.remove(type_url);
        }
    }

    /// Follows one event of stream `key`: [`ServerEvent::Subscribed`] and
    /// [`ServerEvent::Unsubscribed`] change the index, every other event is no concern of
    /// it. The one channel a stream reports its subscriptions on.
    pub fn follow(&mut self, key: K, event: &ServerEvent) {
        match event {
            // The type looked up once, not once per name (a storm's first requests name a
            // hundred resources each).
            ServerEvent::Subscribed { type_url, names } if !names.is_empty() => {
                let entry = self.type_entry(type_url);
                for name in names {
                    entry.subscribe(key, name, || name.clone());
                }
            }
            ServerEvent::Unsubscribed { type_url, names } => {
                self.unsubscribe_all(key, type_url, names.iter().map(|name| &**name));
            }
            _ => {}
        }
    }

    /// Stream `key` ended: drops its `subscriptions` (what
    /// [`ServerStream::subscriptions`](super::ServerStream::subscriptions) says).
    pub fn remove<'a>(
        &mut self,
        key: K,
        subscriptions: impl IntoIterator<Item = &'a (String, String)>,
    ) {
        for (type_url, name) in subscriptions {
            self.unsubscribe(key, type_url, name);
        }
    }

    /// Whether no stream subscribes to anything.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Visits the streams `changes` concern, with how ([`Concern`]): once per wildcard
    /// subscriber and type with every change of the type (a full replacement of 10k
    /// resources to 100k wildcard streams stays 100k calls, not 10^9), and once per change
    /// and stream subscribed to it by name (a stream may be visited more than once).
    pub fn visit<'c>(
        &self,
        changes: impl IntoIterator<Item = StoreChange<'c>>,
        mut visit: impl FnMut(K, Concern<'_, 'c>),
    ) {
        let mut by_type: BTreeMap<&'c str, Vec<StoreChange<'c>>> = BTreeMap::new();
        for change in changes {
            by_type.entry(change.type_url).or_default().push(change);
        }
        for (type_url, changes) in by_type {
            let Some(entry) = self.types.get(type_url) else {
                continue;
            };
            for key in &entry.wildcard {
                visit(
                    *key,
                    Concern::Wildcard {
                        type_url,
                        changes: &changes,
                    },
                );
            }
            for change in &changes {
                if change.name.is_empty() || change.name == TYPE_WIDE {
                    for key in entry.by_name.iter().flat_map(|named| &named.keys) {
                        visit(*key, Concern::Named(change));
                    }
                    continue;
                }
                for name in change.subscription_keys() {
                    if let Some(named) = entry.named(name.as_ref()) {
                        for key in &named.keys {
                            visit(*key, Concern::Named(change));
                        }
                    }
                }
            }
        }
    }

    /// Every stream `changes` concern, once each, ascending.
    pub fn concerned<'c>(&self, changes: impl IntoIterator<Item = StoreChange<'c>>) -> BTreeSet<K> {
        let mut keys = BTreeSet::new();
        self.visit(changes, |key, _| {
            keys.insert(key);
        });
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::google::rpc::Status;
    use crate::server::{ResourceEntry, ResourceStore, StoreOp};
    use crate::types::{CLUSTER, ENDPOINT};
    use alloc::format;
    use alloc::string::ToString;
    use alloc::vec;
    use bytes::Bytes;

    const CDS: &str = CLUSTER.type_url;
    const EDS: &str = ENDPOINT.type_url;

    fn index() -> SubscriptionIndex<u32> {
        let mut index = SubscriptionIndex::new();
        index.subscribe(1, CDS, "*");
        index.subscribe(2, EDS, "a");
        index.subscribe(3, EDS, "b");
        index.subscribe(
            4,
            EDS,
            "xdstp://auth/envoy.config.endpoint.v3.ClusterLoadAssignment/c/*",
        );
        index
    }

    /// What `f` does to a fresh store after it served both types, as the index sees it.
    fn concerned(index: &SubscriptionIndex<u32>, f: impl FnOnce(&mut ResourceStore)) -> Vec<u32> {
        let mut store = ResourceStore::new();
        store.serve_type(CDS).unwrap();
        store.serve_type(EDS).unwrap();
        let since = store.revision();
        f(&mut store);
        let changes = store.changes_since(since).unwrap();
        index.concerned(changes).into_iter().collect()
    }

    #[test]
    fn a_change_concerns_the_wildcard_of_its_type_and_its_name_only() {
        let index = index();
        let set = |t: &'static str, n: &'static str| {
            move |s: &mut ResourceStore| {
                s.set(t, n, Bytes::from_static(b"x")).unwrap();
            }
        };
        assert_eq!(concerned(&index, set(CDS, "c1")), vec![1]);
        assert_eq!(concerned(&index, set(EDS, "a")), vec![2]);
        assert_eq!(concerned(&index, set(EDS, "z")), Vec::<u32>::new());
    }

    #[test]
    fn a_glob_collection_and_an_alias_concern_their_subscribers() {
        let index = index();
        let glob_member = "xdstp://auth/envoy.config.endpoint.v3.ClusterLoadAssignment/c/e1";
        assert_eq!(
            concerned(&index, |s| {
                s.set(EDS, glob_member, Bytes::from_static(b"x")).unwrap();
            }),
            vec![4]
        );
        assert_eq!(
            concerned(&index, |s| {
                let entry = ResourceEntry::new("real", Bytes::from_static(b"x"))
                    .with_aliases(vec!["b".into()]);
                s.apply(vec![StoreOp::Set {
                    type_url: EDS.to_string(),
                    entry,
                }])
                .unwrap();
            }),
            vec![3]
        );
    }

    #[test]
    fn a_type_wide_error_concerns_every_named_subscriber_of_the_type() {
        let index = index();
        let got = concerned(&index, |s| {
            s.apply(vec![StoreOp::SetError {
                type_url: EDS.to_string(),
                name: TYPE_WIDE.to_string(),
                status: Status {
                    code: 14,
                    message: "down".into(),
                    details: vec![],
                },
            }])
            .unwrap();
        });
        assert_eq!(got, vec![2, 3, 4]);
    }

    #[test]
    fn a_wildcard_stream_is_visited_once_per_type_with_every_change() {
        let index = index();
        let mut store = ResourceStore::new();
        store.serve_type(CDS).unwrap();
        let since = store.revision();
        for n in ["c1", "c2", "c3"] {
            store.set(CDS, n, Bytes::from_static(b"x")).unwrap();
        }
        let mut visits = Vec::new();
        index.visit(store.changes_since(since).unwrap(), |key, concern| {
            if let Concern::Wildcard { type_url, changes } = concern {
                visits.push((key, type_url, changes.len()));
            }
        });
        assert_eq!(visits, vec![(1, CDS, 3)]);
    }

    #[test]
    fn events_and_removal_keep_the_index_and_leave_it_empty() {
        let mut index = SubscriptionIndex::new();
        index.follow(
            7u32,
            &ServerEvent::Subscribed {
                type_url: CDS.into(),
                names: vec!["*".into(), "x".into()],
            },
        );
        assert!(!index.is_empty());
        index.follow(
            7,
            &ServerEvent::Unsubscribed {
                type_url: CDS.into(),
                names: vec!["x".into()],
            },
        );
        index.remove(7, &[(CDS.to_string(), "*".to_string())]);
        assert!(index.is_empty());
    }

    /// `shared_many` gives the index's own copy of each name some stream subscribes to and
    /// nothing for the others, as `shared` does one by one, including names whose hash
    /// bits lead first to another name's entry (checked to occur, so the path is tested).
    #[test]
    fn many_names_share_the_index_copies_as_one_by_one() {
        let mut index = SubscriptionIndex::new();
        for i in 0..2_000u32 {
            index.subscribe(i % 7, EDS, &format!("held-{i}"));
        }
        let names: Vec<String> = (0..2_000)
            .map(|i| format!("held-{i}"))
            .chain((0..20_000).map(|i| format!("absent-{i}")))
            .collect();
        let kept = index.types.get(EDS).unwrap();
        let shared = kept.shared_many(&names);
        assert_eq!(shared.len(), names.len());
        let mut taken_by_another = 0;
        for (name, shared) in names.iter().zip(&shared) {
            let one = kept.shared(name);
            assert_eq!(shared.is_some(), name.starts_with("held-"), "{name}");
            assert_eq!(shared.as_deref(), one.as_deref(), "{name}");
            if let (Some(shared), Some(one)) = (shared, &one) {
                assert!(
                    SharedName::ptr_eq(shared, one),
                    "{name}: not the index's copy"
                );
            }
            let first = kept.by_name.find(kept.hash(name), |_| true);
            if first.is_some_and(|entry| *entry.name != *name.as_str()) {
                taken_by_another += 1;
            }
        }
        assert!(taken_by_another > 0, "no name met another's entry first");
    }
}
