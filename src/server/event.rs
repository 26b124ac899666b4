//! What a server stream tells the application: who the node is, ACKs and NACKs,
//! subscription changes, stale requests, and the protocol errors that close the stream.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::message::Variant;
use crate::pb::envoy::config::core::v3::Node;
use crate::pb::google::rpc::Status;
use crate::text::SharedStr;

/// Something the application may want to know about a stream.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// The first request carried this node; the application may pick the store for it.
    /// Boxed: a `Node` is 320 bytes, and every event of a stream's queue would be that
    /// large for the sake of this one.
    NodeIdentified(Box<Node>),
    /// The client now subscribes to these names of `type_url` (`*` is wildcard).
    Subscribed {
        /// The type.
        type_url: SharedStr,
        /// The names added, sorted: the stream's own copies (a reference count each, not
        /// a copy of the request's strings kept until the event is polled).
        names: Vec<Arc<str>>,
    },
    /// The client no longer subscribes to these names (`*` is wildcard). Phantom
    /// unsubscribes (names it did not subscribe to) are not reported.
    Unsubscribed {
        /// The type.
        type_url: SharedStr,
        /// The names removed, sorted: the copies the stream held.
        names: Vec<Arc<str>>,
    },
    /// The client applied the response with this nonce.
    Acked {
        /// The type.
        type_url: SharedStr,
        /// The nonce of the response.
        nonce: String,
        /// The response's version (`version_info`, or `system_version_info` in delta).
        version: String,
    },
    /// The client rejected the response with this nonce. The server holds: what it sent
    /// is not resent until the store changes it.
    Nacked {
        /// The type.
        type_url: SharedStr,
        /// The nonce of the rejected response.
        nonce: String,
        /// The version the rejected response carried.
        version: String,
        /// Why, as the client put it: its `error_detail`, a `google.rpc.Status` (code,
        /// message, details), kept whole since it is the peer's data. The client side's
        /// `ClientEvent::Nacked::error` is a `String`: there it is the text the client's own
        /// validator produced, before it becomes this `Status` on the wire.
        ///
        /// ```
        /// # use xds_sansio::server::ServerEvent;
        /// fn log(event: &ServerEvent) {
        ///     if let ServerEvent::Nacked { type_url, version, error, .. } = event {
        ///         eprintln!("{type_url} {version} rejected (code {}): {}", error.code, error.message);
        ///     }
        /// }
        /// ```
        error: Status,
    },
    /// A request whose nonce is not the latest this stream sent for its type: it is neither
    /// an ACK nor a NACK (its subscription changes were applied, envoy#10363).
    StaleRequest {
        /// The type.
        type_url: SharedStr,
        /// The nonce it carried (empty when none).
        nonce: String,
    },
    /// Part of a request was ignored (it breaks a SHOULD of the protocol, not a MUST).
    Ignored {
        /// The type.
        type_url: SharedStr,
        /// What was ignored.
        what: Ignored,
    },
    /// The client subscribes to a type the store has not published: nothing is sent for it
    /// until the store publishes it (a server that has not loaded its configuration says
    /// nothing rather than "none", which a client would act on). Once per stream and type,
    /// so that the hold can be logged and counted rather than be silent.
    Held {
        /// The type.
        type_url: SharedStr,
    },
    /// The client broke the protocol; the stream is closed and the application should end
    /// the gRPC call with [`ProtocolError::grpc_code`].
    ProtocolError(ProtocolError),
}

/// Parts of a request that are ignored rather than fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ignored {
    /// `initial_resource_versions` on a request that is not the first of its type.
    LateInitialResourceVersions,
    /// `error_detail` on a request that has no response to refer to.
    ErrorWithoutResponse,
}

/// Why a stream was closed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The first request of the stream carries no node.
    NodeMissing,
    /// A later request carries a node different from the first one.
    NodeChanged,
    /// A request on an aggregated stream has no type URL.
    TypeUrlMissing,
    /// A request on a single-type stream names another type.
    WrongTypeUrl {
        /// The stream's type.
        expected: String,
        /// The request's type.
        got: String,
    },
    /// A request of the other variant (SotW on a delta stream or the reverse).
    WrongVariant {
        /// The stream's variant.
        expected: Variant,
    },
    /// A request goes beyond the stream's [`ServerLimits`](super::ServerLimits).
    LimitExceeded(Limit),
    /// Not the client's doing: neither the store's change log nor its list of removed
    /// names reaches back to an incremental type this stream kept in step with the store
    /// (more removals than [`DEFAULT_LOG_CAPACITY`](super::DEFAULT_LOG_CAPACITY), or the
    /// store's own capacity, between two polls), so which resources were removed
    /// meanwhile is lost. The call ends
    /// with `UNAVAILABLE`; the client reconnects presenting `initial_resource_versions`,
    /// and is then sent exactly what differs, removals included.
    ChangeLogOutrun {
        /// The type that lost track.
        type_url: String,
    },
}

/// Which of the stream's [`ServerLimits`](super::ServerLimits) a request went beyond.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`ServerLimits::max_names_per_request`](super::ServerLimits::max_names_per_request).
    NamesPerRequest,
    /// [`ServerLimits::max_name_len`](super::ServerLimits::max_name_len).
    NameLength,
    /// [`ServerLimits::max_types`](super::ServerLimits::max_types).
    TypesPerStream,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::NamesPerRequest => "too many resource names in one request",
            Limit::NameLength => "a resource name is too long",
            Limit::TypesPerStream => "too many type URLs on one stream",
        })
    }
}

impl ProtocolError {
    /// The gRPC status code to end the call with: `RESOURCE_EXHAUSTED` (8) for a limit,
    /// `UNAVAILABLE` (14) for [`ProtocolError::ChangeLogOutrun`], `INVALID_ARGUMENT` (3)
    /// otherwise.
    pub fn grpc_code(&self) -> i32 {
        match self {
            // RESOURCE_EXHAUSTED: the request is well-formed but too big.
            ProtocolError::LimitExceeded(_) => 8,
            // UNAVAILABLE: the server's doing; clients reconnect with backoff.
            ProtocolError::ChangeLogOutrun { .. } => 14,
            _ => 3,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::NodeMissing => f.write_str("the first request carries no node"),
            ProtocolError::NodeChanged => f.write_str("the node changed within the stream"),
            ProtocolError::TypeUrlMissing => f.write_str("a request on ADS has no type URL"),
            ProtocolError::WrongTypeUrl { expected, got } => {
                write!(f, "type URL {got:?} on a stream for {expected:?}")
            }
            ProtocolError::WrongVariant { expected } => {
                write!(f, "request of the wrong variant on a {expected:?} stream")
            }
            ProtocolError::LimitExceeded(what) => write!(f, "{what}"),
            ProtocolError::ChangeLogOutrun { type_url } => write!(
                f,
                "the server's change log no longer reaches back to what this stream was sent of {type_url}; reconnect presenting initial_resource_versions"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ProtocolError {}
