//! Batched change events: one [`ClientEvent::Changed`](super::ClientEvent::Changed) per run of cache changes, whose
//! entries name what changed and borrow the rest from the client's cache.
//!
//! Why: an owned [`ClientEvent::Upserted`](super::ClientEvent::Upserted) carries four reference-counted handles (type
//! URL, name, version, body), each an atomic increment when made and a decrement when
//! dropped. On a 10k-resource response that is as much work as decoding the response
//! (`benches/README.md`, "the floor"). A batch carries one handle per change (the name)
//! and one type URL per batch; the application reads the body, version and aliases from
//! the cache with [`Client::changes`](super::Client::changes), without copying anything.

use alloc::vec::Vec;

use super::cache::record::CachedResource;
use crate::text::SharedStr;

/// Why a resource left the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RemovalReason {
    /// Incremental: named in `removed_resources` / `removed_resource_names`, or announced
    /// as not existing by a body-less `Resource`.
    ServerRemoved,
    /// SotW LDS/CDS: absent from a full-state response (an empty one removes all).
    AbsentFromResponse,
    /// The application unsubscribed from it.
    Unsubscribed,
    /// Its TTL ran out without a refresh.
    Expired,
}

/// How the client reports changes to its cache (resources upserted, removed, known not to
/// exist).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EventShape {
    /// One owned event per change: [`ClientEvent::Upserted`](super::ClientEvent::Upserted), [`ClientEvent::Removed`](super::ClientEvent::Removed),
    /// [`ClientEvent::DoesNotExist`](super::ClientEvent::DoesNotExist). Simple to consume; each event owns its handles.
    #[default]
    PerResource,
    /// One [`ClientEvent::Changed`](super::ClientEvent::Changed) per run of changes of one type (one response's changes,
    /// unless another event falls between them), whose entries borrow from the cache: the
    /// path for large configurations. No `Upserted`, `Removed` or `DoesNotExist` is
    /// emitted; every other event is unchanged.
    Batched,
}

/// What happened to one name, in a [`ChangeBatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// Added or its body changed (as [`ClientEvent::Upserted`](super::ClientEvent::Upserted)).
    Upserted,
    /// Left the cache (as [`ClientEvent::Removed`](super::ClientEvent::Removed)).
    Removed(RemovalReason),
    /// A subscribed name is known not to exist (as [`ClientEvent::DoesNotExist`](super::ClientEvent::DoesNotExist)).
    DoesNotExist,
}

/// The changes of one [`ClientEvent::Changed`](super::ClientEvent::Changed), in the order they happened: a name per
/// change, nothing copied from the response.
///
/// An upsert also notes where its record stood in the cache, so reading it back
/// ([`Client::changes`](super::Client::changes)) needs no second hash of the name. The
/// position is a hint, checked against the name when read (a later removal may have moved
/// the record), and is not part of what the batch says: batches compare by names and
/// changes only.
#[derive(Clone, Debug, Default)]
pub struct ChangeBatch {
    entries: Vec<Entry>,
}

/// One change: the name, what happened, and the record's position when it happened.
#[derive(Clone, Debug)]
struct Entry {
    name: SharedStr,
    change: Change,
    /// [`NO_POSITION`] when the change left no record to read.
    at: u32,
}

/// The position of a change that left nothing to read.
const NO_POSITION: u32 = u32::MAX;

impl PartialEq for ChangeBatch {
    fn eq(&self, other: &ChangeBatch) -> bool {
        self.iter().eq(other.iter())
    }
}

impl ChangeBatch {
    /// An empty batch with room for `hint` changes (one allocation for a large response).
    pub(crate) fn with_capacity(hint: usize) -> ChangeBatch {
        ChangeBatch {
            entries: Vec::with_capacity(hint),
        }
    }

    /// Adds a change at the end; `at` is where its record stands now, if it is to be read.
    pub(crate) fn push(&mut self, name: SharedStr, change: Change, at: Option<usize>) {
        let at = at
            .and_then(|at| u32::try_from(at).ok())
            .unwrap_or(NO_POSITION);
        self.entries.push(Entry { name, change, at });
    }

    /// The number of changes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (never, in an event).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each changed name and what happened to it, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&SharedStr, Change)> + '_ {
        self.entries.iter().map(|e| (&e.name, e.change))
    }

    /// [`ChangeBatch::iter`] with each record's position when the change was made.
    pub(crate) fn iter_at(
        &self,
    ) -> impl ExactSizeIterator<Item = (&SharedStr, Change, Option<usize>)> + '_ {
        self.entries.iter().map(|e| {
            let at = (e.at != NO_POSITION).then_some(e.at as usize);
            (&e.name, e.change, at)
        })
    }
}

/// One change of a batch, with the resource as the cache holds it now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChangeView<'a> {
    /// The resource name.
    pub name: &'a SharedStr,
    /// What happened to it.
    pub change: Change,
    /// The resource as held now (body, version, aliases, TTL): for an upsert read before
    /// the next input, the resource it put there. `None` when it is not held (removed,
    /// does not exist, or changed again by a later input).
    pub resource: Option<CachedResource<'a>>,
}
