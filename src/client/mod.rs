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
//! The method kinds are on [`Client`], each poll says when to call it, and the rules of
//! time and output that every machine of the crate follows are [the crate's
//! contract](crate#the-contract).
//!
//! # Rules and where they live
//!
//! * `subscription`: what the application wants per type and what this stream was told;
//!   wildcard and subscribe/unsubscribe merging.
//! * `sotw` / `delta`: only the protocol checks of a response and the shape of a request.
//! * `type_state`: everything the two variants share: cache mutations, removal reasons,
//!   does-not-exist, TTL, per-resource status, readiness, ACK/NACK replies.
//! * `validation`: the application's validators and the NACK message.
//! * `intake`, `interest`: the per-type steps of a response (hold, check, judge, apply,
//!   verdict) and of interest (subscribe, unsubscribe, the next request).
//! * `variant`: the one place that dispatches between SotW and incremental.
//! * `update`: what both variants share before the apply step (checks, limits, what a
//!   type owes).
//! * `inputs`, `commands`, `outputs`, `reads`: the public methods of [`Client`], by kind
//!   (see [`Client`]); they only route to the per-type state and order what leaves.
//!
//! # Decisions
//!
//! * **Legacy wildcard vs explicit `*`.** `subscribe(LDS or CDS, &[])` asks for everything
//!   the legacy way: the first request of the stream for that type carries no names (xDS
//!   protocol, "How the client specifies what resources to return"). `subscribe(t, &["*"])`
//!   is the explicit wildcard for any type; unsubscribing `*` leaves it. In SotW every
//!   request carries the full list, and once a request with names was sent on the stream an
//!   empty list would mean "nothing", so a wildcard that lives next to names is sent as an
//!   explicit `*` (as Envoy does when names join a legacy wildcard). In SotW, leaving a
//!   *legacy* wildcard that was never joined by a name cannot be said on the wire (an empty
//!   list is still the wildcard), so the client stops caching that type and ACKs what keeps
//!   arriving; a reconnect ends it. Incremental requests carry changes, and the server
//!   keeps the wildcard it recorded from the first request, so names added next to a
//!   legacy wildcard go alone (`resource_names_subscribe: [foo]`) and `*` is never sent
//!   again: subscribing `*` would ask the server to resend every wildcard resource
//!   (`resource_names_subscribe`: the server must respond with every resource listed there;
//!   Envoy's `NewDeltaSubscriptionState` only adds the new names). `*` is listed explicitly
//!   only on the first request of a stream when names are also wanted; `*` alone still
//!   goes out in legacy form.
//! * **Protocol checks vs content validation.** Duplicate names (xDS protocol, "Duplicate
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
//!   message capped at 4096 bytes plus `...(truncated)`, as Envoy sends.
//! * **Does-not-exist timer (gRPC A57, "XdsClient failure mode behavior").** Per subscribed
//!   name, 15 s by default. It starts when a request naming it is *returned by
//!   `poll_request`* on a connected stream, is cancelled by any response carrying the
//!   resource (or announcing its absence), is stopped on `disconnected`, and on the next
//!   stream is restarted only for names that are not cached and not already known not to
//!   exist. In SotW, absence from a response never proves non-existence (xDS protocol, "Knowing
//!   When a Requested Resource Does Not Exist"), except the deletion of a held resource by
//!   a full-state LDS/CDS response.
//! * **TTL (discovery.proto, `Resource.ttl`).** Set or reset by a resource carrying a TTL,
//!   cleared by one without; a heartbeat (a `Resource` without body at the version held)
//!   only moves the timer, and a body-less `Resource` at any other version is neither a
//!   heartbeat nor a resource: the response is NACKed (`Resource.resource` may be omitted
//!   only for "a response that doesn't change the resource version"). On expiry the
//!   resource is removed ([`RemovalReason::Expired`], status `Expired`). In SotW nothing is
//!   sent and `version_info` stays the last accepted version ("the version_info received
//!   with the most recent successfully processed response", discovery.proto);
//!   [`ClientConfig::sotw_refetch_on_ttl_expiry`] turns on Envoy's non-standard refetch
//!   (envoy#15667: forget the accepted version and send a request with an empty one, so
//!   the server re-delivers). Incremental re-sends the name in `resource_names_subscribe`
//!   (the server must answer every name listed there; discovery.proto's note on TTL), and
//!   an expired resource is left out of the next `initial_resource_versions`. A resource
//!   that only the wildcard brought in is asked for by name as well (the newest text lets a
//!   wildcard subscriber name resources too); that name stays subscribed on the stream
//!   until the wildcard is dropped, when it is unsubscribed with it, so the application's
//!   interest is unchanged. A name the application unsubscribed is never subscribed again
//!   on its behalf.
//! * **Incremental does-not-exist.** A `Resource` with a subscribed name and no body, when the
//!   client does not hold that name at that version, means the resource does not exist
//!   (xDS protocol, "Knowing When a Requested Resource Does Not Exist"); so does a name in
//!   `removed_resources`, `removed_resource_names`, or a `resource_errors` entry with code
//!   NOT_FOUND (discovery.proto, `DeltaDiscoveryResponse.resource_errors`). Removals of names never held and not subscribed are
//!   ignored (discovery.proto, `removed_resources`).
//! * **`resource_errors`, both variants (newest text; xRFC TP3 "xDS error propagation",
//!   which the older protocol text predates; gRPC A88 "xDS Data Error Handling").** An
//!   entry stops the name's does-not-exist timer and counts as an answer for readiness. What
//!   it does to the name is [`ClientConfig::data_errors`]:
//!   - [`DataErrors::Legacy`] (the default, TP3): NOT_FOUND for a concrete name is handled
//!     exactly like an incremental removal (TP3: "exactly the same way as ... the
//!     does-not-exist timer"), in SotW too, so a SotW client need not wait 15 s. Every
//!     other code is reported as [`ClientEvent::ResourceError`] and remembered in the
//!     name's status ([`ResourceState::ReceivedError`], [`ResourceStatus::server_error`])
//!     until the resource arrives or another error replaces it; a held body stays held
//!     (TP3: MUST for UNAVAILABLE, INTERNAL, UNKNOWN, SHOULD for the rest; for
//!     PERMISSION_DENIED, where TP3 says MAY drop, we keep it too).
//!   - [`DataErrors::KeepCached`] and [`DataErrors::FailOnDataErrors`] (A88, "Support for
//!     Errors Provided by the xDS server": "1. Cancel the resource timer ... 2. Set the
//!     cache entry's status to RECEIVED_ERROR and record the error ... 3. If the status
//!     code is NOT_FOUND or PERMISSION_DENIED and the "fail_on_data_errors" server feature
//!     is present ..., delete the existing cached resource"): every code, NOT_FOUND
//!     included, is a [`ClientEvent::ResourceError`] and `ReceivedError` with the error
//!     recorded (a NOT_FOUND for a name never held too: A88 makes it that error, not the
//!     timer's does-not-exist); the held body stays, except for NOT_FOUND and
//!     PERMISSION_DENIED under `FailOnDataErrors` ([`ClientEvent::Removed`] first).
//!
//!   While an error is remembered a full-state LDS/CDS response that leaves the name out
//!   does not delete it (the server lists the name's error instead of its body). An entry
//!   for `""`, `*` or an `xdstp` glob concerns the subscription as a whole: it is reported
//!   and changes no resource, whatever its code. Errors for names the client does not want
//!   are ignored; an entry without `error_detail` counts as UNKNOWN. The entries are part
//!   of their response: a response NACKed whole applies none of them.
//! * **Data errors (gRPC A88, "Handling Data Errors").** A88's data errors are "NACKs,
//!   resource deletions in LDS and CDS, TP3 errors with status NOT_FOUND or
//!   PERMISSION_DENIED". Under [`DataErrors::FailOnDataErrors`] each drops what is held of
//!   the resource: a deletion as before A88, a NACKed resource ([`ClientEvent::Removed`]
//!   with the status still `Nacked`; only resources the validator named: a response
//!   rejected whole for a protocol reason names none). Under [`DataErrors::KeepCached`]
//!   ("the new default behavior is to treat all data errors as transient, including
//!   resource deletion") a deletion keeps the body with status `DoesNotExist` and
//!   [`ClientEvent::DeletionIgnored`] ("setting the cache entry state to NOT_FOUND without
//!   actually deleting the cached resource"). Both ignore
//!   [`ClientConfig::ignore_resource_deletion`] (A88: "gRPC will ignore that server
//!   feature"), which only [`DataErrors::Legacy`] reads. A deletion here is what the
//!   option A53 covered: a full-state response leaving a held name out, an incremental
//!   removal of a held name (any type), a body-less marker for it. `Legacy` stays the
//!   default so that a client configured before A88 behaves as it did; A88's own default
//!   is `KeepCached`. A88's `resource_timer_is_transient_error` is not implemented.
//! * **Readiness.** [`ClientEvent::Ready`] fires once per type when every name subscribed
//!   before it has arrived, been rejected, or is known not to exist, and for a wildcard once
//!   the first response was answered (ACK or NACK), like Envoy's initial fetch. A wildcard
//!   added to a type already ready makes it fire once more, after the next response (the
//!   full state the wildcard asked for).
//! * **Deferred validation.** While a verdict is pending, no request of that type leaves and
//!   later responses of the type wait their turn (up to [`Limits::max_held_responses`]; one
//!   more is NACKed in order). A broken stream voids the ticket: the response is dropped
//!   unapplied (its nonce cannot be answered on another stream) and the server resends on
//!   the next stream.
//! * **Ignored responses.** A response for a type never subscribed, of the other variant, for
//!   a type the per-type stream does not carry, or while disconnected is dropped without an
//!   answer and reported as [`ClientEvent::Ignored`]. A type whose last name was dropped
//!   still gets its responses ACKed.
//! * **One copy of what is kept.** Decoding is zero-copy (decode with
//!   [`decode_discovery_response`](crate::pb::decode_discovery_response)`(bytes)`, prost's
//!   outcome at about half its cost, or `DiscoveryResponse::decode(bytes)`: bodies and SotW
//!   names are slices of its buffer, [`SharedStr`]), and the cache copies each body it
//!   keeps, once, as it applies it: into chunks shared by the bodies a response copies one after another (`cache/copies.rs`).
//!   A slice would keep the whole response alive for one body: every `Any` wrapper and
//!   type URL, and every body the cache already held. So once a response is applied, its
//!   buffer goes with it, and a body's record reads its name from the copy (no key beside
//!   it). An unchanged body (same bytes, same aliases) is neither copied nor told: the
//!   cache keeps what it holds and emits no [`ClientEvent::Upserted`]. Event bodies are
//!   handles to the cache's copy. The copy costs one `memcpy` and a reference count per
//!   changed body (a first load of 10 000 clusters: about 5 % more instructions); it
//!   halves what the client keeps per resource (`benches/README.md`).
//! * **Event shapes.** By default every change to the cache is its own owned event
//!   ([`ClientEvent::Upserted`], [`ClientEvent::Removed`], [`ClientEvent::DoesNotExist`]),
//!   each holding its type URL, name, version and body: simple, and as costly as the decode
//!   on a large response (four reference counts per resource, `benches/README.md`). With
//!   [`ClientConfig::event_shape`] = [`EventShape::Batched`] a run of changes of one type is
//!   one [`ClientEvent::Changed`] whose [`ChangeBatch`] holds a name and a [`Change`] per
//!   entry; [`Client::changes`] lends each resource from the cache (nothing copied, nothing
//!   counted), and [`Client::owned_events`] rebuilds the owned events where wanted. Read a
//!   batch before the next input: it shows the cache as it is now. Both shapes send the
//!   same requests and stand for the same changes (the `client_session` fuzz target runs
//!   them as twins; every client scenario passes in both).
//! * **Not interpreted.** The newest, not-implemented-hide fields are decoded but ignored:
//!   SotW `canary`, `Resource.cache_control` and `metadata`, `DynamicParameterConstraints`.
//!   `resource_locators` are never sent.
//! * **Verdicts and interest.** A verdict applies only the resources still wanted when it
//!   is given: an unsubscribe while a verdict is pending is honoured.
//! * **ADS order.** On connect the first requests go out in make-before-break order (CDS,
//!   EDS, LDS, RDS, ...); after that, types are served first come first served.
//!   Incremental answers every response on its own, in order (discovery.proto, `response_nonce`).
//!   SotW answers the latest response of a type only: an unsent answer to an older one would
//!   carry a stale nonce that the server ignores (xDS protocol, "Requests become stale"), so
//!   every SotW request carries the latest nonce of its type on the stream.

mod cache;
mod changes;
mod commands;
mod config;
mod context;
mod defect;
mod delta;
pub mod deps;
mod event;
mod inputs;
mod outputs;
mod readiness;
mod reads;
pub mod session;
mod sotw;
mod status;
mod subscription;

mod incoming;
mod timers;
mod turn;
mod type_state;
mod type_view;
mod validation;
mod variant;
mod verdicts;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use hashbrown::HashMap;

pub use crate::text::SharedStr;
pub use cache::CachedResource;
pub use changes::{Change, ChangeBatch, ChangeView, EventShape, RemovalReason};
pub use config::{ClientConfig, DataErrors, Limits, NackPolicy};
pub use defect::{At, ResponseDefect};
pub use event::{ClientError, ClientEvent, IgnoreReason, PendingResource, VerdictTicket};
pub use status::{Rejection, ResourceState, ResourceStatus, ServerError, StatusEntry};
pub use subscription::WILDCARD;
pub use validation::{cap_message, Validator, MAX_ERROR_MESSAGE, NACK_CODE, TRUNCATION_MARKER};

use context::Ctx;
use type_state::TypeState;
use validation::Judges;

use crate::time::Instant;

/// The protocol state of one xDS stream (and its successors) to one management server.
///
/// # Method kinds
///
/// As every machine of the crate, a `Client` has four kinds of method:
/// - **inputs** ([`Client::connected`], [`Client::disconnected`],
///   [`Client::handle_response`], [`Client::handle_timeout`]) take `now` and never fail:
///   whatever the server sent becomes state, events and queued requests;
/// - **commands** from the application ([`Client::subscribe`], [`Client::unsubscribe`],
///   [`Client::verdict`], validators) may return a [`ClientError`] and then change nothing;
/// - **outputs** (`poll_*`): after every input or command, drain [`Client::poll_request`],
///   then [`Client::poll_event`], then read [`Client::poll_timeout`];
/// - **reads** (`&self`): the cache and the per-resource status.
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
#[derive(Clone)]
pub struct Client {
    config: ClientConfig,
    types: Vec<TypeState>,
    index: HashMap<SharedStr, usize>,
    judges: Judges,
    timers: timers::Timers,
    events: VecDeque<ClientEvent>,
    send_queue: VecDeque<usize>,
    connected: bool,
    first_on_stream: bool,
    last_now: Instant,
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
    /// Every field of the state (validators by type only), for the fingerprints of model
    /// checkers. Map order follows the maps' hashers, so equal states reached in different
    /// ways may print differently (a checker then explores one state twice; it never
    /// merges two different ones).
    #[doc(hidden)]
    pub fn debug_state(&self) -> alloc::string::String {
        alloc::format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{}|{:?}",
            self.config,
            self.types,
            self.index,
            self.judges,
            self.timers,
            self.events,
            self.send_queue,
            self.connected,
            self.first_on_stream,
            self.last_now,
        )
    }
}

impl Client {
    /// A client with no subscriptions and no stream.
    pub fn new(config: ClientConfig) -> Client {
        Client {
            config,
            types: Vec::new(),
            index: HashMap::new(),
            judges: Judges::default(),
            timers: timers::Timers::default(),
            events: VecDeque::new(),
            send_queue: VecDeque::new(),
            connected: false,
            first_on_stream: false,
            last_now: Instant::ZERO,
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

    /// The type at `idx` and the context its per-type step needs: the only place a
    /// [`Ctx`] is built.
    fn split(&mut self, idx: usize) -> Option<(&mut TypeState, Ctx<'_>)> {
        let Client {
            config,
            types,
            judges,
            timers,
            events,
            last_now,
            ..
        } = self;
        let ts = types.get_mut(idx)?;
        let cx = Ctx {
            idx,
            now: *last_now,
            config,
            judges,
            timers,
            events,
            batch_hint: 1,
        };
        Some((ts, cx))
    }

    /// Puts the type in the send queue if it owes a request.
    fn enqueue(&mut self, idx: usize) {
        if !self.connected {
            return;
        }
        let Some((ts, cx)) = self.split(idx) else {
            return;
        };
        if ts.turn.is_queued() || !ts.has_due(&cx) {
            return;
        }
        ts.turn.set_queued(true);
        self.send_queue.push_back(idx);
    }
}
