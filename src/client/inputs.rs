//! The inputs: the stream's life, the responses it brings, and the time.

use alloc::vec::Vec;

use super::{Client, ClientEvent, IgnoreReason, SharedStr};
use crate::message::{Response, Transport};
use crate::time::Instant;
use crate::types::ads_order;

impl Client {
    /// A new stream is up: every type with interest sends its first request (last accepted
    /// version, every name, no nonce; incremental: `initial_resource_versions`), the node
    /// rides on the first one. Calling it while connected first ends the old stream.
    pub fn connected(&mut self, now: Instant) {
        if self.connected {
            self.disconnected(now);
        }
        self.last_now = now;
        self.connected = true;
        self.first_on_stream = true;
        let mut order: Vec<usize> = (0..self.types.len()).collect();
        order.sort_by(|a, b| {
            let ua = self.types.get(*a).map_or("", |t| t.url.as_str());
            let ub = self.types.get(*b).map_or("", |t| t.url.as_str());
            ads_order(ua, ub)
        });
        for idx in order {
            self.enqueue(idx);
        }
    }

    /// The stream broke: nonces, unsent answers, pending verdicts and does-not-exist timers
    /// are dropped; cache, versions, subscriptions and TTL timers stay.
    pub fn disconnected(&mut self, now: Instant) {
        self.last_now = now;
        self.connected = false;
        self.first_on_stream = false;
        self.send_queue.clear();
        self.timers.disarm_all_dne();
        for ts in &mut self.types {
            ts.reset_stream();
        }
    }

    /// Handles a response of either variant. Never fails: whatever the peer sent becomes
    /// state, events and a queued ACK or NACK (or an [`ClientEvent::Ignored`]).
    pub fn handle_response(&mut self, now: Instant, response: Response) {
        self.last_now = now;
        let raw = response.type_url();
        let url = match (&self.config.transport, raw.is_empty()) {
            // Singleton APIs may leave the type implicit.
            (Transport::PerType(u), true) => SharedStr::from(u.as_str()),
            _ => SharedStr::from(raw),
        };
        let idx = self.index.get(url.as_str()).copied();
        let reason = if !self.connected {
            Some(IgnoreReason::NotConnected)
        } else if response.variant() != self.config.variant {
            Some(IgnoreReason::WrongVariant)
        } else if !self.config.transport.carries(&url) {
            Some(IgnoreReason::NotCarried)
        } else if idx.is_none() {
            Some(IgnoreReason::NeverSubscribed)
        } else {
            None
        };
        let (Some(idx), None) = (idx, reason) else {
            self.events.push_back(ClientEvent::Ignored {
                type_url: url,
                nonce: SharedStr::from(response.nonce()),
                reason: reason.unwrap_or(IgnoreReason::NeverSubscribed),
            });
            return;
        };
        if let Some((ts, mut cx)) = self.split(idx) {
            ts.receive(response, &mut cx);
        }
        self.enqueue(idx);
    }

    /// Fires every timer due at `now`: does-not-exist and TTL expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = now;
        for (at, kind, idx, name) in self.timers.expire(now) {
            if let Some((ts, mut cx)) = self.split(idx) {
                ts.fire(at, kind, &name, &mut cx);
            }
            self.enqueue(idx);
        }
    }
}
