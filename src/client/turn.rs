//! The type's turn on the current stream: whether its first request left, the latest
//! response nonce, the answers owed to responses (in order), and whether it waits in the
//! client's send queue. Owned by the type's state, forgotten with the stream; changed only
//! here.

use alloc::collections::VecDeque;

use crate::message::Variant;
use crate::pb::google::rpc::Status;
use crate::text::SharedStr;

/// An answer owed to one response, sent in order.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) nonce: SharedStr,
    /// SotW: the version to report (applied for an ACK, previous good for a NACK).
    pub(crate) version: SharedStr,
    pub(crate) error: Option<Status>,
}

/// The kind of request a type owes, in the order its variant decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DueKind {
    /// The first request of the type on this stream.
    Initial,
    /// The answer to a response (incremental: it may carry unsent interest changes).
    Reply,
    /// Interest changed (SotW: or the version was reset) with no response to answer.
    Change,
}

/// A request a type owes, ready to build.
pub(crate) enum Due {
    /// The first request of the type on this stream.
    Initial,
    /// The answer to one response.
    Reply(Reply),
    /// An interest change.
    Change,
}

/// What the type owes the server on this stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamTurn {
    sent_first: bool,
    /// Latest response nonce of this type on this stream.
    nonce: SharedStr,
    replies: VecDeque<Reply>,
    /// SotW: send a request even if the names did not change (version reset on TTL expiry).
    resend: bool,
    /// In the client's send queue.
    queued: bool,
}

impl StreamTurn {
    /// Whether the type's first request on this stream has left.
    pub(crate) fn sent_first(&self) -> bool {
        self.sent_first
    }

    /// A request left: the first one if it was, and no resend is owed any more.
    pub(crate) fn sent(&mut self) {
        self.sent_first = true;
        self.resend = false;
    }

    /// The latest response nonce of the type on this stream.
    pub(crate) fn nonce(&self) -> &SharedStr {
        &self.nonce
    }

    /// A response of the type arrived with `nonce`.
    pub(crate) fn received(&mut self, nonce: SharedStr) {
        self.nonce = nonce;
    }

    /// SotW after a version reset: a request is owed even if the names did not change
    /// (only once the first one left: that one carries the reset anyway).
    pub(crate) fn resend_if_sent(&mut self) {
        if self.sent_first {
            self.resend = true;
        }
    }

    /// Whether a SotW resend is owed.
    pub(crate) fn resend(&self) -> bool {
        self.resend
    }

    /// Whether an answer to a response is owed.
    pub(crate) fn owes_reply(&self) -> bool {
        !self.replies.is_empty()
    }

    /// Queues the answer to a response. Incremental answers every response on its own, in
    /// order. SotW answers only the latest: an unsent answer to an older response would
    /// carry a stale nonce, which the server ignores (xDS protocol, "Requests become stale"),
    /// so every SotW request carries the latest nonce of its type on the stream.
    pub(crate) fn push_reply(&mut self, reply: Reply, variant: Variant) {
        if variant == Variant::Sotw {
            self.replies.clear();
        }
        self.replies.push_back(reply);
    }

    /// Takes what `kind` says is due: the oldest answer owed, for a reply.
    pub(crate) fn take_due(&mut self, kind: DueKind) -> Option<Due> {
        match kind {
            DueKind::Initial => Some(Due::Initial),
            DueKind::Reply => self.replies.pop_front().map(Due::Reply),
            DueKind::Change => Some(Due::Change),
        }
    }

    /// Whether the type waits in the client's send queue.
    pub(crate) fn is_queued(&self) -> bool {
        self.queued
    }

    /// The type entered (`true`) or left the client's send queue.
    pub(crate) fn set_queued(&mut self, queued: bool) {
        self.queued = queued;
    }
}
