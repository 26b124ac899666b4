//! Fallback and revert within each authority (gRPC A71, "xDS Fallback"), and the outage
//! an authority's watchers are told of (gRPC A57, A88).
//!
//! # Decisions
//!
//! - **Fall back only when something is missing** (A71: "fallback will happen only if
//!   [...] a resource is not in the cache"): when the lowest server in use fails before
//!   its first response and a watched resource is neither held nor known not to exist (or
//!   a wildcard's type never answered), the next server is started and subscribed to every
//!   watched name. Nothing missing: no fallback; the servers in use keep retrying.
//! - **Revert on the first response** (A71: "once the primary server is back, we want to
//!   switch back to it"): a response from a higher-priority server in use makes it the
//!   lowest in use again; the servers below are closed. Entries the view took from them
//!   take the reverting server's held value or does-not-exist at once, and otherwise stay,
//!   marked as the reverting server's, until it speaks.
//! - **An outage is told once** (A88's ambient error, A57): when the lowest server in use
//!   fails and no server is started, every watcher of the authority gets one
//!   [`WatchError`] ([`Unreachable`](super::WatchError::Unreachable),
//!   [`Refused`](super::WatchError::Refused) or [`Protocol`](super::WatchError::Protocol),
//!   by how the last server failed: [`StreamEnd`]) once, until a server answers again;
//!   values held stay in use. The first response after that tells them
//!   [`WatchEvent::Reachable`].

use alloc::vec::Vec;

use crate::client::{ResourceState, WILDCARD};

use super::view::{view_event, Key, Seen};
use super::{ServerId, Session, SessionEvent, StreamEnd, WatchEvent};

impl Session {
    /// A response arrived on channel `c`: the authorities using it below the lowest
    /// server in use revert to it (A71), and an outage is over.
    pub(super) fn answered_by(&mut self, c: usize) {
        for a in 0..self.authorities.len() {
            let Some(p) = self.position(a, c) else {
                continue;
            };
            let Some(auth) = self.authorities.get_mut(a) else {
                continue;
            };
            auth.ever_answered = true;
            auth.on_cache = false;
            if core::mem::take(&mut auth.unreachable) {
                let server = self
                    .channels
                    .get(c)
                    .map(|ch| ch.server.server_uri.clone())
                    .unwrap_or_default();
                self.notify_authority(
                    a,
                    &WatchEvent::Reachable {
                        server: server.clone(),
                    },
                );
                self.config_reachable(a, &server);
            }
            let Some(auth) = self.authorities.get_mut(a) else {
                continue;
            };
            if p >= auth.depth {
                continue;
            }
            self.events.push_back(SessionEvent::Reverted {
                authority: auth.name.clone(),
                to: ServerId(c),
            });
            let released: Vec<usize> = auth
                .channels
                .iter()
                .skip(p + 1)
                .take(auth.depth - p)
                .copied()
                .collect();
            auth.depth = p;
            // Entries from the servers given up take the reverting server's word now.
            let stale: Vec<Key> = auth
                .view
                .iter()
                .filter(|(_, e)| e.source > p)
                .map(|(k, _)| k.clone())
                .collect();
            for key in stale {
                let Some(channel) = self.channels.get(c) else {
                    continue;
                };
                let held = channel.slots.iter().find_map(|s| {
                    let r = s.client.resource(&key.0, &key.1)?;
                    Some(Seen::Held {
                        version: r.version_shared(),
                        body: r.body_bytes(),
                    })
                });
                let absent = channel.slots.iter().any(|s| {
                    s.client
                        .status(&key.0, &key.1)
                        .is_some_and(|st| st.state == ResourceState::DoesNotExist)
                });
                let seen = match (held, absent) {
                    (Some(seen), _) => seen,
                    (None, true) => Seen::Absent,
                    (None, false) => {
                        // Stays until the reverting server speaks: mark it as ours so
                        // its word applies.
                        if let Some(entry) = self
                            .authorities
                            .get_mut(a)
                            .and_then(|x| x.view.get_mut(&key))
                        {
                            entry.source = p;
                        }
                        continue;
                    }
                };
                let event = view_event(&key, &seen);
                if self.set_view(a, p, key, seen) {
                    self.deps_event(&event);
                }
            }
            for channel in released {
                self.sync_channel(channel);
            }
        }
        self.flush();
    }

    /// Channel `c` failed before answering: fall back (A71) or tell the watchers (A57).
    pub(super) fn failed(&mut self, c: usize, end: &StreamEnd) {
        for a in 0..self.authorities.len() {
            let Some(p) = self.position(a, c) else {
                continue;
            };
            let Some(auth) = self.authorities.get(a) else {
                continue;
            };
            if p != auth.depth || auth.interest.is_empty() {
                continue;
            }
            let missing = auth.interest.iter().any(|(type_url, names)| {
                names.keys().any(|n| {
                    if n.as_str() == WILDCARD {
                        !auth.answered.contains(type_url)
                    } else {
                        !auth.view.contains_key(&(type_url.clone(), n.clone()))
                    }
                })
            });
            if missing && p + 1 < auth.channels.len() {
                let next = auth.channels.get(p + 1).copied();
                let authority = auth.name.clone();
                if let Some(auth) = self.authorities.get_mut(a) {
                    auth.depth = p + 1;
                }
                if let Some(next) = next {
                    self.events.push_back(SessionEvent::FellBack {
                        authority,
                        from: ServerId(c),
                        to: ServerId(next),
                    });
                    self.sync_channel(next);
                }
                continue;
            }
            if !auth.unreachable {
                let server = self
                    .channels
                    .get(c)
                    .map(|ch| ch.server.server_uri.clone())
                    .unwrap_or_default();
                if let Some(auth) = self.authorities.get_mut(a) {
                    auth.unreachable = true;
                }
                let error = end.watch_error(server);
                self.notify_authority(
                    a,
                    &WatchEvent::Error {
                        name: None,
                        error: error.clone(),
                    },
                );
                self.config_unreachable(a, &error);
                self.apply_restored(a);
            }
        }
        self.flush();
    }
}
