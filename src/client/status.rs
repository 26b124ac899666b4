//! Per-resource status for a CSDS-style dump (`envoy.admin.v3.ClientResourceStatus`), read
//! from the same records the events come from.

use alloc::string::String;

use crate::text::SharedStr;
use crate::time::Instant;

/// Where a name stands, as CSDS reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceState {
    /// Subscribed, not received yet.
    Requested,
    /// Known not to exist.
    DoesNotExist,
    /// Received and accepted.
    Acked,
    /// The last update of it was rejected (a previous accepted body may still be held).
    Nacked,
    /// Its TTL ran out; it was removed.
    Expired,
    /// The server reported an error for it in `resource_errors` (xRFC TP3; CSDS
    /// `RECEIVED_ERROR`): a previously accepted body, if any, is still held (unless gRPC
    /// A88's `fail_on_data_errors` dropped it).
    ReceivedError,
    /// Its does-not-exist timer fired under gRPC A88's `resource_timer_is_transient_error`
    /// (CSDS `TIMEOUT`): not known to be missing, only not received; the error is in
    /// [`ResourceStatus::server_error`] (UNAVAILABLE).
    TimedOut,
}

/// An error the server reported for a resource in `resource_errors` (xRFC TP3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    /// The `google.rpc.Code` (NOT_FOUND lands here only under gRPC A88's
    /// [`DataErrors`](super::DataErrors); before it, NOT_FOUND means "does not exist").
    pub code: i32,
    /// The server's message.
    pub message: String,
}

/// The last rejected update of a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The version that was rejected.
    pub version: SharedStr,
    /// Why.
    pub error: String,
}

/// The status of one name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceStatus {
    /// Where it stands.
    pub state: ResourceState,
    /// The accepted version held, if any.
    pub version: Option<SharedStr>,
    /// The last rejected update, until a later one is accepted.
    pub rejected: Option<Rejection>,
    /// When the held resource expires, if it has a TTL.
    pub ttl_deadline: Option<Instant>,
    /// The last error the server reported for it, until it arrives again or another error
    /// replaces it.
    pub server_error: Option<ServerError>,
    /// The server deleted the held resource and the deletion was ignored
    /// ([`ClientConfig::ignore_resource_deletion`](super::ClientConfig::ignore_resource_deletion),
    /// gRPC A53): the body is still held and in use; cleared when the resource arrives
    /// again.
    pub deletion_ignored: bool,
}

/// One row of [`Client::dump`](super::Client::dump).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusEntry {
    /// Type URL.
    pub type_url: SharedStr,
    /// Resource name.
    pub name: SharedStr,
    /// Its status.
    pub status: ResourceStatus,
    /// The management server that sent the last response of the type
    /// (`control_plane.identifier`), if it said.
    pub control_plane: Option<SharedStr>,
}
