//! What the client hands back: requests, events, deadlines, timer firing.

use super::type_state::Ctx;
use super::{delta, sotw, Client, ClientEvent};
use crate::message::{Request, Variant};
use crate::time::Instant;

impl Client {
    // ------------------------------------------------------------------ outputs

    /// The next request to send on the stream, if any; it counts as sent at `now`.
    pub fn poll_request(&mut self, now: Instant) -> Option<Request> {
        self.last_now = now;
        if !self.connected {
            return None;
        }
        for _ in 0..self.send_queue.len() {
            let idx = self.send_queue.pop_front()?;
            let Client {
                config,
                types,
                timers,
                events,
                send_queue,
                first_on_stream,
                ..
            } = self;
            let Some(ts) = types.get_mut(idx) else {
                continue;
            };
            ts.queued = false;
            let node =
                || (*first_on_stream || config.node_on_every_request).then(|| config.node.clone());
            let (request, names) = match config.variant {
                Variant::Sotw => {
                    let Some(due) = sotw::due(ts) else { continue };
                    let (r, names) = sotw::build(ts, due, node());
                    (Request::Sotw(r), names)
                }
                Variant::Delta => {
                    let Some(due) = delta::due(ts) else { continue };
                    let (r, names) = delta::build(ts, due, node());
                    (Request::Delta(r), names)
                }
            };
            *first_on_stream = false;
            let mut cx = Ctx {
                idx,
                now,
                variant: config.variant,
                policy: config.nack_policy,
                timers,
                events,
            };
            ts.start_dne_timers(&names, config.does_not_exist_timeout, &mut cx);
            let more = match config.variant {
                Variant::Sotw => sotw::has_due(ts),
                Variant::Delta => delta::has_due(ts),
            };
            if more {
                ts.queued = true;
                send_queue.push_back(idx);
            }
            return Some(request);
        }
        None
    }

    /// The next event for the application, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When to call [`Client::handle_timeout`]: the last `now` while output is queued, else
    /// the earliest timer, else `None`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let request_ready = self.connected
            && self
                .send_queue
                .iter()
                .any(|&i| self.types.get(i).is_some_and(|ts| self.has_due(ts)));
        if !self.events.is_empty() || request_ready {
            return Some(self.last_now);
        }
        self.timers.next()
    }

    /// Fires every timer due at `now`: does-not-exist and TTL expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = now;
        for (at, kind, idx, name) in self.timers.expire(now) {
            self.with_type(idx, |ts, cx| ts.fire(at, kind, &name, cx));
            self.enqueue(idx);
        }
    }
}
