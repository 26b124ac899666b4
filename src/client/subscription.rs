//! What the application wants of one type, and what this stream has been told of it: the
//! one home of wildcard (legacy and explicit `*`) and of subscribe/unsubscribe merging.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;

use crate::name::{collection_of, is_glob};
use crate::text::SharedStr;

/// The explicit wildcard name (one constant with [`crate::name::WILDCARD`]).
pub use crate::name::WILDCARD;

#[derive(Clone, Debug, Default)]
pub(crate) struct Subscription {
    /// Names wanted, `*` included when wildcard; sorted, so requests are deterministic.
    desired: BTreeSet<SharedStr>,
    /// The wildcard came from an empty subscribe (legacy wildcard of LDS/CDS).
    legacy: bool,
    /// SotW: the name list of the last request sent on this stream.
    last_sent: Option<Vec<SharedStr>>,
    /// SotW: a request with names was sent on this stream, so an empty list now means
    /// "nothing" rather than legacy wildcard.
    named_on_stream: bool,
    /// Incremental: the names this stream's server tracks for us.
    told: BTreeSet<SharedStr>,
    /// Incremental: subscriptions not sent yet.
    pending_sub: BTreeSet<SharedStr>,
    /// Incremental: unsubscriptions not sent yet.
    pending_unsub: BTreeSet<SharedStr>,
    /// Names the application unsubscribed while the wildcard still covers them: never
    /// subscribed again on its behalf (TTL recovery).
    dropped: BTreeSet<SharedStr>,
    /// How many of the names are `xdstp://` glob collections (xDS TP1).
    globs: usize,
}

impl Subscription {
    /// The names wanted, sorted (`*` for the wildcard).
    pub(crate) fn desired(&self) -> &BTreeSet<SharedStr> {
        &self.desired
    }

    /// Whether a resource named `name` (with `aliases`) is wanted: by the wildcard, by
    /// name, through an alias, or as a member of a subscribed glob collection.
    pub(crate) fn wants(&self, name: &str, aliases: &[SharedStr]) -> bool {
        self.is_wildcard()
            || self.names(name)
            || aliases.iter().any(|a| self.names(a))
            || self.in_glob(name)
    }

    pub(crate) fn is_wildcard(&self) -> bool {
        self.desired.contains(WILDCARD)
    }

    pub(crate) fn has_interest(&self) -> bool {
        !self.desired.is_empty()
    }

    /// Whether `name` was asked for by name (not through the wildcard or a glob).
    pub(crate) fn names(&self, name: &str) -> bool {
        name != WILDCARD && self.desired.contains(name)
    }

    /// Whether `name` belongs to an `xdstp://` glob collection that is subscribed.
    pub(crate) fn in_glob(&self, name: &str) -> bool {
        self.globs > 0 && collection_of(name).is_some_and(|g| self.desired.contains(g.as_str()))
    }

    /// Adds a wanted name; true if it is new. Merges with unsent changes: an unsent
    /// unsubscribe of it is cancelled and a subscribe is queued anyway, so the server
    /// resends a resource the client dropped (the RemoveThenAdd case).
    pub(crate) fn add(&mut self, name: SharedStr, legacy: bool) -> bool {
        if name == WILDCARD {
            // An explicit `*` turns a legacy wildcard explicit; an empty subscribe keeps an
            // explicit one explicit.
            self.legacy = legacy && (self.legacy || !self.desired.contains(WILDCARD));
        }
        if !self.desired.insert(name.clone()) {
            return false;
        }
        if is_glob(&name) {
            self.globs += 1;
        }
        self.dropped.remove(&name);
        self.pending_unsub.remove(&name);
        self.pending_sub.insert(name);
        true
    }

    /// Removes a wanted name; true if it was wanted. A subscribe not sent yet is cancelled;
    /// an unsubscribe is queued only if the server was told of the name.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let Some(name) = self.desired.take(name) else {
            return false;
        };
        if is_glob(&name) {
            self.globs = self.globs.saturating_sub(1);
        }
        if name == WILDCARD {
            self.legacy = false;
            self.dropped.clear();
            // Names subscribed only to recover an expired resource (`resubscribe`) were
            // interest of the wildcard: they go with it.
            let recovered: Vec<SharedStr> = self
                .told
                .iter()
                .chain(self.pending_sub.iter())
                .filter(|n| !self.desired.contains(*n) && n.as_str() != WILDCARD)
                .cloned()
                .collect();
            for n in recovered {
                self.pending_sub.remove(&n);
                if self.told.contains(&n) {
                    self.pending_unsub.insert(n);
                }
            }
        }
        self.pending_sub.remove(&name);
        if name != WILDCARD && self.is_wildcard() {
            self.dropped.insert(name.clone());
        }
        if self.told.contains(&name) {
            self.pending_unsub.insert(name);
        }
        true
    }

    /// Incremental: ask for `name` again although the server believes we hold it (TTL
    /// expiry): the server must answer every name in `resource_names_subscribe`. A name
    /// only the wildcard brought in is subscribed by name too: it then sits in `told`
    /// without being desired, and leaves with the wildcard (see [`Subscription::remove`]).
    /// A name the application unsubscribed is never subscribed again on its behalf.
    pub(crate) fn resubscribe(&mut self, name: &SharedStr) {
        if self.desired.contains(name) || (self.is_wildcard() && !self.dropped.contains(name)) {
            self.pending_sub.insert(name.clone());
        }
    }

    /// Forgets everything the broken stream was told.
    pub(crate) fn reset_stream(&mut self) {
        self.last_sent = None;
        self.named_on_stream = false;
        self.told.clear();
        self.pending_sub.clear();
        self.pending_unsub.clear();
    }

    /// SotW: the `resource_names` of the next request. A lone legacy wildcard is the empty
    /// list while no name was sent on this stream; after that it is an explicit `*`.
    pub(crate) fn sotw_names(&self, legacy_capable: bool) -> Vec<SharedStr> {
        if self.lone_legacy(legacy_capable) {
            return Vec::new();
        }
        self.desired.iter().cloned().collect()
    }

    fn lone_legacy(&self, legacy_capable: bool) -> bool {
        legacy_capable && self.legacy && self.desired.len() == 1 && !self.named_on_stream
    }

    /// SotW: whether an interest-only request is worth sending (its list differs from the
    /// last one sent on this stream). Compares in place: no allocation.
    pub(crate) fn sotw_changed(&self, legacy_capable: bool) -> bool {
        let Some(last) = &self.last_sent else {
            return true;
        };
        if self.lone_legacy(legacy_capable) {
            return !last.is_empty();
        }
        last.len() != self.desired.len() || !last.iter().eq(self.desired.iter())
    }

    /// SotW: records the list just sent.
    pub(crate) fn sotw_sent(&mut self, names: Vec<SharedStr>) {
        if !names.is_empty() {
            self.named_on_stream = true;
        }
        self.last_sent = Some(names);
    }

    /// Incremental: the `resource_names_subscribe` of the first request of a stream: every
    /// name of interest (empty for a lone legacy wildcard).
    pub(crate) fn delta_initial(&mut self, legacy_capable: bool) -> Vec<String> {
        self.pending_sub.clear();
        self.pending_unsub.clear();
        self.told = self.desired.clone();
        if legacy_capable && self.legacy && self.desired.len() == 1 {
            return Vec::new();
        }
        self.desired.iter().map(String::from).collect()
    }

    /// Incremental: the unsent subscribe / unsubscribe diffs, sorted; marks them told.
    /// Names added next to a legacy wildcard go alone: the server keeps the wildcard it
    /// recorded on the first request, and subscribing `*` again would ask it to resend
    /// every wildcard resource ("the server must respond with all resources listed" in
    /// `resource_names_subscribe`, discovery.proto; Envoy's `NewDeltaSubscriptionState`
    /// likewise only adds the new names).
    pub(crate) fn delta_take_diff(&mut self) -> (Vec<String>, Vec<String>) {
        let sub: Vec<String> = self.pending_sub.iter().map(String::from).collect();
        let unsub: Vec<String> = self.pending_unsub.iter().map(String::from).collect();
        for n in core::mem::take(&mut self.pending_sub) {
            self.told.insert(n);
        }
        for n in core::mem::take(&mut self.pending_unsub) {
            self.told.remove(&n);
        }
        (sub, unsub)
    }

    pub(crate) fn delta_has_diff(&self) -> bool {
        !self.pending_sub.is_empty() || !self.pending_unsub.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn s(x: &str) -> SharedStr {
        SharedStr::from(x)
    }

    #[test]
    fn subscribe_then_unsubscribe_before_sending_cancels_out() {
        let mut sub = Subscription::default();
        sub.add(s("a"), false);
        sub.remove("a");
        assert!(!sub.delta_has_diff());
    }

    #[test]
    fn remove_then_add_still_subscribes() {
        let mut sub = Subscription::default();
        sub.add(s("a"), false);
        assert_eq!(sub.delta_take_diff(), (vec!["a".into()], vec![]));
        sub.remove("a");
        sub.add(s("a"), false);
        assert_eq!(sub.delta_take_diff(), (vec!["a".into()], vec![]));
    }

    #[test]
    fn legacy_wildcard_becomes_explicit_once_named() {
        let mut sub = Subscription::default();
        sub.add(s(WILDCARD), true);
        assert!(sub.sotw_names(true).is_empty());
        sub.add(s("x"), false);
        assert_eq!(sub.sotw_names(true), vec![s("*"), s("x")]);
        sub.sotw_sent(sub.sotw_names(true));
        sub.remove("x");
        assert_eq!(sub.sotw_names(true), vec![s("*")]);
    }
}
