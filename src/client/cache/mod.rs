//! What the client holds of one type ([`TypeCache`]): the per-name records (the accepted
//! resource, if held, and the status a CSDS dump reports, kept together so events and
//! status can never disagree), the alias index and the accepted versions. Its fields are
//! private: it changes only through its own methods, here and in [`apply`], so a count can
//! never drift from the records it counts.

mod apply;
mod copies;
pub(crate) mod record;
mod records;
mod unchanged;
mod versions;

use alloc::string::String;
use hashbrown::HashMap;

use super::defect::ResponseDefect;
use super::incoming::Incoming;
use super::status::{Rejection, ResourceState};
use crate::message::Variant;
use crate::text::SharedStr;

pub(crate) use apply::{Around, Fired};
pub use record::CachedResource;
pub(crate) use record::Record;
use records::Records;
use versions::Versions;

/// Everything held of one type. See the [module docs](self).
#[derive(Clone, Debug)]
pub(crate) struct TypeCache {
    records: Records,
    /// The versions held resources are at (each record keeps a slot).
    versions: Versions,
    /// alias -> resource name (incremental).
    aliases: HashMap<SharedStr, SharedStr>,
    /// SotW: last accepted `version_info` (survives reconnects).
    version: SharedStr,
    /// Incremental: last accepted `system_version_info` (status only).
    system_version: SharedStr,
    /// The `control_plane.identifier` of the last response of the type (CSDS: which
    /// management server answered).
    control_plane: Option<SharedStr>,
    /// Counts applied responses; records named by the current one carry it.
    generation: u32,
    /// Records holding a resource.
    cached_count: usize,
    /// Records holding a resource named by the response being applied.
    marked: usize,
}

impl Default for TypeCache {
    fn default() -> TypeCache {
        TypeCache {
            records: Records::default(),
            versions: Versions::default(),
            aliases: HashMap::new(),
            version: SharedStr::EMPTY,
            system_version: SharedStr::EMPTY,
            control_plane: None,
            generation: 0,
            cached_count: 0,
            marked: 0,
        }
    }
}

impl TypeCache {
    // ---------------------------------------------------------------- reads

    /// The record of exactly `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Record> {
        self.records.get(name)
    }

    /// The hasher names' records are found by (what [`Incoming::hash`] is made with).
    #[inline]
    pub(crate) fn name_hasher(&self) -> &hashbrown::DefaultHashBuilder {
        self.records.hasher()
    }

    /// The record of `name`, following an alias.
    pub(crate) fn record(&self, name: &str) -> Option<&Record> {
        self.records.get(name).or_else(|| {
            self.aliases
                .get(name)
                .and_then(|real| self.records.get(real.as_str()))
        })
    }

    /// The resource held under exactly `name`.
    pub(crate) fn held(&self, name: &str) -> Option<CachedResource<'_>> {
        self.records.get(name)?.held(&self.versions)
    }

    /// The resource held under exactly `name`, whose record stood at `at` (a hint: checked,
    /// and looked up by name if the record has moved since).
    #[inline]
    pub(crate) fn held_at(&self, at: usize, name: &SharedStr) -> Option<CachedResource<'_>> {
        match self.records.at_keyed(at, name.as_str()) {
            Some(rec) => rec.held(&self.versions),
            None => self.held(name.as_str()),
        }
    }

    /// The resource held under `name`, following an alias.
    pub(crate) fn resource(&self, name: &str) -> Option<CachedResource<'_>> {
        self.record(name)?.held(&self.versions)
    }

    /// The CSDS status of `name`, following an alias.
    pub(crate) fn status(&self, name: &str) -> Option<super::status::ResourceStatus> {
        Some(self.record(name)?.status(&self.versions))
    }

    /// Every name with its CSDS status, in no order.
    pub(crate) fn statuses(
        &self,
    ) -> impl Iterator<Item = (SharedStr, super::status::ResourceStatus)> + '_ {
        self.records
            .iter()
            .map(|r| (r.name_shared(), r.status(&self.versions)))
    }

    /// Every held resource with its record (which knows its name), in no order.
    pub(crate) fn held_resources(&self) -> impl Iterator<Item = (&Record, CachedResource<'_>)> {
        self.records
            .iter()
            .filter_map(|r| r.held(&self.versions).map(|c| (r, c)))
    }

    /// The last accepted SotW `version_info`: what a SotW request carries.
    pub(crate) fn sotw_version(&self) -> &SharedStr {
        &self.version
    }

    /// The last accepted version of `variant`'s kind (SotW `version_info`, incremental
    /// `system_version_info`).
    pub(crate) fn accepted_version(&self, variant: Variant) -> &SharedStr {
        match variant {
            Variant::Sotw => &self.version,
            Variant::Delta => &self.system_version,
        }
    }

    /// Which management server answered last.
    pub(crate) fn control_plane(&self) -> Option<&SharedStr> {
        self.control_plane.as_ref()
    }

    /// Fails when applying `resources` would make the type hold more than
    /// [`Limits::max_names_per_type`](super::Limits::max_names_per_type): a full-state response replaces what is held, any
    /// other adds its new names.
    pub(crate) fn check_capacity(
        &self,
        resources: &[Incoming],
        full_state: bool,
        max_names_per_type: usize,
    ) -> Result<(), ResponseDefect> {
        let count = if full_state {
            resources.len()
        } else {
            let new_names = resources
                .iter()
                .filter(|inc| inc.body.is_some() && !self.records.contains(inc.name.as_str()))
                .count();
            self.records.len().saturating_add(new_names)
        };
        if count > max_names_per_type {
            return Err(ResponseDefect::TooManyHeld {
                count,
                limit: max_names_per_type,
            });
        }
        Ok(())
    }

    // ---------------------------------------------------------------- small changes

    /// A response arrived from `control_plane` (or from a server that names none).
    pub(crate) fn note_control_plane(&mut self, control_plane: Option<SharedStr>) {
        self.control_plane = control_plane;
    }

    /// `version` of `variant`'s kind was accepted (ACKed).
    pub(crate) fn accept_version(&mut self, variant: Variant, version: SharedStr) {
        match variant {
            Variant::Sotw => self.version = version,
            Variant::Delta => self.system_version = version,
        }
    }

    /// Forgets the accepted SotW version, so the next request asks for everything again.
    pub(crate) fn forget_sotw_version(&mut self) {
        self.version = SharedStr::EMPTY;
    }

    /// `name` is subscribed by name: it has a record from now on (its status is
    /// `Requested` until something is known).
    pub(crate) fn note_requested(&mut self, name: &SharedStr) {
        self.records.get_or_insert(name);
    }

    /// A new stream: no does-not-exist timer runs (the caller disarms them all).
    pub(crate) fn reset_stream(&mut self) {
        for rec in self.records.values_mut() {
            rec.take_dne_at();
        }
    }

    /// The record of `name` for a rejection of this response: `Nacked`, with why.
    pub(crate) fn note_rejected(&mut self, name: &SharedStr, version: SharedStr, error: String) {
        let Some(rec) = self.records.get_or_insert(name) else {
            return;
        };
        rec.state = ResourceState::Nacked;
        rec.seen = self.generation;
        if rec.has_body() {
            self.marked += 1;
        }
        rec.set_rejected(Some(Rejection { version, error }));
    }
}
