//! Why a stream ends, and the one place each reason becomes a gRPC status, a metric label
//! and a tracing event.

use std::time::Duration;

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};
use xds_sansio::server::ProtocolError;

use super::admission::ShedReason;

/// The trailer that tells a client when to retry (gRFC A6, "Pushback"): milliseconds, as
/// a decimal integer.
pub(crate) const RETRY_PUSHBACK: &str = "grpc-retry-pushback-ms";

/// Why a stream ended.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The client half-closed the stream.
    ClientClosed,
    /// The transport reported an error (reset, connection lost); nothing can be sent.
    Broken(Status),
    /// The response stream was dropped (the client went away).
    Gone,
    /// The client broke a protocol rule (the core closed the stream).
    Protocol(ProtocolError),
    /// The authorization hook refused the group the stream's node maps to.
    Denied(String),
    /// No first request within the configured time.
    NoFirstRequest,
    /// A response larger than the configured maximum.
    ResponseTooLarge { bytes: usize, limit: usize },
    /// The server is shutting down.
    Shutdown,
    /// The application ended every stream ([`XdsServer::end_streams`](super::XdsServer::end_streams)).
    Ended,
    /// A fault plan closed or refused the stream (feature `faults`).
    #[cfg(feature = "faults")]
    Injected(xds_sansio_conformance::faults::FaultStatus),
    /// Storm protection shed the stream at its first request.
    Shed {
        reason: ShedReason,
        retry_after: Duration,
    },
}

/// Why a call was refused before it became a stream.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The method is not a discovery method of the catalog.
    UnknownMethod(String),
    /// As many streams as allowed are open.
    TooManyStreams(usize),
    /// The server is shutting down.
    ShuttingDown,
}

impl Ending {
    /// The status the call ends with; `None` when nothing can or need be sent.
    pub(crate) fn status(&self) -> Option<Status> {
        Some(match self {
            Ending::ClientClosed | Ending::Broken(_) | Ending::Gone => return None,
            Ending::Protocol(e) => Status::new(Code::from_i32(e.grpc_code()), e.to_string()),
            Ending::Denied(why) => Status::permission_denied(why.clone()),
            Ending::NoFirstRequest => {
                Status::deadline_exceeded("no discovery request arrived in time")
            }
            Ending::ResponseTooLarge { bytes, limit } => Status::resource_exhausted(format!(
                "a response of {bytes} bytes exceeds the server's limit of {limit}"
            )),
            Ending::Shutdown => Status::unavailable("the server is shutting down"),
            Ending::Ended => Status::unavailable("the server ended the stream"),
            // Code 0 ends the call with OK: nothing but the end of the stream.
            #[cfg(feature = "faults")]
            Ending::Injected(status) if status.code == 0 => return None,
            #[cfg(feature = "faults")]
            Ending::Injected(status) => {
                Status::new(Code::from_i32(status.code), status.message.clone())
            }
            Ending::Shed {
                reason,
                retry_after,
            } => {
                let millis = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
                let why = match reason {
                    ShedReason::Rate => "the server admits new streams at a bounded rate",
                    ShedReason::Cap => "the server serves as many streams as it may",
                    ShedReason::Window => {
                        "the server lets new streams in as earlier ones acknowledge their state"
                    }
                };
                let mut status = Status::unavailable(format!("{why}; retry after {millis} ms"));
                status
                    .metadata_mut()
                    .insert(RETRY_PUSHBACK, MetadataValue::from(millis));
                status
            }
        })
    }

    /// The metric label.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Ending::ClientClosed => "client_closed",
            Ending::Broken(_) => "broken",
            Ending::Gone => "gone",
            Ending::Protocol(ProtocolError::LimitExceeded(_)) => "limit",
            Ending::Protocol(ProtocolError::ChangeLogOutrun { .. }) => "change_log_outrun",
            Ending::Protocol(_) => "protocol_error",
            Ending::Denied(_) => "permission_denied",
            Ending::NoFirstRequest => "no_first_request",
            Ending::ResponseTooLarge { .. } => "response_too_large",
            Ending::Shutdown => "shutdown",
            Ending::Ended => "ended",
            #[cfg(feature = "faults")]
            Ending::Injected(_) => "fault",
            Ending::Shed { .. } => "shed",
        }
    }

    /// Tells the tracing subscriber, at the level the reason deserves.
    pub(crate) fn trace(&self) {
        match self {
            Ending::ClientClosed
            | Ending::Gone
            | Ending::Shutdown
            | Ending::Ended
            | Ending::Shed { .. } => {
                tracing::debug!(reason = self.label(), "stream ended")
            }
            Ending::Broken(status) => {
                tracing::debug!(reason = self.label(), %status, "stream broke")
            }
            Ending::Protocol(ProtocolError::LimitExceeded(what)) => {
                tracing::warn!(reason = self.label(), limit = %what, "stream closed: limit exceeded")
            }
            Ending::Protocol(e @ ProtocolError::ChangeLogOutrun { .. }) => {
                // The server's doing: the store's log is too short for its publications.
                tracing::warn!(reason = self.label(), error = %e, "stream ended: the change log ran past it")
            }
            Ending::Protocol(e) => {
                tracing::info!(reason = self.label(), error = %e, "stream closed: protocol error")
            }
            Ending::Denied(why) => {
                tracing::warn!(reason = self.label(), why = %why, "stream refused: permission denied")
            }
            #[cfg(feature = "faults")]
            Ending::Injected(status) => {
                tracing::info!(
                    reason = self.label(),
                    code = status.code,
                    "stream closed: injected fault"
                )
            }
            Ending::NoFirstRequest | Ending::ResponseTooLarge { .. } => {
                tracing::warn!(reason = self.label(), status = ?self.status(), "stream closed: limit")
            }
        }
    }
}

impl Refusal {
    /// The status the call is refused with.
    pub(crate) fn status(&self) -> Status {
        match self {
            Refusal::UnknownMethod(path) => Status::unimplemented(format!("no method {path}")),
            Refusal::TooManyStreams(limit) => Status::resource_exhausted(format!(
                "the server already serves its maximum of {limit} streams"
            )),
            Refusal::ShuttingDown => Status::unavailable("the server is shutting down"),
        }
    }

    /// The metric label.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Refusal::UnknownMethod(_) => "unknown_method",
            Refusal::TooManyStreams(_) => "too_many_streams",
            Refusal::ShuttingDown => "shutting_down",
        }
    }

    /// Tells the tracing subscriber.
    pub(crate) fn trace(&self) {
        match self {
            Refusal::TooManyStreams(limit) => {
                tracing::warn!(
                    reason = self.label(),
                    limit,
                    "stream refused: too many streams"
                )
            }
            _ => tracing::debug!(reason = self.label(), status = ?self.status(), "call refused"),
        }
    }
}
