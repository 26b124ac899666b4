//! When a type is ready: the client says [`ClientEvent::Ready`] once, when everything the
//! application asked for since the type was last ready has been answered (each name held,
//! rejected or known not to exist; a wildcard by its first response), as Envoy's initial
//! fetch waits. Owned by the type's state; changed only here.

use alloc::collections::VecDeque;
use hashbrown::HashSet;

use super::event::ClientEvent;
use super::incoming::is_collection;
use super::subscription::WILDCARD;
use crate::text::SharedStr;

/// What a type waits for before it is ready.
#[derive(Clone, Debug, Default)]
pub(crate) struct Readiness {
    ready: bool,
    armed: bool,
    awaiting: HashSet<SharedStr>,
    awaiting_wildcard: bool,
}

impl Readiness {
    /// `name` was newly subscribed; `unanswered` says whether nothing is known of it yet
    /// (no body held, still requested).
    pub(crate) fn arm(&mut self, name: &SharedStr, unanswered: impl FnOnce() -> bool) {
        if self.ready {
            if is_collection(name) {
                // A wildcard added to a type already ready is ready again once its first
                // response is answered: only then does the client hold the full state, and
                // a consumer that judges names absent from it (the dependency manager's
                // Envoy shape) must wait for that, as for Envoy's initial fetch.
                self.ready = false;
                self.armed = true;
                self.awaiting_wildcard = true;
            }
            return;
        }
        self.armed = true;
        if is_collection(name) {
            // Answered by the first response, whatever it holds.
            self.awaiting_wildcard = true;
        } else if unanswered() {
            self.awaiting.insert(name.clone());
        }
    }

    /// `name` was answered (held, rejected, known not to exist) or is no longer wanted.
    #[inline]
    pub(crate) fn answered(&mut self, name: &str) {
        if !self.awaiting.is_empty() {
            self.awaiting.remove(name);
        }
    }

    /// A response was answered: a wildcard waits no more.
    pub(crate) fn response_answered(&mut self) {
        self.awaiting_wildcard = false;
    }

    /// `name` is no longer wanted.
    pub(crate) fn unwanted(&mut self, name: &str) {
        self.answered(name);
        if name == WILDCARD {
            self.awaiting_wildcard = false;
        }
    }

    /// Says [`ClientEvent::Ready`] of `type_url` if nothing is awaited any more.
    pub(crate) fn check(&mut self, type_url: &SharedStr, events: &mut VecDeque<ClientEvent>) {
        if !self.ready && self.armed && self.awaiting.is_empty() && !self.awaiting_wildcard {
            self.ready = true;
            events.push_back(ClientEvent::Ready {
                type_url: type_url.clone(),
            });
        }
    }
}
