//! A SotW response that brings again, in the same order, exactly the bodies the cache
//! holds: a server's resend after a reconnect, or a server that answers every change with
//! the whole type. Recognised by comparing each body with the record at its place (equal
//! bodies name the same resource, so no name is read and no duplicate can hide), and
//! applied by touching each record once: what the full path would have done to an
//! unchanged resource (named by this response, at this version), no more. Any other
//! response, or any record with a status of its own, takes the full path.

use crate::pb::google::protobuf::Any;
use crate::text::SharedStr;

use super::apply::Around;
use super::TypeCache;
use crate::client::status::ResourceState;

impl TypeCache {
    /// Whether `resources` are, in order, exactly the bodies held (plain `Any`s of
    /// `type_url`, every record a held resource without aliases, TTL or status of its own).
    pub(crate) fn holds_in_order(&self, resources: &[Any], type_url: &str) -> bool {
        resources.len() == self.records.len()
            && self.cached_count == resources.len()
            && resources
                .iter()
                .zip(self.records.iter())
                .all(|(any, record)| {
                    any.type_url == type_url
                        && record.state == ResourceState::Acked
                        && record.is_plain()
                        && record.body().is_some_and(|b| *b == any.value)
                })
    }

    /// Applies a response [`TypeCache::holds_in_order`] said yes to: every record named by
    /// it, held at its `version`; nothing changed, nothing to tell.
    pub(crate) fn apply_unchanged(&mut self, version: &SharedStr, ar: &mut Around<'_, '_>) {
        self.generation = self.generation.wrapping_add(1);
        let generation = self.generation;
        let mut marked = 0;
        for record in self.records.values_mut() {
            record.seen = generation;
            marked += 1;
            if record.has_body() {
                record.version = self.versions.replace_lent(record.version, version);
            }
            ar.readiness.answered(record.name());
        }
        self.marked = marked;
    }
}
