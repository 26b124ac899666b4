//! What the application wants of one type, and the requests that tell the server:
//! subscribing, unsubscribing (and the cache work it implies), the next request.

use alloc::vec::Vec;

use super::cache::Record;
use super::changes::RemovalReason;
use super::timers::TimerKind;
use super::type_state::{Ctx, TypeState};
use super::update::is_collection;
use super::variant;
use crate::message::Request;
use crate::pb::envoy::config::core::v3::Node;
use crate::text::SharedStr;

impl TypeState {
    /// Adds `names` to what is wanted (`*` for the wildcard; `legacy` when it came from an
    /// empty subscribe).
    pub(crate) fn subscribe(&mut self, names: Vec<SharedStr>, legacy: bool) {
        for name in names {
            if self.sub.add(name.clone(), legacy) {
                if !is_collection(&name) {
                    self.records
                        .entry(name.clone())
                        .or_insert_with(Record::requested);
                }
                self.arm_ready(&name);
            }
        }
    }

    /// Removes `names` from what is wanted. Resources no longer wanted leave the cache
    /// ([`RemovalReason::Unsubscribed`]); so do statuses only the wildcard kept.
    pub(crate) fn unsubscribe<N: AsRef<str>>(&mut self, names: &[N], cx: &mut Ctx<'_>) {
        for name in names {
            let name = name.as_ref();
            if !self.sub.remove(name) {
                continue;
            }
            let name = SharedStr::from(name);
            self.stop_awaiting(&name);
            if is_collection(&name) {
                self.drop_unwanted(cx);
                continue;
            }
            self.drop_unsubscribed(&name, cx);
        }
        self.check_ready(cx.events);
    }

    /// After the wildcard or a glob left: every resource no longer wanted leaves the cache, and the
    /// statuses the wildcard alone kept (rejected, never held) go too.
    fn drop_unwanted(&mut self, cx: &mut Ctx<'_>) {
        let mut unwanted: Vec<SharedStr> = self
            .records
            .iter()
            .filter(|(n, r)| {
                r.cached
                    .as_ref()
                    .is_some_and(|c| !self.wants(n, &c.aliases))
            })
            .map(|(n, _)| n.clone())
            .collect();
        unwanted.sort_unstable();
        for n in unwanted {
            self.remove_cached(&n, RemovalReason::Unsubscribed, cx);
        }
        let sub = &self.sub;
        self.records
            .retain(|n, r| r.cached.is_some() || sub.names(n) || r.dne_at.is_some());
    }

    /// After `name` (a resource name or an alias) left: its resource leaves the cache unless
    /// still wanted otherwise; a name never held is forgotten with its timer.
    fn drop_unsubscribed(&mut self, name: &SharedStr, cx: &mut Ctx<'_>) {
        let target = if self.records.contains_key(name.as_str()) {
            name.clone()
        } else {
            match self.aliases.get(name.as_str()) {
                Some(real) => real.clone(),
                None => return,
            }
        };
        let Some(rec) = self.records.get(target.as_str()) else {
            return;
        };
        match rec.cached.as_ref().map(|c| c.aliases.clone()) {
            Some(aliases) => {
                if !self.wants(&target, &aliases) {
                    self.remove_cached(&target, RemovalReason::Unsubscribed, cx);
                }
            }
            None => {
                if !self.sub.names(&target) {
                    if let Some(rec) = self.records.remove(target.as_str()) {
                        if let Some(at) = rec.dne_at {
                            cx.timers
                                .disarm(at, TimerKind::DoesNotExist, cx.idx, &target);
                        }
                    }
                }
            }
        }
    }

    /// Whether this type owes a request.
    pub(crate) fn has_due(&self, cx: &Ctx<'_>) -> bool {
        variant::due(cx.variant(), self).is_some()
    }

    /// The next request of this type, if it owes one, counted as sent at `cx.now`: the
    /// does-not-exist timers of the names it asks for start. Also says whether it owes
    /// another one after it.
    pub(crate) fn poll_request(
        &mut self,
        node: Option<Node>,
        cx: &mut Ctx<'_>,
    ) -> Option<(Request, bool)> {
        let (request, names) = variant::build(cx.variant(), self, node)?;
        self.start_dne_timers(&names, cx.config.does_not_exist_timeout, cx);
        Some((request, self.has_due(cx)))
    }
}
