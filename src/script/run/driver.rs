//! The steps: each line of a scenario as inputs to the simulated stream, or as a check of
//! what the model sent.
//!
//! Decisions:
//! - A message line of the side the model plays takes the oldest message that side sent and
//!   matches it; a line of the side the scenario plays is built and delivered.
//! - Commands of one line all run before the model is drained, so that their effects merge
//!   into one request or one poll.
//! - Nonces belong to one stream: a new stream's may repeat the old one's values, so the
//!   nonce symbols start afresh on connect.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use super::build::body_of;
use super::symbols::{symbolize, Symbols};
use super::{Logged, Runner};
use crate::client::ClientEvent;
use crate::script::ast::*;
use crate::server::{ResourceEntry, ServerEvent};
use crate::transcript::notation;

impl Runner {
    /// Runs one line: what actually passed (message lines), and whether the line held.
    pub(super) fn step(&mut self, action: &Action) -> (Option<String>, Result<(), String>) {
        let outcome = match action {
            Action::Message {
                direction,
                message,
                tags,
            } => return self.message(*direction, message, tags),
            Action::ClientBatch(commands) => {
                let result = commands.iter().try_for_each(|c| self.client_command(c));
                self.sim.drain();
                result
            }
            Action::ServerBatch(commands) => {
                let result = commands.iter().try_for_each(|c| self.server_command(c));
                self.sim.drain();
                result
            }
            Action::Wait(duration) => self.wait(*duration),
            Action::Disconnect => {
                self.sim.break_stream();
                Ok(())
            }
            Action::Connect => {
                self.connect();
                Ok(())
            }
            Action::Expect(side, expectation) => self.expect(*side, expectation),
        };
        self.take_events();
        (None, outcome)
    }

    /// Moves the events of both sides from the stream into the runner's logs, noting the
    /// responses that await a verdict.
    pub(super) fn take_events(&mut self) {
        for (_, event) in self.sim.take_client_events() {
            if let ClientEvent::ValidationNeeded {
                ticket,
                type_url,
                resources,
                ..
            } = &event
            {
                let names = resources
                    .iter()
                    .map(|r| r.name.as_str().to_string())
                    .collect();
                self.tickets
                    .insert(type_url.as_str().into(), (*ticket, names));
            }
            self.client_events.push(Logged {
                event,
                consumed: false,
            });
        }
        for (_, event) in self.sim.take_server_events() {
            self.server_events.push(Logged {
                event,
                consumed: false,
            });
        }
    }

    fn message(
        &mut self,
        direction: Direction,
        pattern: &MessagePattern,
        tags: &[String],
    ) -> (Option<String>, Result<(), String>) {
        match direction {
            Direction::ClientToServer => {
                let events_before = self.server_events.len();
                let request = if self.sim.client.is_some() {
                    let Some((_, request)) = self.sim.take_request() else {
                        return (
                            None,
                            Err("expected the client to send this, it sent nothing".into()),
                        );
                    };
                    let rendered = self.show(notation::request(&request), request.type_url());
                    if let Err(e) = self.match_request(pattern, &request) {
                        return (Some(rendered), Err(e));
                    }
                    request
                } else {
                    self.build_request(pattern)
                };
                let rendered = self.show(notation::request(&request), request.type_url());
                self.sim.deliver_request(request);
                self.take_events();
                let result = self.check_tags(pattern.type_url(), tags, events_before);
                (Some(rendered), result)
            }
            Direction::ServerToClient => {
                let response = if self.sim.models_server() {
                    let Some((_, response)) = self.sim.take_response() else {
                        return (
                            None,
                            Err("expected the server to send this, it sent nothing".into()),
                        );
                    };
                    let rendered = self.show(notation::response(&response), response.type_url());
                    if let Err(e) = self.match_response(pattern, &response) {
                        return (Some(rendered), Err(e));
                    }
                    response
                } else {
                    self.build_response(pattern)
                };
                let rendered = self.show(notation::response(&response), response.type_url());
                self.sim.deliver_responses([response]);
                self.take_events();
                (Some(rendered), Ok(()))
            }
        }
    }

    /// A rendered message with the symbols bound so far in place of values.
    fn show(&self, rendered: String, type_url: &str) -> String {
        symbolize(&rendered, self.versions.get(type_url), &self.nonces)
    }

    /// The server's classification of the request just delivered (`[ack]`, `[nack]`,
    /// `[stale]`) among the events it emitted since `from`.
    fn check_tags(&mut self, type_url: &str, tags: &[String], from: usize) -> Result<(), String> {
        if !self.sim.models_server() {
            return Ok(());
        }
        for tag in tags {
            let found = self.server_events.iter().skip(from).any(|logged| {
                match (tag.as_str(), &logged.event) {
                    ("stale", ServerEvent::StaleRequest { type_url: t, .. })
                    | ("ack", ServerEvent::Acked { type_url: t, .. })
                    | ("nack", ServerEvent::Nacked { type_url: t, .. }) => t == type_url,
                    _ => false,
                }
            });
            if !found {
                return Err(format!(
                    "the server did not classify this request as [{tag}]"
                ));
            }
        }
        Ok(())
    }

    fn client_command(&mut self, command: &ClientCommand) -> Result<(), String> {
        let client = self
            .sim
            .client
            .as_mut()
            .ok_or("the model does not play the client")?;
        match command {
            ClientCommand::Subscribe(t, names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                client.subscribe(t, &names).map_err(|e| e.to_string())
            }
            ClientCommand::Unsubscribe(t, names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                client.unsubscribe(t, &names).map_err(|e| e.to_string())
            }
            ClientCommand::Defer(t) => {
                client.set_deferred_validation(t, true);
                Ok(())
            }
            ClientCommand::Accept(t) => {
                let (ticket, _) = self
                    .tickets
                    .remove(t.as_str())
                    .ok_or("no response of that type awaits a verdict")?;
                client.verdict(ticket, &[]).map_err(|e| e.to_string())
            }
            ClientCommand::Reject(t, names, reason) => {
                let (ticket, pending) = self
                    .tickets
                    .remove(t.as_str())
                    .ok_or("no response of that type awaits a verdict")?;
                let names = if names.is_empty() { &pending } else { names };
                let rejections: Vec<(&str, &str)> = names
                    .iter()
                    .map(|n| (n.as_str(), reason.as_str()))
                    .collect();
                client
                    .verdict(ticket, &rejections)
                    .map_err(|e| e.to_string())
            }
        }
    }

    fn server_command(&mut self, command: &ServerCommand) -> Result<(), String> {
        if !self.sim.models_server() {
            return Err("the model does not play the server".into());
        }
        match command {
            ServerCommand::Set(t, items) => {
                for item in items {
                    let mut entry = ResourceEntry::new(item.name.clone(), body_of(item, ""));
                    if let Some(v) = &item.version {
                        entry = entry.with_version(self.versions_of(t).input(v));
                    }
                    if let Some(ttl) = item.ttl {
                        entry = entry.with_ttl(ttl);
                    }
                    if !item.aliases.is_empty() {
                        entry = entry.with_aliases(item.aliases.clone());
                    }
                    self.sim
                        .store
                        .set_entry(t, entry)
                        .map_err(|e| format!("{e:?}"))?;
                    self.sim.record_store(t, &item.name);
                }
            }
            ServerCommand::Remove(t, names) => {
                for name in names {
                    self.sim.store.remove(t, name);
                    self.sim.record_store(t, name);
                }
            }
        }
        Ok(())
    }

    /// Advances time by `duration`, firing every deadline at its own time.
    fn wait(&mut self, duration: Duration) -> Result<(), String> {
        let until = self.sim.now() + duration;
        self.sim
            .fire_timers_until(until)
            .map_err(|stuck| stuck.to_string())
    }

    fn connect(&mut self) {
        self.first_request_sent = false;
        self.nonces = Symbols::default();
        self.sim.reconnect();
    }

    /// The messages the model sent that no line accounted for, when the scenario ends.
    pub(super) fn leftovers(&mut self) -> Option<String> {
        self.sim.drain();
        let mut left: Vec<String> = Vec::new();
        if self.sim.client.is_some() {
            left.extend(
                self.sim
                    .requests()
                    .map(|r| format!("C->S {}", notation::request(r))),
            );
        }
        if self.sim.models_server() {
            left.extend(
                self.sim
                    .responses()
                    .map(|r| format!("S->C {}", notation::response(r))),
            );
        }
        (!left.is_empty()).then(|| {
            format!(
                "messages the scenario does not account for: {}",
                left.join("; ")
            )
        })
    }
}
