//! The state of one type URL, and the apply step shared by SotW and incremental: cache
//! mutations, removals, does-not-exist, TTL, per-resource status, readiness and the reply.
//! Every rule here has this one home; the variant parsers only turn a response into an
//! [`Update`].

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;
use hashbrown::hash_map::EntryRef;
use hashbrown::{HashMap, HashSet};

use super::cache::{CachedResource, Record};
use super::changes::{Change, EventShape, RemovalReason};
use super::config::{ClientConfig, DataErrors, NackPolicy};
use super::defect::ResponseDefect;
use super::event::{queue_change, ClientEvent};
use super::readiness::Readiness;
use super::status::{Rejection, ResourceState, ServerError};
use super::subscription::Subscription;
use super::timers::{TimerKind, Timers};
use super::turn::{Reply, StreamTurn};
use super::update::{is_collection, Incoming, ReportedError, Update};
use super::validation::{nack_status, rejection_message, Judges};
use super::verdicts::Verdicts;
use crate::message::Variant;
use crate::text::SharedStr;
use crate::time::Instant;
use crate::types::{TypeInfo, NOT_FOUND_CODE, PERMISSION_DENIED_CODE, UNAVAILABLE_CODE};

/// What the per-type step needs from the client besides the type: built in one place,
/// `Client::split`.
pub(crate) struct Ctx<'a> {
    pub(crate) idx: usize,
    pub(crate) now: Instant,
    pub(crate) config: &'a ClientConfig,
    pub(crate) judges: &'a mut Judges,
    pub(crate) timers: &'a mut Timers,
    pub(crate) events: &'a mut VecDeque<ClientEvent>,
    /// How many changes the input at hand may make (room for a batch).
    pub(crate) batch_hint: usize,
}

impl Ctx<'_> {
    pub(crate) fn variant(&self) -> Variant {
        self.config.variant
    }

    fn policy(&self) -> NackPolicy {
        self.config.nack_policy
    }

    /// Whether a deletion of a held resource keeps it (gRPC A53 before A88; A88 without
    /// `fail_on_data_errors`, which ignores A53's option).
    fn keeps_deleted(&self) -> bool {
        match self.config.data_errors {
            DataErrors::Legacy => self.config.ignore_resource_deletion,
            DataErrors::KeepCached => true,
            DataErrors::FailOnDataErrors => false,
        }
    }

    /// Queues one cache change in the configured [`EventShape`].
    fn change(
        &mut self,
        type_url: &SharedStr,
        name: SharedStr,
        change: Change,
        owned: impl FnOnce(SharedStr, SharedStr) -> ClientEvent,
    ) {
        let shape = self.config.event_shape;
        queue_change(
            self.events,
            shape,
            self.batch_hint,
            type_url,
            name,
            change,
            owned,
        );
    }
}

#[derive(Clone, Debug)]
pub(crate) struct TypeState {
    pub(crate) url: SharedStr,
    pub(crate) info: TypeInfo,
    pub(crate) sub: Subscription,
    pub(crate) records: HashMap<SharedStr, Record>,
    /// alias -> resource name (incremental).
    pub(crate) aliases: HashMap<SharedStr, SharedStr>,
    /// SotW: last accepted `version_info` (survives reconnects).
    pub(crate) version: SharedStr,
    /// Incremental: last accepted `system_version_info` (status only).
    pub(crate) system_version: SharedStr,
    /// The `control_plane.identifier` of the last response of the type (CSDS: which
    /// management server answered).
    pub(crate) control_plane: Option<SharedStr>,
    // --- this stream ---
    pub(crate) turn: StreamTurn,
    // --- validation ---
    pub(crate) verdicts: Verdicts,
    // --- readiness ---
    readiness: Readiness,
    /// Counts applied responses; records named by the current one carry it.
    pub(crate) generation: u64,
    /// Records holding a resource.
    pub(crate) cached_count: usize,
    /// Records holding a resource named by the response being applied.
    marked: usize,
}

impl TypeState {
    pub(crate) fn new(url: SharedStr) -> TypeState {
        let info = TypeInfo::of(&url);
        // Catalog types get a static URL: cloning it into every event costs nothing.
        let url = match info.known {
            Some((t, v)) => SharedStr::from_static(t.type_url_for(v)),
            None => url,
        };
        TypeState {
            url,
            info,
            sub: Subscription::default(),
            records: HashMap::new(),
            aliases: HashMap::new(),
            version: SharedStr::EMPTY,
            system_version: SharedStr::EMPTY,
            control_plane: None,
            turn: StreamTurn::default(),
            verdicts: Verdicts::default(),
            readiness: Readiness::default(),
            generation: 0,
            cached_count: 0,
            marked: 0,
        }
    }

    /// Whether a resource named `name` (with `aliases`) is wanted.
    pub(crate) fn wants(&self, name: &str, aliases: &[SharedStr]) -> bool {
        self.sub.is_wildcard()
            || self.sub.names(name)
            || aliases.iter().any(|a| self.sub.names(a))
            || self.sub.in_glob(name)
    }

    /// The record of `name`, following an alias.
    pub(crate) fn record(&self, name: &str) -> Option<&Record> {
        self.records.get(name).or_else(|| {
            self.aliases
                .get(name)
                .and_then(|real| self.records.get(real.as_str()))
        })
    }

    /// Forgets the stream (the client keeps cache, versions and subscriptions).
    pub(crate) fn reset_stream(&mut self) {
        self.turn = StreamTurn::default();
        self.verdicts = Verdicts::default();
        self.sub.reset_stream();
        for rec in self.records.values_mut() {
            rec.dne_at = None;
        }
    }

    // ---------------------------------------------------------------- readiness

    pub(crate) fn arm_ready(&mut self, name: &SharedStr) {
        let records = &self.records;
        self.readiness.arm(name, || {
            records
                .get(name)
                .is_none_or(|r| r.cached.is_none() && r.state == ResourceState::Requested)
        });
    }

    pub(crate) fn check_ready(&mut self, events: &mut VecDeque<ClientEvent>) {
        self.readiness.check(&self.url, events);
    }

    /// `name` is no longer wanted: readiness waits no more for it.
    pub(crate) fn stop_awaiting(&mut self, name: &str) {
        self.readiness.unwanted(name);
    }

    // ---------------------------------------------------------------- apply

    /// Applies a checked response with the application's rejections (name, reason), queues
    /// the reply, and emits the events.
    pub(crate) fn apply(
        &mut self,
        update: Update,
        rejections: Vec<(SharedStr, String)>,
        cx: &mut Ctx<'_>,
    ) {
        let Update {
            nonce,
            version,
            resources,
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
        for (name, error) in &rejections {
            let rejected_version = versions
                .get(name.as_str())
                .map_or_else(|| version.clone(), |v| (*v).clone());
            let rec = self
                .records
                .entry(name.clone())
                .or_insert_with(Record::requested);
            rec.state = ResourceState::Nacked;
            rec.seen = generation;
            if rec.cached.is_some() {
                self.marked += 1;
            }
            rec.rejected = Some(alloc::boxed::Box::new(Rejection {
                version: rejected_version,
                error: error.clone(),
            }));
            self.readiness.answered(name.as_str());
        }
        drop(versions);
        // gRPC A88: with `fail_on_data_errors` a NACK is a data error that drops what is
        // held of the rejected resource ("we will delete the existing cached resource").
        let nack_drops: Vec<SharedStr> =
            if nack && cx.config.data_errors == DataErrors::FailOnDataErrors {
                rejections
                    .iter()
                    .filter(|(n, _)| {
                        self.records
                            .get(n.as_str())
                            .is_some_and(|r| r.cached.is_some())
                    })
                    .map(|(n, _)| n.clone())
                    .collect()
            } else {
                Vec::new()
            };
        if !nack || cx.policy() == NackPolicy::KeepValid {
            if self.records.is_empty() {
                self.records.reserve(resources.len());
            }
            match cx.config.event_shape {
                EventShape::PerResource => cx.events.reserve(resources.len().saturating_add(2)),
                EventShape::Batched => {
                    cx.batch_hint = resources.len().saturating_add(removed.len())
                }
            }
            let rejected: HashSet<&SharedStr> = rejections.iter().map(|(n, _)| n).collect();
            for mut inc in resources {
                if rejected.contains(&inc.name) {
                    continue;
                }
                match inc.body.take() {
                    Some(body) => self.upsert(inc, body, &version, cx),
                    None => self.bodyless(&inc, &version, cx),
                }
            }
            for name in &removed {
                self.server_removed(name, cx);
            }
            for error in errors {
                self.server_error(error, cx);
            }
            // Only scan for what the response left out if something was left out. A
            // resource with a remembered server error is kept (xRFC TP3: the client MUST
            // keep using what it holds on a transient error).
            if full_state && self.cached_count > self.marked {
                let mut absent: Vec<SharedStr> = self
                    .records
                    .iter()
                    .filter(|(_, r)| {
                        r.cached.is_some() && r.seen != generation && r.server_error.is_none()
                    })
                    .map(|(n, _)| n.clone())
                    .collect();
                absent.sort_unstable();
                for name in absent {
                    if cx.keeps_deleted() {
                        self.ignore_deletion(&name, cx);
                        continue;
                    }
                    self.remove_cached(&name, RemovalReason::AbsentFromResponse, cx);
                    if self.sub.names(&name) {
                        self.mark_dne(&name, cx);
                    }
                }
            }
        }
        for name in &nack_drops {
            self.remove_cached(name, RemovalReason::ServerRemoved, cx);
        }
        if nack {
            let message = rejection_message(&rejections);
            let status = nack_status(&message);
            cx.events.push_back(ClientEvent::Nacked {
                type_url: self.url.clone(),
                version,
                nonce: nonce.clone(),
                error: status.message.clone(),
                rejected: rejections.into_iter().map(|(n, _)| n).collect(),
                defect: None,
            });
            let reply = Reply {
                nonce,
                version: self.version.clone(),
                error: Some(status),
            };
            self.turn.push_reply(reply, cx.variant());
        } else {
            match cx.variant() {
                Variant::Sotw => self.version = version.clone(),
                Variant::Delta => self.system_version = version.clone(),
            }
            cx.events.push_back(ClientEvent::Acked {
                type_url: self.url.clone(),
                version,
                nonce: nonce.clone(),
            });
            let reply = Reply {
                nonce,
                version: self.version.clone(),
                error: None,
            };
            self.turn.push_reply(reply, cx.variant());
        }
        self.readiness.response_answered();
        self.check_ready(cx.events);
    }

    /// A response rejected whole for a protocol reason: NACK, no state change.
    pub(crate) fn reject(
        &mut self,
        nonce: SharedStr,
        version: SharedStr,
        defect: ResponseDefect,
        cx: &mut Ctx<'_>,
    ) {
        let status = nack_status(&alloc::format!("{defect}"));
        cx.events.push_back(ClientEvent::Nacked {
            type_url: self.url.clone(),
            version,
            nonce: nonce.clone(),
            error: status.message.clone(),
            rejected: Vec::new(),
            defect: Some(defect),
        });
        let reply = Reply {
            nonce,
            version: self.version.clone(),
            error: Some(status),
        };
        self.turn.push_reply(reply, cx.variant());
        self.readiness.response_answered();
        self.check_ready(cx.events);
    }

    fn upsert(
        &mut self,
        inc: Incoming,
        mut body: Bytes,
        response_version: &SharedStr,
        cx: &mut Ctx<'_>,
    ) {
        let Incoming {
            name,
            version,
            mut aliases,
            ttl,
            ..
        } = inc;
        // A name subscribed through an alias resolves to this resource.
        for alias in &aliases {
            if alias != &name && self.records.get(alias).is_some_and(|r| r.cached.is_none()) {
                if let Some(rec) = self.records.remove(alias) {
                    if let Some(at) = rec.dne_at {
                        cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, alias);
                    }
                }
                self.readiness.answered(alias.as_str());
            }
        }
        let mut entry = match self.records.entry_ref(&name) {
            EntryRef::Occupied(entry) => entry,
            EntryRef::Vacant(entry) => entry.insert_entry(Record::requested()),
        };
        let rec = entry.get_mut();
        rec.seen = self.generation;
        self.marked += 1;
        if let Some(at) = rec.dne_at.take() {
            cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, &name);
        }
        let v = version.as_ref().unwrap_or(response_version);
        let replaced = rec.cached.is_some();
        let changed = match rec.cached.as_mut() {
            // Same content: keep the held buffers, note the version and TTL.
            Some(c) if c.body == body && c.aliases == aliases => {
                if c.version != *v {
                    c.version = v.clone();
                }
                c.ttl = ttl;
                false
            }
            _ => {
                match rec.cached.take() {
                    Some(old) => {
                        for a in &old.aliases {
                            self.aliases.remove(a.as_str());
                        }
                    }
                    None => self.cached_count += 1,
                }
                for a in &aliases {
                    self.aliases.insert(a.clone(), name.clone());
                }
                // The cache owns the buffers; an owned event takes its own handles.
                let owned_event = cx.config.event_shape == EventShape::PerResource;
                rec.cached = Some(CachedResource {
                    version: v.clone(),
                    body: if owned_event {
                        body.clone()
                    } else {
                        core::mem::take(&mut body)
                    },
                    aliases: if owned_event {
                        aliases.clone()
                    } else {
                        core::mem::take(&mut aliases)
                    },
                    ttl,
                });
                true
            }
        };
        rec.state = ResourceState::Acked;
        rec.rejected = None;
        rec.server_error = None;
        rec.deletion_ignored = false;
        if ttl.is_some() || rec.ttl_at.is_some() {
            set_ttl(rec, &name, ttl, cx);
        }
        self.readiness.answered(name.as_str());
        if changed && replaced && cx.variant() == Variant::Sotw {
            // A SotW key is a zero-copy slice of the body it was read with: keyed by the
            // old one, the record would keep the old response's whole buffer alive for a
            // name. Re-keyed in place with the new body's slice (an equal key, so no
            // rehash), it holds only what the body holds. (Incremental names have buffers
            // of their own.)
            entry.replace_key(name.clone());
        }
        if changed {
            cx.change(&self.url, name, Change::Upserted, |type_url, name| {
                ClientEvent::Upserted {
                    type_url,
                    name,
                    version: version.unwrap_or_else(|| response_version.clone()),
                    body,
                    aliases,
                }
            });
        }
    }

    /// A resource without a body: a heartbeat when held at that version (refreshes the
    /// TTL); otherwise, incremental only, "this resource does not exist".
    fn bodyless(&mut self, inc: &Incoming, response_version: &SharedStr, cx: &mut Ctx<'_>) {
        let v = inc.version.as_ref().unwrap_or(response_version);
        if let Some(rec) = self.records.get_mut(inc.name.as_str()) {
            rec.seen = self.generation;
            if rec.cached.is_some() {
                self.marked += 1;
            }
            if rec.cached.as_ref().is_some_and(|c| c.version == *v) {
                if let Some(c) = rec.cached.as_mut() {
                    c.ttl = inc.ttl;
                }
                set_ttl(rec, &inc.name, inc.ttl, cx);
                return;
            }
        }
        if cx.variant() == Variant::Delta {
            self.server_removed(&inc.name, cx);
            for alias in &inc.aliases {
                if self.sub.names(alias)
                    && self.records.get(alias).is_none_or(|r| r.cached.is_none())
                {
                    self.mark_dne(alias, cx);
                }
            }
        }
    }

    /// Incremental removal of `name`: drop it if held; a name still subscribed does not exist.
    pub(crate) fn server_removed(&mut self, name: &SharedStr, cx: &mut Ctx<'_>) {
        if is_collection(name) {
            // A glob without members (xDS TP1): the collection is empty, which removes
            // none of its members and is no resource's absence.
            return;
        }
        let held = self
            .records
            .get(name.as_str())
            .and_then(|r| r.cached.as_ref());
        if held.is_some() && cx.keeps_deleted() {
            self.ignore_deletion(name, cx);
            return;
        }
        let aliases: Vec<SharedStr> = held.map(|c| c.aliases.clone()).unwrap_or_default();
        self.remove_cached(name, RemovalReason::ServerRemoved, cx);
        if self.sub.names(name) {
            self.mark_dne(name, cx);
        }
        for alias in aliases {
            if self.sub.names(&alias) {
                self.mark_dne(&alias, cx);
            }
        }
    }

    /// gRPC A53: the server deleted held resource `name`; keep it, and say so once. Under
    /// A88 the status says `DoesNotExist` while the body stays held ("setting the cache
    /// entry state to NOT_FOUND without actually deleting the cached resource").
    fn ignore_deletion(&mut self, name: &SharedStr, cx: &mut Ctx<'_>) {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return;
        };
        if cx.config.data_errors != DataErrors::Legacy {
            rec.state = ResourceState::DoesNotExist;
            rec.server_error = None;
        }
        if rec.deletion_ignored {
            return;
        }
        rec.deletion_ignored = true;
        cx.events.push_back(ClientEvent::DeletionIgnored {
            type_url: self.url.clone(),
            name: name.clone(),
        });
    }

    /// Drops a held resource and says so; keeps the record only while the name is
    /// subscribed by name. Returns whether something was held.
    pub(crate) fn remove_cached(
        &mut self,
        name: &SharedStr,
        reason: RemovalReason,
        cx: &mut Ctx<'_>,
    ) -> bool {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return false;
        };
        let Some(old) = rec.cached.take() else {
            return false;
        };
        self.cached_count = self.cached_count.saturating_sub(1);
        for a in &old.aliases {
            self.aliases.remove(a.as_str());
        }
        if let Some(at) = rec.ttl_at.take() {
            cx.timers.disarm(at, TimerKind::Ttl, cx.idx, name);
        }
        if reason == RemovalReason::Expired {
            rec.state = ResourceState::Expired;
        }
        if !self.sub.names(name) {
            if let Some(rec) = self.records.remove(name.as_str()) {
                if let Some(at) = rec.dne_at {
                    cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, name);
                }
            }
        }
        cx.change(
            &self.url,
            name.clone(),
            Change::Removed(reason),
            |type_url, name| ClientEvent::Removed {
                type_url,
                name,
                reason,
            },
        );
        true
    }

    /// A `resource_errors` entry (xRFC TP3; gRPC A88, "Support for Errors Provided by the
    /// xDS server"). Before A88 a NOT_FOUND for a concrete name is a deletion. Otherwise
    /// the name's timer stops, the error is remembered in its status (`ReceivedError`)
    /// until the resource arrives or another error replaces it, and the application hears
    /// of it; a held body stays held, except for NOT_FOUND and PERMISSION_DENIED under
    /// [`DataErrors::FailOnDataErrors`]. An error for the subscription as a whole (`""`,
    /// `*`, a glob) is only reported.
    fn server_error(&mut self, error: ReportedError, cx: &mut Ctx<'_>) {
        let ReportedError {
            name,
            code,
            message,
        } = error;
        let data_error = code == NOT_FOUND_CODE || code == PERMISSION_DENIED_CODE;
        match cx.config.data_errors {
            DataErrors::Legacy if code == NOT_FOUND_CODE && !is_collection(&name) => {
                self.server_removed(&name, cx);
                return;
            }
            DataErrors::FailOnDataErrors if data_error && !is_collection(&name) => {
                self.remove_cached(&name, RemovalReason::ServerRemoved, cx);
            }
            _ => {}
        }
        if !is_collection(&name) {
            if !self.wants(&name, &[]) && !self.records.contains_key(name.as_str()) {
                return;
            }
            let rec = self
                .records
                .entry(name.clone())
                .or_insert_with(Record::requested);
            if let Some(at) = rec.dne_at.take() {
                cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, &name);
            }
            rec.state = ResourceState::ReceivedError;
            rec.seen = self.generation;
            rec.server_error = Some(alloc::boxed::Box::new(ServerError {
                code,
                message: message.clone(),
            }));
            self.readiness.answered(name.as_str());
        }
        cx.events.push_back(ClientEvent::ResourceError {
            type_url: self.url.clone(),
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
    fn mark_timed_out(&mut self, name: &SharedStr, cx: &mut Ctx<'_>) {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return;
        };
        let message = String::from("timed out waiting for the resource from the xDS server");
        rec.state = ResourceState::TimedOut;
        rec.server_error = Some(alloc::boxed::Box::new(ServerError {
            code: UNAVAILABLE_CODE,
            message: message.clone(),
        }));
        self.readiness.answered(name.as_str());
        cx.events.push_back(ClientEvent::ResourceError {
            type_url: self.url.clone(),
            name: name.clone(),
            code: UNAVAILABLE_CODE,
            message,
        });
    }

    /// A subscribed name is known not to exist.
    pub(crate) fn mark_dne(&mut self, name: &SharedStr, cx: &mut Ctx<'_>) {
        let rec = self
            .records
            .entry(name.clone())
            .or_insert_with(Record::requested);
        rec.server_error = None;
        if let Some(at) = rec.dne_at.take() {
            cx.timers.disarm(at, TimerKind::DoesNotExist, cx.idx, name);
        }
        if rec.state != ResourceState::DoesNotExist {
            rec.state = ResourceState::DoesNotExist;
            cx.change(
                &self.url,
                name.clone(),
                Change::DoesNotExist,
                |type_url, name| ClientEvent::DoesNotExist { type_url, name },
            );
        }
        self.readiness.answered(name.as_str());
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
                if rec.cached.is_none()
                    && rec.state == ResourceState::Requested
                    && rec.dne_at.is_none()
                {
                    rec.dne_at = Some(at);
                    cx.timers
                        .arm(at, TimerKind::DoesNotExist, cx.idx, name.clone());
                }
            }
        }
    }

    /// A timer of this type fired.
    pub(crate) fn fire(
        &mut self,
        at: Instant,
        kind: TimerKind,
        name: &SharedStr,
        cx: &mut Ctx<'_>,
    ) {
        let Some(rec) = self.records.get_mut(name.as_str()) else {
            return;
        };
        match kind {
            TimerKind::DoesNotExist => {
                if rec.dne_at != Some(at) {
                    return;
                }
                rec.dne_at = None;
                if rec.cached.is_none() && rec.state == ResourceState::Requested {
                    if cx.config.resource_timer_is_transient_error {
                        self.mark_timed_out(name, cx);
                    } else {
                        self.mark_dne(name, cx);
                    }
                }
            }
            TimerKind::Ttl => {
                if rec.ttl_at != Some(at) {
                    return;
                }
                rec.ttl_at = None;
                self.remove_cached(name, RemovalReason::Expired, cx);
                match cx.variant() {
                    // By default nothing is sent: the version stays the last accepted one.
                    Variant::Sotw if cx.config.sotw_refetch_on_ttl_expiry => {
                        self.version = SharedStr::EMPTY;
                        self.turn.resend_if_sent();
                    }
                    Variant::Sotw => {}
                    Variant::Delta => {
                        if self.turn.sent_first() {
                            self.sub.resubscribe(name);
                        }
                    }
                }
            }
        }
        self.check_ready(cx.events);
    }
}

/// Sets, resets or clears the TTL timer of a held resource.
fn set_ttl(rec: &mut Record, name: &SharedStr, ttl: Option<Duration>, cx: &mut Ctx<'_>) {
    if let Some(at) = rec.ttl_at.take() {
        cx.timers.disarm(at, TimerKind::Ttl, cx.idx, name);
    }
    if let Some(ttl) = ttl {
        let at = cx.now.saturating_add(ttl);
        rec.ttl_at = Some(at);
        cx.timers.arm(at, TimerKind::Ttl, cx.idx, name.clone());
    }
}
