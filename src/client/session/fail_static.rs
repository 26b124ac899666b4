//! The fail-static cache: resources a former run accepted ([`RestoredResource`]), served
//! when the session starts and no server answers, replaced as soon as one does.
//!
//! # Decisions
//!
//! - **Only when every server failed before any answered** (Envoy's open
//!   envoy#21644, "fail static"): the restored resources of an authority enter its view
//!   when the outage is told ([`WatchError`](super::WatchError), after every server that
//!   could be tried, fallbacks included, failed) and no server of the authority has
//!   answered since the session started. A live answer always wins: a server's word, of
//!   any priority, replaces a restored entry, and once a server has answered nothing is
//!   restored any more.
//! - **What the server no longer has goes away when it has said so**: when a client in use
//!   says a type is ready (every name answered, the wildcard answered), a restored entry
//!   of that type it did not replace is told as not existing. Until then it stays in use,
//!   so a server that answers one type does not take the others away.
//! - **What is written** ([`Session::served`]): the resources the watchers are served now,
//!   restored ones included, per authority: the application persists them (the adapter
//!   writes one file per authority and type, atomically) and restores them next time.
//! - **Visible**: [`Session::dump`] marks a restored entry (`DumpEntry::restored`), and the
//!   adapter's CSDS says so (`is_static_resource`).

use alloc::string::String;
use alloc::vec::Vec;

use bytes::Bytes;

use crate::client::{ClientEvent, SharedStr, WILDCARD};

use super::view::{view_event, Key, Seen, ViewEntry};
use super::Session;

/// The source position of a restored entry: below every server, so any server's word
/// replaces it.
pub(super) const RESTORED: usize = usize::MAX;

/// A resource accepted in a former run, as the application persisted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredResource {
    /// The authority it belongs to (`""`: the top-level servers').
    pub authority: String,
    /// Its type URL.
    pub type_url: SharedStr,
    /// Its name.
    pub name: SharedStr,
    /// The version it was accepted at.
    pub version: SharedStr,
    /// Its body (the encoded resource).
    pub body: Bytes,
}

impl Session {
    /// Offers the resources a former run accepted: they are served if every server fails
    /// before any answers (see the [module docs](self)). Resources of an authority the
    /// bootstrap does not list are ignored; call before the first watch is useful, but
    /// any time works while no server of the authority has answered.
    pub fn restore(&mut self, resources: Vec<RestoredResource>) {
        for r in resources {
            let Some(&a) = self.authority_index.get(&r.authority) else {
                continue;
            };
            if let Some(auth) = self.authorities.get_mut(a) {
                if !auth.ever_answered {
                    auth.restored
                        .insert((r.type_url, r.name), (r.version, r.body));
                }
            }
        }
        for a in 0..self.authorities.len() {
            if self.authorities.get(a).is_some_and(|x| x.on_cache) {
                self.apply_restored(a);
            }
        }
        self.flush();
    }

    /// The resources the watchers are served now, restored ones included: what to persist.
    pub fn served(&self) -> Vec<RestoredResource> {
        let mut out = Vec::new();
        for auth in &self.authorities {
            for ((type_url, name), entry) in &auth.view {
                if let Seen::Held { version, body } = &entry.seen {
                    out.push(RestoredResource {
                        authority: auth.name.clone(),
                        type_url: type_url.clone(),
                        name: name.clone(),
                        version: version.clone(),
                        body: body.clone(),
                    });
                }
            }
        }
        out
    }

    /// The outage of authority `a` was told: if no server of it ever answered, its
    /// restored resources that are wanted and not known enter the view.
    pub(super) fn apply_restored(&mut self, a: usize) {
        let Some(auth) = self.authorities.get_mut(a) else {
            return;
        };
        if auth.ever_answered || auth.restored.is_empty() {
            return;
        }
        auth.on_cache = true;
        let keys: Vec<Key> = auth.restored.keys().cloned().collect();
        for key in keys {
            self.restore_key(a, &key, true);
        }
    }

    /// Puts the restored entry of `key` in the view if the authority is on its cache, the
    /// key is wanted and the view does not know it; tells the watchers and managers when
    /// `tell`. (A new watch reads the view itself.)
    pub(super) fn restore_key(&mut self, a: usize, key: &Key, tell: bool) {
        let Some(auth) = self.authorities.get_mut(a) else {
            return;
        };
        if !auth.on_cache || auth.view.contains_key(key) {
            return;
        }
        let wanted = auth
            .interest
            .get(&key.0)
            .is_some_and(|n| n.contains_key(&key.1) || n.contains_key(WILDCARD));
        let Some((version, body)) = auth.restored.get(key).cloned() else {
            return;
        };
        if !wanted {
            return;
        }
        let seen = Seen::Held { version, body };
        auth.view.insert(
            key.clone(),
            ViewEntry {
                source: RESTORED,
                seen: seen.clone(),
            },
        );
        if tell {
            let event = view_event(key, &seen);
            self.notify_key(a, key, &seen);
            self.deps_event(&event);
        }
    }

    /// The restored entries of a type (`*`) or of one name wanted anew.
    pub(super) fn restore_interest(&mut self, a: usize, type_url: &SharedStr, name: &SharedStr) {
        let keys: Vec<Key> = match self.authorities.get(a) {
            Some(auth) if auth.on_cache => auth
                .restored
                .keys()
                .filter(|(t, n)| t == type_url && (n == name || name.as_str() == WILDCARD))
                .cloned()
                .collect(),
            _ => return,
        };
        for key in keys {
            self.restore_key(a, &key, false);
        }
    }

    /// A client at position `p` of authority `a` says `type_url` is ready: the restored
    /// entries of the type it did not replace are not the server's, and go.
    pub(super) fn drop_unconfirmed(&mut self, a: usize, p: usize, type_url: &SharedStr) {
        let Some(auth) = self.authorities.get(a) else {
            return;
        };
        let stale: Vec<Key> = auth
            .view
            .iter()
            .filter(|((t, _), e)| t == type_url && e.source == RESTORED)
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            let event = ClientEvent::DoesNotExist {
                type_url: key.0.clone(),
                name: key.1.clone(),
            };
            if self.set_view(a, p, key, Seen::Absent) {
                self.deps_event(&event);
            }
        }
    }
}
