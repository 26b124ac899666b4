//! Why a stream to a management server ended ([`StreamEnd`], the session's input from
//! the adapter), and what the watchers are told when every server that could be tried
//! failed so ([`StreamEnd::watch_error`]).
//!
//! # Decisions
//!
//! - **Three kinds of outage, by the gRPC status** (gRPC A57 has the client retry every
//!   failure with backoff, and so does the session; the kinds only tell the application
//!   what it is facing). *Refused*: the server answered and will not serve this client as
//!   it stands: `INVALID_ARGUMENT`, `PERMISSION_DENIED`, `FAILED_PRECONDITION`,
//!   `UNAUTHENTICATED` (its authorization, the node the client sent). *Protocol*: one
//!   side broke the protocol or a limit: `UNIMPLEMENTED` (the server does not serve this
//!   discovery service), `OUT_OF_RANGE` (a message over a size limit), `INTERNAL`,
//!   `DATA_LOSS`. *Unreachable*: everything else: no status at all (the connection could
//!   not be made or broke), `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED` (a
//!   server shedding load), `CANCELLED`, `ABORTED`, `UNKNOWN`, and a stream the server
//!   closed with `OK`.
//! - **A server's retry hint is honoured** (gRFC A6, "Pushback": the
//!   `grpc-retry-pushback-ms` trailer, which the adapter reads into
//!   [`StreamEnd::Status`]'s `retry_after`): a stream that failed before its first response
//!   is retried after the longer of the backoff and the hint, the hint bounded by the
//!   backoff's `max` so a server cannot park a client for ever. A server shedding load
//!   (xds-sansio-tonic's storm protection) so spreads its clients' returns.

use alloc::string::String;
use core::fmt;
use core::time::Duration;

use super::WatchError;

/// Why a stream to a management server ended, or its connection attempt failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEnd {
    /// No gRPC status: the connection could not be made, or it broke (name resolution,
    /// TCP, TLS, HTTP/2).
    Transport {
        /// What the transport said.
        error: String,
    },
    /// The call ended with a gRPC status (from the server, or from the channel on its
    /// behalf); `OK` when the server closed the stream.
    Status {
        /// The `google.rpc.Code`.
        code: i32,
        /// The status message.
        message: String,
        /// When the server asked to be retried (gRFC A6's `grpc-retry-pushback-ms`), if it
        /// did.
        retry_after: Option<Duration>,
    },
}

impl StreamEnd {
    /// A connection that could not be made or broke.
    pub fn transport(error: impl Into<String>) -> StreamEnd {
        StreamEnd::Transport {
            error: error.into(),
        }
    }

    /// A call that ended with a gRPC status.
    pub fn status(code: i32, message: impl Into<String>) -> StreamEnd {
        StreamEnd::Status {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same end, with the server's retry hint (a no-op on a transport failure, which
    /// has no trailers).
    pub fn with_retry_after(mut self, hint: Duration) -> StreamEnd {
        if let StreamEnd::Status { retry_after, .. } = &mut self {
            *retry_after = Some(hint);
        }
        self
    }

    /// The server's retry hint, if it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            StreamEnd::Status { retry_after, .. } => *retry_after,
            StreamEnd::Transport { .. } => None,
        }
    }

    /// What a watcher is told when every server that could be tried failed, the last
    /// being `server` and failing so. See the [module docs](self).
    pub fn watch_error(&self, server: String) -> WatchError {
        match self {
            StreamEnd::Status { code, message, .. } if matches!(code, 3 | 7 | 9 | 16) => {
                WatchError::Refused {
                    server,
                    code: *code,
                    message: message.clone(),
                }
            }
            StreamEnd::Status { code, message, .. } if matches!(code, 11 | 12 | 13 | 15) => {
                WatchError::Protocol {
                    server,
                    code: *code,
                    message: message.clone(),
                }
            }
            other => WatchError::Unreachable {
                server,
                error: alloc::format!("{other}"),
            },
        }
    }
}

impl fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamEnd::Transport { error } => write!(f, "{error}"),
            StreamEnd::Status { code, message, .. } => {
                write!(f, "{} ({code}): {message}", code_name(*code))
            }
        }
    }
}

/// The name of a `google.rpc.Code`.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "an unknown code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_status_has_its_kind() {
        let kind = |end: StreamEnd| match end.watch_error("s".into()) {
            WatchError::Refused { .. } => "refused",
            WatchError::Protocol { .. } => "protocol",
            WatchError::Unreachable { .. } => "unreachable",
            _ => "other",
        };
        assert_eq!(
            kind(StreamEnd::transport("connection refused")),
            "unreachable"
        );
        for code in [3, 7, 9, 16] {
            assert_eq!(kind(StreamEnd::status(code, "no")), "refused", "{code}");
        }
        for code in [11, 12, 13, 15] {
            assert_eq!(kind(StreamEnd::status(code, "no")), "protocol", "{code}");
        }
        for code in [0, 1, 2, 4, 5, 6, 8, 10, 14, 17, -1] {
            assert_eq!(kind(StreamEnd::status(code, "no")), "unreachable", "{code}");
        }
        assert_eq!(
            alloc::format!("{}", StreamEnd::status(7, "no token")),
            "PERMISSION_DENIED (7): no token"
        );
    }
}
