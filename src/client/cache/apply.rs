//! How a response, a timer or a change of interest changes what is held: cache mutations,
//! removals, does-not-exist, TTL and per-resource status. Every rule here has this one
//! home; the variant parsers only turn a response into an [`Update`].

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;
use hashbrown::{HashMap, HashSet};

use super::copies::BodyCopies;
use super::{Record, TypeCache};
use crate::client::changes::{Change, EventShape, RemovalReason};
use crate::client::config::{DataErrors, NackPolicy};
use crate::client::context::Ctx;
use crate::client::event::ClientEvent;
use crate::client::incoming::{is_collection, Incoming, ReportedError, Update};
use crate::client::readiness::Readiness;
use crate::client::status::{ResourceState, ServerError};
use crate::client::subscription::Subscription;
use crate::client::timers::TimerKind;
use crate::message::Variant;
use crate::text::SharedStr;
use crate::time::Instant;
use crate::types::{NOT_FOUND_CODE, PERMISSION_DENIED_CODE, UNAVAILABLE_CODE};

/// What a change of the cache reads or tells besides the cache: the type (for events),
/// what is wanted, the readiness it answers, and the client's context (time, timers,
/// events, configuration).
pub(crate) struct Around<'a, 'c> {
    pub(crate) url: &'a SharedStr,
    pub(crate) sub: &'a Subscription,
    pub(crate) readiness: &'a mut Readiness,
    pub(crate) cx: &'a mut Ctx<'c>,
}

/// What a fired timer did that concerns more than the cache.
pub(crate) enum Fired {
    /// Nothing beyond the cache (or a stale timer).
    Nothing,
    /// The TTL of `name` ran out and its resource left the cache.
    Expired,
}

impl TypeCache {
    /// Applies a checked response with the application's rejections (name, reason): the
    /// rejected names are marked, the rest applied as the NACK policy says. Returns the
    /// response's nonce and version for the reply.
    pub(crate) fn apply(
        &mut self,
        update: Update,
        rejections: &[(SharedStr, String)],
        ar: &mut Around<'_, '_>,
    ) -> (SharedStr, SharedStr) {
        let Update {
            nonce,
            version,
            mut resources,
            removed,
            full_state,
            errors,
        } = update;
        self.generation = self.generation.wrapping_add(1);
        self.marked = 0;
        let generation = self.generation;
        let nack = !rejections.is_empty();
        // name -> version of each resource, built only when something was rejected.
        let versions: HashMap<&str, &SharedStr> = if nack {
            resources
                .iter()
                .map(|r| (r.name.as_str(), r.version.as_ref().unwrap_or(&version)))
                .collect()
        } else {
            HashMap::new()
        };
        for (name, error) in rejections {
            let rejected_version = versions
                .get(name.as_str())
                .map_or_else(|| version.clone(), |v| (*v).clone());
            self.note_rejected(name, rejected_version, error.clone());
            ar.readiness.answered(name.as_str());
        }
        drop(versions);
        // gRPC A88: with `fail_on_data_errors` a NACK is a data error that drops what is
        // held of the rejected resource ("we will delete the existing cached resource").
        let nack_drops: Vec<SharedStr> =
            if nack && ar.cx.config.data_errors == DataErrors::FailOnDataErrors {
                rejections
                    .iter()
                    .filter(|(n, _)| self.held(n).is_some())
                    .map(|(n, _)| n.clone())
                    .collect()
            } else {
                Vec::new()
            };
        if !nack || ar.cx.policy() == NackPolicy::KeepValid {
            if self.records.is_empty() {
                self.records.reserve(resources.len());
            }
            match ar.cx.config.event_shape {
                EventShape::PerResource => ar.cx.events.reserve(resources.len().saturating_add(2)),
                EventShape::Batched => {
                    ar.cx.batch_hint = resources.len().saturating_add(removed.len())
                }
            }
            let rejected: HashSet<&SharedStr> = rejections.iter().map(|(n, _)| n).collect();
            let mut copies = BodyCopies::new(resources.iter().map(Incoming::body_len).sum());
            // Each taken apart where it lies: moving each `Incoming` out of the vector and
            // into `upsert` cost two `memcpy` calls a resource.
            for inc in &mut resources {
                let len = inc.body_len();
                if !rejected.contains(&inc.name) {
                    match inc.body.take() {
                        Some(body) => self.upsert(inc, body, &version, &mut copies, ar),
                        None => self.bodyless(inc, &version, ar),
                    }
                }
                copies.passed(len);
            }
            for name in &removed {
                self.server_removed(name, ar);
            }
            for error in errors {
                self.server_error(error, ar);
            }
            // Only scan for what the response left out if something was left out. A
            // resource with a remembered server error is kept (xRFC TP3: the client MUST
            // keep using what it holds on a transient error).
            if full_state && self.cached_count > self.marked {
                let mut absent: Vec<SharedStr> = self
                    .records
                    .iter()
                    .filter(|r| r.has_body() && r.seen != generation && r.server_error().is_none())
                    .map(Record::name_shared)
                    .collect();
                absent.sort_unstable();
                for name in absent {
                    if ar.cx.keeps_deleted() {
                        self.ignore_deletion(&name, ar);
                        continue;
                    }
                    self.remove_cached(&name, RemovalReason::AbsentFromResponse, ar);
                    if ar.sub.names(&name) {
                        self.mark_dne(&name, ar);
                    }
                }
            }
        }
        for name in &nack_drops {
            self.remove_cached(name, RemovalReason::ServerRemoved, ar);
        }
        (nonce, version)
    }

    fn upsert(
        &mut self,
        inc: &mut Incoming,
        body: Bytes,
        response_version: &SharedStr,
        copies: &mut BodyCopies,
        ar: &mut Around<'_, '_>,
    ) {
        let name = core::mem::replace(&mut inc.name, SharedStr::EMPTY);
        let version = inc.version.take();
        let rare = inc.rare.take();
        let aliases = rare.as_deref().map_or(&[][..], |r| r.aliases.as_slice());
        let (ttl, hash) = (rare.as_deref().and_then(|r| r.ttl), inc.hash);
        let cx = &mut *ar.cx;
        // A name subscribed through an alias resolves to this resource.
        for alias in aliases {
            if alias != &name && self.records.get(alias).is_some_and(|r| !r.has_body()) {
                if let Some(rec) = self.records.remove(alias) {
                    if let Some(at) = rec.dne_at() {
                        cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, alias);
                    }
                }
                ar.readiness.answered(alias.as_str());
            }
        }
        let Some((at, rec)) = self.records.get_or_insert_to_hold(&name, hash) else {
            return;
        };
        rec.seen = self.generation;
        self.marked += 1;
        if let Some(at) = rec.take_dne_at() {
            cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, &name);
        }
        // A resource's own version (incremental) is moved into the cache when no owned
        // event takes it: it is a buffer of its own, and a second handle to it would
        // allocate a shared header. The response's (SotW) is lent, and cloned only where
        // it takes a slot of its own or an owned event takes it.
        // `None`: unchanged; `Some(None)`: changed, told in a batch; `Some(Some(parts))`:
        // changed, told by an owned event made of `parts`.
        let same = rec.body().is_some_and(|b| *b == body) && rec.aliases() == aliases;
        let changed = if same {
            // Same content: keep the held buffers, note the version and TTL.
            rec.version = match version {
                Some(own) => self.versions.replace(rec.version, own),
                None => self.versions.replace_lent(rec.version, response_version),
            };
            None
        } else {
            if rec.has_body() {
                self.versions.release(rec.version);
                for a in rec.aliases() {
                    self.aliases.remove(a.as_str());
                }
            } else {
                self.cached_count += 1;
            }
            for a in aliases {
                self.aliases.insert(a.clone(), name.clone());
            }
            // Kept as a copy (`copies.rs`), so the response's buffer goes with the response.
            let kept = copies.copy(&body);
            // The cache owns the buffers; an owned event takes handles of its own.
            let event_parts = (cx.config.event_shape == EventShape::PerResource).then(|| {
                let told = version.as_ref().unwrap_or(response_version).clone();
                (told, kept.clone(), aliases.to_vec())
            });
            rec.version = match version {
                Some(own) => self.versions.intern(own),
                None => self.versions.intern_lent(response_version),
            };
            // The old body (if any) goes; the record now reads its name from the new one,
            // so it keeps nothing of the old response alive.
            drop(rec.hold(kept, &body, &name));
            match rare {
                Some(rare) => rec.set_aliases(rare.aliases),
                None => rec.clear_aliases(),
            }
            Some(event_parts)
        };
        rec.set_held_ttl(ttl);
        rec.state = ResourceState::Acked;
        rec.clear_outcomes();
        if ttl.is_some() || rec.ttl_at().is_some() {
            set_ttl(rec, &name, ttl, cx);
        }
        ar.readiness.answered(name.as_str());
        match changed {
            None => {}
            Some(None) => cx.batch_change(ar.url, name, Change::Upserted, Some(at)),
            Some(Some((version, body, aliases))) => cx.change(
                ar.url,
                name,
                Change::Upserted,
                Some(at),
                |type_url, name| ClientEvent::Upserted {
                    type_url,
                    name,
                    version,
                    body,
                    aliases,
                },
            ),
        }
    }

    /// A resource without a body: a heartbeat when held at that version (refreshes the
    /// TTL); otherwise, incremental only, "this resource does not exist".
    fn bodyless(&mut self, inc: &Incoming, response_version: &SharedStr, ar: &mut Around<'_, '_>) {
        let v = inc.version.as_ref().unwrap_or(response_version);
        if let Some(rec) = self.records.get_mut(inc.name.as_str()) {
            rec.seen = self.generation;
            if rec.has_body() {
                self.marked += 1;
            }
            if rec.has_body() && self.versions.get(rec.version) == v {
                rec.set_held_ttl(inc.ttl());
                set_ttl(rec, &inc.name, inc.ttl(), ar.cx);
                return;
            }
        }
        if ar.cx.variant() == Variant::Delta {
            self.server_removed(&inc.name, ar);
            for alias in inc.aliases() {
                if ar.sub.names(alias) && self.held(alias).is_none() {
                    self.mark_dne(alias, ar);
                }
            }
        }
    }

    /// Incremental removal of `name`: drop it if held; a name still subscribed does not exist.
    pub(crate) fn server_removed(&mut self, name: &SharedStr, ar: &mut Around<'_, '_>) {
        if is_collection(name) {
            // A glob without members (xDS TP1): the collection is empty, which removes
            // none of its members and is no resource's absence.
            return;
        }
        let held = self.held(name);
        if held.is_some() && ar.cx.keeps_deleted() {
            self.ignore_deletion(name, ar);
            return;
        }
        let aliases: Vec<SharedStr> = held.map(|c| c.aliases().to_vec()).unwrap_or_default();
        self.remove_cached(name, RemovalReason::ServerRemoved, ar);
        if ar.sub.names(name) {
            self.mark_dne(name, ar);
        }
        for alias in aliases {
            if ar.sub.names(&alias) {
                self.mark_dne(&alias, ar);
            }
        }
    }

    /// gRPC A53: the server deleted held resource `name`; keep it, and say so once. Under
    /// A88 the status says `DoesNotExist` while the body stays held ("setting the cache
    /// entry state to NOT_FOUND without actually deleting the cached resource").
    fn ignore_deletion(&mut self, name: &SharedStr, ar: &mut Around<'_, '_>) {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return;
        };
        if ar.cx.config.data_errors != DataErrors::Legacy {
            rec.state = ResourceState::DoesNotExist;
            rec.set_server_error(None);
        }
        if rec.deletion_ignored() {
            return;
        }
        rec.set_deletion_ignored(true);
        ar.cx.events.push_back(ClientEvent::DeletionIgnored {
            type_url: ar.url.clone(),
            name: name.clone(),
        });
    }

    /// Drops a held resource and says so; keeps the record only while the name is
    /// subscribed by name. Returns whether something was held.
    pub(crate) fn remove_cached(
        &mut self,
        name: &SharedStr,
        reason: RemovalReason,
        ar: &mut Around<'_, '_>,
    ) -> bool {
        let cx = &mut *ar.cx;
        let keep = ar.sub.names(name);
        if !self
            .records
            .get(name.as_str())
            .is_some_and(Record::has_body)
        {
            return false;
        }
        // A record kept (its name still subscribed) keeps a copy of its name; one that goes
        // is removed whole, its name never copied.
        let taken = if keep {
            self.records.get_mut(name.as_str()).and_then(|rec| {
                if reason == RemovalReason::Expired {
                    rec.state = ResourceState::Expired;
                }
                let ttl_at = rec.take_ttl_at();
                rec.take_held()
                    .map(|(_, slot, aliases)| (slot, aliases, ttl_at))
            })
        } else {
            self.forget(name, cx).map(|mut rec| {
                let ttl_at = rec.take_ttl_at();
                let aliases = rec.aliases().to_vec();
                (rec.version, aliases, ttl_at)
            })
        };
        let Some((old_slot, old_aliases, ttl_at)) = taken else {
            return false;
        };
        self.versions.release(old_slot);
        self.cached_count = self.cached_count.saturating_sub(1);
        for a in &old_aliases {
            self.aliases.remove(a.as_str());
        }
        if let Some(at) = ttl_at {
            cx.timers.disarm(at, TimerKind::Ttl, cx.idx, name);
        }
        cx.change(
            ar.url,
            name.clone(),
            Change::Removed(reason),
            None,
            |type_url, name| ClientEvent::Removed {
                type_url,
                name,
                reason,
            },
        );
        true
    }

    /// Forgets the record of `name` and its does-not-exist timer; returns the record.
    fn forget(&mut self, name: &SharedStr, cx: &mut Ctx<'_>) -> Option<Record> {
        let rec = self.records.remove(name.as_str())?;
        if let Some(at) = rec.dne_at() {
            cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, name);
        }
        Some(rec)
    }

    /// A `resource_errors` entry (xRFC TP3; gRPC A88, "Support for Errors Provided by the
    /// xDS server"). Before A88 a NOT_FOUND for a concrete name is a deletion. Otherwise
    /// the name's timer stops, the error is remembered in its status (`ReceivedError`)
    /// until the resource arrives or another error replaces it, and the application hears
    /// of it; a held body stays held, except for NOT_FOUND and PERMISSION_DENIED under
    /// [`DataErrors::FailOnDataErrors`]. An error for the subscription as a whole (`""`,
    /// `*`, a glob) is only reported.
    fn server_error(&mut self, error: ReportedError, ar: &mut Around<'_, '_>) {
        let ReportedError {
            name,
            code,
            message,
        } = error;
        let data_error = code == NOT_FOUND_CODE || code == PERMISSION_DENIED_CODE;
        match ar.cx.config.data_errors {
            DataErrors::Legacy if code == NOT_FOUND_CODE && !is_collection(&name) => {
                self.server_removed(&name, ar);
                return;
            }
            DataErrors::FailOnDataErrors if data_error && !is_collection(&name) => {
                self.remove_cached(&name, RemovalReason::ServerRemoved, ar);
            }
            _ => {}
        }
        if !is_collection(&name) {
            if !ar.sub.wants(&name, &[]) && !self.records.contains(name.as_str()) {
                return;
            }
            let cx = &mut *ar.cx;
            if let Some(rec) = self.records.get_or_insert(&name) {
                if let Some(at) = rec.take_dne_at() {
                    cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, &name);
                }
                rec.state = ResourceState::ReceivedError;
                rec.seen = self.generation;
                rec.set_server_error(Some(ServerError {
                    code,
                    message: message.clone(),
                }));
            }
            ar.readiness.answered(name.as_str());
        }
        ar.cx.events.push_back(ClientEvent::ResourceError {
            type_url: ar.url.clone(),
            name,
            code,
            message,
        });
    }

    /// The resource timer of a name fired under gRPC A88's
    /// `resource_timer_is_transient_error`: "the resulting error will have status
    /// UNAVAILABLE instead of NOT_FOUND, and the cache state will be set to `TIMEOUT`
    /// instead of `DOES_NOT_EXIST`", and the watchers hear of it (nothing is held, so it
    /// is not an ambient error).
    fn mark_timed_out(&mut self, name: &SharedStr, ar: &mut Around<'_, '_>) {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return;
        };
        let message = String::from("timed out waiting for the resource from the xDS server");
        rec.state = ResourceState::TimedOut;
        rec.set_server_error(Some(ServerError {
            code: UNAVAILABLE_CODE,
            message: message.clone(),
        }));
        ar.readiness.answered(name.as_str());
        ar.cx.events.push_back(ClientEvent::ResourceError {
            type_url: ar.url.clone(),
            name: name.clone(),
            code: UNAVAILABLE_CODE,
            message,
        });
    }

    /// A subscribed name is known not to exist.
    pub(crate) fn mark_dne(&mut self, name: &SharedStr, ar: &mut Around<'_, '_>) {
        let cx = &mut *ar.cx;
        let Some(rec) = self.records.get_or_insert(name) else {
            return;
        };
        rec.set_server_error(None);
        if let Some(at) = rec.take_dne_at() {
            cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, name);
        }
        if rec.state != ResourceState::DoesNotExist {
            rec.state = ResourceState::DoesNotExist;
            cx.change(
                ar.url,
                name.clone(),
                Change::DoesNotExist,
                None,
                |type_url, name| ClientEvent::DoesNotExist { type_url, name },
            );
        }
        ar.readiness.answered(name.as_str());
    }

    /// Starts the does-not-exist timer of each name just sent that is neither held, known
    /// not to exist, nor already timed (gRPC A57: only when sent on a connected stream).
    pub(crate) fn start_dne_timers(
        &mut self,
        names: &[SharedStr],
        timeout: Option<Duration>,
        cx: &mut Ctx<'_>,
    ) {
        let Some(timeout) = timeout else {
            return;
        };
        let at = cx.now.saturating_add(timeout);
        for name in names {
            if is_collection(name) {
                continue;
            }
            if let Some(rec) = self.records.get_mut(name.as_str()) {
                if !rec.has_body()
                    && rec.state == ResourceState::Requested
                    && rec.dne_at().is_none()
                {
                    rec.set_dne_at(at);
                    cx.timers
                        .arm(at, TimerKind::DoesNotExist, cx.idx, name.clone());
                }
            }
        }
    }

    /// A timer of this type fired for `name`.
    pub(crate) fn fire(
        &mut self,
        at: Instant,
        kind: TimerKind,
        name: &SharedStr,
        ar: &mut Around<'_, '_>,
    ) -> Fired {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return Fired::Nothing;
        };
        match kind {
            TimerKind::DoesNotExist => {
                if rec.dne_at() != Some(at) {
                    return Fired::Nothing;
                }
                rec.take_dne_at();
                if !rec.has_body() && rec.state == ResourceState::Requested {
                    if ar.cx.config.resource_timer_is_transient_error {
                        self.mark_timed_out(name, ar);
                    } else {
                        self.mark_dne(name, ar);
                    }
                }
                Fired::Nothing
            }
            TimerKind::Ttl => {
                if rec.ttl_at() != Some(at) {
                    return Fired::Nothing;
                }
                rec.take_ttl_at();
                self.remove_cached(name, RemovalReason::Expired, ar);
                Fired::Expired
            }
        }
    }

    // ---------------------------------------------------------------- interest

    /// After the wildcard or a glob left: every resource no longer wanted leaves the
    /// cache, and the statuses the wildcard alone kept (rejected, never held) go too.
    pub(crate) fn drop_unwanted(&mut self, ar: &mut Around<'_, '_>) {
        let mut unwanted: Vec<SharedStr> = self
            .held_resources()
            .filter(|(r, c)| !ar.sub.wants(r.name(), c.aliases()))
            .map(|(r, _)| r.name_shared())
            .collect();
        unwanted.sort_unstable();
        for n in unwanted {
            self.remove_cached(&n, RemovalReason::Unsubscribed, ar);
        }
        let sub = ar.sub;
        self.records
            .retain(|r| r.has_body() || sub.names(r.name()) || r.dne_at().is_some());
    }

    /// After `name` (a resource name or an alias) left: its resource leaves the cache
    /// unless still wanted otherwise; a name never held is forgotten with its timer.
    pub(crate) fn drop_unsubscribed(&mut self, name: &SharedStr, ar: &mut Around<'_, '_>) {
        let target = if self.records.contains(name.as_str()) {
            name.clone()
        } else {
            match self.aliases.get(name.as_str()) {
                Some(real) => real.clone(),
                None => return,
            }
        };
        let Some(rec) = self.records.get(target.as_str()) else {
            return;
        };
        match rec.held(&self.versions).map(|c| c.aliases().to_vec()) {
            Some(aliases) => {
                if !ar.sub.wants(&target, &aliases) {
                    self.remove_cached(&target, RemovalReason::Unsubscribed, ar);
                }
            }
            None => {
                if !ar.sub.names(&target) {
                    self.forget(&target, ar.cx);
                }
            }
        }
    }
}

/// Sets, resets or clears the TTL timer of a held resource.
fn set_ttl(rec: &mut Record, name: &SharedStr, ttl: Option<Duration>, cx: &mut Ctx<'_>) {
    if let Some(at) = rec.take_ttl_at() {
        cx.timers.disarm(at, TimerKind::Ttl, cx.idx, name);
    }
    if let Some(ttl) = ttl {
        let at = cx.now.saturating_add(ttl);
        rec.set_ttl_at(at);
        cx.timers.arm(at, TimerKind::Ttl, cx.idx, name.clone());
    }
}
