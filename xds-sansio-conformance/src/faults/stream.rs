//! One stream's faults: a Sans-IO machine between the server's stream and the wire.
//!
//! The adapter gives it every response the server built ([`StreamFaults::handle_response`])
//! and every request the client sent ([`StreamFaults::handle_request`]), and writes what
//! [`StreamFaults::poll_transmit`] gives back; it sleeps until
//! [`StreamFaults::poll_timeout`]. Time is an input, so a plan behaves the same in a
//! virtual-time test and on a socket.

use alloc::collections::VecDeque;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use bytes::Bytes;
use prost::Message;
use xds_sansio::message::Request;
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse};
use xds_sansio::server::EncodedResponse;
use xds_sansio::time::Instant;
use xds_sansio::Variant;

use super::rng::SplitMix;
use super::rule::{FaultKind, FaultRule, FaultStatus};

/// What the adapter does next.
#[derive(Clone, Debug)]
pub enum FaultTransmit {
    /// Write this response.
    Send(EncodedResponse),
    /// End the stream with this status (0: OK).
    Close(FaultStatus),
}

/// A fault that fired, for logs, records and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultEvent {
    /// The rule's index in the plan (from 0).
    pub rule: usize,
    /// The rule's name (`drop`, `delay`, ...).
    pub fault: &'static str,
    /// The type of the response it concerned (empty for a stream fault).
    pub type_url: String,
    /// The nonce the server gave that response (empty for a stream fault).
    pub nonce: String,
}

/// A response waiting to leave.
struct Queued {
    not_before: Instant,
    response: EncodedResponse,
}

/// A response held back by `reorder`.
struct Held {
    until: Instant,
    /// How many times it leaves when released (a `duplicate` may have fired too).
    copies: u32,
    /// Not before this, even when released earlier (a `delay` may have fired too).
    not_before: Instant,
    response: EncodedResponse,
}

/// The faults of one stream, from [`FaultPlan::stream`](super::FaultPlan::stream).
pub struct StreamFaults {
    rules: Vec<FaultRule>,
    /// Per rule: how many responses (or NACKs, for `resend-nacked`) it has matched.
    matched: Vec<u32>,
    rng: SplitMix,
    ordinal: u32,
    queue: VecDeque<Queued>,
    held: Option<Held>,
    /// The last response that left, per type: for `resend-nacked` and `stale-nonce`.
    last_sent: Vec<EncodedResponse>,
    /// The nonce of the last response that left.
    last_nonce: Option<String>,
    sent: u32,
    fresh: u32,
    closing: Option<FaultStatus>,
    events: VecDeque<FaultEvent>,
}

impl core::fmt::Debug for StreamFaults {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StreamFaults")
            .field("stream", &self.ordinal)
            .field("queued", &self.queue.len())
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl StreamFaults {
    pub(super) fn new(rules: Vec<FaultRule>, seed: u64, ordinal: u32) -> StreamFaults {
        // The stream's draws depend on the seed and its ordinal only, not on how the
        // streams' tasks interleave.
        let rng = SplitMix::new(seed ^ (u64::from(ordinal)).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let rules: Vec<FaultRule> = rules
            .into_iter()
            .filter(|r| r.selector.stream.is_none_or(|s| s == ordinal))
            .collect();
        StreamFaults {
            matched: alloc::vec![0; rules.len()],
            rules,
            rng,
            ordinal,
            queue: VecDeque::new(),
            held: None,
            last_sent: Vec::new(),
            last_nonce: None,
            sent: 0,
            fresh: 0,
            closing: None,
            events: VecDeque::new(),
        }
    }

    /// The stream's ordinal (from 1, in the order the server opened streams).
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Called as the stream opens: `Some` when a `refuse` rule refuses it.
    pub fn open(&mut self) -> Option<FaultStatus> {
        for index in 0..self.rules.len() {
            let Some(FaultKind::Refuse(status)) = self.kind(index) else {
                continue;
            };
            if self.selects(index, None) {
                self.fired(index, "", "");
                return Some(status);
            }
        }
        None
    }

    /// A request from the client: a NACK of a response a `resend-nacked` rule selects
    /// sends that response again.
    pub fn handle_request(&mut self, now: Instant, request: &Request) {
        let (type_url, nonce, nack) = match request {
            Request::Sotw(r) => (&r.type_url, &r.response_nonce, r.error_detail.is_some()),
            Request::Delta(r) => (&r.type_url, &r.response_nonce, r.error_detail.is_some()),
        };
        if !nack || nonce.is_empty() {
            return;
        }
        let Some(nacked) = self
            .last_sent
            .iter()
            .find(|r| &r.type_url == type_url && &r.nonce == nonce)
            .cloned()
        else {
            return;
        };
        for index in 0..self.rules.len() {
            if self.kind(index) == Some(FaultKind::ResendNacked)
                && self.selects(index, Some(type_url))
            {
                self.fired(index, type_url, nonce);
                let nonce = self.fresh_nonce("resent");
                if let Some(again) = with_nonce(&nacked, &nonce) {
                    self.queue.push_back(Queued {
                        not_before: now,
                        response: again,
                    });
                }
                return;
            }
        }
    }

    /// A response the server built: it goes through the plan's rules in order.
    pub fn handle_response(&mut self, now: Instant, mut response: EncodedResponse) {
        let mut copies: u32 = 1;
        let mut not_before = now;
        let mut hold: Option<Instant> = None;
        for index in 0..self.rules.len() {
            let Some(kind) = self.kind(index) else {
                continue;
            };
            match kind {
                FaultKind::Refuse(_) | FaultKind::CloseAfter { .. } | FaultKind::ResendNacked => {
                    continue
                }
                _ => {}
            }
            if !self.selects(index, Some(&response.type_url)) {
                continue;
            }
            // Counted as a match (nth= counts responses, not firings), but with nothing
            // sent before there is no stale nonce to give.
            if kind == FaultKind::StaleNonce && self.last_nonce.is_none() {
                continue;
            }
            self.fired(index, &response.type_url, &response.nonce);
            match kind {
                FaultKind::Drop => return,
                FaultKind::Delay(by) => not_before = not_before.saturating_add(by),
                FaultKind::Duplicate => copies += 1,
                FaultKind::Reorder { within } => hold = Some(now.saturating_add(within)),
                FaultKind::WrongNonce => {
                    let nonce = self.fresh_nonce("wrong");
                    if let Some(r) = with_nonce(&response, &nonce) {
                        response = r;
                    }
                }
                FaultKind::StaleNonce => {
                    let stale = self.last_nonce.clone().unwrap_or_default();
                    if let Some(r) = with_nonce(&response, &stale) {
                        response = r;
                    }
                }
                FaultKind::Refuse(_) | FaultKind::CloseAfter { .. } | FaultKind::ResendNacked => {}
            }
        }
        // A held response is overtaken only by another type: a newer response of its own
        // type lets it go first, so no client sees an older state after a newer one.
        if self
            .held
            .as_ref()
            .is_some_and(|h| h.response.type_url == response.type_url)
        {
            self.release_held(now);
        }
        let release = self.held.is_some();
        if let Some(until) = hold {
            if self.held.is_none() {
                self.held = Some(Held {
                    until,
                    copies,
                    not_before,
                    response,
                });
                return;
            }
        }
        for _ in 0..copies {
            self.queue.push_back(Queued {
                not_before,
                response: response.clone(),
            });
        }
        if release {
            self.release_held(not_before);
        }
    }

    /// What to write next, if anything is due at `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<FaultTransmit> {
        if let Some(status) = &self.closing {
            return Some(FaultTransmit::Close(status.clone()));
        }
        if self.held.as_ref().is_some_and(|h| h.until <= now) {
            self.release_held(now);
        }
        if self.queue.front()?.not_before > now {
            return None;
        }
        let queued = self.queue.pop_front()?;
        self.note_sent(&queued.response);
        Some(FaultTransmit::Send(queued.response))
    }

    /// The next time something may be due (a delay or a reorder hold ending).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let queued = self.queue.front().map(|q| q.not_before);
        let held = self.held.as_ref().map(|h| h.until);
        match (queued, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) has something at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        self.closing.is_some()
            || self.queue.front().is_some_and(|q| q.not_before <= now)
            || self.held.as_ref().is_some_and(|h| h.until <= now)
    }

    /// Whether a response waits in the machine (delayed or held).
    pub fn is_holding(&self) -> bool {
        !self.queue.is_empty() || self.held.is_some()
    }

    /// The next fault that fired.
    pub fn poll_event(&mut self) -> Option<FaultEvent> {
        self.events.pop_front()
    }

    fn release_held(&mut self, not_before: Instant) {
        if let Some(held) = self.held.take() {
            for _ in 0..held.copies {
                self.queue.push_back(Queued {
                    not_before: not_before.max(held.not_before),
                    response: held.response.clone(),
                });
            }
        }
    }

    /// Counts a response that left; `close after=N` fires after the N-th.
    fn note_sent(&mut self, response: &EncodedResponse) {
        self.sent += 1;
        self.last_nonce = Some(response.nonce.clone());
        match self
            .last_sent
            .iter_mut()
            .find(|r| r.type_url == response.type_url)
        {
            Some(slot) => *slot = response.clone(),
            None => self.last_sent.push(response.clone()),
        }
        for index in 0..self.rules.len() {
            let Some(FaultKind::CloseAfter { responses, status }) = self.kind(index) else {
                continue;
            };
            if self.sent == responses && self.closing.is_none() && self.selects(index, None) {
                self.fired(index, "", "");
                self.closing = Some(status);
            }
        }
    }

    fn kind(&self, index: usize) -> Option<FaultKind> {
        self.rules.get(index).map(|r| r.kind.clone())
    }

    /// Whether rule `index` applies to this match (counting it when the type fits).
    fn selects(&mut self, index: usize, type_url: Option<&str>) -> bool {
        let Some(rule) = self.rules.get(index) else {
            return false;
        };
        let selector = &rule.selector;
        if let (Some(wanted), Some(actual)) = (&selector.type_url, type_url) {
            if wanted != actual {
                return false;
            }
        }
        let (nth, every, probability) = (selector.nth, selector.every, selector.probability);
        let Some(count) = self.matched.get_mut(index) else {
            return false;
        };
        *count += 1;
        let count = *count;
        if nth.is_some_and(|n| n != count) || every.is_some_and(|k| count % k != 0) {
            return false;
        }
        // A draw only for rules that ask for one, so adding a rule without p= does not
        // change what the others draw.
        probability.is_none_or(|p| self.rng.next_f64() < p)
    }

    fn fired(&mut self, rule: usize, type_url: &str, nonce: &str) {
        let fault = self.rules.get(rule).map_or("", |r| r.kind.name());
        self.events.push_back(FaultEvent {
            rule,
            fault,
            type_url: type_url.to_string(),
            nonce: nonce.to_string(),
        });
    }

    fn fresh_nonce(&mut self, why: &str) -> String {
        self.fresh += 1;
        format!("fault-{why}-{}-{}", self.ordinal, self.fresh)
    }
}

/// The response with another nonce (decoded and encoded again: a test tool's cost).
fn with_nonce(response: &EncodedResponse, nonce: &str) -> Option<EncodedResponse> {
    let bytes = response.bytes.to_bytes();
    let encoded = match response.variant {
        Variant::Sotw => {
            let mut message = DiscoveryResponse::decode(bytes).ok()?;
            message.nonce = nonce.to_string();
            message.encode_to_vec()
        }
        Variant::Delta => {
            let mut message = DeltaDiscoveryResponse::decode(bytes).ok()?;
            message.nonce = nonce.to_string();
            message.encode_to_vec()
        }
    };
    let mut changed = response.clone();
    changed.nonce = nonce.to_string();
    changed.bytes = Bytes::from(encoded).into();
    Some(changed)
}
