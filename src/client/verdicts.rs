//! The verdict of the application a type waits for, and the responses held behind it,
//! answered in order once it comes ([`Verdicts`], changed only here).

use alloc::collections::VecDeque;

use super::event::VerdictTicket;
use super::incoming::Update;
use crate::message::Response;
use crate::text::SharedStr;

/// A response held back while a verdict is pending.
#[derive(Clone, Debug)]
pub(crate) enum Held {
    Response(Response),
    /// Over [`Limits::max_held_responses`](super::Limits): NACKed when its turn comes.
    Overflow {
        nonce: SharedStr,
        version: SharedStr,
    },
}

/// The verdict a type waits for, and the responses held behind it (answered in order).
#[derive(Clone, Debug, Default)]
pub(crate) struct Verdicts {
    pending: Option<(VerdictTicket, Update)>,
    held: VecDeque<Held>,
}

impl Verdicts {
    /// Whether a verdict is awaited.
    pub(crate) fn is_waiting(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether the verdict awaited is `ticket`'s.
    pub(crate) fn waits_on(&self, ticket: VerdictTicket) -> bool {
        self.pending.as_ref().is_some_and(|(t, _)| *t == ticket)
    }

    /// `update` waits for the verdict of `ticket`.
    pub(crate) fn wait(&mut self, ticket: VerdictTicket, update: Update) {
        self.pending = Some((ticket, update));
    }

    /// The update whose verdict came, if one was waiting.
    pub(crate) fn take_pending(&mut self) -> Option<Update> {
        self.pending.take().map(|(_, update)| update)
    }

    /// Holds `response` (received with `nonce`) behind the pending verdict; past `limit`
    /// held, only its nonce and version are kept, to be NACKed when its turn comes.
    pub(crate) fn hold(&mut self, response: Response, nonce: SharedStr, limit: usize) {
        if self.held.len() >= limit {
            let version = match &response {
                Response::Sotw(r) => SharedStr::from(r.version_info.as_str()),
                Response::Delta(r) => SharedStr::from(r.system_version_info.as_str()),
            };
            self.held.push_back(Held::Overflow { nonce, version });
        } else {
            self.held.push_back(Held::Response(response));
        }
    }

    /// The next response held, in order of arrival.
    pub(crate) fn next_held(&mut self) -> Option<Held> {
        self.held.pop_front()
    }
}
