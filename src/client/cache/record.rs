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

    /// Its body: a slice of the chunk the cache copied it into when it arrived (so it does
    /// not keep the response's buffer alive).
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
/// together in one optional box ([`Rare`]), its version is a slot of the type's
/// [`Versions`], and its name is kept where it costs nothing: inside the held body (every
/// xDS resource carries its name), or, while nothing is held, as the one buffer it keeps.
/// A record is 56 bytes and has no key beside it.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    /// The held resource's body; while nothing is held, the name.
    bytes: Bytes,
    /// The held resource's version, a slot of the type's [`Versions`] (no meaning while
    /// nothing is held).
    pub(crate) version: u32,
    /// The response generation that last named it (full-state deletion), modulo 2^32: a
    /// full-state response names or drops every held record it could delete, so none falls
    /// 2^32 behind.
    pub(crate) seen: u32,
    rare: Option<Box<Rare>>,
    pub(crate) state: ResourceState,
    /// Where the name is kept.
    name_in: NameIn,
    /// Where the name lies in the body ([`NameIn::Body`]).
    name_at: u16,
    name_len: u16,
}

/// Where a record keeps its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameIn {
    /// Nothing is held: `bytes` is the name.
    Bytes,
    /// A body is held and carries the name at `name_at`.
    Body,
    /// A body is held that does not carry the name (an incremental name spelt otherwise
    /// than in its body, or one past 64 KiB into it): the rare box keeps it.
    Rare,
}

/// What a record holds only while it is rejected, in error, timed or kept after deletion,
/// or while its resource has aliases or a TTL.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rare {
    /// The name, when the held body does not carry it ([`NameIn::Rare`]).
    name: Option<SharedStr>,
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
        self.name.is_none()
            && self.aliases.is_empty()
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

    /// A record of `name` that holds nothing yet.
    pub(crate) fn requested(name: &SharedStr) -> Record {
        Record {
            bytes: name.as_bytes().clone(),
            ..Record::unnamed()
        }
    }

    /// A record with no name yet: only for one that [`Record::hold`]s a body next
    /// ([`super::records::Records::get_or_insert_to_hold`]).
    pub(crate) fn unnamed() -> Record {
        Record {
            bytes: Bytes::new(),
            version: 0,
            seen: 0,
            rare: None,
            state: ResourceState::Requested,
            name_in: NameIn::Bytes,
            name_at: 0,
            name_len: 0,
        }
    }

    /// Where the name lies in the body ([`NameIn::Body`]).
    #[inline]
    fn name_range(&self) -> core::ops::Range<usize> {
        let at = usize::from(self.name_at);
        at..at.saturating_add(usize::from(self.name_len))
    }

    /// Its name's bytes: what its records are found and hashed by.
    #[inline]
    pub(crate) fn name_bytes(&self) -> &[u8] {
        match self.name_in {
            NameIn::Bytes => &self.bytes,
            NameIn::Body => self.bytes.get(self.name_range()).unwrap_or_default(),
            NameIn::Rare => self
                .rare
                .as_deref()
                .and_then(|r| r.name.as_ref())
                .map_or(&[], |n| n.as_str().as_bytes()),
        }
    }

    /// Its name.
    #[inline]
    pub(crate) fn name(&self) -> &str {
        let bytes = self.name_bytes();
        debug_assert!(core::str::from_utf8(bytes).is_ok());
        // SAFETY: every way a name gets here keeps a `SharedStr`'s bytes (UTF-8) or a range
        // of an immutable body whose bytes equalled one when the range was taken.
        unsafe { core::str::from_utf8_unchecked(bytes) }
    }

    /// Its name as a handle of its own (no copy: a slice of the buffer it is kept in).
    pub(crate) fn name_shared(&self) -> SharedStr {
        let bytes = match self.name_in {
            NameIn::Bytes => self.bytes.clone(),
            NameIn::Body => {
                let range = self.name_range();
                if range.end > self.bytes.len() {
                    return SharedStr::EMPTY;
                }
                self.bytes.slice(range)
            }
            NameIn::Rare => {
                return self
                    .rare
                    .as_deref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or(SharedStr::EMPTY)
            }
        };
        // SAFETY: as in `Record::name`.
        unsafe { SharedStr::from_utf8_unchecked(bytes) }
    }

    /// The held body, if any.
    #[inline]
    pub(crate) fn body(&self) -> Option<&Bytes> {
        (self.name_in != NameIn::Bytes).then_some(&self.bytes)
    }

    /// Whether a resource is held.
    #[inline]
    pub(crate) fn has_body(&self) -> bool {
        self.name_in != NameIn::Bytes
    }

    /// Holds `body`, a resource named `name` (this record's name), whose bytes are those of
    /// `as_received` (the body as the response brought it, which `body` may be a copy of);
    /// returns the body held before, if any. The name is then read from the body where it
    /// carries it (a SotW name is a slice of the body received; an incremental body names
    /// itself in field 1, first).
    #[inline]
    pub(crate) fn hold(
        &mut self,
        body: Bytes,
        as_received: &[u8],
        name: &SharedStr,
    ) -> Option<Bytes> {
        debug_assert_eq!(&body[..], as_received);
        let found = name_in_body(as_received, name.as_str().as_bytes());
        let before = core::mem::replace(&mut self.bytes, body);
        let had = self.name_in != NameIn::Bytes;
        let was_rare = self.name_in == NameIn::Rare;
        match found {
            Some((at, len)) => {
                (self.name_in, self.name_at, self.name_len) = (NameIn::Body, at, len);
                if was_rare {
                    self.with_rare(|r| r.name = None);
                }
            }
            None => {
                (self.name_in, self.name_at, self.name_len) = (NameIn::Rare, 0, 0);
                if !was_rare {
                    let name = name.clone();
                    self.with_rare(|r| r.name = Some(name));
                }
            }
        }
        had.then_some(before)
    }

    /// The resource it holds, if any, its version read from `versions`.
    pub(crate) fn held<'a>(&'a self, versions: &'a Versions) -> Option<CachedResource<'a>> {
        let body = self.body()?;
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

    /// Drops the held resource's aliases, if it had any.
    #[inline]
    pub(crate) fn clear_aliases(&mut self) {
        if !self.aliases().is_empty() {
            self.with_rare(|r| r.aliases = Vec::new());
        }
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
        if !self.has_body() {
            return None;
        }
        // The record keeps its name: a copy (not a slice, which would keep the body's
        // buffer alive), or the one the rare box kept.
        let name = match self.name_in {
            NameIn::Rare => {
                let mut name = None;
                self.with_rare(|r| name = r.name.take());
                name.unwrap_or(SharedStr::EMPTY)
            }
            _ => SharedStr::from(self.name()),
        };
        let body = core::mem::replace(&mut self.bytes, name.as_bytes().clone());
        (self.name_in, self.name_at, self.name_len) = (NameIn::Bytes, 0, 0);
        let mut aliases = Vec::new();
        if self.rare.is_some() {
            self.with_rare(|r| {
                aliases = core::mem::take(&mut r.aliases);
                r.ttl = None;
            });
        }
        Some((body, self.version, aliases))
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
            version: self.has_body().then(|| versions.get(self.version).clone()),
            rejected: rare.and_then(|r| r.rejected.clone()),
            ttl_deadline: self.ttl_at(),
            server_error: rare.and_then(|r| r.server_error.clone()),
            deletion_ignored: self.deletion_ignored(),
        }
    }
}

/// Where `body` carries `name` ([`crate::resource::name_in_body`]), if it does within its
/// first 64 KiB.
#[inline]
fn name_in_body(body: &[u8], name: &[u8]) -> Option<(u16, u16)> {
    let len = u16::try_from(name.len()).ok()?;
    let at = crate::resource::name_in_body(body, name)?;
    Some((u16::try_from(at).ok()?, len))
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

    /// A body naming itself in field 1 (tag 0x0a, then the length), then `rest`.
    fn body_named(name: &str, rest: &[u8]) -> Bytes {
        let mut b = alloc::vec![0x0a, name.len() as u8];
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(rest);
        Bytes::from(b)
    }

    #[test]
    fn the_name_is_read_from_wherever_the_record_keeps_it() {
        let name = SharedStr::from("cluster-1");
        let mut rec = Record::requested(&name);
        assert_eq!((rec.name(), rec.has_body()), ("cluster-1", false));

        // An incremental body naming itself in field 1: the name is read from the body.
        let body = body_named("cluster-1", b"\x10\x01");
        assert!(rec.hold(body.clone(), &body, &name).is_none());
        assert_eq!(rec.name_in, NameIn::Body);
        assert_eq!((rec.name(), rec.body()), ("cluster-1", Some(&body)));
        assert_eq!(rec.name_shared(), name);
        assert!(rec.is_plain(), "no rare box for a name the body carries");

        // A SotW name, a slice of its body: found by address, wherever it lies.
        let body = Bytes::from_static(b"\x12\x02xx\x0a\x09cluster-1");
        // SAFETY: ASCII.
        let sliced = unsafe { SharedStr::from_utf8_unchecked(body.slice(6..)) };
        assert_eq!(
            rec.hold(body.clone(), &body, &sliced).map(|b| b.len()),
            Some(13)
        );
        assert_eq!(
            (rec.name_in, rec.name_at, rec.name()),
            (NameIn::Body, 6, "cluster-1")
        );

        // A body that spells its name otherwise: the rare box keeps the name.
        let other = body_named("elsewhere", b"");
        assert!(rec.hold(other.clone(), &other, &name).is_some());
        assert_eq!((rec.name_in, rec.name()), (NameIn::Rare, "cluster-1"));
        assert!(!rec.is_plain());

        // Dropped: the record keeps its name (from the rare box), and no rare box.
        let (taken, _, _) = rec.take_held().unwrap();
        assert_eq!(taken, other);
        assert_eq!(
            (rec.name_in, rec.name(), rec.has_body()),
            (NameIn::Bytes, "cluster-1", false)
        );
        assert!(rec.is_plain());

        // Dropped from the body: a copy, not a slice of the body's buffer.
        rec.hold(body.clone(), &body, &sliced);
        rec.take_held();
        assert_eq!(rec.name(), "cluster-1");
        assert!(!rec
            .bytes
            .as_ptr_range()
            .contains(&body.as_ptr().wrapping_add(6)));
    }

    #[test]
    fn a_body_that_does_not_carry_the_name_in_its_first_field_is_not_misread() {
        for body in [
            &b""[..],
            b"\x0a",
            b"\x0a\x09cluster-",
            b"\x12\x09cluster-1",
            b"\x0a\x08cluster-1",
            b"\x0a\xff\xff\xff\xffcluster-1",
        ] {
            assert_eq!(name_in_body(body, b"cluster-1"), None, "{body:?}");
        }
        assert_eq!(
            name_in_body(b"\x0a\x09cluster-1", b"cluster-1"),
            Some((2, 9))
        );
        let long = alloc::vec![b'a'; 70_000];
        assert_eq!(
            name_in_body(&long, &long),
            None,
            "past a u16: kept in the rare box"
        );
    }
}
