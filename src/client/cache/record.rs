//! The per-name record of one type: the accepted resource (if held) and the status a CSDS
//! dump reports, kept together so events and status can never disagree.

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::client::status::{Rejection, ResourceState, ResourceStatus, ServerError};
use crate::text::SharedStr;
use crate::time::Instant;

/// An accepted resource held by the client.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedResource {
    /// Its version (incremental: `Resource.version`; SotW: the wrapper's version, else the
    /// response's `version_info`).
    pub version: SharedStr,
    /// Its body: a slice of the buffer the response was decoded from, never a copy.
    pub body: Bytes,
    /// Other names it goes by (incremental).
    pub aliases: Vec<SharedStr>,
    /// The TTL it last arrived with, if any.
    pub ttl: Option<Duration>,
}

/// Everything known about one name of one type.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) cached: Option<CachedResource>,
    pub(crate) state: ResourceState,
    pub(crate) rejected: Option<Box<Rejection>>,
    /// The last `resource_errors` entry for it (kept until it arrives again).
    pub(crate) server_error: Option<Box<ServerError>>,
    pub(crate) dne_at: Option<Instant>,
    pub(crate) ttl_at: Option<Instant>,
    /// The response generation that last named it (full-state deletion).
    pub(crate) seen: u64,
    /// The server deleted it while held and [`ClientConfig::ignore_resource_deletion`]
    /// kept it (gRPC A53); cleared when it arrives again.
    ///
    /// [`ClientConfig::ignore_resource_deletion`]: super::ClientConfig::ignore_resource_deletion
    pub(crate) deletion_ignored: bool,
}

impl Record {
    pub(crate) fn requested() -> Record {
        Record {
            cached: None,
            state: ResourceState::Requested,
            rejected: None,
            server_error: None,
            dne_at: None,
            ttl_at: None,
            seen: 0,
            deletion_ignored: false,
        }
    }

    pub(crate) fn status(&self) -> ResourceStatus {
        ResourceStatus {
            state: self.state,
            version: self.cached.as_ref().map(|c| c.version.clone()),
            rejected: self.rejected.as_deref().cloned(),
            ttl_deadline: self.ttl_at,
            server_error: self.server_error.as_deref().cloned(),
            deletion_ignored: self.deletion_ignored,
        }
    }
}
