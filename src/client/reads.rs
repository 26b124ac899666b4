//! Reading the cache and the per-resource status (CSDS).

use alloc::vec::Vec;

use super::{
    CachedResource, Change, ChangeBatch, ChangeView, Client, ClientEvent, ResourceStatus,
    SharedStr, StatusEntry,
};
use crate::name::comparable;

impl Client {
    // ------------------------------------------------------------------ reads

    /// The accepted resource `name` (or alias) of `type_url`, if held.
    pub fn resource(&self, type_url: &str, name: &str) -> Option<CachedResource<'_>> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        ts.cache.resource(&comparable(name))
    }

    /// The changes of a [`ClientEvent::Changed`] of `type_url`,
    /// each with the resource as the cache holds it now: read before the next input, an
    /// upsert shows the resource it put there. Nothing is copied.
    pub fn changes<'a>(
        &'a self,
        type_url: &str,
        batch: &'a ChangeBatch,
    ) -> impl ExactSizeIterator<Item = ChangeView<'a>> + 'a {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i));
        batch.iter_at().map(move |(name, change, at)| ChangeView {
            name,
            change,
            resource: ts.and_then(|ts| match at {
                Some(at) => ts.cache.held_at(at, name),
                None => ts.cache.held(name.as_str()),
            }),
        })
    }

    /// The owned per-resource events a batch stands for ([`ClientEvent::Upserted`],
    /// [`ClientEvent::Removed`], [`ClientEvent::DoesNotExist`], as
    /// [`EventShape::PerResource`](super::EventShape::PerResource) would have emitted
    /// them), made from the cache: call before the next input. An upsert whose resource
    /// is no longer held (changed again since) has no event.
    pub fn owned_events<'a>(
        &'a self,
        type_url: &'a SharedStr,
        batch: &'a ChangeBatch,
    ) -> impl Iterator<Item = ClientEvent> + 'a {
        self.changes(type_url, batch).filter_map(move |view| {
            let type_url = type_url.clone();
            let name = view.name.clone();
            Some(match view.change {
                Change::Upserted => {
                    let held = view.resource?;
                    ClientEvent::Upserted {
                        type_url,
                        name,
                        version: held.version_shared(),
                        body: held.body_bytes(),
                        aliases: held.aliases().to_vec(),
                    }
                }
                Change::Removed(reason) => ClientEvent::Removed {
                    type_url,
                    name,
                    reason,
                },
                Change::DoesNotExist => ClientEvent::DoesNotExist { type_url, name },
            })
        })
    }

    /// The names subscribed for `type_url`, sorted (`*` for the wildcard, legacy or
    /// explicit), as [`Client::subscribe`], [`Client::unsubscribe`] and
    /// [`Client::set_subscription`] left them.
    pub fn subscribed_names(&self, type_url: &str) -> Vec<SharedStr> {
        self.index
            .get(type_url)
            .and_then(|&i| self.types.get(i))
            .map(|ts| ts.sub.desired().iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The names of the resources of `type_url` held, sorted.
    pub fn resource_names(&self, type_url: &str) -> Vec<SharedStr> {
        let mut names: Vec<SharedStr> = self
            .index
            .get(type_url)
            .and_then(|&i| self.types.get(i))
            .map(|ts| {
                ts.cache
                    .held_resources()
                    .map(|(r, _)| r.name_shared())
                    .collect()
            })
            .unwrap_or_default();
        names.sort_unstable();
        names
    }

    /// The last accepted SotW `version_info` of `type_url` (incremental: the last accepted
    /// `system_version_info`).
    pub fn version(&self, type_url: &str) -> Option<&str> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        Some(ts.cache.accepted_version(self.config.variant).as_str())
    }

    /// The CSDS status of `name` (or alias) of `type_url`: subscribed names and held
    /// resources have one.
    pub fn status(&self, type_url: &str, name: &str) -> Option<ResourceStatus> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        ts.cache.status(&comparable(name))
    }

    /// The `control_plane.identifier` of the last response of `type_url`: which management
    /// server answered (a CSDS view shows it).
    pub fn control_plane(&self, type_url: &str) -> Option<&str> {
        let ts = self.index.get(type_url).and_then(|&i| self.types.get(i))?;
        ts.cache.control_plane().map(SharedStr::as_str)
    }

    /// Every status, sorted by type URL then name: the material of a CSDS dump.
    pub fn dump(&self) -> Vec<StatusEntry> {
        let mut out: Vec<StatusEntry> = self
            .types
            .iter()
            .flat_map(|ts| {
                ts.cache.statuses().map(|(n, status)| StatusEntry {
                    type_url: ts.url.clone(),
                    name: n,
                    status,
                    control_plane: ts.cache.control_plane().cloned(),
                })
            })
            .collect();
        out.sort_unstable_by(|a, b| (&a.type_url, &a.name).cmp(&(&b.type_url, &b.name)));
        out
    }
}
