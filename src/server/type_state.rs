//! One type URL on one stream: its nonce bookkeeping, heartbeat timers and SotW or delta
//! state. Every `match` between the two variants of the server lives here, one per method,
//! so the stream only routes and orders.

use alloc::string::String;
use alloc::vec::Vec;

use super::applied::{Applied, AppliedState};
use super::config::ServerConfig;
use super::delta::DeltaState;
use super::flow::{Flow, Kind, SendCtx, Timers};
use super::names::NameSource;
use super::publication::StoreChange;
use super::resource_errors::TYPE_WIDE;
use super::sotw::{Diff, SotwState};
use super::store::ResourceStore;
use super::wire::{DeltaSink, ResourceSink};
use crate::message::{Request, Variant};
use crate::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse};
use crate::text::SharedStr;
use crate::time::Instant;

#[derive(Clone, Debug)]
enum State {
    Sotw(SotwState),
    Delta(DeltaState),
}

/// The state of one type URL on one stream.
#[derive(Clone, Debug)]
pub(crate) struct TypeState {
    pub(crate) type_url: SharedStr,
    pub(crate) flow: Flow,
    state: State,
    pub(crate) timers: Timers,
    /// The store had not published the type at the last build: nothing is built until it
    /// is (a server that has not loaded its configuration says nothing rather than "none").
    unpublished: bool,
    /// [`ServerEvent::Held`](super::ServerEvent::Held) was reported for this hold.
    hold_reported: bool,
    /// [`ServerConfig::await_ack`].
    await_ack: bool,
    /// What the client did with this type's responses.
    applied: Applied,
}

impl TypeState {
    pub(crate) fn new(type_url: &str, config: &ServerConfig) -> TypeState {
        let state = match config.variant {
            Variant::Sotw => State::Sotw(SotwState::new(
                type_url,
                config.sticky_legacy_wildcard,
                config.sotw_not_found_errors,
            )),
            Variant::Delta => State::Delta(DeltaState::new(type_url, config.delta_in_step)),
        };
        TypeState {
            type_url: SharedStr::from(type_url),
            flow: Flow::default(),
            state,
            timers: Timers::default(),
            unpublished: false,
            hold_reported: false,
            await_ack: config.await_ack,
            applied: Applied::default(),
        }
    }

    /// Whether the client subscribes to every resource of the type.
    pub(crate) fn is_wildcard(&self) -> bool {
        match &self.state {
            State::Sotw(s) => s.is_wildcard(),
            State::Delta(d) => d.is_wildcard(),
        }
    }

    /// The names explicitly subscribed, sorted.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        let names = match &self.state {
            State::Sotw(s) => s.names(),
            State::Delta(d) => d.names(),
        };
        names.iter().map(|n| &**n)
    }

    /// Applies the subscription part of a request (whatever its kind: a stale request's
    /// interest counts too). Returns the diff and whether `initial_resource_versions` came
    /// too late to count.
    /// A new name is shared from `source` where it keeps one.
    pub(crate) fn apply(
        &mut self,
        request: Request,
        kind: &Kind,
        source: &dyn NameSource,
    ) -> (Diff, bool) {
        let first = *kind == Kind::First;
        match (&mut self.state, request) {
            (State::Sotw(s), Request::Sotw(r)) => {
                let stale = matches!(kind, Kind::Stale { .. });
                (s.apply(r, first, stale, source), false)
            }
            (State::Delta(d), Request::Delta(r)) => d.apply(&r, first, source),
            _ => (Diff::default(), false),
        }
    }

    /// Whether the type's next response waits for the client's answer to its latest one
    /// ([`ServerConfig::await_ack`]).
    pub(crate) fn held_for_answer(&self) -> bool {
        self.await_ack && self.flow.awaiting_answer()
    }

    /// Whether the next build has something to consider.
    pub(crate) fn has_work(&self) -> bool {
        if self.unpublished || self.held_for_answer() {
            return false;
        }
        match &self.state {
            State::Sotw(s) => s.has_work(),
            State::Delta(d) => d.has_work(),
        }
    }

    /// Whether everything due was sent and the latest response ACKed.
    pub(crate) fn is_settled(&self) -> bool {
        !self.has_work() && self.flow.acked()
    }

    /// Whether the next build compares everything anyway (the change log adds nothing).
    pub(crate) fn resyncing(&self) -> bool {
        match &self.state {
            State::Sotw(s) => s.resyncing(),
            State::Delta(d) => d.resyncing(),
        }
    }

    /// The change log could not say what changed: compare everything at the next build.
    pub(crate) fn resync(&mut self) {
        match &mut self.state {
            State::Sotw(s) => s.resync(),
            State::Delta(d) => d.changes().resync = true,
        }
    }

    /// A store change of resource `name` of this type; an empty name is the type's
    /// publication, [`TYPE_WIDE`] a change of the type's error (it may concern every name
    /// subscribed: compare everything).
    pub(crate) fn mark_dirty(&mut self, change: &StoreChange<'_>) {
        let name = change.name;
        if name.is_empty() {
            self.unpublished = false;
            self.hold_reported = false;
            return;
        }
        if name == TYPE_WIDE {
            self.resync();
            return;
        }
        match &mut self.state {
            State::Sotw(s) => s.mark_dirty(name),
            State::Delta(d) => d.mark_dirty(change),
        }
    }

    /// The change log no longer reaches back to the last change this type noted: compare
    /// everything at the next build. Whether the type recovered (an incremental type in
    /// step with the store may have lost which resources were removed meanwhile).
    pub(crate) fn lost_log(&mut self, store: &ResourceStore) -> bool {
        self.resync();
        match &mut self.state {
            State::Sotw(_) => true,
            State::Delta(d) => d.recover(store),
        }
    }

    /// Whether more changes of resources would note nothing new: a full-state SotW type
    /// that already knows more changed than it lists (a publication still counts).
    pub(crate) fn saturated(&self) -> bool {
        match &self.state {
            State::Sotw(s) => s.saturated(),
            State::Delta(_) => false,
        }
    }

    /// Fires the heartbeats due at `now`.
    pub(crate) fn fire_timers(&mut self, now: Instant) {
        for name in self.timers.pop_due(now) {
            match &mut self.state {
                State::Sotw(s) => s.heartbeat_due(name),
                State::Delta(d) => d.heartbeat_due(name),
            }
        }
    }

    /// Whether a hold is to be reported now: the last build found the type unpublished
    /// while the client subscribes to some of it, and it was not reported yet.
    pub(crate) fn newly_held(&mut self) -> bool {
        if !self.unpublished || self.hold_reported {
            return false;
        }
        let subscribed = self.is_wildcard() || self.names().next().is_some();
        self.hold_reported = subscribed;
        subscribed
    }

    /// Whether the store publishes the type; remembers the answer for `has_work`.
    fn published(&mut self, store: &ResourceStore) -> bool {
        self.unpublished = !store.is_served(&self.type_url);
        !self.unpublished
    }

    /// SotW: the next response of this type, without its nonce, its resources written to
    /// `sink`.
    pub(crate) fn build_sotw<S: ResourceSink>(
        &mut self,
        store: &ResourceStore,
        ctx: SendCtx,
        sink: &mut S,
    ) -> Option<DiscoveryResponse> {
        if !self.published(store) || self.held_for_answer() {
            return None;
        }
        match &mut self.state {
            State::Sotw(s) => s.build(store, ctx, &mut self.timers, sink),
            State::Delta(_) => None,
        }
    }

    /// Delta: turns what changed into planned upserts and removals.
    pub(crate) fn plan(&mut self, store: &ResourceStore) {
        if !self.published(store) {
            return;
        }
        if let State::Delta(d) = &mut self.state {
            d.plan(store);
        }
    }

    /// Delta: whether upserts (or not-found reports, or a due answer) are planned.
    pub(crate) fn has_upserts(&self) -> bool {
        matches!(&self.state, State::Delta(d) if !self.unpublished && d.has_upserts())
    }

    /// Delta: whether removals are planned.
    pub(crate) fn has_removals(&self) -> bool {
        matches!(&self.state, State::Delta(d) if !self.unpublished && d.has_removals())
    }

    /// Delta: emits what is planned, without its nonce.
    pub(crate) fn emit(
        &mut self,
        store: &ResourceStore,
        ctx: SendCtx,
        with_upserts: bool,
        with_removals: bool,
        sink: &mut impl DeltaSink,
    ) -> Option<DeltaDiscoveryResponse> {
        match &mut self.state {
            State::Delta(d) => d.emit(
                store,
                ctx,
                &mut self.timers,
                with_upserts,
                with_removals,
                sink,
            ),
            State::Sotw(_) => None,
        }
    }

    /// Records the nonce and version of a response just sent for this type.
    pub(crate) fn sent(&mut self, nonce: String, version: String, now: Instant) {
        self.applied.sent(now);
        self.flow.sent(nonce, version);
    }

    /// The client answered a response of this type (`kind` as classified).
    pub(crate) fn answered(&mut self, kind: &Kind, now: Instant) {
        self.applied.answered(kind, now);
    }

    /// What the client did with this type's responses.
    pub(crate) fn applied(&self) -> AppliedState {
        self.applied.state(&self.type_url, self.flow.in_flight())
    }

    /// The `(type, name)` pairs subscribed, `*` for wildcard.
    pub(crate) fn subscriptions(&self) -> Vec<(String, String)> {
        let wildcard = self.is_wildcard().then_some("*");
        wildcard
            .into_iter()
            .chain(self.names())
            .map(|name| (String::from(self.type_url.as_str()), String::from(name)))
            .collect()
    }
}
