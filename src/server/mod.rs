//! The management-server half: a [`ResourceStore`] the application publishes into, one
//! [`ServerStream`] per gRPC stream (SotW or delta, ADS or one type), and a [`StreamSet`]
//! that indexes many streams so a store update touches only the streams it concerns.
//!
//! # Call order
//!
//! One stream on its own:
//!
//! 1. `ServerStream::new(ServerConfig::new(variant, transport))` when the call opens.
//! 2. For each request received: `handle_request(now, request)`, then drain
//!    `poll_event()` (the first event is `NodeIdentified`: pick the store for that node),
//!    then `poll_response(now, &store)` until `None`, sending each response in order.
//! 3. After every store change: `poll_response(now, &store)` until `None`. The stream reads
//!    the store's change log since the last call ([`ResourceStore::changes_since`]).
//! 4. At `poll_timeout()`: `handle_timeout(now)`, then `poll_response` until `None`
//!    (TTL heartbeats).
//!    Each `poll_response` has an encoded twin, `poll_response_encoded`: the same response
//!    (same nonce, same state change) as the bytes its message encodes to, assembled from
//!    each stored body and its frame's tags, worked out once per resource
//!    ([`EncodedResponse`]), a wildcard full
//!    state shared between streams rather than copied ([`EncodedBytes`]); use it with a
//!    codec that writes pre-encoded messages and skip the encode.
//! 5. When `is_closed()` (after a [`ServerEvent::ProtocolError`]): end the call with
//!    [`ProtocolError::grpc_code`].
//!
//! Many streams on one store ([`StreamSet`]): `insert(config)` per call;
//! `handle_request(id, ..)`; after store changes `sync(&store)`; then
//! `while let Some(id) = poll_ready() { while let Some(r) = poll_response(id, now, &store)
//! { send(id, r) } }`, and `poll_event(id)` likewise; at `poll_timeout()`,
//! `handle_timeout(now)` then the same drain. `sync` looks each change up in a
//! `(type, name)` → streams and a type → wildcard-streams index, so one changed resource
//! costs about the same with 100 or 10 000 streams (see `benches/README.md`). Different
//! nodes may read different stores: use one `StreamSet` per store.
//!
//! # Where each rule lives
//!
//! `flow.rs`: request classification (first / ACK / NACK / stale / update) and TTL timers,
//! for both variants. `stream.rs`: node, type URL and variant checks, nonces, ADS order.
//! `type_state.rs`: one type on one stream, the one place that dispatches between SotW and
//! delta, and the publication hold.
//! `sotw.rs`: SotW subscriptions (wildcard, names), full state vs changes, NACK hold.
//! `delta.rs`: per-resource client versions, subscribe/unsubscribe, not-found, removals.
//! `resource_errors.rs`: the errors the application publishes instead of bodies.
//! `store.rs`: resources, versions, publication, change log (several changes may share a
//! revision: [`ResourceStore::apply`] updates several types at once). `index.rs`: which streams a change concerns.
//! `consistency.rs`: dangling references of a publication, make-before-break plans.
//!
//! # Versions
//!
//! A resource's default version is FNV-1a 64 of its body ([`body_version`]); the
//! application may supply its own. The SotW `version_info` of a type is a digest of the
//! `(name, version, TTL)` of what the response leaves the client holding ([`VersionSum`]):
//! the same on every replica, so a client reconnecting to another replica with the `version_info`
//! it holds for LDS/CDS is not sent the same state again. Delta's `system_version_info` is
//! the digest of the whole type in the store (debug only, as the protocol says).
//! Nonces are `1`, `2`, `3`, ... per stream: unique and deterministic.
//!
//! # Running replicas
//!
//! Management servers run as replicas behind a load balancer, and a client whose replica
//! dies reconnects to another one. The recipe:
//!
//! - Feed every replica the same publications (the same resources, names and TTLs; the
//!   order and the history do not matter). Leave versions to the store (the body hash) or
//!   derive them from the content; never from a counter local to one replica. Versions
//!   and SotW `version_info` are then byte-identical on every replica.
//! - Nonces are per stream (`1`, `2`, ...) and differ between replicas; a nonce never
//!   crosses streams, so that costs nothing.
//! - Publish every type a replica serves before it takes traffic ([`ResourceStore::serve_type`]):
//!   a replica that has not loaded its configuration then says nothing rather than "none".
//! - What a moved client already holds is not sent again where it can say exactly what it
//!   holds: incremental clients by `initial_resource_versions`, SotW wildcard LDS/CDS by
//!   `version_info`. SotW named subscriptions (gRPC's LDS and CDS, every EDS/RDS) are
//!   answered in full on the new stream, because their `version_info` need not describe
//!   what the client holds (see "No identical resend" below).
//!   `tests/replica_failover.rs` moves 10 000 clients: zero bytes resent for incremental
//!   clients, only the named EDS part for Envoy-shaped SotW clients (`benches/README.md`).
//!
//! # Memory of an incremental stream
//!
//! A delta stream must know what its client holds, name by name, to send only what
//! differs. A stream subscribed by wildcard, once its full answer is out, holds what the
//! store holds: it then keeps only the names whose held state differs from the store's
//! (changed since and not sent yet, published errors, absences), and reads the rest from
//! the store (`known.rs`, [`ServerConfig::delta_in_step`]). What the client held of a
//! changed resource comes from the change log ([`StoreChange::before`]), read before the
//! stream next looks at the store. So 100 000 wildcard streams over one type cost what is
//! in flight to them, not 100 000 copies of the type's names. If the log runs past such a
//! stream (more changes between two polls than the log holds, as when a large type is
//! republished whole), the stream recovers from what the store still says: every resource
//! changed since is resent, and every name removed since (the store keeps as many removed
//! names as its log holds changes, `graves.rs`) is told removed. Only if the removals too
//! run past it (more removals than the log holds) does it end, with
//! [`ProtocolError::ChangeLogOutrun`] (`UNAVAILABLE`), for the client to resume with
//! `initial_resource_versions`, which the
//! protocol defines for exactly this ("the first message (for a given type_url) of a
//! reconnected gRPC stream has a third role: informing the server of the resources (and
//! their versions) that the client already possesses"). A stream subscribed by
//! name keeps an entry per name, as it must: which names it holds is its own.
//!
//! # Decisions
//!
//! - **Classification** (one home, `flow.rs`, shared by SotW and delta). The first request
//!   of a type opens it. A request whose `response_nonce` is the latest this stream sent
//!   for the type is an ACK, or a NACK when `error_detail` is present; a NACK is never
//!   inferred from `version_info` (seed: "Only the NACK should populate the
//!   error_detail"). A second request with the same nonce is a subscription update (the
//!   seed's "additional DiscoveryRequests at a given version_info ... with new resource
//!   hints").
//! - **Stale nonces** (seed, "Resource updates": "The management server should not send a
//!   DiscoveryResponse for any DiscoveryRequest that has a stale nonce"; envoy#10363 and the
//!   delta text "the server must honor changes to the subscription state even if the nonce
//!   is stale"). A request whose nonce is not the latest sent for its type is reported as
//!   [`ServerEvent::StaleRequest`] and is never an ACK or NACK, but its resource names are
//!   applied: dropping them would lose a subscription for good, since the client will not
//!   repeat it. In SotW a stale request is never answered by itself, even when it names
//!   something new: what it changed is served by the response that the client's next
//!   request that is not stale (its answer to our latest response) triggers, so that
//!   answer is never made stale by a response to the stale request. A store change meanwhile
//!   is still pushed (the store asks for it, not the stale request) and carries the new
//!   names too. In SotW an empty nonce after a response was sent is stale too (the request
//!   crossed the response); in delta an empty nonce is a spontaneous request, and a delta
//!   request with a stale nonce is answered ("the server must honor changes to the
//!   subscription state even if the nonce is stale": delta responses carry only what the
//!   request changed, so answering cannot make anything stale that matters).
//! - **Publication** (the restart hazard: a management server that has not loaded its
//!   configuration yet would answer a reconnecting client's LDS/CDS wildcard with an empty
//!   full state, and the client would drop every listener or cluster it holds). The store
//!   knows which types the application has published ([`ResourceStore::serve_type`], or
//!   setting any resource of the type; a type published with zero resources is published).
//!   Until then every request for the type, wildcard or named, SotW or delta, is held
//!   without an answer and without busy work ([`ServerStream::poll_timeout`] says nothing
//!   for it); the publication answers them. An application that serves a fixed set of types
//!   publishes each once at start, as go-control-plane's snapshot does for every type.
//! - **Limits** (the crate's rule that the peer cannot make us hold unbounded state):
//!   [`ServerLimits`] bounds the names of one request, the length of a name and the type
//!   URLs of one stream. A request beyond them closes the stream with
//!   [`ProtocolError::LimitExceeded`] (gRPC `RESOURCE_EXHAUSTED`) before any of it is
//!   applied, so nothing of it is held.
//! - **Node** (seed: "Only the first request on a stream is guaranteed to carry the node
//!   identifier ... The node identifier should always be identical if present more than
//!   once"): required on the first request ([`ServerConfig::require_node`]), compared
//!   whole on every later request that carries one; a difference closes the stream.
//! - **Type URL** (discovery.proto: "implicit in requests made via singleton xDS APIs ...
//!   but is required for ADS"): empty on ADS closes the stream; on a single-type stream an
//!   empty type URL means the stream's type and another one closes the stream.
//! - **Not found in SotW** (newest text, xRFC TP3; the older text gives SotW no way to say it):
//!   with [`ServerConfig::sotw_not_found_errors`] a response carries a `resource_errors`
//!   entry of code NOT_FOUND for each name newly subscribed (or re-requested on a new
//!   stream) that the store lacks, and, for types that are not full-state, for each name
//!   sent or subscribed that leaves the store; a name only subscribed gets an answer that
//!   holds only the error. Each is said once. Off by default (older clients ignore the
//!   field, so it is safe to turn on).
//! - **Resource errors** (newest text, `resource_errors` of both responses, xRFC TP3;
//!   gRPC A88 is how gRPC clients read them). The application publishes an error in place
//!   of a body ([`ResourceStore::set_error`]): per name, or per type ([`TYPE_WIDE`], `*`:
//!   every name of the type the store holds neither a body nor an error of its own for). It
//!   is published like any change (a revision, the change log, the [`StreamSet`] index; a
//!   type error concerns every subscriber of the type); setting it removes the name's body,
//!   a body set later replaces it, [`ResourceStore::clear_error`] leaves the name not
//!   existing. A subscriber by name hears the error of its names, the type's included; a
//!   wildcard subscriber hears every name's own error and the type's once, under `*` (TP3:
//!   an error for the wildcard subscription as a whole). In SotW LDS/CDS an error is part
//!   of the full state: every response lists the errors in force for what it covers, the
//!   resource absent from the list and its error listed (a full-state response that left
//!   the name out without its error would delete it: "Grouping Resources into Responses"),
//!   and each error enters the version digest beside the bodies (so a new error is a new
//!   version, the same state is not resent, and replicas agree). Other SotW types and delta
//!   say each error once, in place of the body (never with a removal: gRPC A88 keeps a
//!   client's cached resource on a transient error and by default on NOT_FOUND and
//!   PERMISSION_DENIED too, a removal would not); the same error is not said again (no
//!   identical resend), a newly subscribed name is answered with its error. Errors are
//!   store calls, not [`StoreOp`]s: batching them with a publication would need the
//!   consistency checks to know them.
//! - **Wildcard** (seed, "How the client specifies what resources to return"; newest
//!   text): for LDS and CDS a first SotW request with no names is a legacy wildcard. It
//!   lasts while requests carry no names; a request that names resources without `*` ends
//!   it, and one with `*` keeps it as an explicit wildcard. That is the newest protocol
//!   text and what Envoy sends since 1.21 (go-control-plane#558). The older text's rule, "once a
//!   stream has entered wildcard mode ... resource names specified in any subsequent
//!   request on the stream will be ignored", is the option
//!   [`ServerConfig::sticky_legacy_wildcard`]. `*` among the names is an explicit wildcard
//!   for any type, in SotW for as long as requests carry it, in delta until unsubscribed.
//!   A first SotW wildcard request is answered even when the published type is empty,
//!   unless the client already holds exactly that version (reconnect to a replica). A new
//!   delta wildcard (legacy or `*`) is always answered, with an empty response when nothing
//!   is new, also on a reconnect whose `initial_resource_versions` already match: the
//!   client learns that its wildcard set is complete.
//! - **No identical resend** (SotW): a response whose version equals the last one sent for
//!   the type carries the same resources (the version is their digest), so it is not sent
//!   again: names joining a `*` that already brought them, `*` dropped while the names
//!   cover everything. Except when the client may lack some of it: names it unsubscribed
//!   and took back since (it dropped them: "the server must resend any newly requested
//!   resources"), and the stream's first request with names (the version a client states
//!   on a new stream need not describe what it holds by name: it may have ignored
//!   resources that crossed its unsubscription, or kept the valid part of a response it
//!   NACKed, gRPC A46).
//! - **`xdstp://` names** (xDS TP1; newest text, "xdstp:// resource names"): names are
//!   compared in canonical form (context parameters sorted), in requests and in the store,
//!   which refuses a malformed `xdstp://` name ([`StoreError::MalformedXdstpName`]). A
//!   subscription to a glob collection (`xdstp://authority/TYPE/path/*`) receives every
//!   published resource under that path with the same context parameters, SotW and delta,
//!   later members too; a member removed is removed (delta `removed_resources`; LDS/CDS
//!   SotW full state); a glob with no member is answered (delta: the glob name in
//!   `removed_resources`; SotW: a response); an exact name and a glob may be subscribed
//!   side by side. The [`StreamSet`] finds a member's subscribers through its glob.
//! - **What SotW sends** (seed, "Grouping Resources into Responses", "When to send an
//!   update"): LDS/CDS responses carry every subscribed (wildcard: every) resource; other
//!   types carry only resources whose version differs from what was sent plus newly
//!   subscribed names, which are always sent even if unchanged ("the server must resend any
//!   newly requested resources"); for LDS/CDS a newly subscribed name is answered even when
//!   it does not exist (its absence in the full state says so at once, and corrects a
//!   client that got the name in a response that crossed its unsubscription). A
//!   non-LDS/CDS resource removed from the store is not sent (SotW cannot say it) but
//!   forgotten, so if it "springs into existence later" it is pushed. Nothing is sent when nothing the client holds would change.
//! - **NACK hold**: a NACK changes nothing the server plans to send. The rejected version
//!   stays recorded as sent, so it is not resent in a loop; the next response for that type
//!   comes when the store changes something the client subscribes to (or it subscribes to
//!   something new). The application sees [`ServerEvent::Nacked`] and may fix the store.
//! - **Delta versions** (discovery.proto, `initial_resource_versions`): the server tracks
//!   per resource the version the client holds: from `initial_resource_versions` (whose
//!   keys count as subscriptions, so a key the store lacks is answered with a removal) and
//!   from what it sent. Names in `resource_names_subscribe` are answered even when the
//!   client seems to hold them ("the server must still provide those resources"), except
//!   on the first request of a type for names that are also keys of
//!   `initial_resource_versions` (Envoy's reconnect lists both): those are sent only when
//!   the store's version differs (seed, "Incremental xDS": "the Incremental xDS client may
//!   tell the server of its known resources to avoid resending them over the network").
//!   Phantom unsubscribes are ignored ("it can simply ignore these phantom
//!   unsubscriptions"). Unsubscribing a name while wildcard answers with the resource (it
//!   is still covered by the wildcard but the client dropped it) or its removal.
//! - **Not found in delta** (seed, "Knowing When a Requested Resource Does Not Exist":
//!   "the server will send a Resource whose name field matches ... and whose resource field
//!   is unset"): by default a subscribed name that does not exist is listed in
//!   `removed_resources`, which is what deployed clients act on; with
//!   [`NotFoundReporting::BodylessResource`] it is sent as the protocol text describes. Either way it
//!   is reported once per subscription, and the resource is pushed if it appears later.
//! - **TTL** (discovery.proto, `Resource.ttl`: "The TTL can be refreshed ... by sending a
//!   response that doesn't change the resource version ... the resource field does not need
//!   to be populated"): a resource with a TTL is sent with it (SotW: wrapped in `Resource`,
//!   encoded once by the store); `ttl / heartbeat_divisor` (default half the TTL) after it
//!   was last sent, a body-less `Resource` with the same version is sent. For LDS/CDS in
//!   SotW the heartbeat is a full-state response in which TTL resources are body-less.
//! - **ADS order** (xDS protocol, "Eventual consistency considerations": CDS, then EDS,
//!   then LDS, then RDS, then VHDS; "Stale CDS clusters and related EDS endpoints ... can
//!   then be removed"): when several types have something to send, responses come in that
//!   order, then unknown types by URL. In delta, removals wait until no type has upserts
//!   left and then go out in the reverse order (VHDS ... CDS), so a client never loses a
//!   cluster before the routes that stop using it arrive; a type's removals ride with its
//!   own upserts when no other type has upserts. In SotW, LDS/CDS removals are implied by
//!   a full-state response and therefore travel at that type's place in the order, before
//!   the routes: make-before-break across SotW types needs two publications (below).
//! - **Consistency** ([`ResourceStore::consistency`], [`ResourceStore::consistency_of`],
//!   [`Consistency::Enforce`]; `consistency.rs`): every name a listener, route
//!   configuration or cluster refers to ([`crate::refs`]) must be published, in the types
//!   the store serves; the check lists each [`Dangling`] reference, and under enforcement
//!   an inconsistent publication is refused whole. [`ResourceStore::apply`] makes a
//!   publication of several types one revision, which is what a consistent change across
//!   types needs (the route and its new cluster together); the adapter's node groups
//!   publish through it (`XdsServer::publish(group, ops)` in xds-sansio-tonic), and its
//!   `update(group, ..)` gives the store for `set_consistency` and the two phases below.
//! - **Make-before-break** ([`ResourceStore::plan_make_before_break`]): a publication that
//!   removes what something published still names is split in two ([`TwoPhase`]): first
//!   every set and the removals nothing names, then, once the streams are settled
//!   ([`ServerStream::is_settled`], [`StreamSet::is_settled`]: everything sent and
//!   ACKed), the removals of what the old resources named. The protocol text asks for
//!   exactly that ("providing a CDS/EDS update with both X and Y, then the RDS update
//!   repointing from X to Y and then a CDS/EDS update dropping X").
//!
//!   What is *guaranteed*: on one stream (ADS, SotW or delta), within one publication,
//!   new resources go out before what refers to them (the ADS order above), and with the
//!   two phases a removal goes out only after the client has ACKed the resources that
//!   stopped naming the removed one (`tests/consistency.rs` checks, message by message,
//!   that the client never holds a route whose cluster it lacks). Under
//!   [`Consistency::Enforce`], no publication leaves a published resource naming a
//!   missing one. What is only *ordered*: across per-type streams (one gRPC stream per
//!   type, possibly to different servers) each stream is its own machine and nothing
//!   orders one stream's responses against another's ("It's challenging to provide the
//!   above guarantees on sequencing to avoid traffic drop when management servers are
//!   distributed. ADS allow a single management server, via a single gRPC stream, to
//!   deliver all API updates"); there the two phases still hold removals back until every
//!   stream of the [`StreamSet`] has ACKed, but new clusters and the routes naming them
//!   race, and the client's warming (clusters are warmed, routes are not) is what remains.
//!   The server never waits for ACKs between types on its own: the second phase is the
//!   application's call.

//! # Not done (yet)
//!
//! - `resource_locators` / dynamic parameters are not interpreted.
//! - TTLs are sent whatever the node's `client_features` say
//!   (`xds.config.supports-resource-ttl`, `xds.config.supports-resource-in-sotw`).
//! - The store keeps its last changes, as many as a quarter of the resources it holds
//!   (at least 1 024, at most [`DEFAULT_LOG_CAPACITY`]); a stream or set that falls
//!   further behind rescans its subscriptions (correct, slower); an incremental stream in
//!   step with the store that falls behind by more than [`DEFAULT_LOG_CAPACITY`]
//!   removals ends (see "Memory of an incremental stream").

mod applied;
mod body_checks;
mod change_log;
mod config;
mod consistency;
mod dangling;
mod delta;
mod event;
mod flow;
mod frame;
mod graves;
mod index;
mod known;
mod names;
mod owed;
mod packing;
mod prefetch;
mod publication;
mod resource_errors;
mod resource_table;
mod shared;
mod sotw;
mod store;
mod stream;
mod subscribers;
mod type_state;
mod version;
mod wire;

pub use applied::{AppliedState, InFlight, Nacked};
pub use body_checks::BodyChecks;
pub use change_log::DEFAULT_LOG_CAPACITY;
pub use config::{NotFoundReporting, ServerConfig, ServerLimits};
pub use consistency::{Consistency, ConsistencyReport, Dangling};
pub use dangling::TwoPhase;
pub use event::{Ignored, Limit, ProtocolError, ServerEvent};
pub use index::{StreamId, StreamSet, UnknownStream};
pub use publication::{
    LogTruncated, ResourceEntry, ResourceSet, Revision, StoreChange, StoreError, StoreOp,
};
pub use resource_errors::TYPE_WIDE;
pub use store::{ResourceStore, StoredResource};
pub use stream::ServerStream;
pub use subscribers::{Concern, SubscriptionIndex};
pub use version::{body_version, entry_hash, fnv1a64, pair_hash, VersionSum};
pub use wire::{EncodedBytes, EncodedResponse};
