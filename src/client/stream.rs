//! The stream's life and the responses it brings.

use alloc::string::String;
use alloc::vec::Vec;

use super::type_state::{Ctx, Held};
use super::{
    delta, sotw, Client, ClientEvent, IgnoreReason, PendingResource, SharedStr, VerdictTicket,
};
use crate::message::{Response, Transport};
use crate::time::Instant;
use crate::types::ads_order;

impl Client {
    // ------------------------------------------------------------------ stream

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
        let nonce = SharedStr::from(response.nonce());
        let reason = if !self.connected {
            Some(IgnoreReason::NotConnected)
        } else if response.variant() != self.config.variant {
            Some(IgnoreReason::WrongVariant)
        } else if !self.config.transport.carries(&url) {
            Some(IgnoreReason::NotCarried)
        } else if !self.index.contains_key(url.as_str()) {
            Some(IgnoreReason::NeverSubscribed)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.events.push_back(ClientEvent::Ignored {
                type_url: url,
                nonce,
                reason,
            });
            return;
        }
        let Some(&idx) = self.index.get(url.as_str()) else {
            return;
        };
        let max_held = self.config.limits.max_held_responses;
        let Some(ts) = self.types.get_mut(idx) else {
            return;
        };
        ts.nonce = nonce.clone();
        if ts.pending.is_some() {
            if ts.held.len() >= max_held {
                let version = match &response {
                    Response::Sotw(r) => SharedStr::from(r.version_info.as_str()),
                    Response::Delta(r) => SharedStr::from(r.system_version_info.as_str()),
                };
                ts.held.push_back(Held::Overflow { nonce, version });
            } else {
                ts.held.push_back(Held::Response(response));
            }
            return;
        }
        self.process(idx, response);
        self.enqueue(idx);
    }

    /// Checks, validates and applies one response of the type at `idx`.
    pub(crate) fn process(&mut self, idx: usize, response: Response) {
        let Client {
            config,
            types,
            validators,
            deferred,
            extractors,
            timers,
            events,
            next_ticket,
            last_now,
            ..
        } = self;
        let Some(ts) = types.get_mut(idx) else {
            return;
        };
        let url = ts.url.clone();
        let mut cx = Ctx {
            idx,
            now: *last_now,
            variant: config.variant,
            policy: config.nack_policy,
            timers,
            events,
        };
        let parsed = match response {
            Response::Sotw(r) => {
                let extractor = extractors.get(url.as_str()).copied();
                sotw::parse(r, &url, ts, &config.limits, extractor)
            }
            Response::Delta(r) => delta::parse(r, &url, ts, &config.limits),
        };
        let update = match parsed {
            Ok(update) => update,
            Err(reject) => {
                ts.reject(reject.nonce, reject.version, &reject.message, &mut cx);
                return;
            }
        };
        if deferred.contains(url.as_str()) && update.resources.iter().any(|r| r.body.is_some()) {
            let ticket = VerdictTicket(*next_ticket);
            *next_ticket = next_ticket.wrapping_add(1);
            cx.events.push_back(ClientEvent::ValidationNeeded {
                ticket,
                type_url: url,
                version: update.version.clone(),
                resources: update
                    .resources
                    .iter()
                    .filter_map(|r| {
                        r.body.as_ref().map(|b| PendingResource {
                            name: r.name.clone(),
                            version: r.version.clone().unwrap_or_else(|| update.version.clone()),
                            body: b.clone(),
                        })
                    })
                    .collect(),
            });
            ts.pending = Some((ticket, update));
            return;
        }
        let rejections: Vec<(SharedStr, String)> = match validators.get(url.as_str()) {
            Some(v) => update
                .resources
                .iter()
                .filter_map(|r| {
                    let body = r.body.as_ref()?;
                    let version = r.version.as_ref().unwrap_or(&update.version);
                    v.validate(&r.name, version, body)
                        .err()
                        .map(|e| (r.name.clone(), e))
                })
                .collect(),
            None => Vec::new(),
        };
        ts.apply(update, rejections, &mut cx);
    }
}
