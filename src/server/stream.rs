//! One gRPC stream of a management server: checks the stream-level rules (variant, node,
//! type URL), classifies each request per type, routes it to the type's SotW or delta
//! state, and orders responses across types on ADS.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::applied::AppliedState;
use super::config::ServerConfig;
use super::event::{Ignored, Limit, ProtocolError, ServerEvent};
use super::flow::{Kind, SendCtx};
use super::names::{NameSource, NoNames};
use super::publication::{Revision, StoreChange};
use super::sotw::Diff;
use super::store::ResourceStore;
use super::subscribers::SubscriptionIndex;
use super::type_state::TypeState;
use super::wire::{DeltaSink, EncodedResponse, Listed, ResourceSink, WireSink};
use crate::message::{Request, Response, Transport, Variant};
use crate::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse};
use crate::pb::envoy::config::core::v3::Node;
use crate::text::SharedStr;
use crate::time::Instant;
use crate::types::ads_order;

/// The protocol state of one server-side stream. See the [module docs](super) for the call
/// order.
///
/// # Method kinds
///
/// - **inputs** ([`ServerStream::handle_request`], [`ServerStream::handle_timeout`]) take
///   `now` and never fail: whatever the client sent becomes state and events; a protocol
///   violation closes the stream ([`ServerStream::is_closed`]);
/// - **outputs**: after every input and every store change, drain
///   [`ServerStream::poll_event`], then [`ServerStream::poll_response`] (or its encoded
///   twin), then read [`ServerStream::poll_timeout`];
/// - **reads** (`&self`): the node, the types, the subscriptions.
///
/// The store is the application's command side ([`ResourceStore`]).
#[derive(Clone, Debug)]
pub struct ServerStream {
    config: ServerConfig,
    node: Option<Node>,
    /// Sorted in ADS (make-before-break) order.
    types: Vec<TypeState>,
    events: VecDeque<ServerEvent>,
    /// The protocol error that closed the stream.
    closed: Option<ProtocolError>,
    next_nonce: u64,
    /// The store revision this stream has accounted for.
    seen: Revision,
    /// Driven by a `StreamSet`: the set marks changes, the stream does not read the log.
    indexed: bool,
    /// The latest `now` given (time never goes backwards here).
    last_now: Instant,
}

impl ServerStream {
    /// A stream that has received nothing yet.
    pub fn new(config: ServerConfig) -> ServerStream {
        ServerStream {
            config,
            node: None,
            types: Vec::new(),
            events: VecDeque::new(),
            closed: None,
            next_nonce: 0,
            seen: Revision(0),
            indexed: false,
            last_now: Instant::ZERO,
        }
    }

    /// The stream's configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The node of the stream, once identified.
    pub fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// Whether a protocol error closed the stream: the application ends the gRPC call.
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// Why the stream closed: the protocol error (also reported once as
    /// [`ServerEvent::ProtocolError`]), for the status the gRPC call ends with.
    pub fn closed_by(&self) -> Option<&ProtocolError> {
        self.closed.as_ref()
    }

    /// The type URLs the client has requested on this stream, in ADS order.
    pub fn type_urls(&self) -> impl Iterator<Item = &str> {
        self.types.iter().map(|t| t.type_url.as_str())
    }

    /// Whether the client subscribes to every resource of `type_url`.
    pub fn is_wildcard(&self, type_url: &str) -> bool {
        self.entry(type_url).is_some_and(TypeState::is_wildcard)
    }

    /// The names explicitly subscribed for `type_url`, sorted.
    pub fn subscribed_names(&self, type_url: &str) -> Vec<&str> {
        self.entry(type_url)
            .map_or_else(Vec::new, |e| e.names().collect())
    }

    fn entry(&self, type_url: &str) -> Option<&TypeState> {
        self.types.iter().find(|t| t.type_url == type_url)
    }

    fn close(&mut self, error: ProtocolError) {
        self.closed = Some(error.clone());
        self.events.push_back(ServerEvent::ProtocolError(error));
    }

    /// Takes one request from the client. Never fails: whatever the client sent becomes
    /// state and events; a protocol violation closes the stream.
    pub fn handle_request(&mut self, now: Instant, request: Request) {
        self.handle_request_from(now, request, &NoNames);
    }

    /// [`ServerStream::handle_request`] for a stream whose subscriptions `index` follows
    /// (a [`super::StreamSet`]'s, or an embedding's own for its streams): a name it newly
    /// subscribes to is kept as the index's copy where the index has one, so a name that
    /// many streams subscribe to is kept once, not once per stream. The same state and
    /// events as `handle_request`.
    pub fn handle_request_sharing<K>(
        &mut self,
        now: Instant,
        request: Request,
        index: &SubscriptionIndex<K>,
    ) {
        self.handle_request_from(now, request, index);
    }

    /// [`ServerStream::handle_request`], new names shared from `names`.
    fn handle_request_from(&mut self, now: Instant, request: Request, names: &dyn NameSource) {
        self.last_now = self.last_now.max(now);
        if self.closed.is_some() {
            return;
        }
        if request.variant() != self.config.variant {
            self.close(ProtocolError::WrongVariant {
                expected: self.config.variant,
            });
            return;
        }
        let node = match &request {
            Request::Sotw(r) => r.node.as_ref(),
            Request::Delta(r) => r.node.as_ref(),
        };
        match (&self.node, node) {
            (None, None) if self.config.require_node => {
                self.close(ProtocolError::NodeMissing);
                return;
            }
            (None, Some(node)) => {
                self.node = Some(node.clone());
                self.events
                    .push_back(ServerEvent::NodeIdentified(Box::new(node.clone())));
            }
            (Some(first), Some(node)) if first != node => {
                self.close(ProtocolError::NodeChanged);
                return;
            }
            _ => {}
        }
        let type_url = match &self.config.transport {
            Transport::Aggregated if request.type_url().is_empty() => {
                self.close(ProtocolError::TypeUrlMissing);
                return;
            }
            Transport::Aggregated => String::from(request.type_url()),
            Transport::PerType(url) => {
                if !request.type_url().is_empty() && request.type_url() != url {
                    let got = String::from(request.type_url());
                    self.close(ProtocolError::WrongTypeUrl {
                        expected: url.clone(),
                        got,
                    });
                    return;
                }
                url.clone()
            }
        };
        let limits = self.config.limits;
        let new_type = !self.types.iter().any(|t| t.type_url == type_url);
        let exceeded = limits.exceeded(&request).or_else(|| {
            (new_type && self.types.len() >= limits.max_types).then_some(Limit::TypesPerStream)
        });
        if let Some(what) = exceeded {
            self.close(ProtocolError::LimitExceeded(what));
            return;
        }
        let variant = self.config.variant;
        let (index, first) = self.entry_index(&type_url);
        let Some(entry) = self.types.get_mut(index) else {
            return;
        };
        let (nonce, error) = match &request {
            Request::Sotw(r) => (r.response_nonce.as_str(), r.error_detail.as_ref()),
            Request::Delta(r) => (r.response_nonce.as_str(), r.error_detail.as_ref()),
        };
        let kind = if first {
            Kind::First
        } else {
            entry.flow.classify(variant, nonce, error)
        };
        entry.answered(&kind, now);
        let (diff, late_initial) = entry.apply(request, &kind, names);
        let entry_url = entry.type_url.clone();
        match kind {
            Kind::First | Kind::Update => {}
            Kind::Ack { nonce, version } => self.events.push_back(ServerEvent::Acked {
                type_url: entry_url.clone(),
                nonce,
                version,
            }),
            Kind::Nack {
                nonce,
                version,
                error,
            } => self.events.push_back(ServerEvent::Nacked {
                type_url: entry_url.clone(),
                nonce,
                version,
                error,
            }),
            Kind::Stale { nonce } => self.events.push_back(ServerEvent::StaleRequest {
                type_url: entry_url.clone(),
                nonce,
            }),
            Kind::ErrorWithoutResponse => self.events.push_back(ServerEvent::Ignored {
                type_url: entry_url.clone(),
                what: Ignored::ErrorWithoutResponse,
            }),
        }
        if late_initial {
            self.events.push_back(ServerEvent::Ignored {
                type_url: entry_url.clone(),
                what: Ignored::LateInitialResourceVersions,
            });
        }
        self.subscription_changed(&entry_url, diff);
    }

    /// The one place subscription changes become events: the one channel every index of
    /// subscriptions follows ([`super::SubscriptionIndex::follow`]).
    fn subscription_changed(&mut self, type_url: &SharedStr, diff: Diff) {
        if !diff.added.is_empty() {
            self.events.push_back(ServerEvent::Subscribed {
                type_url: type_url.clone(),
                names: diff.added,
            });
        }
        if !diff.removed.is_empty() {
            self.events.push_back(ServerEvent::Unsubscribed {
                type_url: type_url.clone(),
                names: diff.removed,
            });
        }
    }

    /// The index of the entry for `type_url`, created (in ADS order) if new.
    fn entry_index(&mut self, type_url: &str) -> (usize, bool) {
        if let Some(i) = self.types.iter().position(|t| t.type_url == type_url) {
            return (i, false);
        }
        let at = self
            .types
            .iter()
            .position(|t| ads_order(type_url, &t.type_url).is_lt())
            .unwrap_or(self.types.len());
        // Exactly one more: a `TypeState` is ~430 bytes and most streams carry one to six
        // types, so the vector's usual doubling (room for four at the first) would make an
        // idle one-type stream hold three unused.
        self.types.reserve_exact(1);
        self.types
            .insert(at, TypeState::new(type_url, &self.config));
        (at, true)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        let event = self.events.pop_front();
        if event.is_none() {
            crate::queue::shrink_after_burst(&mut self.events, crate::queue::KEEP_IDLE);
        }
        event
    }

    /// Reads the store's change log since the last call and marks what concerns this
    /// stream; a log that no longer reaches back makes every type resync.
    fn catch_up(&mut self, store: &ResourceStore) {
        if self.seen == store.revision() {
            return;
        }
        if self.types.iter().all(TypeState::resyncing) {
            // Every type compares everything at the next build: the log has nothing to add.
            self.seen = store.revision();
            return;
        }
        match store.changes_since(self.seen) {
            Ok(changes) => {
                for change in changes {
                    if let Some(entry) = self
                        .types
                        .iter_mut()
                        .find(|t| t.type_url == change.type_url)
                    {
                        entry.mark_dirty(&change);
                    }
                }
            }
            Err(_) => self.resync_all(store),
        }
        self.seen = store.revision();
    }

    /// The change log no longer reaches back to the stream's last catch-up: every type
    /// compares everything at its next build; a type that cannot recover so ends the
    /// stream ([`ProtocolError::ChangeLogOutrun`]).
    pub(crate) fn resync_all(&mut self, store: &ResourceStore) {
        let mut lost = None;
        for entry in &mut self.types {
            if !entry.lost_log(store) && lost.is_none() {
                lost = Some(String::from(entry.type_url.as_str()));
            }
        }
        if let (Some(type_url), None) = (lost, &self.closed) {
            self.close(ProtocolError::ChangeLogOutrun { type_url });
        }
    }

    /// Marks a store change for this stream (the `StreamSet` index calls it).
    pub(crate) fn mark_dirty(&mut self, change: &StoreChange<'_>) {
        if let Some(entry) = self
            .types
            .iter_mut()
            .find(|t| t.type_url == change.type_url)
        {
            entry.mark_dirty(change);
        }
    }

    /// [`ServerStream::mark_dirty`] for several changes of one type, stopping once the type
    /// notes no more (a full-state type that knows a build is due).
    pub(crate) fn mark_dirty_all(&mut self, type_url: &str, changes: &[StoreChange<'_>]) {
        if let Some(entry) = self.types.iter_mut().find(|t| t.type_url == type_url) {
            for change in changes {
                // A publication (no name) is always noted: it ends an unpublished wait.
                if !change.name.is_empty() && entry.saturated() {
                    continue;
                }
                entry.mark_dirty(change);
            }
        }
    }

    pub(crate) fn set_indexed(&mut self) {
        self.indexed = true;
    }

    /// How many events are queued (for [`ServerStream::events_from`]).
    pub(crate) fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// The queued events from position `from` on (those an input added, when `from` is
    /// [`ServerStream::queued_events`] before it), without taking them.
    pub(crate) fn events_from(&self, from: usize) -> impl Iterator<Item = &ServerEvent> {
        self.events.iter().skip(from)
    }

    /// What the client did with the responses of each type, in ADS order: the version it
    /// last ACKed, the one it NACKed since (with its error), the response not answered yet,
    /// and when (a per-node status for the management server's operators).
    pub fn applied(&self) -> Vec<AppliedState> {
        self.types.iter().map(TypeState::applied).collect()
    }

    /// Every current subscription as `(type_url, name)`, `*` for the wildcard: what an
    /// index of subscriptions drops when the stream ends
    /// ([`super::SubscriptionIndex::remove`]).
    pub fn subscriptions(&self) -> Vec<(String, String)> {
        self.types
            .iter()
            .flat_map(TypeState::subscriptions)
            .collect()
    }

    /// What must be sent now, or `None`. Call it after every `handle_request`, every store
    /// change and every `handle_timeout`, until it returns `None`. Responses come in ADS
    /// order; resources in each are sorted by name; nonces are `1`, `2`, ... per stream.
    /// A stream reads one store for its whole life (it follows that store's change log);
    /// pick the store when the node is identified, before the first call.
    pub fn poll_response(&mut self, now: Instant, store: &ResourceStore) -> Option<Response> {
        self.ready_to_build(now, store)?;
        self.build(now, store)
    }

    /// [`ServerStream::poll_response`], encoded: the same response (same nonce, same
    /// state change), as the bytes `poll_response`'s message would encode to. A SotW
    /// response is assembled from the frames the store encoded when each resource was set,
    /// so this costs less than building the message and then encoding it (see
    /// `benches/README.md`). Use one or the other for a given response, in any mix.
    pub fn poll_response_encoded(
        &mut self,
        now: Instant,
        store: &ResourceStore,
    ) -> Option<EncodedResponse> {
        self.ready_to_build(now, store)?;
        self.build_encoded(now, store)
    }

    /// The common start of every poll: `None` when the stream is closed.
    /// A stream in a `StreamSet` is marked by the set's index; one on its own reads the
    /// store's change log.
    fn ready_to_build(&mut self, now: Instant, store: &ResourceStore) -> Option<()> {
        self.last_now = self.last_now.max(now);
        if self.closed.is_some() {
            return None;
        }
        if !self.indexed {
            self.catch_up(store);
        }
        // Catching up may end the stream (`ChangeLogOutrun`).
        self.closed.is_none().then_some(())
    }

    fn next_nonce(&mut self) -> String {
        self.next_nonce = self.next_nonce.wrapping_add(1);
        format!("{}", self.next_nonce)
    }

    fn build(&mut self, now: Instant, store: &ResourceStore) -> Option<Response> {
        let built = match self.config.variant {
            Variant::Sotw => {
                let mut resources = Vec::new();
                self.build_sotw(now, store, &mut resources)
                    .map(|mut response| {
                        response.resources = resources;
                        Response::Sotw(response)
                    })
            }
            Variant::Delta => self
                .build_delta(now, store, &mut Listed)
                .map(Response::Delta),
        };
        if built.is_none() {
            self.report_holds();
        }
        built
    }

    /// Nothing to send: a type held because the store has not published it is reported
    /// once ([`ServerEvent::Held`]).
    fn report_holds(&mut self) {
        for entry in &mut self.types {
            if entry.newly_held() {
                self.events.push_back(ServerEvent::Held {
                    type_url: entry.type_url.clone(),
                });
            }
        }
    }

    fn build_encoded(&mut self, now: Instant, store: &ResourceStore) -> Option<EncodedResponse> {
        let built = self.build_encoded_inner(now, store);
        if built.is_none() {
            self.report_holds();
        }
        built
    }

    fn build_encoded_inner(
        &mut self,
        now: Instant,
        store: &ResourceStore,
    ) -> Option<EncodedResponse> {
        match self.config.variant {
            Variant::Sotw => {
                let mut sink = WireSink::default();
                let mut response = self.build_sotw(now, store, &mut sink)?;
                debug_assert!(response.resources.is_empty());
                // The sink wrote field 1 itself; the strings move out once the tail is
                // encoded (no copies: this runs once per stream in a fan-out).
                let version = core::mem::take(&mut response.version_info);
                let bytes = sink.finish(&response);
                Some(EncodedResponse {
                    variant: Variant::Sotw,
                    type_url: response.type_url,
                    nonce: response.nonce,
                    version,
                    bytes,
                })
            }
            Variant::Delta => {
                let mut sink = WireSink::default();
                let mut response = self.build_delta(now, store, &mut sink)?;
                if !sink.is_shared() {
                    return Some(EncodedResponse::of(&Response::Delta(response)));
                }
                // A full state the store shares: as for SotW, the sink wrote fields 1
                // and 2.
                debug_assert!(response.resources.is_empty());
                let version = core::mem::take(&mut response.system_version_info);
                let bytes = sink.finish(&response);
                Some(EncodedResponse {
                    variant: Variant::Delta,
                    type_url: response.type_url,
                    nonce: response.nonce,
                    version,
                    bytes,
                })
            }
        }
    }

    fn send_ctx(&self, now: Instant) -> SendCtx {
        SendCtx {
            now,
            divisor: self.config.heartbeat_divisor.max(2),
            not_found: self.config.not_found,
        }
    }

    /// The next SotW response in ADS order, its resources written to `sink`, its nonce
    /// assigned and recorded.
    fn build_sotw<S: ResourceSink>(
        &mut self,
        now: Instant,
        store: &ResourceStore,
        sink: &mut S,
    ) -> Option<DiscoveryResponse> {
        let ctx = self.send_ctx(now);
        let (index, mut response) = self
            .types
            .iter_mut()
            .enumerate()
            .find_map(|(i, entry)| Some((i, entry.build_sotw(store, ctx, sink)?)))?;
        let nonce = self.next_nonce();
        response.nonce = nonce.clone();
        if let Some(entry) = self.types.get_mut(index) {
            entry.sent(nonce, response.version_info.clone(), now);
        }
        Some(response)
    }

    /// Delta on ADS: upserts go out in make-before-break order (CDS, EDS, LDS, RDS, VHDS,
    /// the rest); removals wait until no type has upserts left, then go out in the reverse
    /// order. A type's removals ride with its own upserts when no other type has any.
    /// A full state may go to `sink` (see [`DeltaSink`]).
    fn build_delta(
        &mut self,
        now: Instant,
        store: &ResourceStore,
        sink: &mut impl DeltaSink,
    ) -> Option<DeltaDiscoveryResponse> {
        let ctx = self.send_ctx(now);
        for entry in &mut self.types {
            entry.plan(store);
        }
        loop {
            let with_upserts: Vec<usize> = self
                .types
                .iter()
                .enumerate()
                .filter(|(_, e)| e.has_upserts())
                .map(|(i, _)| i)
                .collect();
            // A type held for the client's answer (`await_ack`) sends nothing, but its
            // upserts still hold every type's removals back.
            let open = with_upserts
                .iter()
                .find(|i| self.types.get(**i).is_some_and(|e| !e.held_for_answer()));
            let (index, upserts, removals) = match open {
                Some(i) => (*i, true, with_upserts.len() == 1),
                None if with_upserts.is_empty() => {
                    let last = self
                        .types
                        .iter()
                        .rposition(|e| e.has_removals() && !e.held_for_answer())?;
                    (last, false, true)
                }
                None => return None,
            };
            let entry = self.types.get_mut(index)?;
            let Some(mut response) = entry.emit(store, ctx, upserts, removals, sink) else {
                continue;
            };
            let nonce = self.next_nonce();
            response.nonce = nonce.clone();
            if let Some(entry) = self.types.get_mut(index) {
                entry.sent(nonce, response.system_version_info.clone(), ctx.now);
            }
            return Some(response);
        }
    }

    /// The next deadline: the last `now` this stream was given while a request or a fired
    /// timer still waits for `poll_response`, else the next TTL heartbeat, if any resource
    /// sent has a TTL. (Store changes are seen only by `poll_response`.)
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed.is_some() {
            return None;
        }
        if self.types.iter().any(TypeState::has_work) {
            return Some(self.last_now);
        }
        self.types.iter().filter_map(|t| t.timers.next()).min()
    }

    /// Whether the stream has sent everything `store` asks of it and the client has ACKed
    /// the latest response of every type (none NACKed, none unanswered): the moment the
    /// second phase of a make-before-break publication
    /// ([`ResourceStore::plan_make_before_break`]) may go. Read after draining
    /// [`ServerStream::poll_response`]. A closed stream is settled (it sends nothing more).
    pub fn is_settled(&self, store: &ResourceStore) -> bool {
        if self.closed.is_some() {
            return true;
        }
        (self.indexed || self.seen == store.revision())
            && self.types.iter().all(TypeState::is_settled)
    }

    /// Fires the heartbeats due at `now`; `poll_response` then sends them (body-less, same
    /// version). Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        for entry in &mut self.types {
            entry.fire_timers(now);
        }
    }

    /// Whether a heartbeat is waiting for `poll_response` (for the `StreamSet`).
    pub(crate) fn has_due_timer(&self, now: Instant) -> bool {
        self.poll_timeout().is_some_and(|t| t <= now)
    }
}
