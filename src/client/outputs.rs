//! The outputs: requests, events and the next deadline.

use super::{Client, ClientEvent};
use crate::message::Request;
use crate::time::Instant;

impl Client {
    /// The next request to send on the stream, if any; it counts as sent at `now` (the
    /// does-not-exist timers of the names it carries start there).
    /// Call after: [`Client::connected`], [`Client::handle_response`],
    /// [`Client::handle_timeout`], any command; until `None`.
    pub fn poll_request(&mut self, now: Instant) -> Option<Request> {
        self.last_now = now;
        if !self.connected {
            return None;
        }
        let node = (self.first_on_stream || self.config.node_on_every_request)
            .then(|| self.config.node.clone());
        while let Some(idx) = self.send_queue.pop_front() {
            let Some((ts, mut cx)) = self.split(idx) else {
                continue;
            };
            ts.turn.set_queued(false);
            let Some((request, more)) = ts.poll_request(node.clone(), &mut cx) else {
                continue;
            };
            if more {
                ts.turn.set_queued(true);
                self.send_queue.push_back(idx);
            }
            self.first_on_stream = false;
            return Some(request);
        }
        None
    }

    /// The next event for the application, if any.
    /// Call after every input and command, after draining [`Client::poll_request`]; until
    /// `None`.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        let event = self.events.pop_front();
        if event.is_none() {
            crate::queue::shrink_after_burst(&mut self.events, crate::queue::KEEP_BUSY);
        }
        event
    }

    /// When to call [`Client::handle_timeout`]: the last `now` while output is queued, else
    /// the earliest timer (does-not-exist or TTL), else `None`.
    /// Read after draining the outputs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let request_ready = self.connected
            && self.send_queue.iter().any(|&i| {
                self.types
                    .get(i)
                    .is_some_and(|ts| ts.owes_request(self.config.variant))
            });
        if !self.events.is_empty() || request_ready {
            return Some(self.last_now);
        }
        self.timers.next()
    }
}
