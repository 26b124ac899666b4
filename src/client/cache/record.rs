//! The per-name record of one type: the accepted resource (if held) and the status a CSDS
//! dump reports, kept together so events and status can never disagree.

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use core::time::Duration;

use super::versions::Versions;
use crate::client::status::{Rejection, ResourceState, ResourceStatus, ServerError};
use crate::text::SharedStr;
use crate::time::Instant;

/// An accepted resource held by the client, as the cache lends it ([`Client::resource`],
/// [`ChangeView::resource`]): a view, not a stored struct, so the cache is free to keep
/// each part where it costs least (the aliases and TTL, which most resources lack, sit
/// with a record's rare fields). Copy it freely; clone the parts to keep them.
///
/// [`Client::resource`]: crate::client::Client::resource
/// [`ChangeView::resource`]: crate::client::ChangeView::resource
#[derive(Clone, Copy)]
pub struct CachedResource<'a> {
    body: &'a Bytes,
    version: &'a SharedStr,
    rare: Option<&'a Rare>,
}

impl<'a> CachedResource<'a> {
    /// Its version (incremental: `Resource.version`; SotW: the wrapper's version, else the
    /// response's `version_info`).
    pub fn version(&self) -> &'a str {
        self.version.as_str()
    }

    /// [`CachedResource::version`] as a handle of its own (no copy).
    pub fn version_shared(&self) -> SharedStr {
        self.version.clone()
    }

    /// Its body: a slice of the buffer the response was decoded from, or, when that
    /// response put less than half of its bodies in the cache, of the one buffer those
    /// bodies were copied into (so they do not keep the whole response alive).
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// [`CachedResource::body`] as a handle of its own to the same buffer (no copy).
    pub fn body_bytes(&self) -> Bytes {
        self.body.clone()
    }

    /// Other names it goes by (incremental).
    pub fn aliases(&self) -> &'a [SharedStr] {
        self.rare.map_or(&[], |r| r.aliases.as_slice())
    }

    /// The TTL it last arrived with, if any.
    pub fn ttl(&self) -> Option<Duration> {
        self.rare.and_then(|r| r.ttl)
    }
}

impl PartialEq for CachedResource<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.version() == other.version()
            && self.body() == other.body()
            && self.aliases() == other.aliases()
            && self.ttl() == other.ttl()
    }
}

impl fmt::Debug for CachedResource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedResource")
            .field("version", &self.version())
            .field("body", self.body)
            .field("aliases", &self.aliases())
            .field("ttl", &self.ttl())
            .finish()
    }
}

/// Everything known about one name of one type. The fields most records never use sit
/// together in one optional box ([`Rare`]), and its version is a slot of the type's
/// [`Versions`]: a record is 56 bytes, not 168.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    /// The held resource's body; `None` while nothing is held.
    pub(crate) body: Option<Bytes>,
    /// The held resource's version, a slot of the type's [`Versions`] (no meaning while
    /// nothing is held).
    pub(crate) version: u32,
    /// The response generation that last named it (full-state deletion), modulo 2^32: a
    /// full-state response names or drops every held record it could delete, so none falls
    /// 2^32 behind.
    pub(crate) seen: u32,
    rare: Option<Box<Rare>>,
    pub(crate) state: ResourceState,
}

/// What a record holds only while it is rejected, in error, timed or kept after deletion,
/// or while its resource has aliases or a TTL.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rare {
    /// The held resource's aliases (incremental).
    aliases: Vec<SharedStr>,
    /// The TTL the held resource last arrived with.
    ttl: Option<Duration>,
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
        self.aliases.is_empty()
            && self.ttl.is_none()
            && self.rejected.is_none()
            && self.server_error.is_none()
            && self.dne_at.is_none()
            && self.ttl_at.is_none()
            && !self.deletion_ignored
    }
}

impl Record {
    /// Whether nothing but its state, body and version is known of it (no aliases, TTL,
    /// rejection, server error, timer or ignored deletion).
    pub(crate) fn is_plain(&self) -> bool {
        self.rare.as_deref().is_none_or(Rare::is_empty)
    }

    /// The resource it holds, if any, its version read from `versions`.
    pub(crate) fn held<'a>(&'a self, versions: &'a Versions) -> Option<CachedResource<'a>> {
        let body = self.body.as_ref()?;
        Some(CachedResource {
            body,
            version: versions.get(self.version),
            rare: self.rare.as_deref(),
        })
    }

    /// The held resource's aliases (none when nothing is held).
    #[inline]
    pub(crate) fn aliases(&self) -> &[SharedStr] {
        self.rare.as_deref().map_or(&[], |r| r.aliases.as_slice())
    }

    /// Sets the held resource's aliases.
    #[inline]
    pub(crate) fn set_aliases(&mut self, aliases: Vec<SharedStr>) {
        if !aliases.is_empty() || !self.aliases().is_empty() {
            self.with_rare(|r| r.aliases = aliases);
        }
    }

    /// Sets the TTL the held resource last arrived with.
    #[inline]
    pub(crate) fn set_held_ttl(&mut self, ttl: Option<Duration>) {
        if ttl.is_some() || self.rare.as_deref().is_some_and(|r| r.ttl.is_some()) {
            self.with_rare(|r| r.ttl = ttl);
        }
    }

    /// Takes the held resource's body, version slot (for the caller to release) and
    /// aliases; its TTL goes with it.
    #[inline]
    pub(crate) fn take_held(&mut self) -> Option<(Bytes, u32, Vec<SharedStr>)> {
        let body = self.body.take()?;
        let mut aliases = Vec::new();
        if self.rare.is_some() {
            self.with_rare(|r| {
                aliases = core::mem::take(&mut r.aliases);
                r.ttl = None;
            });
        }
        Some((body, self.version, aliases))
    }

    pub(crate) fn requested() -> Record {
        Record {
            body: None,
            version: 0,
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

    pub(crate) fn status(&self, versions: &Versions) -> ResourceStatus {
        let rare = self.rare.as_deref();
        ResourceStatus {
            state: self.state,
            version: self
                .body
                .is_some()
                .then(|| versions.get(self.version).clone()),
            rejected: rare.and_then(|r| r.rejected.clone()),
            ttl_deadline: self.ttl_at(),
            server_error: rare.and_then(|r| r.server_error.clone()),
            deletion_ignored: self.deletion_ignored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size the module docs and the memory figures in `benches/README.md` count on.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_record_is_56_bytes() {
        assert_eq!(core::mem::size_of::<Record>(), 56);
    }
}
