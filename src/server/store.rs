//! What the management server publishes: per type URL, name -> (version, body, TTL,
//! aliases), with a revision counter and a bounded change log so streams learn what
//! changed without rescanning everything.

use alloc::borrow::Cow;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;
use prost::Message;

use super::body_checks::BodyChecks;
use super::change_log::{Change, ChangeLog, LogCapacity};
use super::consistency::{Consistency, ConsistencyReport};
use super::dangling::{self, TwoPhase};
use super::frame::{self, FrameHeads, FramePrefix};
use super::graves::Graves;
use super::publication::{LogTruncated, ResourceEntry, Revision, StoreChange, StoreError, StoreOp};
use super::resource_errors::{StoredError, TYPE_WIDE};
use super::resource_table::{Named, ResourceTable};
use super::shared::SharedFrames;
use super::version::{body_version, entry_hash, NameAndVersion, VersionSum};
use crate::name::{collection_of, comparable, XdstpName, XDSTP_SCHEME};
use crate::pb::discovery::Resource;
use crate::pb::google::protobuf::{Any, TypeUrl};
use crate::pb::google::rpc::Status;
use crate::resource::{name_field_1, NameError};
use crate::text::SharedStr;
use crate::types::RESOURCE_WRAPPER_TYPE_URL;

/// A resource as the store holds it; responses carry clones of its `Bytes` (a reference
/// count, never a copy of the body).
///
/// The store keeps the body alone, copied once at its exact length when it is set. An
/// encoded response ([`super::ServerStream::poll_response_encoded`]) writes each
/// resource's *frame* (the `resources` entry of a SotW `DiscoveryResponse`: field tag,
/// length, `Any`) from the type URL and the body as it copies the body in, which is what
/// encoding the message would cost, with none of the encoder's per-field work. Keeping
/// frames instead cost 59 bytes a resource of framing (the type URL, in every frame) and
/// a second buffer handle, for about 30 instructions a resource less in a build
/// (callgrind, a 10 000-cluster full state: 104 against 134 a resource, part of it glibc's
/// merging of freed chunks; `benches/README.md`, "The store without kept frames").
///
/// `repr(C)` with the fields a full-state build reads (body, heads) first, so building a
/// 10 000-resource response touches one cache line per resource.
#[derive(Clone, Debug, PartialEq)]
#[repr(C)]
pub struct StoredResource {
    body: Bytes,
    /// The tags and lengths of the body's frame; unfit when the frame is not the body's
    /// (a TTL's wrapper), so a build checks only these.
    heads: FrameHeads,
    /// A name or version not kept in `id`, the TTL and the aliases, which most resources
    /// have none of: one pointer for all.
    rare: Option<Box<Rare>>,
    pair: u64,
    revision: Revision,
    /// The name (a range of the body) and the version, in 24 bytes.
    id: NameAndVersion,
}

/// What few resources have: a body that does not name the resource in field 1, a version
/// longer than 16 bytes, a TTL, aliases. Boxed, so the many without any pay 8 bytes for
/// all; a long version alone costs 24 bytes and its text.
#[derive(Clone, Debug, PartialEq)]
struct Rare {
    /// The name `id` keeps apart, then the version it keeps apart ([`NameAndVersion`]).
    text: Box<str>,
    /// The TTL and the aliases, rarer still.
    extra: Option<Box<Extra>>,
}

/// A resource's TTL and aliases.
#[derive(Clone, Debug, PartialEq)]
struct Extra {
    ttl: Option<TtlForm>,
    aliases: Vec<String>,
}

impl Rare {
    /// The rare parts, if a resource has any: `text` kept apart, a TTL, aliases.
    fn of(text: Option<Box<str>>, ttl: Option<TtlForm>, aliases: Vec<String>) -> Option<Box<Rare>> {
        let extra =
            (ttl.is_some() || !aliases.is_empty()).then(|| Box::new(Extra { ttl, aliases }));
        if text.is_none() && extra.is_none() {
            return None;
        }
        Some(Box::new(Rare {
            text: text.unwrap_or_default(),
            extra,
        }))
    }
}

/// A TTL and the SotW form it needs: the encoded `Resource` wrapper, built once.
#[derive(Clone, Debug, PartialEq)]
struct TtlForm {
    ttl: Duration,
    wrapped: Bytes,
}

impl Named for StoredResource {
    #[inline]
    fn name(&self) -> &str {
        StoredResource::name(self)
    }
}

impl StoredResource {
    /// The resource name.
    #[inline]
    pub fn name(&self) -> &str {
        match self.id.name(&self.body) {
            Some(name) => name,
            None => self.id.name_apart(self.text_apart()),
        }
    }
    /// The version (application-supplied or the body hash).
    pub fn version(&self) -> &str {
        match self.id.version() {
            Some(version) => version,
            None => self.id.version_apart(self.text_apart()),
        }
    }
    /// The name and version `id` keeps apart.
    #[cold]
    fn text_apart(&self) -> &str {
        self.rare.as_deref().map_or("", |r| &r.text)
    }
    fn extra(&self) -> Option<&Extra> {
        self.rare.as_deref()?.extra.as_deref()
    }
    /// The aliases of a resource that goes.
    fn take_aliases(self) -> Vec<String> {
        self.rare
            .and_then(|r| r.extra)
            .map_or_else(Vec::new, |e| e.aliases)
    }
    /// The encoded body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
    /// The TTL, if any.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl_form().map(|t| t.ttl)
    }
    /// The aliases.
    pub fn aliases(&self) -> &[String] {
        self.extra().map_or(&[], |e| e.aliases.as_slice())
    }
    /// The TTL and its SotW form, if any.
    fn ttl_form(&self) -> Option<&TtlForm> {
        self.extra()?.ttl.as_ref()
    }

    /// The revision of the last change to this resource.
    pub fn revision(&self) -> Revision {
        self.revision
    }
    /// The [`super::version::entry_hash`] of this resource: what enters a SotW version
    /// digest, and what tells whether a client holds exactly this.
    pub(crate) fn pair_hash(&self) -> u64 {
        self.pair
    }

    /// What the SotW `Any` of this resource holds: `type_url` and the body, or, when it
    /// has a TTL, the `Resource` wrapper's type URL and the pre-encoded wrapper.
    fn sotw_parts<'a>(&'a self, type_url: &'a str) -> (&'a str, &'a [u8]) {
        match self.ttl_form() {
            Some(form) => (RESOURCE_WRAPPER_TYPE_URL, &form.wrapped),
            None => (type_url, &self.body),
        }
    }

    /// The length of this resource's SotW frame (see [`StoredResource::write_sotw_frame`]).
    pub(crate) fn sotw_frame_len(&self, type_url: &str) -> usize {
        let (url, value) = self.sotw_parts(type_url);
        frame::frame_len(url, value)
    }

    /// Appends the SotW `resources` entry of this resource, encoded: field 2 tag, length,
    /// and the `Any` of [`StoredResource::sotw_any`]. Byte for byte what prost writes for it.
    /// `prefix` is `type_url`'s [`FramePrefix`], when it has one.
    #[inline]
    pub(crate) fn write_sotw_frame(
        &self,
        type_url: &str,
        prefix: Option<&FramePrefix>,
        out: &mut Vec<u8>,
    ) {
        match prefix {
            Some(prefix) if self.heads.fit(prefix) => prefix.write(&self.heads, &self.body, out),
            _ => {
                let (url, value) = self.sotw_parts(type_url);
                frame::write_frame(url, value, out);
            }
        }
    }

    /// The resource as a SotW `Any`: the body itself, or, when it has a TTL, the
    /// pre-encoded `Resource` wrapper.
    pub(crate) fn sotw_any(&self, type_url: &TypeUrl) -> Any {
        match self.ttl_form() {
            Some(form) => Any {
                type_url: TypeUrl::from_static(RESOURCE_WRAPPER_TYPE_URL),
                value: form.wrapped.clone(),
            },
            None => Any {
                type_url: type_url.clone(),
                value: self.body.clone(),
            },
        }
    }

    /// The incremental form, with or without the body (a heartbeat has none).
    pub(crate) fn delta_resource(&self, type_url: &TypeUrl, with_body: bool) -> Resource {
        Resource {
            name: String::from(self.name()),
            aliases: self.aliases().to_vec(),
            version: String::from(self.version()),
            resource: with_body.then(|| Any {
                type_url: type_url.clone(),
                value: self.body.clone(),
            }),
            ttl: self.ttl().map(to_proto_duration),
            ..Resource::default()
        }
    }
}

/// A TTL as `google.protobuf.Duration` (saturating at the largest representable value).
pub(crate) fn to_proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// The resources of one type of a store ([`ResourceStore::of_type`]).
#[derive(Clone, Copy)]
pub(crate) struct TypeResources<'s>(&'s ResourceTable<StoredResource>);

impl<'s> TypeResources<'s> {
    /// A resource by name (an `xdstp://` name in any order of its context parameters).
    pub(crate) fn get(self, name: &str) -> Option<&'s StoredResource> {
        self.0.get(name).or_else(|| self.in_canonical_form(name))
    }

    /// A name not found as written, looked up again in its canonical form (the one rule of
    /// [`TypeResources::get`] and [`TypeResources::get_many`]); a name already canonical
    /// is not looked up twice.
    fn in_canonical_form(self, name: &str) -> Option<&'s StoredResource> {
        match comparable(name) {
            Cow::Owned(canonical) => self.0.get(&canonical),
            Cow::Borrowed(_) => None,
        }
    }

    /// [`TypeResources::get`] of each of `names`, in order; the lookups overlap
    /// ([`ResourceTable::get_many`]).
    pub(crate) fn get_many<'n>(
        self,
        names: impl Iterator<Item = &'n str> + Clone,
    ) -> Vec<Option<&'s StoredResource>> {
        let mut found = self.0.get_many(names.clone());
        for (found, name) in found.iter_mut().zip(names) {
            if found.is_none() {
                *found = self.in_canonical_form(name);
            }
        }
        found
    }
}

#[derive(Clone, Debug, Default)]
struct TypeTable {
    /// The type URL, one buffer for every frame prefix and response of the type.
    url: SharedStr,
    /// In name order, and by name in one hash probe.
    resources: ResourceTable<StoredResource>,
    /// alias -> resource name
    aliases: BTreeMap<String, String>,
    sum: VersionSum,
    revision: Revision,
    /// The total length of the resources' SotW frames (an encoded wildcard response's size).
    frame_bytes: usize,
    /// How many resources have a TTL (a full state with one is not shared).
    with_ttl: usize,
    /// The frames of every resource, concatenated once per revision for the streams that
    /// send the full state.
    full_state: SharedFrames,
    /// The same for incremental streams: every resource's `resources` entry of a
    /// `DeltaDiscoveryResponse`, with its body, once per revision.
    delta_full_state: SharedFrames,
    /// Names published as an error instead of a body (never also in `resources`).
    errors: BTreeMap<String, StoredError>,
    /// The error of every name held neither as a body nor as an error of its own.
    type_error: Option<StoredError>,
}

impl TypeTable {
    /// Notes a change at `revision`: the shared full state is stale.
    fn changed(&mut self, revision: Revision) {
        self.revision = revision;
        self.full_state = SharedFrames::default();
        self.delta_full_state = SharedFrames::default();
    }

    /// Every resource's frame in name order, as one buffer built at most once per revision;
    /// `None` when a resource has a TTL (its frame depends on the stream's heartbeats).
    fn shared_frames(&self) -> Option<Bytes> {
        self.full_state.get_or_build(|| {
            if self.with_ttl > 0 {
                return None;
            }
            let prefix = FramePrefix::new(&self.url);
            // The room a prefix block may take past the last frame.
            let mut frames = Vec::with_capacity(self.frame_bytes.saturating_add(128));
            for r in self.resources.iter() {
                r.write_sotw_frame(&self.url, prefix.as_ref(), &mut frames);
            }
            Some(Bytes::from(frames))
        })
    }

    /// Every resource's incremental entry (`DeltaDiscoveryResponse.resources`, field 2,
    /// body included) in name order, as one buffer built at most once per revision; `None`
    /// when a resource has a TTL (a stream's heartbeats decide its entry). Encoded by
    /// prost from the [`Resource`] a stream would send, so byte for byte the same.
    fn shared_delta_frames(&self) -> Option<Bytes> {
        self.delta_full_state.get_or_build(|| {
            if self.with_ttl > 0 {
                return None;
            }
            let url = TypeUrl::from(&*self.url);
            let mut frames = Vec::new();
            for r in self.resources.iter() {
                prost::encoding::message::encode(2, &r.delta_resource(&url, true), &mut frames);
            }
            Some(Bytes::from(frames))
        })
    }
}

/// What the server publishes. Different nodes may see different stores: the application
/// decides which store a stream reads.
///
/// # Sharing it between tasks
///
/// The store is plain data: an async server shares it behind a lock (the adapter,
/// `xds-sansio-tonic`, does this for you). Hold the lock only for the synchronous call
/// (`apply`, `poll_response_encoded`), never across an `.await`: a stream waiting to write
/// to a slow peer would then hold up every publish and every other stream. Take the
/// response out, drop the guard, then send:
///
/// ```
/// # use std::sync::RwLock;
/// # use xds_sansio::{ResourceStore, ServerConfig, ServerStream, Transport, Variant, Instant};
/// # async fn send(_: xds_sansio::server::EncodedBytes) {}
/// # async fn example(store: &RwLock<ResourceStore>, stream: &mut ServerStream) {
/// loop {
///     // The guard lives for this statement only.
///     let next = stream.poll_response_encoded(Instant::ZERO, &store.read().unwrap());
///     let Some(response) = next else { break };
///     send(response.bytes).await; // no lock held here
/// }
/// # }
/// ```
///
/// # The shared full state
///
/// Every SotW stream subscribed by wildcard to a type sends the same resources at a given
/// revision. The first such stream to build an encoded response
/// ([`ServerStream::poll_response_encoded`](super::ServerStream::poll_response_encoded))
/// concatenates the type's frames into one buffer, which the store keeps until the type
/// next changes; every other stream's response holds a reference to it (the middle chunk
/// of its [`EncodedBytes`](super::EncodedBytes)). So a reconnect storm or a fan-out copies
/// each revision's full state once, not once per stream; the cost is one more copy of a
/// type's frames while it is unchanged (about the size of one response). Types with a TTL
/// resource are not shared (each stream has its own heartbeats); without the `std`
/// feature nothing is kept (no `Sync` once-cell in `core`) and each response copies.
#[derive(Clone, Debug)]
pub struct ResourceStore {
    types: BTreeMap<String, TypeTable>,
    revision: Revision,
    log: ChangeLog,
    /// Whether publications are checked for dangling references.
    consistency: Consistency,
    /// Whether bodies are checked against their type and entry.
    body_checks: BodyChecks,
    /// Per type, the names removed, kept longer than the log's entries (see `graves.rs`).
    graves: BTreeMap<String, Graves>,
}

impl Default for ResourceStore {
    fn default() -> Self {
        ResourceStore::new()
    }
}

impl ResourceStore {
    /// An empty store at revision 0 whose change log keeps as many changes as a quarter of
    /// the resources it holds, at least 1 024 and at most
    /// [`DEFAULT_LOG_CAPACITY`](super::DEFAULT_LOG_CAPACITY); a stream that falls further
    /// behind rescans its subscriptions (correct, and then about as costly as reading that
    /// many changes). Names removed are kept for up to
    /// [`DEFAULT_LOG_CAPACITY`](super::DEFAULT_LOG_CAPACITY) removals whatever the store's
    /// size (see [`ProtocolError::ChangeLogOutrun`](super::ProtocolError::ChangeLogOutrun)).
    pub fn new() -> ResourceStore {
        ResourceStore::with_log(LogCapacity::Scaled)
    }

    /// An empty store whose change log keeps the last `capacity` changes, and names
    /// removed for as many removals, whatever its size; a stream that falls further
    /// behind rescans its subscriptions (correct, just slower).
    pub fn with_log_capacity(capacity: usize) -> ResourceStore {
        ResourceStore::with_log(LogCapacity::Fixed(capacity))
    }

    fn with_log(capacity: LogCapacity) -> ResourceStore {
        ResourceStore {
            types: BTreeMap::new(),
            revision: Revision(0),
            log: ChangeLog::new(capacity),
            consistency: Consistency::Off,
            body_checks: BodyChecks::Off,
            graves: BTreeMap::new(),
        }
    }

    /// Whether bodies are checked from now on ([`BodyChecks::Enforce`]: an unknown type,
    /// a body named otherwise than its entry, or one unreadable where it names other
    /// resources is refused). Off by default.
    pub fn set_body_checks(&mut self, checks: BodyChecks) {
        self.body_checks = checks;
    }

    /// Whether publications are checked for dangling references from now on
    /// ([`Consistency::Enforce`]: an inconsistent one is refused). Off by default.
    pub fn set_consistency(&mut self, consistency: Consistency) {
        self.consistency = consistency;
    }

    /// The revision of the last change.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The revision of the last change to `type_url` (0 if never changed).
    pub fn type_revision(&self, type_url: &str) -> Revision {
        self.types.get(type_url).map_or(Revision(0), |t| t.revision)
    }

    /// Sets a resource with the default version (the body hash).
    pub fn set(&mut self, type_url: &str, name: &str, body: Bytes) -> Result<Revision, StoreError> {
        self.set_entry(type_url, ResourceEntry::new(name, body))
    }

    /// Sets a resource whose name is field 1 of its body (every type of the catalog).
    pub fn insert(&mut self, type_url: &str, body: Bytes) -> Result<Revision, StoreError> {
        let name = name_field_1(&body).map_err(StoreError::Name)?;
        let name =
            core::str::from_utf8(&name).map_err(|_| StoreError::Name(NameError::NameNotUtf8))?;
        let name = String::from(name);
        self.set_entry(type_url, ResourceEntry::new(name, body))
    }

    /// Sets a resource, and publishes its type. Setting the same version, TTL and aliases
    /// again is a no-op and returns the current revision (nothing is sent to anyone).
    pub fn set_entry(
        &mut self,
        type_url: &str,
        mut entry: ResourceEntry,
    ) -> Result<Revision, StoreError> {
        canonicalize_name(&mut entry.name)?;
        self.check_set(type_url, &entry, &Overlay::default())?;
        let next = self.next_revision();
        self.set_at(type_url, entry, next);
        Ok(self.revision)
    }

    /// Removes a resource; `None` when it was not there, or, under
    /// [`Consistency::Enforce`], when a published resource still names it (use
    /// [`ResourceStore::apply`] to learn which).
    pub fn remove(&mut self, type_url: &str, name: &str) -> Option<Revision> {
        self.get(type_url, name)?;
        if self.consistency == Consistency::Enforce {
            let op = StoreOp::Remove {
                type_url: String::from(type_url),
                name: String::from(name),
            };
            if !self
                .consistency_of(core::slice::from_ref(&op))
                .is_consistent()
            {
                return None;
            }
        }
        let next = self.next_revision();
        self.remove_at(type_url, name, next);
        Some(next)
    }

    /// Serves `type_url`: from now on the type exists for clients, with the resources it
    /// holds, possibly none. Until a type is served (by this, or by setting one of its
    /// resources), streams hold every request for it without an answer, so a management
    /// server that has not loaded its configuration yet never tells a reconnecting client
    /// that its listeners or clusters are gone. Serving a served type is a no-op.
    /// (Not named `publish`: a publication is a set of changes applied at once,
    /// [`ResourceStore::apply`], as the adapter's `XdsServer::publish`.)
    pub fn serve_type(&mut self, type_url: &str) -> Result<Revision, StoreError> {
        self.apply(alloc::vec![StoreOp::ServeType {
            type_url: String::from(type_url),
        }])
    }

    /// Whether `type_url` is served (a type with zero resources may be).
    pub fn is_served(&self, type_url: &str) -> bool {
        self.types.contains_key(type_url)
    }

    /// Applies `ops` in order as one revision: every stream sees all of them or none of
    /// them, whatever the types. Checked before anything changes, so an error leaves the
    /// store untouched. Returns the revision after the update (unchanged when every
    /// operation was a no-op).
    pub fn apply(&mut self, mut ops: Vec<StoreOp>) -> Result<Revision, StoreError> {
        for op in &mut ops {
            canonicalize_op(op)?;
        }
        self.check_ops(&ops)?;
        if self.consistency == Consistency::Enforce {
            let report = self.consistency_of(&ops);
            if !report.is_consistent() {
                return Err(StoreError::Inconsistent(report));
            }
        }
        let next = self.next_revision();
        for op in ops {
            match op {
                StoreOp::Set { type_url, entry } => self.set_at(&type_url, entry, next),
                StoreOp::Remove { type_url, name } => self.remove_at(&type_url, &name, next),
                StoreOp::ServeType { type_url } => {
                    if !self.types.contains_key(type_url.as_str()) {
                        self.publish_at(&type_url, next);
                    }
                }
                StoreOp::SetError {
                    type_url,
                    name,
                    status,
                } => self.set_error_at(&type_url, name, status, next),
                StoreOp::ClearError { type_url, name } => {
                    self.clear_error_at(&type_url, &name, next);
                }
            }
        }
        Ok(self.revision)
    }

    /// Makes `entries` the whole content of `type_url` (publishing it, even when `entries`
    /// is empty): sets each, removes the others, as one revision. Checked before anything
    /// changes, so an error leaves the store untouched.
    pub fn replace_type(
        &mut self,
        type_url: &str,
        entries: Vec<ResourceEntry>,
    ) -> Result<Revision, StoreError> {
        let mut ops = Vec::new();
        self.replace_ops(type_url, entries, &mut ops)?;
        self.apply(ops)
    }

    /// [`ResourceStore::replace_type`] for several types as one revision: each listed type
    /// holds exactly its entries afterwards (published, even when empty), types not listed
    /// are left as they are, and every stream sees all of it or none of it. A snapshot, as
    /// go-control-plane's `SetSnapshot` takes one. Checked before anything changes.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use bytes::Bytes;
    /// # use xds_sansio::server::{ResourceEntry, ResourceStore};
    /// # use xds_sansio::types::{CLUSTER, LISTENER};
    /// let mut store = ResourceStore::new();
    /// let mut snapshot = BTreeMap::new();
    /// snapshot.insert(CLUSTER.type_url.to_string(), vec![ResourceEntry::new("c1", Bytes::from_static(b"..."))]);
    /// snapshot.insert(LISTENER.type_url.to_string(), vec![]);
    /// let revision = store.replace_types(snapshot).unwrap();
    /// assert!(store.is_served(LISTENER.type_url));
    /// assert_eq!(store.get(CLUSTER.type_url, "c1").unwrap().revision(), revision);
    /// ```
    pub fn replace_types(
        &mut self,
        types: BTreeMap<String, Vec<ResourceEntry>>,
    ) -> Result<Revision, StoreError> {
        let mut ops = Vec::new();
        for (type_url, entries) in types {
            self.replace_ops(&type_url, entries, &mut ops)?;
        }
        self.apply(ops)
    }

    /// The operations that make `entries` the whole content of `type_url`.
    fn replace_ops(
        &self,
        type_url: &str,
        entries: Vec<ResourceEntry>,
        ops: &mut Vec<StoreOp>,
    ) -> Result<(), StoreError> {
        let mut names = BTreeMap::new();
        for entry in &entries {
            if names.insert(comparable(&entry.name), ()).is_some() {
                return Err(StoreError::DuplicateName(entry.name.clone()));
            }
        }
        ops.extend(
            self.iter(type_url)
                .filter(|r| !names.contains_key(r.name()))
                .map(|r| StoreOp::Remove {
                    type_url: String::from(type_url),
                    name: String::from(r.name()),
                }),
        );
        drop(names);
        ops.push(StoreOp::ServeType {
            type_url: String::from(type_url),
        });
        ops.extend(entries.into_iter().map(|entry| StoreOp::Set {
            type_url: String::from(type_url),
            entry,
        }));
        Ok(())
    }

    fn next_revision(&self) -> Revision {
        Revision(self.revision.0.wrapping_add(1))
    }

    /// Every check `apply` makes before changing anything: the entries themselves, and the
    /// aliases against the store as the earlier operations of the batch leave it.
    fn check_ops(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        let mut overlay = Overlay::default();
        for (i, op) in ops.iter().enumerate() {
            // The last operation leaves nothing for a later one to check against.
            let more = i + 1 < ops.len();
            match op {
                StoreOp::Set { type_url, entry } => {
                    self.check_set(type_url, entry, &overlay)?;
                    if more {
                        overlay.set(self, type_url, &entry.name, &entry.aliases);
                    }
                }
                StoreOp::Remove { type_url, name } => {
                    if more {
                        overlay.remove(self, type_url, name);
                    }
                }
                StoreOp::ServeType { type_url } => {
                    if type_url.is_empty() {
                        return Err(StoreError::EmptyTypeUrl);
                    }
                    if self.body_checks == BodyChecks::Enforce
                        && crate::types::TypeInfo::of(type_url).known.is_none()
                    {
                        return Err(StoreError::UnknownType(type_url.clone()));
                    }
                }
                StoreOp::SetError { type_url, name, .. }
                | StoreOp::ClearError { type_url, name } => {
                    if type_url.is_empty() {
                        return Err(StoreError::EmptyTypeUrl);
                    }
                    if name.is_empty() {
                        return Err(StoreError::EmptyName);
                    }
                    // An error takes the place of the body: later operations see it gone.
                    if more && matches!(op, StoreOp::SetError { .. }) && name != TYPE_WIDE {
                        overlay.remove(self, type_url, name);
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks one entry, and its aliases against the store as `overlay` says the earlier
    /// operations of a batch leave it.
    fn check_set(
        &self,
        type_url: &str,
        entry: &ResourceEntry,
        overlay: &Overlay,
    ) -> Result<(), StoreError> {
        check_entry(type_url, entry)?;
        if self.body_checks == BodyChecks::Enforce {
            super::body_checks::check_body(type_url, entry)?;
        }
        for alias in &entry.aliases {
            let owner = if overlay.exists(self, type_url, alias) {
                Some(alias.clone())
            } else {
                overlay.owner(self, type_url, alias)
            };
            if let Some(owner) = owner.filter(|o| *o != entry.name) {
                return Err(StoreError::AliasTaken {
                    alias: alias.clone(),
                    owner,
                });
            }
        }
        if let Some(owner) = overlay.owner(self, type_url, &entry.name) {
            return Err(StoreError::AliasTaken {
                alias: entry.name.clone(),
                owner,
            });
        }
        Ok(())
    }

    /// Sets a checked entry at `revision` (a no-op when nothing would change).
    fn set_at(&mut self, type_url: &str, entry: ResourceEntry, revision: Revision) {
        if !self.types.contains_key(type_url) {
            self.publish_at(type_url, revision);
        }
        let Some(table) = self.types.get_mut(type_url) else {
            return;
        };
        if let Some(error) = table.errors.remove(entry.name.as_str()) {
            // A body replaces the name's error.
            table.sum.remove(error.hash);
        }
        let version = entry.version.unwrap_or_else(|| body_version(&entry.body));
        if let Some(old) = table.resources.get(entry.name.as_str()) {
            if old.version() == version
                && old.ttl() == entry.ttl
                && *old.aliases() == *entry.aliases
            {
                return;
            }
        }
        let pair = entry_hash(&entry.name, &version, entry.ttl);
        // Copied at its exact length: the caller's buffer may be larger than the body (spare
        // room, or a slice of a whole response), and the store keeps the body for long.
        let body = Bytes::copy_from_slice(&entry.body);
        let ttl = match entry.ttl {
            None => None,
            Some(ttl) => {
                let wrapped = Resource {
                    name: entry.name.clone(),
                    version: version.clone(),
                    resource: Some(Any {
                        type_url: type_url.into(),
                        value: entry.body.clone(),
                    }),
                    ttl: Some(to_proto_duration(ttl)),
                    ..Resource::default()
                }
                .encode_to_vec();
                let wrapped = Bytes::from(wrapped);
                Some(TtlForm { ttl, wrapped })
            }
        };
        let (id, text) = NameAndVersion::new(&entry.name, &version, &body);
        let stored = StoredResource {
            id,
            heads: match ttl {
                None => FrameHeads::new(type_url.len(), body.len()),
                Some(_) => FrameHeads::UNFIT,
            },
            body,
            rare: Rare::of(text, ttl, entry.aliases),
            revision,
            pair,
        };
        let mut changed_aliases = stored.aliases().to_vec();
        for alias in stored.aliases() {
            table.aliases.insert(alias.clone(), entry.name.clone());
        }
        table.sum.add(pair);
        let frame_len = stored.sotw_frame_len(type_url);
        table.frame_bytes = table.frame_bytes.saturating_add(frame_len);
        table.with_ttl = table
            .with_ttl
            .saturating_add(usize::from(stored.ttl_form().is_some()));
        let mut before = None;
        let replaced = table.resources.replace(Box::new(stored));
        if let Some(old) = replaced {
            before = Some(old.pair);
            table.sum.remove(old.pair);
            let old_len = old.sotw_frame_len(type_url);
            table.frame_bytes = table.frame_bytes.saturating_sub(old_len);
            table.with_ttl = table
                .with_ttl
                .saturating_sub(usize::from(old.ttl_form().is_some()));
            for alias in old.take_aliases() {
                if !changed_aliases.contains(&alias) {
                    table.aliases.remove(alias.as_str());
                    changed_aliases.push(alias);
                }
            }
        }
        table.changed(revision);
        self.push_change(revision, type_url, entry.name, changed_aliases, before);
    }

    /// Removes a resource at `revision` (a no-op when it is not there).
    fn remove_at(&mut self, type_url: &str, name: &str, revision: Revision) {
        let Some(table) = self.types.get_mut(type_url) else {
            return;
        };
        let Some(old) = table.resources.take(name) else {
            return;
        };

        table.sum.remove(old.pair);
        let old_len = old.sotw_frame_len(type_url);
        table.frame_bytes = table.frame_bytes.saturating_sub(old_len);
        table.with_ttl = table
            .with_ttl
            .saturating_sub(usize::from(old.ttl_form().is_some()));
        if !self.graves.contains_key(type_url) {
            self.graves
                .insert(String::from(type_url), Graves::default());
        }
        if let Some(graves) = self.graves.get_mut(type_url) {
            graves.bury(revision, name, self.log.capacity().most());
        }
        for alias in old.aliases() {
            table.aliases.remove(alias.as_str());
        }
        table.changed(revision);
        let name = String::from(old.name());
        let pair = old.pair;
        let aliases = old.take_aliases();
        self.push_change(revision, type_url, name, aliases, Some(pair));
    }

    /// Publishes a type not published yet, at `revision`.
    fn publish_at(&mut self, type_url: &str, revision: Revision) {
        let table = TypeTable {
            url: SharedStr::from(type_url),
            revision,
            ..TypeTable::default()
        };
        self.types.insert(String::from(type_url), table);
        self.push_change(revision, type_url, String::new(), Vec::new(), None);
    }

    /// Publishes an error for `name` of `type_url` instead of a body (xRFC TP3
    /// `resource_errors`: NOT_FOUND, PERMISSION_DENIED, UNAVAILABLE, ...), and publishes the
    /// type. A body the name had is removed (under [`Consistency::Enforce`], refused with
    /// [`StoreError::Inconsistent`] when a published resource still names it); a body set
    /// later replaces the error. `name` = [`TYPE_WIDE`] (`*`) sets the type's error: every
    /// name of the type without a body or an error of its own. The same error again is a
    /// no-op and returns the current revision. Subscribers receive it like any change (see
    /// the `server` module docs, "Resource errors").
    pub fn set_error(
        &mut self,
        type_url: &str,
        name: &str,
        status: Status,
    ) -> Result<Revision, StoreError> {
        self.apply(alloc::vec![StoreOp::SetError {
            type_url: String::from(type_url),
            name: String::from(name),
            status,
        }])
    }

    /// Puts an error in place of `name`'s body at `revision` (publishing the type), for
    /// [`ResourceStore::set_error`] and [`StoreOp::SetError`]; the same error again changes
    /// nothing.
    fn set_error_at(&mut self, type_url: &str, name: String, status: Status, revision: Revision) {
        let error = StoredError::new(&name, status);
        let unchanged = self.types.get(type_url).is_some_and(|t| {
            if name == TYPE_WIDE {
                t.type_error.as_ref() == Some(&error)
            } else {
                t.errors.get(name.as_str()) == Some(&error)
            }
        });
        if unchanged {
            return;
        }
        if !self.types.contains_key(type_url) {
            self.publish_at(type_url, revision);
        }
        self.remove_at(type_url, &name, revision);
        let Some(table) = self.types.get_mut(type_url) else {
            return;
        };
        let old = if name == TYPE_WIDE {
            table.type_error.replace(error.clone())
        } else {
            table.errors.insert(name.clone(), error.clone())
        };
        if let Some(old) = old {
            table.sum.remove(old.hash);
        }
        table.sum.add(error.hash);
        table.changed(revision);
        self.push_change(revision, type_url, name, Vec::new(), None);
    }

    /// Clears the error of `name` ([`TYPE_WIDE`]: the type's); `None` when it had none.
    /// A name left without body or error is then, to its subscribers, a name that does not
    /// exist.
    pub fn clear_error(&mut self, type_url: &str, name: &str) -> Option<Revision> {
        let next = self.next_revision();
        self.clear_error_at(type_url, name, next).then_some(next)
    }

    /// Clears `name`'s error at `revision`, for [`ResourceStore::clear_error`] and
    /// [`StoreOp::ClearError`]; whether it had one.
    fn clear_error_at(&mut self, type_url: &str, name: &str, revision: Revision) -> bool {
        let name = comparable(name).into_owned();
        let Some(table) = self.types.get_mut(type_url) else {
            return false;
        };
        let old = if name == TYPE_WIDE {
            table.type_error.take()
        } else {
            table.errors.remove(name.as_str())
        };
        let Some(old) = old else {
            return false;
        };
        table.sum.remove(old.hash);
        table.changed(revision);
        self.push_change(revision, type_url, name, Vec::new(), None);
        true
    }

    /// The error in force for `name`: its own, or, when the store holds no body for it, the
    /// type's ([`TYPE_WIDE`]).
    pub fn error(&self, type_url: &str, name: &str) -> Option<&Status> {
        let table = self.types.get(type_url)?;
        if let Some(e) = table
            .errors
            .get(name)
            .or_else(|| table.errors.get(comparable(name).as_ref()))
        {
            return Some(&e.status);
        }
        if self.resolve(type_url, name).is_some() {
            return None;
        }
        table.type_error.as_ref().map(|e| &e.status)
    }

    /// The error of `name` itself (not the type's), when the store holds one.
    pub fn own_error(&self, type_url: &str, name: &str) -> Option<&Status> {
        let table = self.types.get(type_url)?;
        table
            .errors
            .get(name)
            .or_else(|| table.errors.get(comparable(name).as_ref()))
            .map(|e| &e.status)
    }

    /// The type's error ([`TYPE_WIDE`]), if any.
    pub fn type_error(&self, type_url: &str) -> Option<&Status> {
        self.types
            .get(type_url)?
            .type_error
            .as_ref()
            .map(|e| &e.status)
    }

    /// What a wildcard full state of `type_url` holds besides its bodies, with one lookup
    /// of the type (the wildcard build runs per stream): the digest of the type (bodies and
    /// errors), its names published as errors (sorted) and its type-wide error.
    pub(crate) fn wildcard_state(
        &self,
        type_url: &str,
    ) -> (
        VersionSum,
        impl Iterator<Item = (&str, &Status)>,
        Option<&Status>,
    ) {
        let table = self.types.get(type_url);
        (
            table.map_or(VersionSum::EMPTY, |t| t.sum),
            table
                .into_iter()
                .flat_map(|t| t.errors.iter().map(|(n, e)| (n.as_str(), &e.status))),
            table.and_then(|t| t.type_error.as_ref()).map(|e| &e.status),
        )
    }

    /// Every name of a type published as an error (not the type's error), sorted by name.
    pub fn errors(&self, type_url: &str) -> impl Iterator<Item = (&str, &Status)> {
        self.types
            .get(type_url)
            .into_iter()
            .flat_map(|t| t.errors.iter().map(|(n, e)| (n.as_str(), &e.status)))
    }

    /// A resource by name (an `xdstp://` name in any order of its context parameters).
    pub fn get(&self, type_url: &str, name: &str) -> Option<&StoredResource> {
        self.of_type(type_url)?.get(name)
    }

    /// The resources of `type_url`, for many lookups of one type: the type is found once
    /// (a tree search over type URLs that share their first 30-odd bytes).
    pub(crate) fn of_type(&self, type_url: &str) -> Option<TypeResources<'_>> {
        self.types
            .get(type_url)
            .map(|t| TypeResources(&t.resources))
    }

    /// A resource by name or alias.
    pub fn resolve(&self, type_url: &str, name_or_alias: &str) -> Option<&StoredResource> {
        let table = self.types.get(type_url)?;
        self.get(type_url, name_or_alias).or_else(|| {
            let name = table.aliases.get(name_or_alias)?;
            table.resources.get(name.as_str())
        })
    }

    /// The members of the `xdstp://` glob collection `glob` (canonical), sorted by name: a
    /// range of the sorted names, each checked to belong to the glob.
    pub fn members<'s>(
        &'s self,
        type_url: &str,
        glob: &str,
    ) -> impl Iterator<Item = &'s StoredResource> + 's {
        // Every member starts with the glob up to its `*`.
        let glob = String::from(glob);
        let prefix = String::from(
            glob.find('*')
                .and_then(|at| glob.get(..at))
                .unwrap_or(&glob),
        );
        let start = prefix.clone();
        self.types
            .get(type_url)
            .into_iter()
            .flat_map(move |t| t.resources.from(start.as_str()))
            .take_while(move |r| r.name().starts_with(prefix.as_str()))
            .filter(move |r| collection_of(r.name()).as_deref() == Some(glob.as_str()))
    }

    /// Every resource of a type, sorted by name.
    pub fn iter(&self, type_url: &str) -> impl Iterator<Item = &StoredResource> {
        self.types
            .get(type_url)
            .into_iter()
            .flat_map(|t| t.resources.iter())
    }

    /// Checks the whole store: every name a published resource of a referring type refers
    /// to is published (in the types the store serves).
    pub fn consistency(&self) -> ConsistencyReport {
        dangling::check_all(self)
    }

    /// Checks the store as `ops` would leave it, without changing anything: the
    /// references of what `ops` set, and, when `ops` remove something, whether anything
    /// left still names it. (Assumes the store itself is consistent, as it is under
    /// [`Consistency::Enforce`]; [`ResourceStore::consistency`] checks everything.)
    pub fn consistency_of(&self, ops: &[StoreOp]) -> ConsistencyReport {
        dangling::check_ops(self, ops)
    }

    /// Splits `ops` for make-before-break: a removal of a resource that something
    /// published now names goes to [`TwoPhase::later`] (clients may hold that referrer
    /// until they have the new version); everything else, in order, to [`TwoPhase::now`].
    /// If `ops` leave the store consistent, so does each phase.
    pub fn plan_make_before_break(&self, ops: Vec<StoreOp>) -> TwoPhase {
        dangling::plan(self, ops)
    }

    /// The total size of the SotW frames of a type (capacity of an encoded response).
    pub(crate) fn frame_bytes(&self, type_url: &str) -> usize {
        self.types.get(type_url).map_or(0, |t| t.frame_bytes)
    }

    /// Every SotW frame of a type, concatenated in name order (the middle of an encoded
    /// wildcard response): built by the first stream that asks at a revision, then shared.
    /// `None` for a type not published, or when one of its resources has a TTL.
    pub(crate) fn shared_frames(&self, type_url: &str) -> Option<Bytes> {
        self.types.get(type_url)?.shared_frames()
    }

    /// [`TypeTable::shared_delta_frames`] of `type_url`.
    pub(crate) fn shared_delta_frames(&self, type_url: &str) -> Option<Bytes> {
        self.types.get(type_url)?.shared_delta_frames()
    }

    /// How many resources of a type the store holds.
    pub fn len(&self, type_url: &str) -> usize {
        self.types.get(type_url).map_or(0, |t| t.resources.len())
    }

    /// Whether the store holds no resource at all.
    pub fn is_empty(&self) -> bool {
        self.types.values().all(|t| t.resources.is_empty())
    }

    /// The version digest of every resource of a type (the SotW version of a wildcard
    /// subscription), kept up to date on every change.
    pub fn type_digest(&self, type_url: &str) -> VersionSum {
        self.types
            .get(type_url)
            .map_or(VersionSum::EMPTY, |t| t.sum)
    }

    /// The names of `type_url` removed after `since` (some may be back), kept longer than
    /// the change log; `Err` when they no longer reach back that far.
    pub(crate) fn removed_since(
        &self,
        type_url: &str,
        since: Revision,
    ) -> Result<impl Iterator<Item = &str>, LogTruncated> {
        match self.graves.get(type_url) {
            Some(g) => g.since(since).map(Some),
            None => Ok(None),
        }
        .map(|names| names.into_iter().flatten())
    }

    /// The changes after `since`, oldest first, in O(log n) + O(changes); `Err` when the
    /// log no longer reaches back that far.
    pub fn changes_since(
        &self,
        since: Revision,
    ) -> Result<impl Iterator<Item = StoreChange<'_>> + '_, LogTruncated> {
        self.log.since(since)
    }

    fn push_change(
        &mut self,
        revision: Revision,
        type_url: &str,
        name: String,
        aliases: Vec<String>,
        before: Option<u64>,
    ) {
        self.revision = revision;
        let held = self.types.values().map(|t| t.resources.len()).sum();
        self.log.push(
            held,
            Change {
                revision,
                type_url,
                name,
                aliases,
                before,
            },
        );
    }
}

impl dangling::Published for ResourceStore {
    fn is_served(&self, type_url: &str) -> bool {
        ResourceStore::is_served(self, type_url)
    }

    fn has(&self, type_url: &str, name: &str) -> bool {
        self.get(type_url, name).is_some()
    }

    fn resources<'s>(
        &'s self,
        type_url: &'static str,
    ) -> impl Iterator<Item = (&'s str, &'s Bytes)> + 's {
        self.iter(type_url).map(|r| (r.name(), r.body()))
    }
}

/// Puts the `xdstp://` names of an operation in canonical form (xDS TP1: names that differ
/// only in the order of their context parameters are the same resource), so they match
/// what clients subscribe to whichever way either side wrote them.
fn canonicalize_op(op: &mut StoreOp) -> Result<(), StoreError> {
    match op {
        StoreOp::Set { entry, .. } => canonicalize_name(&mut entry.name),
        StoreOp::Remove { name, .. } => canonicalize_name(name),
        StoreOp::ServeType { .. } => Ok(()),
        StoreOp::SetError { name, .. } | StoreOp::ClearError { name, .. } => {
            if name == TYPE_WIDE {
                Ok(())
            } else {
                canonicalize_name(name)
            }
        }
    }
}

/// [`canonicalize_op`] for one name.
fn canonicalize_name(name: &mut String) -> Result<(), StoreError> {
    if name.starts_with(XDSTP_SCHEME) {
        let urn = XdstpName::parse(name).map_err(|error| StoreError::MalformedXdstpName {
            name: name.clone(),
            error,
        })?;
        *name = urn.canonical();
    }
    Ok(())
}

/// The names and aliases of the types a batch touches, as its operations so far leave them
/// (what [`ResourceStore::apply`] checks each operation against before changing anything).
#[derive(Default)]
struct Overlay {
    /// (type, name) -> its aliases, `None` when removed.
    resources: BTreeMap<(String, String), Option<Vec<String>>>,
    /// (type, alias) -> its owner, `None` when freed.
    aliases: BTreeMap<(String, String), Option<String>>,
}

impl Overlay {
    fn key(type_url: &str, name: &str) -> (String, String) {
        (String::from(type_url), String::from(name))
    }

    fn exists(&self, store: &ResourceStore, type_url: &str, name: &str) -> bool {
        match self.resources.get(&Overlay::key(type_url, name)) {
            Some(now) => now.is_some(),
            None => store.get(type_url, name).is_some(),
        }
    }

    fn owner(&self, store: &ResourceStore, type_url: &str, alias: &str) -> Option<String> {
        match self.aliases.get(&Overlay::key(type_url, alias)) {
            Some(owner) => owner.clone(),
            None => store
                .types
                .get(type_url)
                .and_then(|table| table.aliases.get(alias).cloned()),
        }
    }

    fn aliases_of(&self, store: &ResourceStore, type_url: &str, name: &str) -> Vec<String> {
        match self.resources.get(&Overlay::key(type_url, name)) {
            Some(now) => now.clone().unwrap_or_default(),
            None => store
                .get(type_url, name)
                .map(|r| r.aliases().to_vec())
                .unwrap_or_default(),
        }
    }

    fn set(&mut self, store: &ResourceStore, type_url: &str, name: &str, aliases: &[String]) {
        for old in self.aliases_of(store, type_url, name) {
            self.aliases.insert(Overlay::key(type_url, &old), None);
        }
        for alias in aliases {
            self.aliases
                .insert(Overlay::key(type_url, alias), Some(String::from(name)));
        }
        self.resources
            .insert(Overlay::key(type_url, name), Some(aliases.to_vec()));
    }

    fn remove(&mut self, store: &ResourceStore, type_url: &str, name: &str) {
        for old in self.aliases_of(store, type_url, name) {
            self.aliases.insert(Overlay::key(type_url, &old), None);
        }
        self.resources.insert(Overlay::key(type_url, name), None);
    }
}

fn check_entry(type_url: &str, entry: &ResourceEntry) -> Result<(), StoreError> {
    if type_url.is_empty() {
        return Err(StoreError::EmptyTypeUrl);
    }
    if entry.name.is_empty() || entry.aliases.iter().any(String::is_empty) {
        return Err(StoreError::EmptyName);
    }
    if entry.name == "*" || entry.aliases.iter().any(|a| a == "*") {
        return Err(StoreError::WildcardName);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const T: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    #[test]
    fn set_is_idempotent_and_logged() {
        let mut s = ResourceStore::new();
        let r1 = s.set(T, "a", Bytes::from_static(b"x")).unwrap();
        assert_eq!(r1, Revision(1));
        assert_eq!(s.set(T, "a", Bytes::from_static(b"x")).unwrap(), r1);
        let r2 = s.set(T, "a", Bytes::from_static(b"y")).unwrap();
        assert_eq!(r2, Revision(2));
        assert_eq!(s.remove(T, "a"), Some(Revision(3)));
        assert_eq!(s.remove(T, "a"), None);
        let names: Vec<_> = s
            .changes_since(Revision(1))
            .unwrap()
            .map(|c| (c.revision.0, c.name))
            .collect();
        assert_eq!(names, [(2, "a"), (3, "a")]);
        assert_eq!(s.changes_since(Revision(3)).unwrap().count(), 0);
        // A revision the store has not reached yet: nothing after it, not an error.
        assert_eq!(s.changes_since(Revision(99)).unwrap().count(), 0);
        assert_eq!(s.type_digest(T), VersionSum::EMPTY);
    }

    #[test]
    fn log_truncation_is_reported() {
        let mut s = ResourceStore::with_log_capacity(2);
        for i in 0..5u8 {
            s.set(T, "a", Bytes::from(vec![i])).unwrap();
        }
        assert!(s.changes_since(Revision(2)).is_err());
        assert_eq!(s.changes_since(Revision(3)).unwrap().count(), 2);
        assert!(ResourceStore::with_log_capacity(0)
            .changes_since(Revision(0))
            .is_ok());
    }

    #[test]
    fn misuse_is_a_typed_error() {
        let mut s = ResourceStore::new();
        assert_eq!(s.set("", "a", Bytes::new()), Err(StoreError::EmptyTypeUrl));
        assert_eq!(s.set(T, "", Bytes::new()), Err(StoreError::EmptyName));
        assert_eq!(s.set(T, "*", Bytes::new()), Err(StoreError::WildcardName));
        assert_eq!(
            s.insert(T, Bytes::from_static(&[0x08, 1])),
            Err(StoreError::Name(NameError::NameNotString))
        );
        s.set_entry(
            T,
            ResourceEntry::new("a", Bytes::new()).with_aliases(vec!["x".into()]),
        )
        .unwrap();
        assert!(matches!(
            s.set_entry(
                T,
                ResourceEntry::new("b", Bytes::new()).with_aliases(vec!["x".into()])
            ),
            Err(StoreError::AliasTaken { .. })
        ));
        assert!(matches!(
            s.set(T, "x", Bytes::new()),
            Err(StoreError::AliasTaken { .. })
        ));
        assert_eq!(s.resolve(T, "x").map(|r| r.name()), Some("a"));
        let e = vec![
            ResourceEntry::new("c", Bytes::new()),
            ResourceEntry::new("c", Bytes::new()),
        ];
        assert_eq!(
            s.replace_type(T, e),
            Err(StoreError::DuplicateName("c".into()))
        );
        assert!(
            s.get(T, "a").is_some(),
            "failed replace leaves the store alone"
        );
    }

    /// A name is read from the body or kept apart, a version inline or apart, with or
    /// without a TTL and aliases: each reads back, and ordering and lookups by name hold.
    #[test]
    fn every_part_reads_back_wherever_it_is_kept() {
        let long = "a version longer than sixteen bytes";
        let mut s = ResourceStore::new();
        let mut expected = Vec::new();
        for (i, (in_body, version, ttl, aliases)) in [
            (true, None, None, vec![]),
            (true, Some("v1"), None, vec![]),
            (true, Some(long), None, vec![]),
            (false, None, None, vec![]),
            (
                false,
                Some(long),
                Some(Duration::from_secs(5)),
                vec!["alias".into()],
            ),
            (true, Some(""), Some(Duration::from_secs(1)), vec![]),
            (true, Some(long), None, vec!["other".into(), "third".into()]),
        ]
        .into_iter()
        .enumerate()
        {
            let name = alloc::format!("r{i}");
            let mut body = vec![0x0a, name.len() as u8];
            body.extend_from_slice(if in_body { name.as_bytes() } else { b"xx" });
            body.extend_from_slice(b"\x12\x01z");
            let body = Bytes::from(body);
            let mut entry = ResourceEntry::new(name.clone(), body.clone());
            entry.version = version.map(String::from);
            entry.ttl = ttl;
            entry.aliases = aliases.clone();
            s.set_entry(T, entry).unwrap();
            let version = version.map_or_else(|| body_version(&body), String::from);
            expected.push((name, version, body, ttl, aliases));
        }
        for (name, version, body, ttl, aliases) in &expected {
            let r = s.get(T, name).unwrap();
            assert_eq!(
                (r.name(), r.version(), r.body(), r.ttl(), r.aliases()),
                (
                    name.as_str(),
                    version.as_str(),
                    body,
                    *ttl,
                    aliases.as_slice()
                )
            );
        }
        let names: Vec<_> = s.iter(T).map(|r| r.name()).collect();
        assert_eq!(names, ["r0", "r1", "r2", "r3", "r4", "r5", "r6"]);
        assert_eq!(s.resolve(T, "third").map(|r| r.name()), Some("r6"));
        let before = s.revision();
        assert_eq!(s.remove(T, "r4"), Some(Revision(before.0 + 1)));
        let gone = s.changes_since(before).unwrap().next();
        assert_eq!(
            gone.map(|c| (c.name, c.aliases)),
            Some(("r4", &["alias".into()][..]))
        );
    }

    #[test]
    fn insert_reads_the_name_and_replace_type_removes_others() {
        let mut s = ResourceStore::new();
        s.insert(T, Bytes::from_static(b"\x0a\x03foo")).unwrap();
        assert!(s.get(T, "foo").is_some());
        s.replace_type(T, vec![ResourceEntry::new("bar", Bytes::from_static(b"b"))])
            .unwrap();
        let names: Vec<_> = s.iter(T).map(|r| r.name()).collect();
        assert_eq!(names, ["bar"]);
        let mut digest = VersionSum::EMPTY;
        digest.add(super::super::version::pair_hash("bar", &body_version(b"b")));
        assert_eq!(s.type_digest(T), digest);
    }
}
