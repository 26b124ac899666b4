//! REST-JSON polling (feature `json`): the client and server sides of xDS over plain HTTP
//! `POST`s, as Sans-IO state machines.
//!
//! xDS protocol, "REST-JSON polling subscriptions": "Synchronous (long) polling via REST
//! endpoints is also available for the xDS singleton APIs. The above sequencing of messages
//! is similar, except no persistent stream is maintained to the management server. It is
//! expected that there is only a single outstanding request at any point in time, and as a
//! result the response nonce is optional in REST-JSON. The JSON canonical transform of
//! proto3 is used to encode DiscoveryRequest and DiscoveryResponse messages. ADS is not
//! available for REST-JSON polling." Its older revision adds: "When the poll period is set
//! to a small value, with the intention of long polling, then there is also a requirement
//! to avoid sending a DiscoveryResponse unless a change to the underlying resources has
//! occurred."
//!
//! # Shapes
//!
//! Requests and answers are HTTP-shaped values ([`HttpRequest`], [`HttpResponse`]): the
//! method, the path of the type catalog ([`crate::types::ResourceType::rest_path`], e.g.
//! `POST /v3/discovery:clusters`), a content type and the canonical proto3 JSON body of
//! [`crate::codec::json`]. The embedding program moves them over whatever HTTP stack it has.
//!
//! # Client decisions ([`RestClient`])
//!
//! * **One home for the rules.** A [`RestClient`] holds a
//!   [`SingleTypeClient`](crate::single_type::SingleTypeClient): the SotW client of its one
//!   type, connected for its lifetime (REST has no stream to break), as a file
//!   subscription does. Versions, ACK/NACK by version (`version_info` is the last accepted
//!   version, a NACK carries `error_detail`), validation, the cache, deletion for
//!   full-state types, duplicate names, type mismatch, does-not-exist and TTL timers are
//!   the client's rules. REST adds only the exchange: when a request may leave, how an HTTP
//!   outcome changes state, and the JSON bodies. The reads (`resource`, `resource_names`,
//!   `version`, `status`, `dump`, `type_url`) are the single-type client's, through
//!   `Deref`.
//! * **A single outstanding request.** Each [`HttpRequest`] has an id; while one is in
//!   flight no other is issued, and an answer is accepted only for the id in flight
//!   (others are reported as [`RestEvent::StaleAnswer`] and change nothing). The one
//!   exception is a subscription change during a long poll: waiting for the server's
//!   deadline would delay the new names (and let their does-not-exist timers run without a
//!   request), so the next request *supersedes* the one in flight
//!   ([`HttpRequest::supersedes`]): the caller aborts the old exchange before sending, so
//!   one request is outstanding again.
//! * **When a poll is due.** The first request leaves at once; after every completed
//!   exchange (an answer of any kind, or [`RestClient::handle_failure`]) the next is due
//!   `poll_period` later (Envoy's `refresh_delay`; keep it small for long polling); a
//!   subscription change makes it due at once. [`RestClient::poll_timeout`] says when.
//!   With [`RestConfig::request_timeout`], an exchange unanswered for that long counts as
//!   failed at that time. There is no jitter (Envoy adds some to `refresh_delay`): outputs
//!   are deterministic, and a caller that wants jitter varies `now` or the period itself.
//!   Failures do not back off either: the next poll is one period later, as in Envoy.
//! * **What is sent.** A request the SotW client has queued (its first request, an ACK, a
//!   NACK, a subscription change) is sent as is; several queued between two polls collapse
//!   into the last one, which carries the same version, nonce and names (a NACK's
//!   `error_detail` is kept if a later request of the same nonce would drop it). When
//!   nothing is queued the last request is repeated without `error_detail`: a NACK is said
//!   once, as on a stream, while `version_info` keeps saying what is accepted. The node is
//!   on every request: each HTTP request stands alone (Envoy does the same).
//! * **Nonce optional.** A response without a nonce is handled like any other; the next
//!   request echoes whatever nonce the last response had (possibly none).
//! * **HTTP outcomes.** `200` with a body: the body is read as canonical JSON and handled by
//!   the SotW rules. `304 Not Modified` (what Envoy's REST fetcher treats as "no change"):
//!   nothing changes. Any other status, a `200` with an empty body, a body that is not a
//!   JSON `DiscoveryResponse` (read by
//!   [`JsonCodec::parse_text`](crate::codec::json::JsonCodec::parse_text), as JSON files are, so
//!   the failure names the line and column; unknown fields are refused unless
//!   [`RestConfig::ignore_unknown_fields`]), or a transport failure:
//!   reported as [`RestEvent::Failed`], nothing changes, and the next poll repeats the same
//!   version. A body that cannot be read is not NACKed: there is no version or nonce to
//!   NACK, as a gRPC stream would not NACK a message that fails to decode.
//! * **No ADS, no delta.** [`RestClient::new`] refuses a configuration for ADS
//!   ([`RestError::AggregatedNotAvailable`]) or incremental xDS
//!   ([`RestError::DeltaNotAvailable`], the single-type client's refusal, which file
//!   subscriptions share), and types without a REST path (VHDS) unless the caller names
//!   one ([`RestConfig::path`]).
//!
//! # Server decisions ([`RestServer`])
//!
//! * **One home for the rules.** Each waiting request gets its own SotW
//!   [`crate::ServerStream`] for its type (inside a [`crate::StreamSet`]), fed that one
//!   request as the first of a stream, so what a response carries (full state for LDS/CDS,
//!   the subscribed resources for other types), its `version_info` (a digest of what it
//!   leaves the client holding, the same on every replica) and the wildcard rules are the
//!   server's. Requests are independent: no per-client state survives between polls, so
//!   any replica can answer any poll. The set's index means a store change wakes only the
//!   waiting requests it concerns, and the change log is read once for all of them.
//! * **Answer only on change (long poll).** The `version_info` of the request says what the
//!   client holds; a response whose version equals it is not sent. Nor is one whose version
//!   equals the request's `response_nonce`: REST responses carry their `version_info` as
//!   nonce, so a client that NACKed version Y (and still holds X) is not sent Y again (the
//!   NACK hold of the streaming server). Otherwise the request waits, and the stream
//!   watches the store: the first change to what it covers produces the answer. A client
//!   that echoes no nonce can only be held by its `version_info`.
//! * **One store per server.** A [`RestServer`] answers from one
//!   [`crate::ResourceStore`], like a [`crate::StreamSet`]. Serving different stores to
//!   different nodes takes one server per store, with the caller choosing the server
//!   (e.g. by path or by reading the node from the body itself); the crate does not route
//!   REST requests by node yet.
//! * **Deadline and not-modified.** The caller gives each request a deadline (its
//!   long-poll timeout; `now` for plain polling). At the deadline with nothing to send,
//!   the answer is **`304 Not Modified` with an empty body**, which Envoy's REST
//!   subscription treats as "no change" and which [`RestClient`] handles the same way.
//! * **TTL heartbeats** of resources with a TTL are answered like changes (a `200` whose
//!   wrapped resources carry no body), so a waiting client's TTLs are refreshed.
//! * **Errors are answers.** An unknown path is `404`; a method other than `POST` is `405`;
//!   a body that is not a JSON `DiscoveryRequest` is `400` naming the line and column
//!   (unknown fields too, unless [`RestServerConfig::ignore_unknown_fields`]); an
//!   incremental request is named as such: "incremental xDS is not available over
//!   REST-JSON polling"; a request the stream rules reject (missing node, a `type_url`
//!   that is not the path's type) is `400` with the reason; a response that cannot be
//!   written is `500`. There is no ADS path, so ADS is a `404` naming it.

mod client;
mod server;

pub use client::{RestClient, RestConfig, RestEvent, RestFailure};
pub use server::{RestRequestId, RestServer, RestServerConfig, RestServerEvent};

use alloc::string::String;
use core::fmt;

use crate::types::{ApiVersion, TypeInfo, CATALOG};

/// The content type of every REST-JSON body.
pub const CONTENT_TYPE_JSON: &str = "application/json";

/// An HTTP request for the caller to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// Identifies this exchange; hand it back with the answer.
    pub id: u64,
    /// Always `POST`.
    pub method: &'static str,
    /// The REST path, e.g. `/v3/discovery:clusters`.
    pub path: String,
    /// Always [`CONTENT_TYPE_JSON`].
    pub content_type: &'static str,
    /// The canonical JSON of the `DiscoveryRequest`.
    pub body: String,
    /// The id of the exchange in flight that this request replaces: abort that one first
    /// (its answer, if it still comes, is ignored).
    pub supersedes: Option<u64>,
}

/// An HTTP answer for the caller to send back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// `200`, `304`, `400`, `404` or `405`.
    pub status: u16,
    /// [`CONTENT_TYPE_JSON`] for `200`, `text/plain` for errors, `None` for `304`.
    pub content_type: Option<&'static str>,
    /// The canonical JSON of the `DiscoveryResponse` (`200`), the reason (errors), or empty
    /// (`304`).
    pub body: String,
}

/// Why a REST client cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestError {
    /// REST-JSON has no aggregated stream (xDS protocol: "ADS is not available for REST-JSON
    /// polling").
    AggregatedNotAvailable,
    /// REST-JSON carries `DiscoveryRequest`/`DiscoveryResponse` only: no incremental xDS.
    DeltaNotAvailable,
    /// The type has no REST path in the catalog (VHDS, unknown types) and none was given.
    NoRestPath(String),
    /// The type URL is empty.
    EmptyTypeUrl,
}

impl fmt::Display for RestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestError::AggregatedNotAvailable => {
                f.write_str("ADS is not available for REST-JSON polling")
            }
            RestError::DeltaNotAvailable => {
                f.write_str("incremental xDS is not available for REST-JSON polling")
            }
            RestError::NoRestPath(t) => write!(f, "type {t} has no REST-JSON path"),
            RestError::EmptyTypeUrl => f.write_str("empty type URL"),
        }
    }
}

impl std::error::Error for RestError {}

/// The REST path of `type_url` in the catalog (v3 or v2 by the URL's version).
pub fn rest_path(type_url: &str) -> Option<&'static str> {
    let (t, version) = TypeInfo::of(type_url).known?;
    match version {
        ApiVersion::V3 => t.rest_path,
        ApiVersion::V2 => t.rest_path_v2,
    }
}

/// The type URL a REST path serves in the catalog.
pub fn type_url_for_path(path: &str) -> Option<&'static str> {
    CATALOG.iter().find_map(|t| {
        if t.rest_path == Some(path) {
            Some(t.type_url)
        } else if t.rest_path_v2 == Some(path) {
            t.type_url_v2
        } else {
            None
        }
    })
}
