//! What the session tells a watcher: [`WatchEvent`] for a watch of one resource (or every
//! resource of a type), [`ConfigEvent`] for a configuration watch, and [`DumpEntry`] for
//! a status dump (CSDS).
//!
//! # Decisions
//!
//! - **Values and errors are separate** (gRPC A88's `OnResourceChanged` and
//!   `OnAmbientError`): an error never hides the value still in use; a rejected update
//!   ([`WatchError::Rejected`]) leaves the previous value in place.
//! - **A new watch starts with what is known**: the value held (or does-not-exist) is its
//!   first event, so a second watcher of a name does not wait for the server.

use alloc::string::String;
use core::fmt;

use bytes::Bytes;

use crate::client::deps::{ListenerConfig, ResourceKey};
use crate::client::{SharedStr, StatusEntry};

/// What a watcher is told.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// The resource arrived or changed (gRPC A88 `OnResourceChanged` with a value).
    Changed {
        /// Its name.
        name: SharedStr,
        /// Its version.
        version: SharedStr,
        /// Its body (the encoded resource), a slice of the response it came in.
        body: Bytes,
    },
    /// The resource does not exist: the server said so (deletion, incremental removal,
    /// `resource_errors` NOT_FOUND), the does-not-exist timer ran out, or its TTL expired.
    DoesNotExist {
        /// Its name.
        name: SharedStr,
    },
    /// Something went wrong that does not change the value held (gRPC A88
    /// `OnAmbientError`), or that explains why none arrives.
    Error {
        /// The name it concerns; `None` for the whole watch (a wildcard, or every server
        /// unreachable).
        name: Option<SharedStr>,
        /// What.
        error: WatchError,
    },
    /// The outage told before ([`WatchError::Unreachable`], [`WatchError::Refused`],
    /// [`WatchError::Protocol`]) is over: `server` answered.
    Reachable {
        /// The server that answered (`server_uri`).
        server: String,
    },
}

impl WatchEvent {
    /// The name the event concerns, if one.
    pub fn name(&self) -> Option<&SharedStr> {
        match self {
            WatchEvent::Changed { name, .. } | WatchEvent::DoesNotExist { name } => Some(name),
            WatchEvent::Error { name, .. } => name.as_ref(),
            WatchEvent::Reachable { .. } => None,
        }
    }
}

/// Why a watcher is told of an error.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchError {
    /// An update was rejected by the validator (or broke a protocol rule) and NACKed; the
    /// value held before, if any, is still the one in use.
    Rejected {
        /// The rejected version.
        version: SharedStr,
        /// The NACK's message.
        error: String,
    },
    /// The server reported an error for the resource (`resource_errors`, xRFC TP3).
    Server {
        /// The `google.rpc.Code`.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// Every server that could be tried failed to connect or dropped the stream before
    /// answering (gRPC A57, A71); the client keeps trying, with backoff.
    Unreachable {
        /// The last server tried (`server_uri`).
        server: String,
        /// Why it failed.
        error: String,
    },
    /// Every server that could be tried failed, the last one refusing this client with a
    /// gRPC status (`PERMISSION_DENIED`, `UNAUTHENTICATED`, `INVALID_ARGUMENT`,
    /// `FAILED_PRECONDITION`: its authorization, the node sent); the client keeps trying,
    /// with backoff, but what it sends must change (or the server's mind) first.
    Refused {
        /// The last server tried (`server_uri`).
        server: String,
        /// The `google.rpc.Code`.
        code: i32,
        /// The status message.
        message: String,
    },
    /// Every server that could be tried failed, the last one ending the stream for a broken
    /// protocol or limit (`UNIMPLEMENTED`, `OUT_OF_RANGE`, `INTERNAL`, `DATA_LOSS`); the
    /// client keeps trying, with backoff.
    Protocol {
        /// The last server tried (`server_uri`).
        server: String,
        /// The `google.rpc.Code`.
        code: i32,
        /// The status message.
        message: String,
    },
}

impl fmt::Display for WatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchError::Rejected { version, error } => {
                write!(f, "update {version} rejected: {error}")
            }
            WatchError::Server { code, message } => write!(f, "server error {code}: {message}"),
            WatchError::Unreachable { server, error } => {
                write!(f, "management server {server} unreachable: {error}")
            }
            WatchError::Refused {
                server,
                code,
                message,
            } => write!(
                f,
                "management server {server} refused this client: {} ({code}): {message}",
                super::ending::code_name(*code)
            ),
            WatchError::Protocol {
                server,
                code,
                message,
            } => write!(
                f,
                "management server {server} ended the stream: {} ({code}): {message}",
                super::ending::code_name(*code)
            ),
        }
    }
}

/// What a configuration watcher is told: a listener and everything it reaches (gRPC A74's
/// `XdsConfig`), from the session's dependency managers.
///
/// # Decisions
///
/// - **Only complete configurations** (A74: "will not deliver a config until all resources
///   are obtained"): every resource the listener reaches is held or known not to be usable;
///   the client's does-not-exist timer bounds the wait. A configuration is delivered again
///   only when it differs from the one delivered before.
/// - **One listener's wait is its own**: each listener watched by name has its own
///   dependency manager (as gRPC has one per channel), so a listener waiting for a
///   resource never holds back another listener's configuration.
/// - **Failures are part of the configuration** (A74, A88): a listener that cannot serve
///   (it, its route configuration or a scope does not exist, expired, or was rejected with
///   nothing held) has [`ListenerConfig::status`](crate::client::deps::ListenerConfig::status) `Err`; a cluster that cannot be used
///   (missing, or its endpoints or secrets are) has its
///   [`ClusterConfig::leaves`](crate::client::deps::ClusterConfig::leaves) `Err` and
///   the others still serve.
/// - **Errors that change nothing are apart** ([`ConfigEvent::Error`], A88's ambient
///   errors): a rejected update or a server error of a resource held keeps it in use, and
///   an unreachable management server keeps the whole configuration.
/// - **The newest state wins**, as for every watch ([`super::WatchQueue`]): an unread
///   configuration of a listener is replaced by a newer one, an unread error of a
///   resource by a newer one.
/// - **Unwatching** (dropping the adapter's watch): what only it reached is unsubscribed
///   after the manager's grace
///   ([`DepsConfig::unsubscribe_grace`](crate::client::deps::DepsConfig::unsubscribe_grace)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigEvent {
    /// A listener resolved to a complete configuration, or a new one (each resource held,
    /// in [`ListenerConfig::resources`]; the clusters with their leaves; what cannot be
    /// used in [`ListenerConfig::failed`]). With [`ListenerConfig::status`] `Err`, the
    /// listener cannot serve: it or its route configuration failed (does not exist,
    /// expired, rejected with nothing held, a server error with nothing held).
    Changed(ListenerConfig),
    /// Something went wrong that does not change the configuration in use (gRPC A88
    /// `OnAmbientError`).
    Error {
        /// The resource it concerns (one the configuration holds); `None` for every
        /// resource of the configuration (a management server unreachable, a response
        /// rejected as a whole).
        resource: Option<ResourceKey>,
        /// What.
        error: WatchError,
    },
    /// The outage told before is over: `server` answered (the configuration delivered
    /// before is still the one in use).
    Reachable {
        /// The server that answered (`server_uri`).
        server: String,
    },
}

/// One resource as the session holds it, for a status dump (CSDS).
#[derive(Clone, Debug, PartialEq)]
pub struct DumpEntry {
    /// The core's status of it, from the client of the server whose data is in use.
    pub status: StatusEntry,
    /// Its body, when held.
    pub body: Option<Bytes>,
    /// The server it came from (`server_uri`; empty when restored).
    pub server: String,
    /// It comes from the fail-static cache (a former run's), no server having answered
    /// yet ([`Session::restore`](super::Session::restore)).
    pub restored: bool,
}

/// A server of the top-level authority, as [`Session::servers`](super::Session::servers)
/// reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerUse {
    /// Its `server_uri`.
    pub server_uri: String,
    /// Whether it is in use (the primary, or a fallback the session fell back to).
    pub in_use: bool,
    /// Whether a stream to it is open.
    pub connected: bool,
}

/// The names a [`Vec`] of dump entries is sorted by.
pub(super) fn sort_dump(out: &mut [DumpEntry]) {
    out.sort_by(|a, b| {
        (&a.status.type_url, &a.status.name).cmp(&(&b.status.type_url, &b.status.name))
    });
}
