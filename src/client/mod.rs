//! The xDS client: the protocol state of one stream to one management server, SotW or
//! incremental, ADS or one type per stream, as a Sans-IO state machine.
//!
//! A [`Client`] outlives its streams: subscriptions, accepted versions and cached resources
//! survive a reconnect; nonces, pending answers and does-not-exist timers do not.
//!
//! # Call order
//!
//! ```text
//! let mut client = Client::new(config);
//! client.subscribe(CDS, &[])?;                  // any time, connected or not
//! client.connected(now);                        // a stream is up
//! loop {
//!     while let Some(req) = client.poll_request(now) { send(req) }   // "sent now"
//!     while let Some(ev) = client.poll_event() { apply(ev) }
//!     match wait_until(client.poll_timeout()) {
//!         Input::Response(r) => client.handle_response(now, r),      // never fails
//!         Input::Timeout => client.handle_timeout(now),
//!         Input::StreamBroke => client.disconnected(now),            // then connected(now)
//!     }
//! }
//! ```
//!
//! Drain [`Client::poll_request`] and [`Client::poll_event`] until `None` after every input.
//! A request returned by `poll_request` counts as sent at that `now`: the does-not-exist
//! timers of the names it carries start there.
//!
//! # Time
//!
//! The caller passes `now` on every time-sensitive call and never moves it backwards.
//! [`Client::poll_timeout`] returns the earliest deadline (does-not-exist or TTL); while a
//! request or an event is queued it returns the last `now` passed in, so a loop that sleeps
//! until `poll_timeout` never sleeps on pending output. [`Client::handle_timeout`] fires
//! everything due at `now`; extra calls are harmless.
//!
//! # Rules and where they live
//!
//! * `subscription`: what the application wants per type and what this stream was told;
//!   wildcard and subscribe/unsubscribe merging.
//! * `sotw` / `delta`: only the protocol checks of a response and the shape of a request.
//! * `type_state`: everything the two variants share: cache mutations, removal reasons,
//!   does-not-exist, TTL, per-resource status, readiness, ACK/NACK replies.
//! * `validation`: the application's validators and the NACK message.
//!
//! # Decisions
//!
//! * **Legacy wildcard vs explicit `*`.** `subscribe(LDS or CDS, &[])` asks for everything
//!   the legacy way: the first request of the stream for that type carries no names (seed
//!   000, "How the client specifies what resources to return"). Once a request with names
//!   was sent on the stream an empty list would mean "nothing", so a wildcard that lives
//!   next to names is sent as an explicit `*` (as Envoy does when names join a legacy
//!   wildcard). `subscribe(t, &["*"])` is the explicit wildcard for any type; unsubscribing
//!   `*` leaves it. In SotW, leaving a *legacy* wildcard that was never joined by a name
//!   cannot be said on the wire (an empty list is still the wildcard), so the client stops
//!   caching that type and ACKs what keeps arriving; a reconnect ends it.
//! * **Protocol checks vs content validation.** Duplicate names (seed 000, "Duplicate
//!   Resource Names"), an `Any` whose type differs from the response's, an undecodable
//!   `Resource` wrapper, an unreadable name, an invalid TTL and exceeded [`Limits`] NACK the
//!   whole response with no state change, whatever the policy. The application judges
//!   content, synchronously ([`Client::set_validator`]) or later
//!   ([`Client::set_deferred_validation`], [`Client::verdict`]). With
//!   [`NackPolicy::RejectAll`] (Envoy) one rejected resource rejects the response; with
//!   [`NackPolicy::KeepValid`] (gRPC A46, "xDS NACK semantics improvement") the valid
//!   resources are applied, the rejected ones keep their previous value and are reported
//!   `Nacked`, and the response is still NACKed with the previous good version. Under
//!   KeepValid a full-state (LDS/CDS) response still deletes what it omits.
//! * **NACK message.** `error_detail` is a `google.rpc.Status` with code 13 (INTERNAL) and a
//!   message capped at 4096 bytes plus `...(truncated)`, as Envoy sends (wire facts 1.4).
//! * **Does-not-exist timer (gRPC A57, "XdsClient failure mode behavior").** Per subscribed
//!   name, 15 s by default. It starts when a request naming it is *returned by
//!   `poll_request`* on a connected stream, is cancelled by any response carrying the
//!   resource (or announcing its absence), is stopped on `disconnected`, and on the next
//!   stream is restarted only for names that are not cached and not already known not to
//!   exist. In SotW, absence from a response never proves non-existence (seed 000, "Knowing
//!   When a Requested Resource Does Not Exist"), except the deletion of a held resource by
//!   a full-state LDS/CDS response.
//! * **TTL (seed 004, `Resource.ttl`).** Set or reset by a resource carrying a TTL, cleared by
//!   one without; a heartbeat (a `Resource` without body at the version held) only moves
//!   the timer. On expiry the resource is removed ([`RemovalReason::Expired`], status
//!   `Expired`) and, following envoy#15667 ("reset type version upon TTL expiry and
//!   schedule new request for SotW"), the client asks again: in SotW it forgets the type's
//!   accepted version and sends a request with an empty `version_info`, so the server sees
//!   a client that lacks the current version and re-delivers; incremental re-sends the name
//!   in `resource_names_subscribe` (the server must answer every name listed there), and an
//!   expired resource is left out of the next `initial_resource_versions`. A resource that
//!   only the wildcard brought in cannot be asked for by name in incremental without
//!   changing the subscription; it comes back with the server's next update or on reconnect.
//! * **Incremental does-not-exist.** A `Resource` with a subscribed name and no body, when the
//!   client does not hold that name at that version, means the resource does not exist
//!   (seed 000, "Knowing When a Requested Resource Does Not Exist"); so does a name in
//!   `removed_resources`, `removed_resource_names`, or a `resource_errors` entry with code
//!   NOT_FOUND (wire facts 1.1). Removals of names never held and not subscribed are
//!   ignored (seed 004, `removed_resources`).
//! * **Readiness.** [`ClientEvent::Ready`] fires once per type when every name subscribed
//!   before it has arrived, been rejected, or is known not to exist, and for a wildcard once
//!   the first response was answered (ACK or NACK), like Envoy's initial fetch.
//! * **Deferred validation.** While a verdict is pending, no request of that type leaves and
//!   later responses of the type wait their turn (up to [`Limits::max_held_responses`]; one
//!   more is NACKed in order). A broken stream voids the ticket: the response is dropped
//!   unapplied (its nonce cannot be answered on another stream) and the server resends on
//!   the next stream.
//! * **Ignored responses.** A response for a type never subscribed, of the other variant, for
//!   a type the per-type stream does not carry, or while disconnected is dropped without an
//!   answer and reported as [`ClientEvent::Ignored`]. A type whose last name was dropped
//!   still gets its responses ACKed.
//! * **Zero copy.** Cached bodies and event bodies are `Bytes` slices of the buffer the
//!   response was decoded from (decode with `DiscoveryResponse::decode(bytes)`); SotW names
//!   read from bodies are slices too ([`SharedStr`]). An unchanged body (same bytes, same
//!   aliases) keeps the buffer already held and emits no [`ClientEvent::Upserted`].
//! * **Not interpreted.** The newest, not-implemented-hide fields are decoded but ignored:
//!   SotW `resource_errors` and `canary`, `Resource.cache_control` and `metadata`,
//!   `DynamicParameterConstraints`; incremental `resource_errors` only count as removals
//!   when their code is NOT_FOUND. `resource_locators` are never sent.
//! * **Verdicts and interest.** A verdict applies only the resources still wanted when it
//!   is given: an unsubscribe while a verdict is pending is honoured.
//! * **ADS order.** On connect the first requests go out in make-before-break order (CDS,
//!   EDS, LDS, RDS, ...); after that, types are served first come first served.
//!   Incremental answers every response on its own, in order (seed 004, `response_nonce`).
//!   SotW answers the latest response of a type only: an unsent answer to an older one would
//!   carry a stale nonce that the server ignores (seed 000, "Requests become stale"), so
//!   every SotW request carries the latest nonce of its type on the stream.

mod cache;
mod config;
mod delta;
mod event;
mod sotw;
mod status;
mod subscription;
mod text;
mod timers;
mod type_state;
mod update;
mod validation;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use hashbrown::{HashMap, HashSet};

pub use cache::CachedResource;
pub use config::{ClientConfig, Limits, NackPolicy};
pub use event::{
    ClientError, ClientEvent, IgnoreReason, PendingResource, RemovalReason, VerdictTicket,
};
pub use status::{Rejection, ResourceState, ResourceStatus, StatusEntry};
pub use subscription::WILDCARD;
pub use text::SharedStr;
pub use validation::{cap_message, Validator, MAX_ERROR_MESSAGE, NACK_CODE, TRUNCATION_MARKER};

use cache::Record;
use type_state::{Ctx, Held, TypeState};

use crate::message::{Request, Response, Transport, Variant};
use crate::resource::NameExtractor;
use crate::time::Instant;
use crate::types::{ads_order, TypeInfo};

/// The protocol state of one xDS stream (and its successors) to one management server.
///
/// ```
/// use xds_sansio::client::{Client, ClientConfig, ClientEvent};
/// use xds_sansio::pb::discovery::DiscoveryResponse;
/// use xds_sansio::types::CLUSTER;
/// use xds_sansio::{Instant, Request, Response, Transport, Variant};
///
/// let config = ClientConfig::new(Variant::Sotw, Transport::Aggregated, Default::default());
/// let mut client = Client::new(config);
/// client.subscribe(CLUSTER.type_url, &[]).unwrap(); // legacy wildcard
/// client.connected(Instant::ZERO);
/// let Some(Request::Sotw(first)) = client.poll_request(Instant::ZERO) else { panic!() };
/// assert!(first.resource_names.is_empty() && first.node.is_some());
///
/// client.handle_response(
///     Instant::from_secs(1),
///     Response::Sotw(DiscoveryResponse {
///         version_info: "v1".into(),
///         type_url: CLUSTER.type_url.into(),
///         nonce: "n1".into(),
///         ..Default::default()
///     }),
/// );
/// let Some(Request::Sotw(ack)) = client.poll_request(Instant::from_secs(1)) else { panic!() };
/// assert_eq!((ack.version_info.as_str(), ack.response_nonce.as_str()), ("v1", "n1"));
/// assert!(matches!(client.poll_event(), Some(ClientEvent::Acked { .. })));
/// assert!(matches!(client.poll_event(), Some(ClientEvent::Ready { .. })));
/// ```
pub struct Client {
    config: ClientConfig,
    types: Vec<TypeState>,
    index: HashMap<SharedStr, usize>,
    validators: HashMap<SharedStr, Box<dyn Validator>>,
    deferred: HashSet<SharedStr>,
    extractors: HashMap<SharedStr, NameExtractor>,
    timers: timers::Timers,
    events: VecDeque<ClientEvent>,
    send_queue: VecDeque<usize>,
    connected: bool,
    first_on_stream: bool,
    last_now: Instant,
    next_ticket: u64,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.config)
            .field("connected", &self.connected)
            .field("types", &self.types.len())
            .field("queued_events", &self.events.len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client with no subscriptions and no stream.
    pub fn new(config: ClientConfig) -> Client {
        Client {
            config,
            types: Vec::new(),
            index: HashMap::new(),
            validators: HashMap::new(),
            deferred: HashSet::new(),
            extractors: HashMap::new(),
            timers: timers::Timers::default(),
            events: VecDeque::new(),
            send_queue: VecDeque::new(),
            connected: false,
            first_on_stream: false,
            last_now: Instant::ZERO,
            next_ticket: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Whether a stream is up.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    fn check_type(&self, type_url: &str) -> Result<(), ClientError> {
        if type_url.is_empty() {
            return Err(ClientError::EmptyTypeUrl);
        }
        if !self.config.transport.carries(type_url) {
            return Err(ClientError::TypeNotCarried);
        }
        Ok(())
    }

    fn type_index(&mut self, type_url: &str) -> usize {
        if let Some(&idx) = self.index.get(type_url) {
            return idx;
        }
        let idx = self.types.len();
        let url = SharedStr::from(type_url);
        self.types.push(TypeState::new(url.clone()));
        self.index.insert(url, idx);
        idx
    }

    fn has_due(&self, ts: &TypeState) -> bool {
        match self.config.variant {
            Variant::Sotw => sotw::has_due(ts),
            Variant::Delta => delta::has_due(ts),
        }
    }

    /// Puts the type in the send queue if it has something to send.
    fn enqueue(&mut self, idx: usize) {
        if !self.connected {
            return;
        }
        let Some(ts) = self.types.get(idx) else {
            return;
        };
        if ts.queued || !self.has_due(ts) {
            return;
        }
        if let Some(ts) = self.types.get_mut(idx) {
            ts.queued = true;
            self.send_queue.push_back(idx);
        }
    }

    fn with_type<R>(
        &mut self,
        idx: usize,
        f: impl FnOnce(&mut TypeState, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let ts = self.types.get_mut(idx)?;
        let mut cx = Ctx {
            idx,
            now: self.last_now,
            variant: self.config.variant,
            policy: self.config.nack_policy,
            timers: &mut self.timers,
            events: &mut self.events,
        };
        Some(f(ts, &mut cx))
    }

    // ------------------------------------------------------------------ commands

    /// Subscribes to `names` of `type_url`, adding to what is already subscribed. `"*"` is
    /// the explicit wildcard; no names at all is the legacy wildcard of LDS/CDS (an error
    /// for other types). The change is sent with the next request of the type.
    pub fn subscribe(&mut self, type_url: &str, names: &[&str]) -> Result<(), ClientError> {
        self.check_type(type_url)?;
        if names.is_empty() && !TypeInfo::of(type_url).legacy_wildcard() {
            return Err(ClientError::EmptyName);
        }
        let limits = self.config.limits;
        for n in names {
            if n.is_empty() {
                return Err(ClientError::EmptyName);
            }
            if n.len() > limits.max_name_len {
                return Err(ClientError::LimitExceeded);
            }
        }
        let held = self.index.get(type_url).and_then(|&i| self.types.get(i));
        let current = held.map_or(0, |ts| ts.sub.desired.len());
        let new = names
            .iter()
            .filter(|n| held.is_none_or(|ts| !ts.sub.desired.contains(**n)))
            .count();
        if current.saturating_add(new) > limits.max_names_per_type {
            return Err(ClientError::LimitExceeded);
        }
        let idx = self.type_index(type_url);
        let legacy = names.is_empty();
        let list: Vec<SharedStr> = if legacy {
            alloc::vec![SharedStr::from_static(WILDCARD)]
        } else {
            names.iter().map(|n| SharedStr::from(*n)).collect()
        };
        if let Some(ts) = self.types.get_mut(idx) {
            for name in list {
                if ts.sub.add(name.clone(), legacy) {
                    if name != WILDCARD {
                        ts.records
                            .entry(name.clone())
                            .or_insert_with(Record::requested);
                    }
                    ts.arm_ready(&name);
                }
            }
        }
        self.enqueue(idx);
        Ok(())
    }

    /// Unsubscribes from `names` of `type_url` (`"*"` leaves the wildcard). Resources no
    /// longer wanted leave the cache ([`RemovalReason::Unsubscribed`]); the change is sent
    /// with the next request of the type. Names not subscribed are ignored.
    pub fn unsubscribe(&mut self, type_url: &str, names: &[&str]) -> Result<(), ClientError> {
        self.check_type(type_url)?;
        let Some(&idx) = self.index.get(type_url) else {
            return Ok(());
        };
        self.with_type(idx, |ts, cx| {
            for name in names {
                if !ts.sub.remove(name) {
                    continue;
                }
                let name = SharedStr::from(*name);
                ts.awaiting.remove(name.as_str());
                if name == WILDCARD {
                    ts.awaiting_wildcard = false;
                    let mut unwanted: Vec<SharedStr> = ts
                        .records
                        .iter()
                        .filter(|(n, r)| {
                            r.cached.as_ref().is_some_and(|c| !ts.wants(n, &c.aliases))
                        })
                        .map(|(n, _)| n.clone())
                        .collect();
                    unwanted.sort_unstable();
                    for n in unwanted {
                        ts.remove_cached(&n, RemovalReason::Unsubscribed, cx);
                    }
                    // Statuses the wildcard alone kept (rejected, never held) go too.
                    let sub = &ts.sub;
                    ts.records
                        .retain(|n, r| r.cached.is_some() || sub.names(n) || r.dne_at.is_some());
                    continue;
                }
                let target = if ts.records.contains_key(name.as_str()) {
                    Some(name.clone())
                } else {
                    ts.aliases.get(name.as_str()).cloned()
                };
                let Some(target) = target else { continue };
                let (cached, aliases) = match ts.records.get(target.as_str()) {
                    Some(r) => (
                        r.cached.is_some(),
                        r.cached
                            .as_ref()
                            .map(|c| c.aliases.clone())
                            .unwrap_or_default(),
                    ),
                    None => continue,
                };
                if cached {
                    if !ts.wants(&target, &aliases) {
                        ts.remove_cached(&target, RemovalReason::Unsubscribed, cx);
                    }
                } else if !ts.sub.names(&target) {
                    if let Some(rec) = ts.records.remove(target.as_str()) {
                        if let Some(at) = rec.dne_at {
                            cx.timers
                                .disarm(at, timers::TimerKind::DoesNotExist, idx, &target);
                        }
                    }
                }
            }
            ts.check_ready(cx.events);
        });
        self.enqueue(idx);
        Ok(())
    }

    /// Sets the synchronous content validator of `type_url`: called for every resource with
    /// a body that the client would apply.
    pub fn set_validator(&mut self, type_url: &str, validator: Box<dyn Validator>) {
        self.validators.insert(SharedStr::from(type_url), validator);
    }

    /// Removes the validator of `type_url`.
    pub fn clear_validator(&mut self, type_url: &str) {
        self.validators.remove(type_url);
    }

    /// Sets how SotW names of `type_url` are read from bodies (default: field 1, which fits
    /// every type of the catalog).
    pub fn set_name_extractor(&mut self, type_url: &str, extractor: NameExtractor) {
        self.extractors.insert(SharedStr::from(type_url), extractor);
    }

    /// Turns deferred validation of `type_url` on or off: when on, each response with
    /// bodies yields [`ClientEvent::ValidationNeeded`] and waits for [`Client::verdict`].
    /// A synchronous validator of the type is then not consulted.
    pub fn set_deferred_validation(&mut self, type_url: &str, on: bool) {
        if on {
            self.deferred.insert(SharedStr::from(type_url));
        } else {
            self.deferred.remove(type_url);
        }
    }

    /// Answers a [`ClientEvent::ValidationNeeded`]: `rejections` lists `(name, reason)` of
    /// the rejected resources; every other resource is accepted. Then the response is
    /// applied and answered, and responses held behind it are handled.
    pub fn verdict(
        &mut self,
        ticket: VerdictTicket,
        rejections: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let idx = self
            .types
            .iter()
            .position(|t| t.pending.as_ref().is_some_and(|(t, _)| *t == ticket))
            .ok_or(ClientError::UnknownTicket)?;
        let ts = self.types.get_mut(idx).ok_or(ClientError::UnknownTicket)?;
        let (_, mut update) = ts.pending.take().ok_or(ClientError::UnknownTicket)?;
        // Interest may have changed while the verdict was pending.
        update.resources.retain(|r| ts.wants(&r.name, &r.aliases));
        let by_name: HashMap<&str, &str> = rejections.iter().copied().collect();
        let rejected: Vec<(SharedStr, String)> = update
            .resources
            .iter()
            .filter(|r| r.body.is_some())
            .filter_map(|r| {
                by_name
                    .get(r.name.as_str())
                    .map(|e| (r.name.clone(), String::from(*e)))
            })
            .collect();
        self.with_type(idx, |ts, cx| ts.apply(update, rejected, cx));
        loop {
            let next = match self.types.get_mut(idx) {
                Some(ts) if ts.pending.is_none() => ts.held.pop_front(),
                _ => None,
            };
            match next {
                None => break,
                Some(Held::Response(r)) => self.process(idx, r),
                Some(Held::Overflow { nonce, version }) => {
                    self.with_type(idx, |ts, cx| {
                        ts.reject(
                            nonce,
                            version,
                            "too many responses held while a verdict was pending",
                            cx,
                        )
                    });
                }
            }
        }
        self.enqueue(idx);
        Ok(())
    }

    // ------------------------------------------------------------------ stream

    /// A new stream is up: every type with interest sends its first request (last accepted
    /// version, every name, no nonce; incremental: `initial_resource_versions`), the node
    /// rides on the first one. Calling it while connected first ends the old stream.
    pub fn connected(&mut self, now: Instant) {
        if self.connected {
            self.disconnected(now);
        }
        self.last_now = now;
        self.connected = true;
        self.first_on_stream = true;
        let mut order: Vec<usize> = (0..self.types.len()).collect();
        order.sort_by(|a, b| {
            let ua = self.types.get(*a).map_or("", |t| t.url.as_str());
            let ub = self.types.get(*b).map_or("", |t| t.url.as_str());
            ads_order(ua, ub)
        });
        for idx in order {
            self.enqueue(idx);
        }
    }

    /// The stream broke: nonces, unsent answers, pending verdicts and does-not-exist timers
    /// are dropped; cache, versions, subscriptions and TTL timers stay.
    pub fn disconnected(&mut self, now: Instant) {
        self.last_now = now;
        self.connected = false;
        self.first_on_stream = false;
        self.send_queue.clear();
        self.timers.disarm_all_dne();
        for ts in &mut self.types {
            ts.reset_stream();
        }
    }

    /// Handles a response of either variant. Never fails: whatever the peer sent becomes
    /// state, events and a queued ACK or NACK (or an [`ClientEvent::Ignored`]).
    pub fn handle_response(&mut self, now: Instant, response: Response) {
        self.last_now = now;
        let raw = response.type_url();
        let url = match (&self.config.transport, raw.is_empty()) {
            // Singleton APIs may leave the type implicit.
            (Transport::PerType(u), true) => SharedStr::from(u.as_str()),
            _ => SharedStr::from(raw),
        };
        let nonce = SharedStr::from(response.nonce());
        let reason = if !self.connected {
            Some(IgnoreReason::NotConnected)
        } else if response.variant() != self.config.variant {
            Some(IgnoreReason::WrongVariant)
        } else if !self.config.transport.carries(&url) {
            Some(IgnoreReason::NotCarried)
        } else if !self.index.contains_key(url.as_str()) {
            Some(IgnoreReason::NeverSubscribed)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.events.push_back(ClientEvent::Ignored {
                type_url: url,
                nonce,
                reason,
            });
            return;
        }
        let Some(&idx) = self.index.get(url.as_str()) else {
            return;
        };
        let max_held = self.config.limits.max_held_responses;
        let Some(ts) = self.types.get_mut(idx) else {
            return;
        };
        ts.nonce = nonce.clone();
        if ts.pending.is_some() {
            if ts.held.len() >= max_held {
                let version = match &response {
                    Response::Sotw(r) => SharedStr::from(r.version_info.as_str()),
                    Response::Delta(r) => SharedStr::from(r.system_version_info.as_str()),
                };
                ts.held.push_back(Held::Overflow { nonce, version });
            } else {
                ts.held.push_back(Held::Response(response));
            }
            return;
        }
        self.process(idx, response);
        self.enqueue(idx);
    }

    /// Checks, validates and applies one response of the type at `idx`.
    fn process(&mut self, idx: usize, response: Response) {
        let Client {
            config,
            types,
            validators,
            deferred,
            extractors,
            timers,
            events,
            next_ticket,
            last_now,
            ..
        } = self;
        let Some(ts) = types.get_mut(idx) else {
            return;
        };
        let url = ts.url.clone();
        let mut cx = Ctx {
            idx,
            now: *last_now,
            variant: config.variant,
            policy: config.nack_policy,
            timers,
            events,
        };
        let parsed = match response {
            Response::Sotw(r) => {
                let extractor = extractors.get(url.as_str()).copied();
                sotw::parse(r, &url, ts, &config.limits, extractor)
            }
            Response::Delta(r) => delta::parse(r, &url, ts, &config.limits),
        };
        let update = match parsed {
            Ok(update) => update,
            Err(reject) => {
                ts.reject(reject.nonce, reject.version, &reject.message, &mut cx);
                return;
            }
        };
        if deferred.contains(url.as_str()) && update.resources.iter().any(|r| r.body.is_some()) {
            let ticket = VerdictTicket(*next_ticket);
            *next_ticket = next_ticket.wrapping_add(1);
            cx.events.push_back(ClientEvent::ValidationNeeded {
                ticket,
                type_url: url,
                version: update.version.clone(),
                resources: update
                    .resources
                    .iter()
                    .filter_map(|r| {
                        r.body.as_ref().map(|b| PendingResource {
                            name: r.name.clone(),
                            version: r.version.clone().unwrap_or_else(|| update.version.clone()),
                            body: b.clone(),
                        })
                    })
                    .collect(),
            });
            ts.pending = Some((ticket, update));
            return;
        }
        let rejections: Vec<(SharedStr, String)> = match validators.get(url.as_str()) {
            Some(v) => update
                .resources
                .iter()
                .filter_map(|r| {
                    let body = r.body.as_ref()?;
                    let version = r.version.as_ref().unwrap_or(&update.version);
                    v.validate(&r.name, version, body)
                        .err()
                        .map(|e| (r.name.clone(), e))
                })
                .collect(),
            None => Vec::new(),
        };
        ts.apply(update, rejections, &mut cx);
    }

    // ------------------------------------------------------------------ outputs

    /// The next request to send on the stream, if any; it counts as sent at `now`.
    pub fn poll_request(&mut self, now: Instant) -> Option<Request> {
        self.last_now = now;
        if !self.connected {
            return None;
        }
        for _ in 0..self.send_queue.len() {
            let idx = self.send_queue.pop_front()?;
            let Client {
                config,
                types,
                timers,
                events,
                send_queue,
                first_on_stream,
                ..
            } = self;
            let Some(ts) = types.get_mut(idx) else {
                continue;
            };
            ts.queued = false;
            let node =
                || (*first_on_stream || config.node_on_every_request).then(|| config.node.clone());
            let (request, names) = match config.variant {
                Variant::Sotw => {
                    let Some(due) = sotw::due(ts) else { continue };
                    let (r, names) = sotw::build(ts, due, node());
                    (Request::Sotw(r), names)
                }
                Variant::Delta => {
                    let Some(due) = delta::due(ts) else { continue };
                    let (r, names) = delta::build(ts, due, node());
                    (Request::Delta(r), names)
                }
            };
            *first_on_stream = false;
            let mut cx = Ctx {
                idx,
                now,
                variant: config.variant,
                policy: config.nack_policy,
                timers,
                events,
            };
            ts.start_dne_timers(&names, config.does_not_exist_timeout, &mut cx);
            let more = match config.variant {
                Variant::Sotw => sotw::has_due(ts),
                Variant::Delta => delta::has_due(ts),
            };
            if more {
                ts.queued = true;
                send_queue.push_back(idx);
            }
            return Some(request);
        }
        None
    }

    /// The next event for the application, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When to call [`Client::handle_timeout`]: the last `now` while output is queued, else
    /// the earliest timer, else `None`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let request_ready = self.connected
            && self
                .send_queue
                .iter()
                .any(|&i| self.types.get(i).is_some_and(|ts| self.has_due(ts)));
        if !self.events.is_empty() || request_ready {
            return Some(self.last_now);
        }
        self.timers.next()
    }

    /// Fires every timer due at `now`: does-not-exist and TTL expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = now;
        for (at, kind, idx, name) in self.timers.expire(now) {
            self.with_type(idx, |ts, cx| ts.fire(at, kind, &name, cx));
            self.enqueue(idx);
        }
    }

    // ------------------------------------------------------------------ reads

    /// The accepted resource `name` (or alias) of `type_url`, if held.
    pub fn resource(&self, type_url: &str, name: &str) -> Option<&CachedResource> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        ts.record(name).and_then(|r| r.cached.as_ref())
    }

    /// The names of the resources of `type_url` held, sorted.
    pub fn resource_names(&self, type_url: &str) -> Vec<SharedStr> {
        let mut names: Vec<SharedStr> = self
            .index
            .get(type_url)
            .and_then(|&i| self.types.get(i))
            .map(|ts| {
                ts.records
                    .iter()
                    .filter(|(_, r)| r.cached.is_some())
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default();
        names.sort_unstable();
        names
    }

    /// The last accepted SotW `version_info` of `type_url` (incremental: the last accepted
    /// `system_version_info`).
    pub fn version(&self, type_url: &str) -> Option<&str> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        Some(match self.config.variant {
            Variant::Sotw => ts.version.as_str(),
            Variant::Delta => ts.system_version.as_str(),
        })
    }

    /// The CSDS status of `name` (or alias) of `type_url`: subscribed names and held
    /// resources have one.
    pub fn status(&self, type_url: &str, name: &str) -> Option<ResourceStatus> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        ts.record(name).map(Record::status)
    }

    /// Every status, sorted by type URL then name: the material of a CSDS dump.
    pub fn dump(&self) -> Vec<StatusEntry> {
        let mut out: Vec<StatusEntry> = self
            .types
            .iter()
            .flat_map(|ts| {
                ts.records.iter().map(|(n, r)| StatusEntry {
                    type_url: ts.url.clone(),
                    name: n.clone(),
                    status: r.status(),
                })
            })
            .collect();
        out.sort_unstable_by(|a, b| (&a.type_url, &a.name).cmp(&(&b.type_url, &b.name)));
        out
    }
}
