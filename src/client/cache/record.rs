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
    /// Its body: a slice of the buffer the response was decoded from, or, when that
    /// response put less than half of its bodies in the cache, of the one buffer those
    /// bodies were copied into (so they do not keep the whole response alive).
    pub body: Bytes,
    /// Other names it goes by (incremental).
    pub aliases: Vec<SharedStr>,
    /// The TTL it last arrived with, if any.
    pub ttl: Option<Duration>,
}

/// Everything known about one name of one type. The fields most records never use sit
/// together in one optional box ([`Rare`]): a record is 128 bytes, not 168.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) cached: Option<CachedResource>,
    /// The response generation that last named it (full-state deletion).
    pub(crate) seen: u64,
    rare: Option<Box<Rare>>,
    pub(crate) state: ResourceState,
}

/// What a record holds only while it is rejected, in error, timed or kept after deletion.
#[derive(Clone, Debug, Default)]
struct Rare {
    rejected: Option<Rejection>,
    /// The last `resource_errors` entry for it (kept until it arrives again).
    server_error: Option<ServerError>,
    dne_at: Option<Instant>,
    ttl_at: Option<Instant>,
    /// The server deleted it while held and [`ClientConfig::ignore_resource_deletion`]
    /// kept it (gRPC A53); cleared when it arrives again.
    ///
    /// [`ClientConfig::ignore_resource_deletion`]: super::ClientConfig::ignore_resource_deletion
    deletion_ignored: bool,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.rejected.is_none()
            && self.server_error.is_none()
            && self.dne_at.is_none()
            && self.ttl_at.is_none()
            && !self.deletion_ignored
    }
}

impl Record {
    /// Whether nothing but its state and what it holds is known of it (no rejection,
    /// server error, timer or ignored deletion).
    pub(crate) fn is_plain(&self) -> bool {
        self.rare.as_deref().is_none_or(Rare::is_empty)
    }

    pub(crate) fn requested() -> Record {
        Record {
            cached: None,
            seen: 0,
            rare: None,
            state: ResourceState::Requested,
        }
    }

    /// Changes the rare part, allocating it only for a value to keep and dropping it once
    /// empty.
    fn with_rare(&mut self, set: impl FnOnce(&mut Rare)) {
        let rare = self.rare.get_or_insert_with(Box::default);
        set(rare);
        if rare.is_empty() {
            self.rare = None;
        }
    }

    pub(crate) fn dne_at(&self) -> Option<Instant> {
        self.rare.as_ref().and_then(|r| r.dne_at)
    }

    pub(crate) fn ttl_at(&self) -> Option<Instant> {
        self.rare.as_ref().and_then(|r| r.ttl_at)
    }

    pub(crate) fn server_error(&self) -> Option<&ServerError> {
        self.rare.as_ref().and_then(|r| r.server_error.as_ref())
    }

    pub(crate) fn deletion_ignored(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.deletion_ignored)
    }

    /// Takes the does-not-exist deadline, if one is set.
    pub(crate) fn take_dne_at(&mut self) -> Option<Instant> {
        let at = self.dne_at()?;
        self.with_rare(|r| r.dne_at = None);
        Some(at)
    }

    /// Takes the TTL deadline, if one is set.
    pub(crate) fn take_ttl_at(&mut self) -> Option<Instant> {
        let at = self.ttl_at()?;
        self.with_rare(|r| r.ttl_at = None);
        Some(at)
    }

    pub(crate) fn set_dne_at(&mut self, at: Instant) {
        self.with_rare(|r| r.dne_at = Some(at));
    }

    pub(crate) fn set_ttl_at(&mut self, at: Instant) {
        self.with_rare(|r| r.ttl_at = Some(at));
    }

    pub(crate) fn set_server_error(&mut self, error: Option<ServerError>) {
        if error.is_some() || self.server_error().is_some() {
            self.with_rare(|r| r.server_error = error);
        }
    }

    pub(crate) fn set_rejected(&mut self, rejection: Option<Rejection>) {
        if rejection.is_some() || self.rare.as_ref().is_some_and(|r| r.rejected.is_some()) {
            self.with_rare(|r| r.rejected = rejection);
        }
    }

    /// The resource arrived: no rejection, server error or ignored deletion stands. One
    /// check when the record has no rare part (nearly always).
    #[inline]
    pub(crate) fn clear_outcomes(&mut self) {
        if let Some(rare) = self.rare.as_mut() {
            rare.rejected = None;
            rare.server_error = None;
            rare.deletion_ignored = false;
            if rare.is_empty() {
                self.rare = None;
            }
        }
    }

    pub(crate) fn set_deletion_ignored(&mut self, ignored: bool) {
        if ignored || self.deletion_ignored() {
            self.with_rare(|r| r.deletion_ignored = ignored);
        }
    }

    pub(crate) fn status(&self) -> ResourceStatus {
        let rare = self.rare.as_deref();
        ResourceStatus {
            state: self.state,
            version: self.cached.as_ref().map(|c| c.version.clone()),
            rejected: rare.and_then(|r| r.rejected.clone()),
            ttl_deadline: self.ttl_at(),
            server_error: rare.and_then(|r| r.server_error.clone()),
            deletion_ignored: self.deletion_ignored(),
        }
    }
}
