//! State of the World, one type on one stream: what the client subscribes to, what it was
//! sent, and the next response.

use alloc::borrow::Cow;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use prost::Message;

use super::flow::{SendCtx, Timers};
use super::names::{share_or_copy_many, Changes, NameSource, Names, SharedName};
use super::owed::Owed;
use super::resource_errors::{self, error_hash, TYPE_WIDE};
use super::store::{to_proto_duration, ResourceStore, StoredResource};
use super::version::VersionSum;
use super::wire::ResourceSink;
use crate::name::{comparable, is_glob, WILDCARD};
use crate::pb::discovery::{
    DiscoveryRequest, DiscoveryResponse, Resource, ResourceError, ResourceName,
};
use crate::pb::google::protobuf::{Any, TypeUrl};
use crate::pb::google::rpc::Status;
use crate::time::Instant;
use crate::types::{TypeInfo, NOT_FOUND_CODE, RESOURCE_WRAPPER_TYPE_URL};

/// How many changed names a full-state type (LDS, CDS) lists before it only notes that
/// more changed.
const FULL_STATE_DIRTY_CAP: usize = 16;

/// How the stream subscribes to every resource of the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wildcard {
    Off,
    /// The first request of the type had no names (LDS/CDS): sticky, later names ignored.
    Legacy,
    /// `*` among the names: lasts while the requests carry it.
    Explicit,
}

/// Names added to and removed from a subscription by one request (`*` is wildcard).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Diff {
    pub(crate) added: Vec<SharedName>,
    pub(crate) removed: Vec<SharedName>,
}

/// What one build reads and writes besides the state: the store, the time, the heartbeat
/// timers, where the resources go, and the type URL every `Any` shares (a reference count,
/// no copy).
struct Build<'a, S> {
    store: &'a ResourceStore,
    now: Instant,
    divisor: u32,
    timers: &'a mut Timers,
    sink: &'a mut S,
    url: TypeUrl,
}

/// The SotW state of one type.
#[derive(Clone, Debug)]
pub(crate) struct SotwState {
    type_url: String,
    full_state: bool,
    legacy_type: bool,
    wildcard: Wildcard,
    names: Names,
    /// Keep a legacy wildcard for the stream's life (the older protocol text) instead of ending it when
    /// names come without `*` (newest text).
    sticky_legacy: bool,
    /// Report subscribed names that do not exist in `resource_errors` (xRFC TP3).
    not_found_errors: bool,
    /// Newly subscribed names: sent even when unchanged.
    pending: BTreeSet<SharedName>,
    /// Store changes not built into a response yet.
    changes: Changes,
    /// Whether a build ran (took `pending`); see [`SotwState::awaits_first_build`].
    built: bool,
    /// A new wildcard subscription: answered even when empty.
    answer_due: bool,
    /// LDS/CDS: the stream's first request named resources: answered whatever version the
    /// client states.
    answer_named_first: bool,
    /// Non-full-state types: the entry hash (name, version, TTL) of each resource sent,
    /// keyed by the subscription's own copy of the name where it has one.
    sent: BTreeMap<SharedName, u64>,
    /// Non-full-state types: the error hash of each published error sent (a name or
    /// [`TYPE_WIDE`]) in place of a body.
    sent_errors: BTreeMap<String, u64>,
    /// Non-full-state types: the digest of `sent` and `sent_errors`.
    sum: VersionSum,
    /// The last `version_info` sent, or the one the client claimed on its first request.
    last_version: Option<String>,
    /// TTL resources whose heartbeat is due.
    heartbeats_due: BTreeSet<String>,
    /// The last request was stale: what it changed waits for the next request that is not
    /// (the client's answer to our latest response), so no response answers a stale one.
    held_by_stale: bool,
    /// LDS/CDS: names unsubscribed since the last build with no wildcard left to cover
    /// them: the client dropped them, so a response holding one is news to it even at the
    /// same version.
    maybe_missing: BTreeSet<SharedName>,
    /// LDS/CDS: the wildcard was dropped since the last build (the client dropped what it
    /// alone covered).
    wildcard_maybe_missing: bool,
}

impl SotwState {
    pub(crate) fn new(type_url: &str, sticky_legacy: bool, not_found_errors: bool) -> SotwState {
        let info = TypeInfo::of(type_url);
        SotwState {
            sticky_legacy,
            not_found_errors,
            type_url: String::from(type_url),
            full_state: info.full_state_in_sotw(),
            legacy_type: info.legacy_wildcard(),
            wildcard: Wildcard::Off,
            names: Names::default(),
            pending: BTreeSet::new(),
            changes: Changes::default(),
            built: false,
            answer_due: false,
            answer_named_first: false,
            sent: BTreeMap::new(),
            sent_errors: BTreeMap::new(),
            sum: VersionSum::EMPTY,
            last_version: None,
            heartbeats_due: BTreeSet::new(),
            held_by_stale: false,
            maybe_missing: BTreeSet::new(),
            wildcard_maybe_missing: false,
        }
    }

    /// Whether the stream is interested in the resource `name`.
    pub(crate) fn covers(&self, name: &str) -> bool {
        self.wildcard != Wildcard::Off || self.names.cover(name)
    }

    /// Whether the stream subscribes to every resource of the type.
    pub(crate) fn is_wildcard(&self) -> bool {
        self.wildcard != Wildcard::Off
    }

    /// The names explicitly subscribed.
    pub(crate) fn names(&self) -> &BTreeSet<SharedName> {
        self.names.set()
    }

    /// Whether the next build learns nothing from the store's change log: it compares
    /// everything, or it is an incremental type's first.
    pub(crate) fn resyncing(&self) -> bool {
        self.changes.resync || self.awaits_first_build()
    }

    /// An incremental type (EDS, RDS...) before its first build owes exactly the names it
    /// subscribes to, all still `pending` (new names go there; only a build takes them), read
    /// from the store as that build finds it: neither store changes nor a resync add to
    /// that (a wildcard's resync is set by its request). A reconnect storm's named
    /// subscriptions are so looked up once each, not twice (issue 28). Full-state types
    /// (LDS, CDS) build from their resync as ever.
    fn awaits_first_build(&self) -> bool {
        !self.built && !self.full_state
    }

    /// The store's change log could not say what changed (or the type's error changed):
    /// compare everything at the next build, unless it is the first (nothing to compare).
    pub(crate) fn resync(&mut self) {
        if !self.awaits_first_build() {
            self.changes.resync = true;
        }
    }

    /// Notes a store change of resource `name`, if the stream covers it and has built
    /// before.
    pub(crate) fn mark_dirty(&mut self, name: &str) {
        if self.awaits_first_build() || !self.covers(name) {
            return;
        }
        if self.full_state && self.is_wildcard() {
            // Every name is covered while the wildcard lasts, and ending it resyncs: that
            // something changed is all the build needs (no name copied per stream).
            self.changes.overflow = true;
        } else if self.full_state {
            // Everything or nothing is sent, and never the same state twice (the version
            // compare in `build_full`): a few names decide that a build is due.
            self.changes.mark_some(name, FULL_STATE_DIRTY_CAP);
        } else {
            self.changes.mark(name);
        }
    }

    /// A full-state type past its list of changed names: more marks note nothing.
    pub(crate) fn saturated(&self) -> bool {
        self.full_state && self.changes.overflow
    }

    /// Whether the next build has something to consider. While a stale request holds the
    /// subscription's changes back, only the store's changes and heartbeats count.
    pub(crate) fn has_work(&self) -> bool {
        if self.held_by_stale {
            return !self.changes.dirty.is_empty()
                || self.changes.overflow
                || !self.heartbeats_due.is_empty();
        }
        !self.changes.is_empty()
            || self.answer_due
            || !self.pending.is_empty()
            || !self.heartbeats_due.is_empty()
    }

    pub(crate) fn heartbeat_due(&mut self, name: String) {
        self.heartbeats_due.insert(name);
    }

    /// Applies the names of a request, stale or not (envoy#10363). A stale request's
    /// changes are answered only by the response that the next request that is not stale
    /// triggers ("The management server should not send a DiscoveryResponse for any
    /// DiscoveryRequest that has a stale nonce", xDS protocol, "Resource updates").
    /// Takes the request whole: its list of names is reused for the new ones, and the
    /// subscription keeps the copy `source` shares of each (or one of its own), which the
    /// event carries too.
    pub(crate) fn apply(
        &mut self,
        request: DiscoveryRequest,
        first: bool,
        stale: bool,
        source: &dyn NameSource,
    ) -> Diff {
        self.held_by_stale = stale;
        let mut diff = Diff::default();
        if first {
            // A full-state type builds on its first request whatever it names; an
            // incremental one owes what it names, all pending ([`Self::awaits_first_build`]).
            self.resync();
            if self.full_state && !request.version_info.is_empty() {
                // Reconnect (maybe to another replica): versions are stable, so a client
                // that already holds this exact state is not sent it again.
                self.last_version = Some(request.version_info);
            }
            if self.legacy_type && request.resource_names.is_empty() {
                self.wildcard = Wildcard::Legacy;
                self.changes.resync = true;
                self.answer_due = self.last_version.is_none();
                diff.added.push(SharedName::from(WILDCARD));
                return diff;
            }
        }
        if self.wildcard == Wildcard::Legacy {
            if self.sticky_legacy || request.resource_names.is_empty() {
                // The older protocol text: "once a stream has entered wildcard mode for a given resource
                // type, there is no way to change the stream out of wildcard mode;
                // resource names specified in any subsequent request on the stream will
                // be ignored." (an empty list keeps the legacy wildcard either way)
                return diff;
            }
            // Newest text: names end the legacy wildcard unless `*` comes with them; the
            // code below treats it as an explicit one that the request may keep or drop.
            self.wildcard = Wildcard::Explicit;
        }
        // The names requested, sharing the subscription's copy of each name it already
        // has; a new name is shared from `source` or copied once. The new names stay in
        // the request's own list, filtered in place (a list grown name by name was
        // reallocated six times for a hundred names, issue 28).
        let kept = source.of_type(&self.type_url);
        let mut new_names: Vec<String> = request.resource_names;
        let mut requested: Vec<SharedName> = Vec::with_capacity(new_names.len());
        let mut want_wildcard = false;
        new_names.retain_mut(|name| {
            if let Cow::Owned(canonical) = comparable(name) {
                *name = canonical;
            }
            if name == "*" {
                want_wildcard = true;
                false
            } else if let Some(held) = self.names.get(name) {
                requested.push(held.clone());
                false
            } else {
                true
            }
        });
        new_names.sort_unstable();
        new_names.dedup();
        // The new names' kept copies looked up together: in a large index each probe
        // misses the cache, and probes independent of each other overlap.
        // The request's strings are dropped with this call, while still in the cache; the
        // events carry the copies.
        let new_names: Vec<SharedName> = share_or_copy_many(kept, &new_names);
        requested.extend(new_names.iter().cloned());
        // Collected from a list, the set is built whole with full nodes (inserted one by
        // one in order, its nodes would stay about half full).
        let requested: BTreeSet<SharedName> = requested.into_iter().collect();
        // What the wildcard brought, the client asked for: a name it now names is not new
        // to it (it holds what `sent` records), so narrowing `*` to names resends nothing
        // unchanged ("the server must resend any newly requested resources", xDS protocol,
        // "How the client specifies what resources to return": these were requested).
        let was_wildcard = self.wildcard != Wildcard::Off;
        if want_wildcard && self.wildcard == Wildcard::Off {
            self.wildcard = Wildcard::Explicit;
            self.changes.resync = true;
            self.answer_due = self.last_version.is_none() || !first;
            diff.added.push(SharedName::from(WILDCARD));
        } else if !want_wildcard && self.wildcard == Wildcard::Explicit {
            self.wildcard = Wildcard::Off;
            // LDS/CDS: the full state shrinks to the names; tell the client.
            self.changes.resync = true;
            diff.removed.push(SharedName::from(WILDCARD));
            let stale: Vec<SharedName> = self
                .sent
                .keys()
                .filter(|n| !requested.contains(&**n))
                .cloned()
                .collect();
            for name in stale {
                self.forget(&name);
            }
        }
        // Collected whole (full nodes, no search per name), then merged into what is
        // still pending.
        let mut newly_pending = Vec::with_capacity(new_names.len());
        diff.added.reserve(new_names.len());
        for shared in new_names {
            if !(was_wildcard && self.sent.contains_key(&*shared)) {
                newly_pending.push(shared.clone());
            }
            diff.added.push(shared);
        }
        let mut newly_pending: BTreeSet<SharedName> = newly_pending.into_iter().collect();
        self.pending.append(&mut newly_pending);
        for name in self.names.set().difference(&requested) {
            diff.removed.push(name.clone());
            self.pending.remove(&**name);
        }
        let removed_glob = diff.removed.iter().any(|n| is_glob(n));
        if diff.added.iter().any(|n| is_glob(n)) {
            // A glob is answered even when it has no member (the client learns it is empty).
            self.answer_due = true;
        }
        if self.wildcard == Wildcard::Off {
            for name in &diff.removed {
                if let Some(pair) = self.sent.remove(&**name) {
                    self.sum.remove(pair);
                }
            }
        }
        if self.full_state {
            if first && !requested.is_empty() {
                // The version a client states on a new stream need not describe what it
                // holds by name: it may have ignored resources that crossed its
                // unsubscription, or kept the valid ones of a response it NACKed (gRPC
                // A46). Named subscriptions are answered.
                self.answer_due = true;
                self.answer_named_first = true;
            }
            for name in &diff.removed {
                if **name == *"*" {
                    self.wildcard_maybe_missing = true;
                } else if self.wildcard == Wildcard::Off {
                    self.maybe_missing.insert(name.clone());
                }
            }
        }
        self.names.replace(requested);
        if removed_glob && self.wildcard == Wildcard::Off {
            // The members only a dropped glob covered leave with it.
            let gone: Vec<SharedName> = self
                .sent
                .keys()
                .filter(|n| !self.names.cover(n))
                .cloned()
                .collect();
            for name in gone {
                self.forget(&name);
            }
        }
        diff.added.sort();
        diff.removed.sort();
        diff
    }

    fn forget(&mut self, name: &str) {
        if let Some(pair) = self.sent.remove(name) {
            self.sum.remove(pair);
        }
        if let Some(hash) = self.sent_errors.remove(name) {
            self.sum.remove(hash);
        }
    }

    /// The published error a subscriber of `name` is owed, when the store holds no body for
    /// it: its own error if the stream covers it, the type's only if the name is
    /// subscribed by name (a wildcard hears the type's error once, as [`TYPE_WIDE`]).
    fn error_for<'s>(&self, store: &'s ResourceStore, name: &str) -> Option<&'s Status> {
        let t = self.type_url.as_str();
        if is_glob(name) || store.get(t, name).is_some() {
            return None;
        }
        match store.own_error(t, name) {
            Some(e) => self.covers(name).then_some(e),
            None if self.names.contains(name) => store.type_error(t),
            None => None,
        }
    }

    /// Records a published error as sent in place of `name`'s body.
    fn record_error(&mut self, name: &str, status: &Status) {
        self.forget(name);
        let hash = error_hash(name, status);
        self.sent_errors.insert(String::from(name), hash);
        self.sum.add(hash);
    }

    /// Records `resources` (sorted by name, each once, at most `at_most` of them) as sent,
    /// each with the subscription's copy of its name where the caller has it (else the
    /// record looks it up). Into an empty record they go as one sorted list, so the tree is built whole: a
    /// stream's first answer of 100 names, inserted one by one in order, would leave its
    /// nodes about half full.
    fn record_all_sent<'r>(
        &mut self,
        resources: impl Iterator<Item = (&'r StoredResource, Option<SharedName>)>,
        at_most: usize,
    ) {
        if !self.sent.is_empty() {
            for (r, name) in resources {
                self.record_sent(r, name);
            }
            return;
        }
        let mut fresh = Vec::with_capacity(at_most);
        for (r, name) in resources {
            self.count_sent(r);
            let name = name.unwrap_or_else(|| self.names.share(r.name()));
            fresh.push((name, r.pair_hash()));
        }
        self.sent = fresh.into_iter().collect();
    }

    /// Records `resource` as sent; `name` is the subscription's copy of its name, if the
    /// caller has it.
    fn record_sent(&mut self, resource: &StoredResource, name: Option<SharedName>) {
        let previous = match self.sent.get_mut(resource.name()) {
            Some(pair) => Some(core::mem::replace(pair, resource.pair_hash())),
            None => {
                let name = name.unwrap_or_else(|| self.names.share(resource.name()));
                self.sent.insert(name, resource.pair_hash())
            }
        };
        if let Some(pair) = previous {
            self.sum.remove(pair);
        }
        self.count_sent(resource);
    }

    /// The digest's part of recording `resource` as sent: its body replaces any error
    /// said in its place.
    fn count_sent(&mut self, resource: &StoredResource) {
        if let Some(hash) = self.sent_errors.remove(resource.name()) {
            self.sum.remove(hash);
        }
        self.sum.add(resource.pair_hash());
    }

    /// The next response for this type, without its nonce, or `None` when nothing needs
    /// sending. TTL heartbeats are scheduled at `now + ttl / divisor`.
    /// The resources go into `sink` (written only when a response is returned); the
    /// returned message has none.
    pub(crate) fn build<S: ResourceSink>(
        &mut self,
        store: &ResourceStore,
        ctx: SendCtx,
        timers: &mut Timers,
        sink: &mut S,
    ) -> Option<DiscoveryResponse> {
        if !self.has_work() {
            return None;
        }
        let build = Build {
            store,
            now: ctx.now,
            divisor: ctx.divisor,
            timers,
            sink,
            url: TypeUrl::from(self.type_url.as_str()),
        };
        let response = if self.full_state {
            self.build_full(build)
        } else {
            self.build_changes(build)
        };
        self.pending.clear();
        self.built = true;
        self.changes.take();
        self.heartbeats_due.clear();
        self.maybe_missing.clear();
        self.wildcard_maybe_missing = false;
        self.answer_due = false;
        self.answer_named_first = false;
        if let Some(r) = &response {
            self.last_version = Some(r.version_info.clone());
        }
        response
    }

    /// LDS/CDS: every subscribed resource (or, for wildcard, every resource), every time.
    fn build_full<S: ResourceSink>(&mut self, build: Build<'_, S>) -> Option<DiscoveryResponse> {
        let Build {
            store,
            now,
            divisor,
            timers,
            sink,
            url,
        } = build;
        let t = self.type_url.as_str();
        // A newly subscribed name asks for a build, even when it does not exist; whether a
        // response goes out is decided below (no identical resend).
        let new_name_exists = !self.pending.is_empty();
        let dirty = self.changes.overflow || self.changes.dirty.iter().any(|n| self.covers(n));
        if !(self.changes.resync
            || self.answer_due
            || new_name_exists
            || dirty
            || !self.heartbeats_due.is_empty())
        {
            return None;
        }
        let wildcard = self.is_wildcard();
        let named = if wildcard {
            Vec::new()
        } else {
            self.names.resources(store, t)
        };
        // Published errors are part of the full state: every response lists those in force
        // for what it covers, and they enter the version beside the bodies.
        let mut resource_errors = Vec::new();
        let version = if wildcard {
            let (digest, errors, type_error) = store.wildcard_state(t);
            // Collected only when there are some: the common case allocates nothing.
            resource_errors = errors.map(|(n, e)| resource_errors::entry(n, e)).collect();
            if let Some(e) = type_error {
                resource_errors.push(resource_errors::entry(TYPE_WIDE, e));
            }
            digest
        } else {
            let mut sum = VersionSum::EMPTY;
            for r in &named {
                sum.add(r.pair_hash());
            }
            for name in self.names.set() {
                if let Some(e) = self.error_for(store, name) {
                    sum.add(error_hash(name, e));
                    resource_errors.push(resource_errors::entry(name, e));
                }
            }
            sum
        }
        .to_version();
        let heartbeat = !self.heartbeats_due.is_empty();
        let absent = self.pending.iter().filter(|n| {
            self.names.contains(n)
                && !is_glob(n)
                && store.get(t, n).is_none()
                && store.error(t, n).is_none()
        });
        let not_found = self.not_found_errors(absent.map(|n| &**n));
        // The same version is the same resource list (the version is their digest): a
        // response equal to the last one sent tells the client nothing (names added next
        // to `*`, `*` dropped while the names cover everything), unless the client dropped
        // some of it meanwhile by unsubscribing ("the server must resend any newly
        // requested resources", xDS protocol, "How the client specifies what resources to
        // return").
        let news = (wildcard && self.wildcard_maybe_missing)
            || self.pending.iter().any(|n| is_glob(n))
            || self.maybe_missing.iter().any(|n| {
                if is_glob(n) {
                    store.members(t, n).any(|r| self.covers(r.name()))
                } else {
                    self.covers(n) && store.get(t, n).is_some()
                }
            });
        if !heartbeat
            && !news
            && !self.answer_named_first
            && not_found.is_empty()
            && self.last_version.as_deref() == Some(version.as_str())
        {
            return None;
        }
        timers.clear();
        let due = &self.heartbeats_due;
        let mut push = |sink: &mut S, r: &StoredResource| match r.ttl() {
            None => sink.stored(r, &url),
            Some(ttl) => {
                timers.schedule(r.name(), now + ttl / divisor);
                if due.contains(r.name()) {
                    sink.any(heartbeat_any(r));
                } else {
                    sink.stored(r, &url);
                }
            }
        };
        if wildcard {
            // Every stream at this revision sends the same frames: shared when the sink
            // can take them whole (the encoded form) and no resource has a TTL (no timers,
            // no heartbeats to put in their place).
            if !sink.full_state(&version, store, t) {
                sink.begin(&version, store.len(t), store.frame_bytes(t));
                for r in store.iter(t) {
                    push(sink, r);
                }
            }
        } else {
            sink.begin(&version, named.len(), 0);
            for r in named {
                push(sink, r);
            }
        }
        if resource_errors.is_empty() {
            resource_errors = not_found;
        } else {
            resource_errors.extend(not_found);
        }
        Some(DiscoveryResponse {
            version_info: version,
            type_url: self.type_url.clone(),
            resource_errors,
            ..DiscoveryResponse::default()
        })
    }

    /// NOT_FOUND entries for `names`, when the stream reports them (else none).
    fn not_found_errors<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<ResourceError> {
        if !self.not_found_errors {
            return Vec::new();
        }
        names
            .map(|name| ResourceError {
                resource_name: Some(ResourceName {
                    name: String::from(name),
                    ..ResourceName::default()
                }),
                error_detail: Some(Status {
                    code: NOT_FOUND_CODE,
                    message: alloc::format!("{name} does not exist"),
                    details: Vec::new(),
                }),
            })
            .collect()
    }

    /// Other types: only what changed, plus newly subscribed names; removals are not sent
    /// (the protocol has no way to say them), but forgotten so a comeback is pushed.
    fn build_changes<S: ResourceSink>(&mut self, build: Build<'_, S>) -> Option<DiscoveryResponse> {
        let store = build.store;
        let type_url = self.type_url.clone();
        let t = type_url.as_str();
        // The type found once for every lookup below.
        let resources = store.of_type(t);
        let get = |name: &str| resources.and_then(|r| r.get(name));
        // The resources owed, each looked up in the store once.
        let mut out = Owed::new();
        let (dirty, resync) = self.changes.take();
        // Moved out (the build clears it): each new name's shared copy goes to the record
        // of what was sent without a search.
        let pending = core::mem::take(&mut self.pending);
        // Published errors owed in place of bodies: (name, error), sorted.
        let mut errors: BTreeMap<String, &Status> = BTreeMap::new();
        // The type's error, if sent, is a candidate like any name sent, even once forgotten.
        let type_wide_sent = resync && self.sent_errors.contains_key(TYPE_WIDE);
        if resync && self.is_wildcard() {
            let hash = store.type_error(t).map(|e| error_hash(TYPE_WIDE, e));
            if hash != self.sent_errors.get(TYPE_WIDE).copied() {
                match store.type_error(t) {
                    Some(e) => {
                        errors.insert(String::from(TYPE_WIDE), e);
                    }
                    None => self.forget(TYPE_WIDE),
                }
            }
        }
        // Names gone from the store (or never there) that the client should hear of.
        let mut absent: BTreeSet<String> = BTreeSet::new();
        // Forgotten once the candidates, which borrow the names sent, are compared.
        let mut forgotten: Vec<String> = Vec::new();
        // A resync compares every name it could owe, borrowed, not copied (a large type
        // lists every name it holds); otherwise the names changed, already a sorted set.
        let mut candidates: BTreeSet<&str> = BTreeSet::new();
        if resync {
            candidates.extend(dirty.iter().map(String::as_str));
            if self.is_wildcard() {
                candidates.extend(store.iter(t).map(StoredResource::name));
            }
            for name in self.names.set() {
                if is_glob(name) {
                    candidates.extend(store.members(t, name).map(StoredResource::name));
                } else {
                    candidates.insert(name);
                }
            }
            candidates.extend(self.sent.keys().map(|n| &**n));
            candidates.extend(self.sent_errors.keys().map(String::as_str));
            if type_wide_sent {
                candidates.insert(TYPE_WIDE);
            }
            if self.is_wildcard() {
                candidates.extend(store.errors(t).map(|(n, _)| n));
            }
        }
        let changed = (!resync).then(|| dirty.iter().map(String::as_str));
        for name in candidates.into_iter().chain(changed.into_iter().flatten()) {
            if !self.covers(name) {
                continue;
            }
            match get(name) {
                Some(r) => {
                    if self.sent.get(name) != Some(&r.pair_hash()) {
                        out.push(r, true, None);
                    }
                }
                None => {
                    build.timers.cancel(name);
                    if let Some(e) = self.error_for(store, name) {
                        // Said once per error (no identical resend); a new one replaces it.
                        if self.sent_errors.get(name) != Some(&error_hash(name, e)) {
                            errors.insert(String::from(name), e);
                        }
                        continue;
                    }
                    if self.sent.contains_key(name) || self.names.contains(name) {
                        absent.insert(String::from(name));
                    }
                    forgotten.push(String::from(name));
                }
            }
        }
        for name in forgotten {
            self.forget(&name);
        }
        // The candidates came sorted, each once: searchable as they are.
        out.sort();
        out.reserve(pending.len());
        // Looked up first, together: in a large type each probe misses the cache several
        // times, and `get_many` makes the misses of all the names overlap (a reconnect
        // storm's first answers, issue 28).
        let found: Vec<Option<&StoredResource>> = match resources {
            Some(resources) => resources.get_many(pending.iter().map(|n| &**n)),
            None => alloc::vec![None; pending.len()],
        };
        for (shared, found) in pending.into_iter().zip(found) {
            let name = &*shared;
            if is_glob(name) {
                for r in store.members(t, name) {
                    if !(self.is_wildcard() && self.sent.get(r.name()) == Some(&r.pair_hash())) {
                        out.push(r, true, None);
                    }
                }
                continue;
            }
            if out.contains(name) {
                // Compared above as a candidate (a resync lists every name) and owed with
                // its body: the same answer, without a second look in the store.
                continue;
            }
            match found {
                // A name added next to `*` that the wildcard already brought: the client
                // holds it, resending it would repeat the last response.
                Some(r) if self.is_wildcard() && self.sent.get(name) == Some(&r.pair_hash()) => {}
                Some(r) => {
                    out.push(r, true, Some(shared));
                }
                // Newly subscribed: its error is said even if said before.
                None => match self.error_for(store, name) {
                    Some(e) => {
                        errors.insert(String::from(name), e);
                    }
                    None => {
                        absent.insert(String::from(name));
                    }
                },
            }
        }
        let mut resource_errors: Vec<ResourceError> = errors
            .iter()
            .map(|(n, e)| resource_errors::entry(n, e))
            .collect();
        resource_errors.extend(self.not_found_errors(absent.iter().map(String::as_str)));
        out.sort();
        for name in &self.heartbeats_due {
            if out.contains(name.as_str()) || !self.covers(name) {
                continue;
            }
            if let Some(r) = get(name) {
                if self.sent.get(name.as_str()) == Some(&r.pair_hash()) && r.ttl().is_some() {
                    out.push(r, false, None);
                }
            }
        }
        out.sort();
        if out.is_empty() && resource_errors.is_empty() && !self.answer_due {
            return None;
        }
        for (name, e) in errors {
            self.record_error(&name, e);
        }
        let at_most = out.len();
        let mut out = out.into_items();
        // The names' copies move to the record (no count raised and dropped).
        self.record_all_sent(
            out.iter_mut()
                .filter(|o| o.with_body)
                .map(|o| (o.resource, o.name.take())),
            at_most,
        );
        let mut frame_bytes = 0usize;
        for o in &out {
            let r = o.resource;
            if o.with_body {
                frame_bytes = frame_bytes.saturating_add(r.sotw_frame_len(&build.url));
            }
            match r.ttl() {
                Some(ttl) => build
                    .timers
                    .schedule(r.name(), build.now + ttl / build.divisor),
                None => build.timers.cancel(r.name()),
            }
        }
        let version_info = self.sum.to_version();
        build.sink.begin(&version_info, out.len(), frame_bytes);
        for o in out {
            if o.with_body {
                build.sink.stored(o.resource, &build.url);
            } else {
                build.sink.any(heartbeat_any(o.resource));
            }
        }
        Some(DiscoveryResponse {
            version_info,
            type_url,
            resource_errors,
            ..DiscoveryResponse::default()
        })
    }
}

/// A SotW heartbeat: the `Resource` wrapper with name, version and TTL but no body.
fn heartbeat_any(r: &StoredResource) -> Any {
    Any {
        type_url: TypeUrl::from_static(RESOURCE_WRAPPER_TYPE_URL),
        value: Resource {
            name: String::from(r.name()),
            version: String::from(r.version()),
            ttl: r.ttl().map(to_proto_duration),
            ..Resource::default()
        }
        .encode_to_vec()
        .into(),
    }
}
