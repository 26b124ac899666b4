//! Incremental xDS, one type on one stream: the per-resource versions the client holds,
//! its subscriptions, and the next diff.
//!
//! Sending is planned in two steps so that ADS can order across types: [`DeltaState::plan`]
//! turns store changes and subscription changes into pending upserts and removals, and the
//! stream then emits upserts (in make-before-break order) before removals.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use super::flow::{SendCtx, Timers};
use super::known::{Known, KnownSet};
use super::names::{Changes, NameSource, Names, SharedName};
use super::publication::StoreChange;
use super::resource_errors::{self, error_hash, TYPE_WIDE};
use super::sotw::Diff;
use super::store::{ResourceStore, StoredResource};
use super::version::pair_hash;
use super::wire::DeltaSink;
use super::NotFoundReporting;
use crate::name::{collection_of, comparable, is_glob, WILDCARD};
use crate::pb::discovery::{DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource};
use crate::pb::google::protobuf::TypeUrl;
use crate::pb::google::rpc::Status;
use crate::types::TypeInfo;

/// The incremental state of one type.
#[derive(Clone, Debug)]
pub(crate) struct DeltaState {
    type_url: String,
    legacy_type: bool,
    wildcard: bool,
    /// Explicit subscriptions: resource names, aliases or `xdstp://` globs.
    names: Names,
    /// What the client holds: per name, or, once a wildcard stream's full answer is out,
    /// only what differs from the store (see [`super::known`]).
    known: KnownSet,
    /// A wildcard full answer was planned: once it is out, step in with the store.
    step_in_due: bool,
    /// Whether stepping in is allowed ([`super::ServerConfig::delta_in_step`]).
    may_step_in: bool,
    /// Names (re)subscribed: answered with the resource or a not-found, even if unchanged.
    pending: BTreeSet<String>,
    /// Names unsubscribed while wildcard: answered with the resource or its removal.
    pending_unsubscribed: BTreeSet<String>,
    /// Names unsubscribed (not wildcard): forgotten at the next plan.
    to_forget: BTreeSet<String>,
    /// Wildcard ended: forget what only wildcard covered at the next plan.
    drop_uncovered: bool,
    /// Store changes not planned yet.
    changes: Changes,
    heartbeats_due: BTreeSet<String>,
    /// Planned: resource name -> send with body (false: heartbeat).
    out_upserts: BTreeMap<String, bool>,
    /// Planned besides: every resource the store holds, with its body (a wildcard stream
    /// that holds nothing), named one by one only if it is not sent as the store's shared
    /// full state.
    out_all: bool,
    /// Planned: subscribed names reported as not existing.
    out_not_found: BTreeSet<String>,
    /// Planned: resource names the client holds that are gone.
    out_removals: BTreeSet<String>,
    /// Planned: names (or [`TYPE_WIDE`]) whose published error is to be sent.
    out_errors: BTreeSet<String>,
    /// The hash of the type's error last sent to this wildcard stream as [`TYPE_WIDE`].
    type_error_sent: Option<u64>,
    /// A new wildcard subscription: answered even when nothing is sent, so the client
    /// learns that its wildcard set is complete.
    answer_due: bool,
}

impl DeltaState {
    pub(crate) fn new(type_url: &str, may_step_in: bool) -> DeltaState {
        DeltaState {
            type_url: String::from(type_url),
            legacy_type: TypeInfo::of(type_url).legacy_wildcard(),
            wildcard: false,
            names: Names::default(),
            known: KnownSet::default(),
            step_in_due: false,
            may_step_in,
            pending: BTreeSet::new(),
            pending_unsubscribed: BTreeSet::new(),
            to_forget: BTreeSet::new(),
            drop_uncovered: false,
            changes: Changes::default(),
            heartbeats_due: BTreeSet::new(),
            out_upserts: BTreeMap::new(),
            out_all: false,
            out_not_found: BTreeSet::new(),
            out_removals: BTreeSet::new(),
            out_errors: BTreeSet::new(),
            type_error_sent: None,
            answer_due: false,
        }
    }

    pub(crate) fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    pub(crate) fn names(&self) -> &BTreeSet<SharedName> {
        self.names.set()
    }

    /// Whether a change to resource `name` (with these aliases) concerns this stream.
    pub(crate) fn covers(&self, name: &str, aliases: &[String]) -> bool {
        self.wildcard
            || self.names.cover(name)
            || self.known.contains_explicit(name)
            || aliases.iter().any(|a| self.names.contains(a.as_str()))
    }

    /// Notes a store change of a resource, if it concerns the stream; in step with the
    /// store, first notes what the client held of it.
    pub(crate) fn mark_dirty(&mut self, change: &StoreChange<'_>) {
        let name = change.name;
        self.known
            .store_changed(name, change.revision, change.before);
        if self.covers(name, change.aliases) {
            self.changes.mark(name);
        }
    }

    /// The store changes not planned yet.
    pub(crate) fn changes(&mut self) -> &mut Changes {
        &mut self.changes
    }

    /// Whether the next plan compares everything and the change log adds nothing (in
    /// step with the store, it still says what the client held).
    pub(crate) fn resyncing(&self) -> bool {
        self.changes.resync && !self.known.is_in_step()
    }

    /// The change log ran past this type: whether what the client holds could be
    /// recovered (see [`super::known::KnownSet::recover`]).
    pub(crate) fn recover(&mut self, store: &ResourceStore) -> bool {
        let t = self.type_url.as_str();
        self.known.recover(store, t)
    }

    /// Whether the next plan or emit has something to consider.
    pub(crate) fn has_work(&self) -> bool {
        !self.changes.is_empty()
            || self.drop_uncovered
            || !self.pending.is_empty()
            || !self.pending_unsubscribed.is_empty()
            || !self.to_forget.is_empty()
            || !self.heartbeats_due.is_empty()
            || self.has_upserts()
            || self.has_removals()
    }

    pub(crate) fn heartbeat_due(&mut self, name: String) {
        self.heartbeats_due.insert(name);
    }

    /// Applies a request's subscription changes (stale or not: envoy#10363). Returns the
    /// diff and whether `initial_resource_versions` was ignored (not the first request).
    /// Aliases are resolved later, by [`DeltaState::plan`], against the store.
    pub(crate) fn apply(
        &mut self,
        request: &DeltaDiscoveryRequest,
        first: bool,
        source: &dyn NameSource,
    ) -> (Diff, bool) {
        let mut diff = Diff::default();
        let mut late_initial = false;
        let kept = source.of_type(&self.type_url);
        if first {
            self.changes.resync = true;
            // The keys of initial_resource_versions count as subscriptions.
            for (name, version) in &request.initial_resource_versions {
                if name == "*" {
                    continue;
                }
                let name = &comparable(name).into_owned();
                let pair = pair_hash(name, version);
                self.known.told(name, Known::Version(pair));
                if let Some(shared) = self.names.insert(name, kept) {
                    diff.added.push(shared);
                }
            }
            if self.legacy_type && request.resource_names_subscribe.is_empty() {
                self.wildcard = true;
                self.answer_due = true;
                diff.added.push(SharedName::from(WILDCARD));
            }
        } else if !request.initial_resource_versions.is_empty() {
            late_initial = true;
        }
        for name in &request.resource_names_subscribe {
            let name = &comparable(name).into_owned();
            if name == "*" {
                if !self.wildcard {
                    self.wildcard = true;
                    self.changes.resync = true;
                    self.answer_due = true;
                    diff.added.push(SharedName::from(WILDCARD));
                }
                continue;
            }
            if let Some(shared) = self.names.insert(name, kept) {
                diff.added.push(shared);
            }
            // Subscribed again: answer even if the client seems to hold it already; but
            // not on the first request for a name whose version the client states in
            // initial_resource_versions (a reconnect: send only what changed).
            if !(first && initial_keys_contain(request, name)) {
                self.pending.insert(name.clone());
            }
            self.pending_unsubscribed.remove(name.as_str());
        }
        for name in &request.resource_names_unsubscribe {
            let name = &comparable(name).into_owned();
            if name == "*" {
                if self.wildcard {
                    self.wildcard = false;
                    diff.removed.push(SharedName::from(WILDCARD));
                    self.drop_uncovered = true;
                    // Names dropped while wildcard covered them are now covered by
                    // nothing: they are forgotten with the rest, not answered.
                    self.to_forget.append(&mut self.pending_unsubscribed);
                }
                continue;
            }
            let Some(held) = self.names.remove(name.as_str()) else {
                // A phantom unsubscribe: ignored.
                continue;
            };
            diff.removed.push(held);
            self.pending.remove(name.as_str());
            if self.wildcard {
                // Still covered by wildcard, but the client dropped it: answer with the
                // resource, or its removal.
                self.pending_unsubscribed.insert(name.clone());
            } else {
                self.to_forget.insert(name.clone());
            }
        }
        diff.added.sort();
        diff.added.dedup();
        diff.removed.sort();
        (diff, late_initial)
    }

    /// Resolves the unsubscriptions recorded by [`DeltaState::apply`] against the store.
    fn settle_unsubscribes(&mut self, store: &ResourceStore) {
        let t = self.type_url.as_str();
        let resolve = |n: &str| {
            store
                .resolve(t, n)
                .map_or_else(|| String::from(n), |r| String::from(r.name()))
        };
        if !self.wildcard {
            // Not wildcard (any more): what the client holds is listed name by name.
            self.known.step_out(store, t);
        }
        if core::mem::take(&mut self.drop_uncovered) && !self.wildcard {
            // Wildcard ended: forget what only wildcard covered.
            let covered: BTreeSet<String> = self.names.set().iter().map(|n| resolve(n)).collect();
            let names = &self.names;
            self.known
                .retain_explicit(|name| covered.contains(name) || names.cover(name));
        }
        for name in core::mem::take(&mut self.to_forget) {
            if is_glob(&name) {
                // Its members leave with it, unless something else still covers them (a
                // wildcard covers every one).
                if !self.wildcard {
                    let names = &self.names;
                    self.known.retain_explicit(|k| {
                        collection_of(k).as_deref() != Some(name.as_str()) || names.cover(k)
                    });
                }
                self.known.remove(store, t, name.as_str());
                continue;
            }
            let resolved = resolve(&name);
            if !self.wildcard && !self.names.contains(resolved.as_str()) {
                self.known.remove(store, t, resolved.as_str());
            }
            if !self.names.contains(name.as_str()) {
                self.known.remove(store, t, name.as_str());
            }
        }
        for name in core::mem::take(&mut self.pending_unsubscribed) {
            if self.names.contains(name.as_str()) {
                continue;
            }
            match store.resolve(t, &name) {
                Some(r) => {
                    self.known.remove(store, t, r.name());
                    self.out_upserts.insert(String::from(r.name()), true);
                }
                None => {
                    self.known.remove(store, t, name.as_str());
                    self.out_removals.insert(name);
                }
            }
        }
    }

    /// Whether the client holds `r` as the store has it now (same version and TTL).
    fn holds(&self, r: &StoredResource) -> bool {
        self.holds_as(r.name(), r)
    }

    /// [`DeltaState::holds`], with what the client holds looked up under `name` (the
    /// name it was planned by).
    fn holds_as(&self, name: &str, r: &StoredResource) -> bool {
        self.known.holds(name, r)
    }

    /// The published error a subscriber of `name` is owed, when the store holds no body for
    /// it: its own error if the stream covers it, the type's only if the name is
    /// subscribed by name (a wildcard hears the type's error once, as [`TYPE_WIDE`]).
    fn error_for<'s>(&self, store: &'s ResourceStore, name: &str) -> Option<&'s Status> {
        let t = self.type_url.as_str();
        if is_glob(name) || store.resolve(t, name).is_some() {
            return None;
        }
        match store.own_error(t, name) {
            Some(e) => self.covers(name, &[]).then_some(e),
            None if self.names.contains(name) => store.type_error(t),
            None => None,
        }
    }

    /// Plans `name`'s error if one is in force and the client does not hold it already
    /// (`always`: newly subscribed, said again). Whether one is in force.
    fn plan_error(&mut self, store: &ResourceStore, name: &str, always: bool) -> bool {
        let Some(e) = self.error_for(store, name) else {
            return false;
        };
        let t = self.type_url.as_str();
        let held = matches!(self.known.get(store, t, name), Some(Known::Error(h)) if h == error_hash(name, e));
        if always || !held {
            self.out_errors.insert(String::from(name));
        }
        true
    }

    /// Turns what changed into planned upserts, not-founds and removals.
    pub(crate) fn plan(&mut self, store: &ResourceStore) {
        self.settle_unsubscribes(store);
        let type_url = self.type_url.clone();
        let t = type_url.as_str();
        let (mut candidates, resync) = self.changes.take();
        // A wildcard resync compares every resource of the type: straight from the store,
        // in its order, without copying each name into `candidates` and looking it up
        // again (most of a reconnect storm's cost). The candidates loop below then skips
        // what the store holds.
        let store_compared = resync && self.wildcard;
        if store_compared && self.may_step_in && !self.known.is_in_step() {
            self.step_in_due = true;
        }
        if store_compared && self.known.holds_nothing() {
            // Every resource is new to the client (and covered: wildcard).
            self.out_all = true;
        } else if store_compared {
            for r in store.iter(t) {
                if self.covers(r.name(), r.aliases()) && !self.holds(r) {
                    self.out_upserts.insert(String::from(r.name()), true);
                }
            }
        }
        if resync && self.wildcard {
            let hash = store.type_error(t).map(|e| error_hash(TYPE_WIDE, e));
            if hash.is_some() && hash != self.type_error_sent {
                self.out_errors.insert(String::from(TYPE_WIDE));
            }
            if hash.is_none() {
                self.type_error_sent = None;
            }
            candidates.extend(store.errors(t).map(|(n, _)| String::from(n)));
        }
        if resync {
            // In step, the store's names are compared above (a wildcard resync); the rest
            // is listed.
            candidates.extend(self.known.explicit_names().map(String::from));
            for name in self.names.set() {
                if is_glob(name) {
                    let mut members = store.members(t, name).peekable();
                    if members.peek().is_none() && !self.known.contains(store, t, name) {
                        self.out_not_found.insert(String::from(&**name));
                    }
                    candidates.extend(members.map(|r| String::from(r.name())));
                    continue;
                }
                match store.resolve(t, name) {
                    Some(r) => {
                        candidates.insert(String::from(r.name()));
                    }
                    None => {
                        if !self.known.contains(store, t, name) {
                            candidates.insert(String::from(&**name));
                        }
                    }
                }
            }
        }
        for name in core::mem::take(&mut self.pending) {
            if is_glob(&name) {
                // Every member is sent; a glob without one is answered with its own name
                // in `removed_resources`.
                let mut any = false;
                for r in store.members(t, &name) {
                    any = true;
                    self.out_upserts.insert(String::from(r.name()), true);
                }
                if !any {
                    self.out_not_found.insert(name);
                }
                continue;
            }
            match store.resolve(t, &name) {
                Some(r) => {
                    self.out_upserts.insert(String::from(r.name()), true);
                }
                None => {
                    if !self.plan_error(store, &name, true) {
                        self.out_not_found.insert(name);
                    }
                }
            }
        }
        for name in candidates {
            match store.get(t, &name) {
                Some(_) if store_compared => {}
                Some(r) => {
                    if self.covers(&name, r.aliases()) && !self.holds(r) {
                        self.out_upserts.insert(name, true);
                    }
                }
                None if self.plan_error(store, &name, false) => {}
                None => match self.known.get(store, t, name.as_str()) {
                    Some(Known::Version(_)) => {
                        self.out_removals.insert(name);
                    }
                    Some(Known::Absent) => {}
                    // The error was cleared and no body came: to the client, the name
                    // now does not exist.
                    Some(Known::Error(_)) | None => {
                        if self.names.contains(name.as_str()) {
                            self.out_not_found.insert(name);
                        } else {
                            self.known.remove(store, t, name.as_str());
                        }
                    }
                },
            }
        }
        for name in core::mem::take(&mut self.heartbeats_due) {
            if let Some(r) = store.get(t, &name) {
                if self.holds_as(&name, r) && r.ttl().is_some() {
                    self.out_upserts.entry(name).or_insert(false);
                }
            }
        }
    }

    /// Whether the planned upserts, with every resource of the store planned ([`out_all`]),
    /// are the whole store, to a wildcard client that holds nothing and has nothing else
    /// due.
    ///
    /// [`out_all`]: DeltaState::out_all
    fn sends_the_whole_store(&self, store: &ResourceStore) -> bool {
        let t = self.type_url.as_str();
        self.wildcard
            && self.known.holds_nothing()
            && self.changes.is_empty()
            && self.pending.is_empty()
            && self.pending_unsubscribed.is_empty()
            && self.to_forget.is_empty()
            && !self.drop_uncovered
            && self.out_removals.is_empty()
            && self.out_upserts.keys().all(|n| store.get(t, n).is_some())
    }

    /// Whether the whole store is all the response's `resources` holds: every upsert with
    /// its body and no bodyless not-found among them (the one case
    /// [`DeltaSink::full_state`] may take).
    fn sends_shared_full_state(&self, store: &ResourceStore) -> bool {
        self.out_not_found.is_empty()
            && store.len(&self.type_url) > 0
            && self.out_upserts.values().all(|with_body| *with_body)
    }

    /// Whether upserts (or not-found reports, or the answer to a new wildcard) are planned.
    pub(crate) fn has_upserts(&self) -> bool {
        self.out_all
            || !self.out_upserts.is_empty()
            || !self.out_not_found.is_empty()
            || !self.out_errors.is_empty()
            || self.answer_due
    }

    /// Whether removals are planned.
    pub(crate) fn has_removals(&self) -> bool {
        !self.out_removals.is_empty()
    }

    /// Emits planned upserts (and, if `with_removals`, removals) as one response without its
    /// nonce; `None` if everything planned turned out moot.
    ///
    /// Every planned upsert goes to `sink` as the store's shared full state when it can
    /// take it (see [`DeltaState::sends_shared_full_state`]).
    pub(crate) fn emit(
        &mut self,
        store: &ResourceStore,
        ctx: SendCtx,
        timers: &mut Timers,
        with_upserts: bool,
        with_removals: bool,
        sink: &mut impl DeltaSink,
    ) -> Option<DeltaDiscoveryResponse> {
        let (now, divisor) = (ctx.now, ctx.divisor);
        let t = self.type_url.as_str();
        let url = TypeUrl::from(t);
        // The response's version: worked out only for a response that goes out.
        let version = || store.type_digest(t).to_version();
        let mut resources: Vec<Resource> = Vec::new();
        let mut removed: BTreeSet<String> = BTreeSet::new();
        let mut resource_errors = Vec::new();
        let known_before = self.known.len();
        let mut shared = false;
        if with_upserts {
            for name in core::mem::take(&mut self.out_errors) {
                if name == TYPE_WIDE {
                    if let Some(e) = store.type_error(t) {
                        self.type_error_sent = Some(error_hash(TYPE_WIDE, e));
                        resource_errors.push(resource_errors::entry(TYPE_WIDE, e));
                    }
                    continue;
                }
                match self.error_for(store, &name) {
                    Some(e) => {
                        timers.cancel(&name);
                        let known = Known::Error(error_hash(&name, e));
                        self.known.insert(store, t, &name, known);
                        resource_errors.push(resource_errors::entry(&name, e));
                    }
                    // A body came meanwhile (it is dirty and will be sent), or the error
                    // was cleared (the next plan says the name does not exist).
                    None => {
                        if store.resolve(t, &name).is_none() && self.names.contains(name.as_str()) {
                            self.out_not_found.insert(name);
                        }
                    }
                }
            }
            let all = core::mem::take(&mut self.out_all);
            if all && self.step_in_due && self.sends_the_whole_store(store) {
                // A full answer to a client that holds nothing: step in now, so the loop
                // below records nothing (a reconnect storm's streams never hold a name).
                self.step_in_due = false;
                self.known.step_in_sending_all(store.revision());
                if self.sends_shared_full_state(store) && sink.full_state(&version(), store, t) {
                    // What the loop below would list, shared; no resource has a TTL.
                    shared = true;
                    self.out_upserts.clear();
                    if !timers.is_empty() {
                        for r in store.iter(t) {
                            timers.cancel(r.name());
                        }
                    }
                }
            }
            if all && !shared {
                for r in store.iter(t) {
                    self.out_upserts.insert(String::from(r.name()), true);
                }
            }
            for (name, with_body) in core::mem::take(&mut self.out_upserts) {
                match store.get(t, &name) {
                    Some(r) => {
                        let held = self.holds_as(&name, r);
                        resources.push(r.delta_resource(&url, with_body || !held));
                        match r.ttl() {
                            Some(ttl) => timers.schedule(&name, now + ttl / divisor),
                            None => timers.cancel(&name),
                        }
                        self.known
                            .insert(store, t, &name, Known::Version(r.pair_hash()));
                    }
                    None => {
                        if matches!(self.known.get(store, t, &name), Some(Known::Version(_))) {
                            self.out_removals.insert(name);
                        }
                    }
                }
            }
            for name in core::mem::take(&mut self.out_not_found) {
                if store.resolve(t, &name).is_some() || store.members(t, &name).next().is_some() {
                    // Sprang into existence meanwhile: it is dirty and will be sent.
                    continue;
                }
                match ctx.not_found {
                    NotFoundReporting::RemovedResources => {
                        removed.insert(name.clone());
                    }
                    NotFoundReporting::BodylessResource => resources.push(Resource {
                        name: name.clone(),
                        ..Resource::default()
                    }),
                }
                timers.cancel(&name);
                self.known.insert(store, t, &name, Known::Absent);
            }
        }
        if with_removals {
            for name in core::mem::take(&mut self.out_removals) {
                if store.get(t, &name).is_some() {
                    // Came back meanwhile: the change is dirty and will be sent.
                    continue;
                }
                timers.cancel(&name);
                if self.names.contains(name.as_str()) {
                    self.known.insert(store, t, &name, Known::Absent);
                } else {
                    self.known.remove(store, t, &name);
                }
                removed.insert(name);
            }
        }
        let answer = with_upserts && core::mem::take(&mut self.answer_due);
        if self.step_in_due && self.wildcard && !self.has_work() {
            // The full answer is out and nothing else is due: what the client holds is
            // the store (but for what differs).
            self.step_in_due = false;
            self.known.step_in(store, t, store.revision());
        }
        self.known.pack_if_grown(known_before);
        if !shared
            && resources.is_empty()
            && removed.is_empty()
            && resource_errors.is_empty()
            && !answer
        {
            return None;
        }
        resources.sort_by(|a, b| a.name.cmp(&b.name));
        Some(DeltaDiscoveryResponse {
            system_version_info: version(),
            resources,
            type_url: self.type_url.clone(),
            removed_resources: removed.into_iter().collect(),
            resource_errors,
            ..DeltaDiscoveryResponse::default()
        })
    }
}

/// Whether `initial_resource_versions` names `name` (compared canonically).
fn initial_keys_contain(request: &DeltaDiscoveryRequest, name: &str) -> bool {
    request.initial_resource_versions.contains_key(name)
        || (name.starts_with("xdstp://")
            && request
                .initial_resource_versions
                .keys()
                .any(|k| comparable(k) == name))
}
