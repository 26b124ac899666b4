//! Batched change events: one [`ClientEvent::Changed`] per run of cache changes, whose
//! entries name what changed and borrow the rest from the client's cache.
//!
//! Why: an owned [`ClientEvent::Upserted`] carries four reference-counted handles (type
//! URL, name, version, body), each an atomic increment when made and a decrement when
//! dropped. On a 10k-resource response that is as much work as decoding the response
//! (`benches/README.md`, "the floor"). A batch carries one handle per change (the name)
//! and one type URL per batch; the application reads the body, version and aliases from
//! the cache with [`Client::changes`](super::Client::changes), without copying anything.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::cache::CachedResource;
use super::event::{ClientEvent, RemovalReason};
use crate::text::SharedStr;

/// How the client reports changes to its cache (resources upserted, removed, known not to
/// exist).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EventShape {
    /// One owned event per change: [`ClientEvent::Upserted`], [`ClientEvent::Removed`],
    /// [`ClientEvent::DoesNotExist`]. Simple to consume; each event owns its handles.
    #[default]
    PerResource,
    /// One [`ClientEvent::Changed`] per run of changes of one type (one response's changes,
    /// unless another event falls between them), whose entries borrow from the cache: the
    /// path for large configurations. No `Upserted`, `Removed` or `DoesNotExist` is
    /// emitted; every other event is unchanged.
    Batched,
}

/// What happened to one name, in a [`ChangeBatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// Added or its body changed (as [`ClientEvent::Upserted`]).
    Upserted,
    /// Left the cache (as [`ClientEvent::Removed`]).
    Removed(RemovalReason),
    /// A subscribed name is known not to exist (as [`ClientEvent::DoesNotExist`]).
    DoesNotExist,
}

/// The changes of one [`ClientEvent::Changed`], in the order they happened: a name per
/// change, nothing copied from the response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChangeBatch {
    entries: Vec<(SharedStr, Change)>,
}

impl ChangeBatch {
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
        self.entries.iter().map(|(name, change)| (name, *change))
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
    pub resource: Option<&'a CachedResource>,
}

/// Queues one change: an owned event (made by `owned` from the type URL and the name) or an entry of the batch at the back
/// of the queue, opening a new batch (room for `hint` changes: one allocation for a large
/// response) when the back is anything else.
pub(crate) fn emit(
    events: &mut VecDeque<ClientEvent>,
    shape: EventShape,
    hint: usize,
    type_url: &SharedStr,
    name: SharedStr,
    change: Change,
    owned: impl FnOnce(SharedStr, SharedStr) -> ClientEvent,
) {
    match shape {
        EventShape::PerResource => events.push_back(owned(type_url.clone(), name)),
        EventShape::Batched => {
            if let Some(ClientEvent::Changed {
                type_url: open,
                changes,
            }) = events.back_mut()
            {
                if open == type_url {
                    changes.entries.push((name, change));
                    return;
                }
            }
            let mut entries = Vec::with_capacity(hint.max(1));
            entries.push((name, change));
            events.push_back(ClientEvent::Changed {
                type_url: type_url.clone(),
                changes: ChangeBatch { entries },
            });
        }
    }
}
