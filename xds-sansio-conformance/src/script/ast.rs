//! The parsed form of a scenario file. The language is documented in
//! `docs/scenario-language.md`.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use xds_sansio::client::{DataErrors, EventShape, NackPolicy};
use xds_sansio::message::Variant;
use xds_sansio::server::NotFoundReporting;

/// One scenario file, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The `title:` header, or the file name.
    pub title: String,
    /// Which side the model plays.
    pub model: Model,
    /// SotW or delta.
    pub variant: Variant,
    /// ADS, or one stream for one type.
    pub transport: TransportSpec,
    /// `option: key=value` headers: settings of the model.
    pub options: Options,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The management servers of a `model: session` scenario (`servers:` and
    /// `authority:` headers).
    pub session: SessionSetup,
}

/// The management servers of a `model: session` scenario: each is named by a word that
/// is also its `server_uri`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionSetup {
    /// `servers: a b`: the top-level servers, primary first.
    pub servers: Vec<String>,
    /// `authority: NAME a b`: an authority of `xdstp://` names and its servers, primary
    /// first (none: the top-level ones), in the order written.
    pub authorities: Vec<(String, Vec<String>)>,
    /// `server-features: a ignore_resource_deletion`: a server's `server_features`.
    pub features: Vec<(String, Vec<String>)>,
    /// `server-replicas: a r1 r2`: a server's other addresses (its replicas); the
    /// session's connections to it are then named `a@ADDRESS`.
    pub replicas: Vec<(String, Vec<String>)>,
}

/// The `option: key=value` headers, read at parse time. A setting left out keeps the
/// model's default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `dne-timeout=15s` or `off`: [`ClientConfig::does_not_exist_timeout`](xds_sansio::client::ClientConfig::does_not_exist_timeout).
    pub does_not_exist_timeout: Option<Option<Duration>>,
    /// `nack-policy=reject-all|keep-valid`: [`ClientConfig::nack_policy`](xds_sansio::client::ClientConfig::nack_policy).
    pub nack_policy: Option<NackPolicy>,
    /// `node-on-every-request=true|false`: [`ClientConfig::node_on_every_request`](xds_sansio::client::ClientConfig::node_on_every_request).
    pub node_on_every_request: Option<bool>,
    /// `sotw-refetch-on-ttl-expiry=true|false`: [`ClientConfig::sotw_refetch_on_ttl_expiry`](xds_sansio::client::ClientConfig::sotw_refetch_on_ttl_expiry).
    pub sotw_refetch_on_ttl_expiry: Option<bool>,
    /// `ignore-resource-deletion=true|false`: [`ClientConfig::ignore_resource_deletion`](xds_sansio::client::ClientConfig::ignore_resource_deletion).
    pub ignore_resource_deletion: Option<bool>,
    /// `data-errors=legacy|keep-cached|fail-on-data-errors`: [`ClientConfig::data_errors`](xds_sansio::client::ClientConfig::data_errors) (gRPC A88).
    pub data_errors: Option<DataErrors>,
    /// `resource-timer-is-transient-error=true|false`: [`ClientConfig::with_transient_resource_timer`](xds_sansio::client::ClientConfig::with_transient_resource_timer)
    /// (gRPC A88: a 30 s timer whose expiry is UNAVAILABLE, not does-not-exist).
    pub resource_timer_is_transient_error: Option<bool>,
    /// `client-events=per-resource|batched`: [`ClientConfig::event_shape`](xds_sansio::client::ClientConfig::event_shape)
    /// (batches are checked as the per-resource events they stand for).
    pub client_event_shape: Option<EventShape>,
    /// `sticky-legacy-wildcard=true|false`: [`ServerConfig::sticky_legacy_wildcard`](xds_sansio::server::ServerConfig::sticky_legacy_wildcard).
    pub sticky_legacy_wildcard: Option<bool>,
    /// `sotw-not-found-errors=true|false`: [`ServerConfig::sotw_not_found_errors`](xds_sansio::server::ServerConfig::sotw_not_found_errors).
    pub sotw_not_found_errors: Option<bool>,
    /// `not-found=removed|bodyless`: [`ServerConfig::not_found`](xds_sansio::server::ServerConfig::not_found).
    pub not_found: Option<NotFoundReporting>,
    /// `server-encoded=true`: drain the server with `poll_response_encoded` and decode what
    /// it sends, so a server scenario runs through the encoded path.
    pub server_encoded: bool,
    /// `deps-grace=30s`: [`DepsConfig::unsubscribe_grace`](xds_sansio::client::deps::DepsConfig::unsubscribe_grace)
    /// of the dependency manager (`deps` steps).
    pub deps_grace: Option<Duration>,
    /// `backoff-seed=7`: [`SessionConfig::backoff_seed`](xds_sansio::client::session::SessionConfig::backoff_seed)
    /// of a `model: session` scenario (default 0).
    pub backoff_seed: Option<u64>,
}

/// Which side the model plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The model is the client: `S->C` lines are inputs, `C->S` lines expected outputs.
    Client,
    /// The model is the server: `C->S` lines are inputs, `S->C` lines expected outputs.
    Server,
    /// The model plays both sides; every line is checked as it passes.
    Both,
    /// The model is the client's multi-server session
    /// ([`Session`](xds_sansio::client::session::Session)) and the scenario plays every
    /// management server: `a S->C` lines are inputs on server `a`'s stream, `a C->S`
    /// lines expected outputs; `up a` and `down a` are what the network did.
    Session,
}

/// The transport a scenario's stream uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportSpec {
    /// Every type on one stream.
    Ads,
    /// One stream carrying only this type URL.
    PerType(String),
}

/// One line that does something.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The 1-based line number in the file.
    pub line: usize,
    /// The line as written (without its comment).
    pub source: String,
    /// What it does.
    pub action: Action,
}

/// Which way a message travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `C->S`: a request.
    ClientToServer,
    /// `S->C`: a response.
    ServerToClient,
}

/// A side of the conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client.
    Client,
    /// The management server.
    Server,
}

/// What a step does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A message on the wire, with trailing `[tag]`s (e.g. `[stale]`, `[ack]`, `[nack]`).
    Message {
        /// Its direction.
        direction: Direction,
        /// Its contents.
        message: MessagePattern,
        /// Classification tags the server must agree with.
        tags: Vec<String>,
    },
    /// Several responses, `;`-separated on one line (`S->C (..) ; S->C (..)`): all are
    /// delivered before the client is polled, so one request may answer them all.
    Responses(Vec<MessagePattern>),
    /// Application commands to the client, `;`-separated on one line: they all run before
    /// the client is polled, so their interest changes merge into one request.
    ClientBatch(Vec<ClientCommand>),
    /// Commands to the server's store, `;`-separated on one line: applied as one revision
    /// ([`ResourceStore::apply`](xds_sansio::server::ResourceStore::apply)) before the server is
    /// polled, so every stream sees all of them or none (and ADS can order them).
    ServerBatch(Vec<ServerCommand>),
    /// Time passes.
    Wait(Duration),
    /// The stream breaks.
    Disconnect,
    /// A new stream is up.
    Connect,
    /// An assertion on one side's state.
    Expect(Side, Expectation),
    /// A command to the client's dependency manager (`deps watch l1`); the first one
    /// creates the manager, which from then on takes every client event and gives its
    /// subscription commands to the client.
    Deps(DepsCommand),
    /// An assertion on the dependency manager (`expect deps ...`).
    ExpectDeps(DepsExpectation),
    /// A step of a `model: session` scenario that is not an expectation.
    Session(SessionStep),
    /// An assertion on the session (`expect session ...`).
    ExpectSession(SessionExpectation),
}

/// A step of a `model: session` scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionStep {
    /// `session watch ID TYPE NAME` (`*`: every name of the type).
    Watch {
        /// The watch's id.
        id: u64,
        /// The type URL.
        type_url: String,
        /// The name; `None` for `*`.
        name: Option<String>,
    },
    /// `session unwatch ID`.
    Unwatch(u64),
    /// `up a`: the connection the session asked for to server `a` is up.
    Up(String),
    /// `down a "why"` (no gRPC status: the transport failed) or `down a status=CODE
    /// "why"` (the call ended with that status): server `a`'s connection attempt failed,
    /// or its stream ended.
    Down(String, xds_sansio::client::session::StreamEnd),
    /// `a C->S (..)` or `a S->C (..)`: a message on server `a`'s stream.
    Message {
        /// The server.
        server: String,
        /// Its direction.
        direction: Direction,
        /// Its contents.
        message: MessagePattern,
    },
}

/// An assertion on the session. Connections, closes and events are consumed oldest first
/// by the lines that match them, as the client's events are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionExpectation {
    /// `expect session connect a`: the session asked to connect to `a`.
    Connect(String),
    /// `expect session close a`: the session closed its stream to `a`.
    Close(String),
    /// `expect session no-connect`: no connection asked for that no line consumed.
    NoConnect,
    /// `expect session event KIND ARGS...`: `fell-back AUTHORITY FROM TO`, `reverted
    /// AUTHORITY TO`, `stream-failed SERVER`, `stream-ended SERVER` (`-`: the top-level
    /// authority).
    Event(String, Vec<String>),
    /// `expect session no-event KIND`: no event of this kind that no line consumed.
    NoEvent(String),
    /// `expect session watch ID KIND [NAME] [key=value...]`: watch `ID` was told
    /// `changed NAME version=V`, `does-not-exist NAME`, or an error: `unreachable`,
    /// `rejected [NAME]`, `server-error [NAME]`.
    Watch {
        /// The watch.
        id: u64,
        /// What it was told.
        kind: String,
        /// The resource name, when the event is about one.
        name: Option<String>,
        /// `version=V`.
        details: Vec<(String, String)>,
    },
    /// `expect session no-watch-event ID`: nothing for watch `ID` that no line consumed.
    NoWatchEvent(u64),
    /// `expect session in-use AUTHORITY {a,b}`: the servers the authority uses now.
    InUse(String, Vec<String>),
    /// `expect session quiet`: no server has a request left that no line took.
    Quiet,
}

/// A command to the dependency manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepsCommand {
    /// `deps watch NAME...`: watch listeners (gRPC's shape).
    Watch(Vec<String>),
    /// `deps unwatch NAME...`.
    Unwatch(Vec<String>),
    /// `deps watch-all`: every listener and cluster (Envoy's shape).
    WatchAll,
}

/// What a listener or a cluster of the manager's configuration must resolve to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `ok` (a listener) or `{leaf,...}` (a cluster's leaves, in order).
    Ok(Vec<String>),
    /// `error "text"`: a failure whose message contains the text.
    Error(String),
}

/// An assertion on the dependency manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepsExpectation {
    /// `expect deps snapshot`: consumes the oldest snapshot no line has consumed.
    Snapshot,
    /// `expect deps no-snapshot`: no snapshot waits to be consumed.
    NoSnapshot,
    /// `expect deps waiting {CDS:b,EDS:b}`: exactly these resources are waited for.
    Waiting(Vec<(String, String)>),
    /// `expect deps listener L ok|error "text"`.
    Listener(String, Outcome),
    /// `expect deps cluster L C {leaf,...}|error "text"`.
    Cluster(String, String, Outcome),
}

/// A command the client application gives.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientCommand {
    /// Subscribe to names (`*` for wildcard) of a type.
    Subscribe(String, Vec<String>),
    /// Unsubscribe from names of a type.
    Unsubscribe(String, Vec<String>),
    /// From now on, validate this type's responses with a verdict given later.
    Defer(String),
    /// The verdict on the pending response of a type: reject these names (all when
    /// empty) with a reason.
    Reject(String, Vec<String>, String),
    /// The verdict on the pending response of a type: accept it.
    Accept(String),
}

/// A command the server application gives to its store.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerCommand {
    /// Set (add or replace) resources; publishes their type.
    Set(String, Vec<Item>),
    /// Remove resources.
    Remove(String, Vec<String>),
    /// Publish a type with whatever resources it holds, possibly none
    /// ([`ResourceStore::serve_type`](xds_sansio::server::ResourceStore::serve_type)).
    Publish(String),
    /// `server error TYPE NAME CODE ["message"]`: publish an error for a name (`*`: the
    /// type's) instead of a body
    /// ([`ResourceStore::set_error`](xds_sansio::server::ResourceStore::set_error)).
    Error {
        /// The type URL.
        type_url: String,
        /// The resource name, or `*`.
        name: String,
        /// The `google.rpc.Code`.
        code: i32,
        /// The message (the code's name when the line gives none).
        message: String,
    },
    /// `server clear-error TYPE NAME`: clear it
    /// ([`ResourceStore::clear_error`](xds_sansio::server::ResourceStore::clear_error)).
    ClearError(String, String),
}

/// An assertion.
#[derive(Clone, Debug, PartialEq)]
pub enum Expectation {
    /// An event the side emitted since the last step that consumed events: its kind
    /// (`upserted`, `removed`, `does-not-exist`, `acked`, `nacked`, `ready`, `stale`, ...),
    /// type, optional name, and `key=value` details.
    Event {
        /// The event kind.
        kind: String,
        /// The type URL.
        type_url: String,
        /// The resource name, when the event is about one.
        name: Option<String>,
        /// Other details (`version=X`, `reason=absent`, ...).
        details: Vec<(String, String)>,
    },
    /// No event of this kind (and type, and name) among those `scope` covers.
    NoEvent {
        /// The event kind.
        kind: String,
        /// The type URL (empty for `protocol-error`).
        type_url: String,
        /// The resource name.
        name: Option<String>,
        /// Which events are looked at: `no-event` or `no-new-event`.
        scope: EventScope,
    },
    /// `expect server sends (..) within 10s`: time passes by the period, and every response
    /// the server sends meanwhile (at least one) matches the message; each is delivered to
    /// the client as it is sent. For what a server may send at any time, such as TTL
    /// heartbeats.
    Sends {
        /// What every response must match.
        message: MessagePattern,
        /// How long to let pass.
        within: Duration,
    },
    /// The side's cache (client) or store (server) of a type holds exactly these.
    Cache(String, Vec<Item>),
    /// The per-resource status of one resource.
    Status(String, String, String),
    /// The `control_plane.identifier` the client keeps for a type (`-`: none).
    ControlPlane(String, String),
    /// The side has no message left to send.
    Quiet,
}

/// Which events a `no-event` expectation looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventScope {
    /// `no-event`: the events that no `expect ... event` line has consumed, however old.
    Pending,
    /// `no-new-event`: every event since the last step that gave the side input, consumed
    /// or not. The client's inputs are responses (`S->C`, `sends`) and client commands, the
    /// server's are requests (`C->S`) and store commands, and both sides' are `wait`,
    /// `disconnect` and `connect`.
    SinceLastInput,
}

/// `node=-`: a request without a node (built), or that must carry none (checked).
pub const NO_NODE: &str = "-";

/// `N=^`: the nonce of the latest response of the request's type on this stream (built),
/// or that the request must echo (checked).
pub const LATEST_NONCE: &str = "^";

/// A resource in a message or a command: `name[@version][:tag][attr...]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Item {
    /// The resource name.
    pub name: String,
    /// Its version, when given.
    pub version: Option<String>,
    /// A tag that stands for its body: same tag, same body.
    pub tag: Option<String>,
    /// A TTL (`[ttl=30s]`).
    pub ttl: Option<Duration>,
    /// Aliases (`[alias=a]`, repeatable).
    pub aliases: Vec<String>,
    /// No body (`[nobody]`): a heartbeat or a does-not-exist marker.
    pub no_body: bool,
    /// Wrapped in a `Resource` in SotW (`[wrapped]`; implied by a TTL and by `[nobody]`
    /// when built). Checked in a SotW response the model sends.
    pub wrapped: bool,
    /// Not wrapped in a `Resource` (`[unwrapped]`, SotW): checked in a response the model
    /// sends; the default when built.
    pub unwrapped: bool,
    /// The type URL of the body's `Any`, when not the message's (`[type=CDS]`).
    pub any_type: Option<String>,
    /// References the body carries (`[ref=RDS:r1]`, repeatable): `(type URL, name)`.
    pub refs: Vec<(String, String)>,
}

/// What is known about the error of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorPattern {
    /// No `E=`: the request must carry no `error_detail` (an ACK or a subscription change).
    Absent,
    /// `E=*`: some `error_detail` (a NACK), whatever its message.
    Any,
    /// `E="text"`: an `error_detail` whose message contains this text.
    Contains(String),
    /// `E=="text"`: an `error_detail` whose message is exactly this text.
    Exact(String),
}

/// A message as a scenario writes it. Scalars are symbols: when the model produces a
/// value, a symbol seen for the first time binds to it; a bound symbol must match it.
#[derive(Clone, Debug, PartialEq)]
pub enum MessagePattern {
    /// `(V=..,R={..},N=..,T=..[,E=..])` from the client.
    SotwRequest {
        /// `V=`: version_info.
        version: Option<String>,
        /// `R=`: resource_names, as a set.
        names: Option<Vec<String>>,
        /// `N=`: response_nonce ([`LATEST_NONCE`]: the latest one sent of the type).
        nonce: Option<String>,
        /// `T=`: the type URL (`T=-`: empty).
        type_url: String,
        /// `E=`: error_detail.
        error: ErrorPattern,
        /// `node=`: the node id, when the request must carry one; [`NO_NODE`] when it
        /// must carry none.
        node: Option<String>,
    },
    /// `(V=..,R={..},N=..,T=..)` from the server.
    SotwResponse {
        /// `V=`: version_info.
        version: Option<String>,
        /// `R=`: the resources.
        resources: Option<Vec<Item>>,
        /// `N=`: nonce.
        nonce: Option<String>,
        /// `T=`: the type URL (`T=-`: empty).
        type_url: String,
        /// `F=`: resource_errors as `name@CODE` (xRFC TP3), as a set.
        errors: Option<Vec<Item>>,
        /// `CP=`: control_plane.identifier (`CP=-`: no control_plane).
        control_plane: Option<String>,
    },
    /// `(T=..,S={..},U={..},I={..},N=..[,E=..])` from the client.
    DeltaRequest {
        /// `T=`: the type URL (`T=-`: empty).
        type_url: String,
        /// `S=`: resource_names_subscribe, as a set.
        subscribe: Option<Vec<String>>,
        /// `U=`: resource_names_unsubscribe, as a set.
        unsubscribe: Option<Vec<String>>,
        /// `I=`: initial_resource_versions (`name@version`).
        initial: Option<Vec<Item>>,
        /// `N=`: response_nonce ([`LATEST_NONCE`]: the latest one sent of the type).
        nonce: Option<String>,
        /// `E=`: error_detail.
        error: ErrorPattern,
        /// `node=`: the node id; [`NO_NODE`] for none.
        node: Option<String>,
    },
    /// `(V=..,R={..},X={..},N=..,T=..)` from the server.
    DeltaResponse {
        /// `V=`: system_version_info.
        version: Option<String>,
        /// `R=`: the resources.
        resources: Option<Vec<Item>>,
        /// `X=`: removed_resources, as a set.
        removed: Option<Vec<String>>,
        /// `N=`: nonce.
        nonce: Option<String>,
        /// `T=`: the type URL (`T=-`: empty).
        type_url: String,
        /// `F=`: resource_errors as `name@CODE` (xRFC TP3), as a set.
        errors: Option<Vec<Item>>,
        /// `CP=`: control_plane.identifier (`CP=-`: no control_plane).
        control_plane: Option<String>,
    },
}

impl MessagePattern {
    /// The type URL of the message.
    pub fn type_url(&self) -> &str {
        match self {
            MessagePattern::SotwRequest { type_url, .. }
            | MessagePattern::SotwResponse { type_url, .. }
            | MessagePattern::DeltaRequest { type_url, .. }
            | MessagePattern::DeltaResponse { type_url, .. } => type_url,
        }
    }
}
