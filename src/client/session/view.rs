//! The watches and the view they are served from: per authority, what each watched name
//! is, and the position of the server it came from; the core clients' events become the
//! watchers' events here, through the fallback rule of whose data is in use.
//!
//! # Decisions
//!
//! - **Whose data a watcher sees** (gRPC A71: "whenever we have a resource already cached
//!   from the primary, we want to use that"): a server's update or deletion applies only to
//!   entries from the same or a lower-priority server.
//! - **What nothing wants is forgotten**: an entry leaves the view with its last watch (a
//!   name still covered by a wildcard watch stays), so a later watch waits for the server.
//! - **An error of a collection is the whole watch's** (xDS TP1 glob collections, see
//!   [`crate::name::is_glob`]): a server error for `*` or an `xdstp://` glob goes to every
//!   watcher of the type, one for a name to that name's.
//! - **Per-resource rejections carry the resource's own reason** (from the client's
//!   status), not the whole response's: a resource rejected again beside another is the
//!   same failure.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use bytes::Bytes;

use crate::client::{ClientEvent, RemovalReason, SharedStr, WILDCARD};
use crate::name::is_glob;
use crate::time::Instant;

use super::{authority_of, Session, SessionEvent, WatchError, WatchEvent, WatchRefused};

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Seen {
    Held { version: SharedStr, body: Bytes },
    Absent,
}

#[derive(Clone, Debug)]
pub(super) struct ViewEntry {
    /// The position (in the authority's server list) of the server it came from.
    pub(super) source: usize,
    pub(super) seen: Seen,
}

pub(super) type Key = (SharedStr, SharedStr);

/// One authority: its servers in priority order, how many are in use, what its watches
/// want and what they are served.
pub(super) struct Authority {
    pub(super) name: String,
    /// Channel indices, primary first.
    pub(super) channels: Vec<usize>,
    /// Positions `0..=depth` are in use.
    pub(super) depth: usize,
    /// Per type: name (or `*`) -> number of watches.
    pub(super) interest: BTreeMap<SharedStr, BTreeMap<SharedStr, usize>>,
    pub(super) view: BTreeMap<Key, ViewEntry>,
    /// Types a wildcard was answered for.
    pub(super) answered: BTreeSet<SharedStr>,
    /// An outage was reported to the watchers and nothing answered since.
    pub(super) unreachable: bool,
    /// Resources a former run accepted (the fail-static cache), by key.
    pub(super) restored: BTreeMap<Key, (SharedStr, Bytes)>,
    /// The restored resources are served: the outage was told before any server answered.
    pub(super) on_cache: bool,
    /// A server of the authority answered since the session started.
    pub(super) ever_answered: bool,
}

impl Authority {
    pub(super) fn new(name: String, channels: Vec<usize>) -> Authority {
        Authority {
            name,
            channels,
            depth: 0,
            interest: BTreeMap::new(),
            view: BTreeMap::new(),
            answered: BTreeSet::new(),
            unreachable: false,
            restored: BTreeMap::new(),
            on_cache: false,
            ever_answered: false,
        }
    }
}

pub(super) struct WatchEntry {
    pub(super) authority: usize,
    type_url: SharedStr,
    /// The name, or `*`.
    name: SharedStr,
}

impl Session {
    /// Adds watch `id` of `name` (`None`: every name) of `type_url`; the events for it
    /// start with what is known already.
    pub fn watch(
        &mut self,
        now: Instant,
        id: u64,
        type_url: &str,
        name: Option<&str>,
    ) -> Result<(), WatchRefused> {
        let (name, authority) = self.bootstrap.check_watch(type_url, name)?;
        if self.watches.contains_key(&id) || self.config_watches.contains_key(&id) {
            return Err(WatchRefused::DuplicateId(id));
        }
        let Some(&a) = self.authority_index.get(&authority) else {
            return Err(WatchRefused::UnknownAuthority(authority));
        };
        self.advance(now);
        let type_url = SharedStr::from(type_url);
        let first = self.add_interest(a, &type_url, &name);
        let mut known = Vec::new();
        if let Some(auth) = self.authorities.get(a) {
            if name.as_str() == WILDCARD {
                for ((t, n), entry) in &auth.view {
                    if *t == type_url {
                        if let Seen::Held { .. } = &entry.seen {
                            known.push(state_event(n, &entry.seen));
                        }
                    }
                }
            } else if let Some(entry) = auth.view.get(&(type_url.clone(), name.clone())) {
                known.push(state_event(&name, &entry.seen));
            }
        }
        self.events.extend(
            known
                .into_iter()
                .map(|event| SessionEvent::Watch { id, event }),
        );
        self.watchers
            .entry((a, type_url.clone(), name.clone()))
            .or_default()
            .insert(id);
        self.watches.insert(
            id,
            WatchEntry {
                authority: a,
                type_url,
                name,
            },
        );
        if first {
            self.sync_authority(a);
        }
        self.flush();
        Ok(())
    }

    /// Removes watch (or configuration watch) `id`; its name is unsubscribed once nothing
    /// wants it any more. An unknown id is ignored.
    pub fn unwatch(&mut self, now: Instant, id: u64) {
        self.advance(now);
        if self.unwatch_config(now, id) {
            return;
        }
        let Some(w) = self.watches.remove(&id) else {
            return;
        };
        let key = (w.authority, w.type_url.clone(), w.name.clone());
        if let Some(set) = self.watchers.get_mut(&key) {
            set.remove(&id);
            if set.is_empty() {
                self.watchers.remove(&key);
            }
        }
        if self.remove_interest(w.authority, &w.type_url, &w.name) {
            self.sync_authority(w.authority);
        }
        self.flush();
    }

    /// One more watch (or dependency manager) wants `name` (or `*`) of `type_url`; true
    /// when nothing wanted it before (the authority's channels need syncing).
    pub(super) fn add_interest(
        &mut self,
        a: usize,
        type_url: &SharedStr,
        name: &SharedStr,
    ) -> bool {
        let Some(auth) = self.authorities.get_mut(a) else {
            return false;
        };
        let count = auth
            .interest
            .entry(type_url.clone())
            .or_default()
            .entry(name.clone())
            .or_insert(0);
        *count += 1;
        let first = *count == 1;
        if first && name.as_str() == WILDCARD {
            // The type is answered for the wildcard once the client says it is ready again.
            auth.answered.remove(type_url);
        }
        if first {
            self.restore_interest(a, type_url, name);
        }
        first
    }

    /// One watch (or dependency manager) less wants `name` of `type_url`; true when it was
    /// the last (the view forgets what nothing wants, the channels need syncing).
    pub(super) fn remove_interest(
        &mut self,
        a: usize,
        type_url: &SharedStr,
        name: &SharedStr,
    ) -> bool {
        let Some(auth) = self.authorities.get_mut(a) else {
            return false;
        };
        let mut last = false;
        if let Some(names) = auth.interest.get_mut(type_url) {
            if let Some(count) = names.get_mut(name) {
                *count -= 1;
                if *count == 0 {
                    names.remove(name);
                    last = true;
                }
            }
            if names.is_empty() {
                auth.interest.remove(type_url);
            }
        }
        if last {
            let wildcard_left = auth
                .interest
                .get(type_url)
                .is_some_and(|n| n.contains_key(WILDCARD));
            if name.as_str() == WILDCARD {
                let named = auth.interest.get(type_url).cloned().unwrap_or_default();
                auth.view
                    .retain(|(t, n), _| t != type_url || named.contains_key(n));
                auth.answered.remove(type_url);
            } else if !wildcard_left {
                auth.view.remove(&(type_url.clone(), name.clone()));
            }
        }
        last
    }

    /// The position of channel `c` among authority `a`'s servers, if in use.
    pub(super) fn position(&self, a: usize, c: usize) -> Option<usize> {
        let auth = self.authorities.get(a)?;
        auth.channels
            .iter()
            .take(auth.depth + 1)
            .position(|&x| x == c)
    }

    /// A core client's event on channel `c`, through the view to the watchers and the
    /// dependency managers.
    pub(super) fn on_event(&mut self, c: usize, event: ClientEvent) {
        let (type_url, name) = match &event {
            ClientEvent::Upserted { type_url, name, .. }
            | ClientEvent::Removed { type_url, name, .. }
            | ClientEvent::DoesNotExist { type_url, name }
            | ClientEvent::ResourceError { type_url, name, .. }
            | ClientEvent::DeletionIgnored { type_url, name } => (type_url.clone(), name.clone()),
            ClientEvent::Nacked { type_url, .. } | ClientEvent::Ready { type_url } => {
                (type_url.clone(), SharedStr::default())
            }
            // The session's clients keep the per-resource event shape: no batches.
            _ => return,
        };
        let authority = if name.is_empty() || name.as_str() == WILDCARD {
            Some(String::new())
        } else {
            authority_of(&name)
        };
        let Some(&a) = authority
            .and_then(|x| self.authority_index.get(&x).copied())
            .as_ref()
        else {
            return;
        };
        let Some(p) = self.position(a, c) else {
            return;
        };
        // What the view takes, the dependency managers take too: they see the data in use,
        // after the fallback rules chose whose it is.
        let seen = match &event {
            ClientEvent::Upserted { version, body, .. } => Some(Seen::Held {
                version: version.clone(),
                body: body.clone(),
            }),
            ClientEvent::Removed { reason, .. } if *reason != RemovalReason::Unsubscribed => {
                Some(Seen::Absent)
            }
            ClientEvent::DoesNotExist { .. } => Some(Seen::Absent),
            _ => None,
        };
        if let Some(seen) = seen {
            if self.set_view(a, p, (type_url, name), seen) {
                self.deps_event(&event);
            }
            return;
        }
        match &event {
            ClientEvent::DeletionIgnored { .. } => {
                self.events
                    .push_back(SessionEvent::DeletionIgnored { type_url, name });
            }
            ClientEvent::ResourceError { code, message, .. } => {
                let key = (type_url.clone(), name.clone());
                if self.overrides(a, p, &key) {
                    let whole = name.is_empty() || name.as_str() == WILDCARD || is_glob(&name);
                    let target = if whole { None } else { Some(name.clone()) };
                    let error = WatchError::Server {
                        code: *code,
                        message: message.clone(),
                    };
                    let watch_event = WatchEvent::Error {
                        name: target.clone(),
                        error: error.clone(),
                    };
                    match &target {
                        Some(n) => self.notify(a, &type_url, n, &watch_event),
                        None => self.notify_type(a, &type_url, &watch_event),
                    }
                    if !whole {
                        self.deps_event(&event);
                    }
                    self.config_error(&type_url, target.as_deref(), &error);
                }
            }
            ClientEvent::Nacked {
                version,
                error,
                rejected,
                nonce,
                defect,
                ..
            } => {
                let watch_error = WatchError::Rejected {
                    version: version.clone(),
                    error: error.clone(),
                };
                let event_of = |n: Option<SharedStr>| WatchEvent::Error {
                    name: n,
                    error: watch_error.clone(),
                };
                if rejected.is_empty() {
                    self.notify_type(a, &type_url, &event_of(None));
                    self.config_error(&type_url, None, &watch_error);
                } else {
                    for n in rejected {
                        let Some(a) =
                            authority_of(n).and_then(|x| self.authority_index.get(&x).copied())
                        else {
                            continue;
                        };
                        if self.position(a, c).is_none() {
                            continue;
                        }
                        self.notify(a, &type_url, n, &event_of(Some(n.clone())));
                        let (rejected_version, own_error) = self
                            .rejection_of(c, &type_url, n)
                            .unwrap_or_else(|| (version.clone(), error.clone()));
                        let own = WatchError::Rejected {
                            version: rejected_version.clone(),
                            error: own_error.clone(),
                        };
                        self.config_error(&type_url, Some(n), &own);
                        self.deps_event(&ClientEvent::Nacked {
                            type_url: type_url.clone(),
                            version: rejected_version,
                            nonce: nonce.clone(),
                            error: own_error,
                            rejected: alloc::vec![n.clone()],
                            defect: defect.clone(),
                        });
                    }
                }
            }
            ClientEvent::Ready { .. } => {
                self.drop_unconfirmed(a, p, &type_url);
                if let Some(auth) = self.authorities.get_mut(a) {
                    auth.answered.insert(type_url);
                }
                self.deps_event(&event);
            }
            _ => {}
        }
    }

    /// The version and reason of the last rejection of `name` by channel `c`'s client.
    fn rejection_of(&self, c: usize, type_url: &str, name: &str) -> Option<(SharedStr, String)> {
        self.channels.get(c)?.slots.iter().find_map(|slot| {
            let rejection = slot.client.status(type_url, name)?.rejected?;
            Some((rejection.version, rejection.error))
        })
    }

    /// Whether an update from position `p` may replace the view's entry for `key`.
    fn overrides(&self, a: usize, p: usize, key: &Key) -> bool {
        self.authorities
            .get(a)
            .and_then(|auth| auth.view.get(key))
            .is_none_or(|e| e.source >= p)
    }

    /// Puts what position `p` says of `key` in the view, if it may (and tells the watchers
    /// of a change); whether it did.
    pub(super) fn set_view(&mut self, a: usize, p: usize, key: Key, seen: Seen) -> bool {
        if !self.overrides(a, p, &key) {
            return false;
        }
        let Some(auth) = self.authorities.get_mut(a) else {
            return false;
        };
        let wanted = auth
            .interest
            .get(&key.0)
            .is_some_and(|n| n.contains_key(&key.1) || n.contains_key(WILDCARD));
        if !wanted {
            auth.view.remove(&key);
            return false;
        }
        let unchanged = auth.view.get(&key).is_some_and(|e| e.seen == seen);
        if seen == Seen::Absent
            && !auth
                .interest
                .get(&key.0)
                .is_some_and(|n| n.contains_key(&key.1))
        {
            // A wildcard-only resource that went away: forget it.
            let had = auth
                .view
                .remove(&key)
                .is_some_and(|e| matches!(e.seen, Seen::Held { .. }));
            if had {
                let event = WatchEvent::DoesNotExist {
                    name: key.1.clone(),
                };
                self.notify(a, &key.0, &key.1, &event);
            }
            return true;
        }
        auth.view.insert(
            key.clone(),
            ViewEntry {
                source: p,
                seen: seen.clone(),
            },
        );
        if !unchanged {
            self.notify(a, &key.0, &key.1, &state_event(&key.1, &seen));
        }
        true
    }

    /// Tells the watchers of `key` what the view now holds of it.
    pub(super) fn notify_key(&mut self, a: usize, key: &Key, seen: &Seen) {
        self.notify(a, &key.0, &key.1, &state_event(&key.1, seen));
    }

    /// To the watchers of `name` and the wildcard watchers of its type.
    fn notify(&mut self, a: usize, type_url: &SharedStr, name: &SharedStr, event: &WatchEvent) {
        let mut ids = Vec::new();
        for n in [name.clone(), SharedStr::from_static(WILDCARD)] {
            if let Some(set) = self.watchers.get(&(a, type_url.clone(), n)) {
                ids.extend(set.iter().copied());
            }
        }
        self.tell(&ids, event);
    }

    fn tell(&mut self, ids: &[u64], event: &WatchEvent) {
        for id in ids {
            self.events.push_back(SessionEvent::Watch {
                id: *id,
                event: event.clone(),
            });
        }
    }

    /// To every watcher of the type in the authority.
    fn notify_type(&mut self, a: usize, type_url: &SharedStr, event: &WatchEvent) {
        let ids: Vec<u64> = (self.watches.iter())
            .filter(|(_, w)| w.authority == a && w.type_url == *type_url)
            .map(|(id, _)| *id)
            .collect();
        self.tell(&ids, event);
    }

    /// To every watcher in the authority.
    pub(super) fn notify_authority(&mut self, a: usize, event: &WatchEvent) {
        let ids: Vec<u64> = (self.watches.iter())
            .filter(|(_, w)| w.authority == a)
            .map(|(id, _)| *id)
            .collect();
        self.tell(&ids, event);
    }
}

/// What the view holds of `key`, as the core event that would have put it there.
pub(super) fn view_event(key: &Key, seen: &Seen) -> ClientEvent {
    match seen {
        Seen::Held { version, body } => ClientEvent::Upserted {
            type_url: key.0.clone(),
            name: key.1.clone(),
            version: version.clone(),
            body: body.clone(),
            aliases: Vec::new(),
        },
        Seen::Absent => ClientEvent::DoesNotExist {
            type_url: key.0.clone(),
            name: key.1.clone(),
        },
    }
}

fn state_event(name: &SharedStr, seen: &Seen) -> WatchEvent {
    match seen {
        Seen::Held { version, body } => WatchEvent::Changed {
            name: name.clone(),
            version: version.clone(),
            body: body.clone(),
        },
        Seen::Absent => WatchEvent::DoesNotExist { name: name.clone() },
    }
}
