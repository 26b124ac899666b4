//! The steps: each line of a scenario as inputs to the simulated stream, or as a check of
//! what the model sent.
//!
//! Decisions:
//! - A message line of the side the model plays takes the oldest message that side sent and
//!   matches it; a line of the side the scenario plays is built and delivered.
//! - Commands of one line all run before the model is drained, so that their effects merge
//!   into one request or one poll; a server line is one store revision
//!   (`ResourceStore::apply`), which every stream sees whole or not at all.
//! - Nonces belong to one stream: a new stream's may repeat the old one's values, so the
//!   nonce symbols start afresh on connect, and so does the latest nonce of each type
//!   (`N=^`).
//! - Responses that share a line reach the client one after the other before it is
//!   polled: a client may then answer them with one request (xDS protocol, "ACK/NACK and
//!   resource type instance version": only the latest nonce needs an answer).
//! - `expect server sends (..) within D` lets time pass and takes every response the
//!   server sends meanwhile, delivering each when it is sent: what a server may send at any
//!   time (TTL heartbeats, `discovery.proto` `Resource.ttl`) cannot be pinned to a line.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use super::remote::Wire;
use super::symbols::{symbolize, Symbols};
use super::timeline::ErrorOp;
use super::{Logged, Runner};
use crate::script::ast::*;
use crate::transcript::notation;
use xds_sansio::client::ClientEvent;
use xds_sansio::message::Response;
use xds_sansio::server::{ResourceEntry, ServerEvent, StoreOp};

impl Runner<'_> {
    /// Runs one line: what actually passed (message lines), and whether the line held.
    pub(super) fn step(&mut self, action: &Action) -> (Option<String>, Result<(), String>) {
        self.steps += 1;
        let (client, server) = inputs_to(action);
        if client {
            self.last_input.client = self.steps;
        }
        if server {
            self.last_input.server = self.steps;
        }
        let outcome = match action {
            Action::Message {
                direction: Direction::ClientToServer,
                message,
                tags,
            } => return self.request(message, tags),
            Action::Message {
                direction: Direction::ServerToClient,
                message,
                ..
            } => return self.responses(core::slice::from_ref(message)),
            Action::Responses(messages) => return self.responses(messages),
            Action::Expect(Side::Server, Expectation::Sends { message, within }) => {
                return self.sends(message, *within)
            }
            Action::ClientBatch(commands) => {
                let result = match self.remote_as(Side::Client) {
                    Some(remote) => remote.client_commands(commands),
                    None => commands.iter().try_for_each(|c| self.client_command(c)),
                };
                self.sim.drain();
                result
            }
            Action::ServerBatch(commands) => {
                let result = self.server_commands(commands);
                self.sim.drain();
                result
            }
            Action::Wait(duration) => self.wait(*duration),
            Action::Disconnect => {
                self.sim.break_stream();
                self.held_requests.clear();
                match self.remote.as_deref_mut() {
                    Some(remote) => remote.disconnect(),
                    None => Ok(()),
                }
            }
            Action::Connect => {
                self.connect();
                match self.remote.as_deref_mut() {
                    Some(remote) => remote.connect(),
                    None => Ok(()),
                }
            }
            Action::Expect(side, expectation) => self.expect(*side, expectation),
            Action::Deps(command) => {
                let result = self.deps_command(command);
                self.sim.drain();
                result
            }
            Action::ExpectDeps(expectation) => self.expect_deps(expectation),
            // A session scenario has a runner of its own (`session.rs`).
            Action::Session(_) | Action::ExpectSession(_) => {
                Err("a session step outside a `model: session` scenario".into())
            }
        };
        self.take_events();
        (None, outcome)
    }

    /// Moves the events of both sides from the stream into the runner's logs, noting the
    /// responses that await a verdict.
    pub(super) fn take_events(&mut self) {
        // The dependency manager takes every client event and gives the client its
        // commands, whose requests (and events) are taken in turn.
        for _ in 0..64 {
            let events = self.sim.take_client_events();
            if events.is_empty() {
                break;
            }
            for (at, event) in events {
                if let Some(deps) = self.deps.as_mut() {
                    deps.handle_event(at, &event);
                }
                self.log_client_event(event);
            }
            if !self.pump_deps() {
                break;
            }
            self.sim.drain();
        }
        for (_, event) in self.sim.take_server_events() {
            self.server_events.push(Logged {
                event,
                step: self.steps,
                consumed: false,
            });
        }
    }

    fn log_client_event(&mut self, event: ClientEvent) {
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
            step: self.steps,
            consumed: false,
        });
    }

    /// A `C->S` line: the client's oldest request matched, or the scenario's built; then
    /// delivered to the server, whose classification must agree with the tags.
    fn request(
        &mut self,
        pattern: &MessagePattern,
        tags: &[String],
    ) -> (Option<String>, Result<(), String>) {
        let events_before = self.server_events.len();
        let remote_client = self.remote_as(Side::Client).is_some();
        let request = if self.sim.client.is_some() || remote_client {
            let taken = if remote_client {
                let type_url = self.effective_type(pattern.type_url()).to_string();
                match self.receive_request_of(&type_url) {
                    Ok(taken) => taken,
                    Err(e) => return (None, Err(e)),
                }
            } else {
                self.sim.take_request().map(|(_, request)| request)
            };
            let Some(request) = taken else {
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
        if let Some(remote) = self.remote_as(Side::Server) {
            if let Err(e) = remote.send(Wire::Request(request.clone())) {
                return (Some(rendered), Err(e));
            }
        }
        self.sim.deliver_request(request);
        self.take_events();
        let type_url = self.effective_type(pattern.type_url()).to_string();
        let result = self.check_tags(&type_url, tags, events_before);
        (Some(rendered), result)
    }

    /// `S->C` lines (one, or several sharing a line): the server's oldest responses
    /// matched, or the scenario's built; then all delivered to the client before it is
    /// drained.
    fn responses(&mut self, patterns: &[MessagePattern]) -> (Option<String>, Result<(), String>) {
        let mut responses = Vec::with_capacity(patterns.len());
        let mut rendered = Vec::with_capacity(patterns.len());
        let remote_server = self.remote_as(Side::Server).is_some();
        for pattern in patterns {
            let response = if self.sim.models_server() || remote_server {
                let taken = if remote_server {
                    match self.receive_response(None) {
                        Ok(taken) => taken,
                        Err(e) => return (None, Err(e)),
                    }
                } else {
                    self.sim.take_response().map(|(_, response)| response)
                };
                let Some(response) = taken else {
                    let shown = (!rendered.is_empty()).then(|| rendered.join(" ; "));
                    return (
                        shown,
                        Err("expected the server to send this, it sent nothing".into()),
                    );
                };
                let shown = self.show(notation::response(&response), response.type_url());
                if let Err(e) = self.match_response(pattern, &response) {
                    rendered.push(shown);
                    return (Some(rendered.join(" ; ")), Err(e));
                }
                response
            } else {
                self.build_response(pattern)
            };
            rendered.push(self.show(notation::response(&response), response.type_url()));
            responses.push(response);
        }
        let delivered = self.deliver_responses(responses);
        (Some(rendered.join(" ; ")), delivered)
    }

    /// Delivers responses to the client (a real client too), remembering the latest nonce
    /// of each type.
    fn deliver_responses(&mut self, responses: Vec<Response>) -> Result<(), String> {
        for response in &responses {
            let type_url = self.effective_type(response.type_url()).to_string();
            self.latest_nonces
                .insert(type_url, response.nonce().to_string());
        }
        if let Some(remote) = self.remote_as(Side::Client) {
            for response in &responses {
                remote.send(Wire::Response(response.clone()))?;
            }
        }
        self.sim.deliver_responses(responses);
        self.take_events();
        Ok(())
    }

    /// The real client's next request of a type: one it sent earlier, held, or the next
    /// it sends, holding those of other types for their own lines (see `remote.rs`).
    fn receive_request_of(
        &mut self,
        type_url: &str,
    ) -> Result<Option<xds_sansio::message::Request>, String> {
        let is_wanted = |runner: &Self, r: &xds_sansio::message::Request| {
            type_url.is_empty() || runner.effective_type(r.type_url()) == type_url
        };
        if let Some(at) = self.held_requests.iter().position(|r| is_wanted(self, r)) {
            return Ok(Some(self.held_requests.remove(at)));
        }
        // Bounded: a client that keeps sending other types is shown, not waited out.
        for _ in 0..16 {
            match self.receive_request()? {
                Some(request) if is_wanted(self, &request) => return Ok(Some(request)),
                Some(request) => self.held_requests.push(request),
                None => break,
            }
        }
        if self.held_requests.is_empty() {
            return Ok(None);
        }
        let held: Vec<String> = self.held_requests.iter().map(notation::request).collect();
        Err(format!(
            "expected the client to send this, it sent only other types: {}",
            held.join("; ")
        ))
    }

    /// The real client's next request (a response from it is a harness error).
    fn receive_request(&mut self) -> Result<Option<xds_sansio::message::Request>, String> {
        let Some(remote) = self.remote_as(Side::Client) else {
            return Ok(None);
        };
        match remote.receive(None)? {
            Some(Wire::Request(request)) => Ok(Some(request)),
            Some(Wire::Response(_)) => Err("the real client sent a response".into()),
            None => Ok(None),
        }
    }

    /// The real server's next response, waiting at most `within` (`None`: its patience).
    fn receive_response(&mut self, within: Option<Duration>) -> Result<Option<Response>, String> {
        let Some(remote) = self.remote_as(Side::Server) else {
            return Ok(None);
        };
        match remote.receive(within)? {
            Some(Wire::Response(response)) => Ok(Some(response)),
            Some(Wire::Request(_)) => Err("the real server sent a request".into()),
            None => Ok(None),
        }
    }

    /// `expect server sends (..) within D` against a real server: every response it sends
    /// in `D` of real time matches, and there is at least one.
    fn sends_remote(
        &mut self,
        pattern: &MessagePattern,
        within: Duration,
    ) -> (Option<String>, Result<(), String>) {
        let mut rendered: Vec<String> = Vec::new();
        let mut left = within;
        let step = Duration::from_millis(50);
        while !left.is_zero() {
            let slice = left.min(step);
            left -= slice;
            let response = match self.receive_response(Some(slice)) {
                Ok(Some(response)) => response,
                Ok(None) => continue,
                Err(e) => return (None, Err(e)),
            };
            let shown = self.show(notation::response(&response), response.type_url());
            if let Err(e) = self.match_response(pattern, &response) {
                rendered.push(shown);
                return (Some(rendered.join(" ; ")), Err(e));
            }
            rendered.push(self.show(notation::response(&response), response.type_url()));
            if let Err(e) = self.deliver_responses(alloc::vec![response]) {
                return (Some(rendered.join(" ; ")), Err(e));
            }
        }
        self.take_events();
        if rendered.is_empty() {
            return (
                None,
                Err(format!("the server sent nothing within {within:?}")),
            );
        }
        (Some(rendered.join(" ; ")), Ok(()))
    }

    /// `expect server sends (..) within D`: every response the server sends while `D`
    /// passes matches the message, and there is at least one.
    pub(super) fn sends(
        &mut self,
        pattern: &MessagePattern,
        within: Duration,
    ) -> (Option<String>, Result<(), String>) {
        if !self.sim.models_server() {
            if self.remote_as(Side::Server).is_some() {
                return self.sends_remote(pattern, within);
            }
            return (None, Err("the model does not play the server".into()));
        }
        let until = self.sim.now() + within;
        let mut rendered: Vec<String> = Vec::new();
        loop {
            while let Some((_, response)) = self.sim.take_response() {
                let shown = self.show(notation::response(&response), response.type_url());
                if let Err(e) = self.match_response(pattern, &response) {
                    rendered.push(shown);
                    return (Some(rendered.join(" ; ")), Err(e));
                }
                rendered.push(self.show(notation::response(&response), response.type_url()));
                if let Err(e) = self.deliver_responses(alloc::vec![response]) {
                    return (Some(rendered.join(" ; ")), Err(e));
                }
            }
            let next = self.sim.next_timer().filter(|at| *at <= until);
            let Err(stuck) = self.sim.fire_timers_until(next.unwrap_or(until)) else {
                if next.is_none() {
                    break;
                }
                continue;
            };
            return (
                (!rendered.is_empty()).then(|| rendered.join(" ; ")),
                Err(stuck.to_string()),
            );
        }
        self.take_events();
        if rendered.is_empty() {
            return (
                None,
                Err(format!("the server sent nothing within {within:?}")),
            );
        }
        (Some(rendered.join(" ; ")), Ok(()))
    }

    /// A rendered message with the symbols bound so far in place of values.
    pub(super) fn show(&self, rendered: String, type_url: &str) -> String {
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

    /// A server line: its commands as store operations, applied as one revision.
    fn server_commands(&mut self, commands: &[ServerCommand]) -> Result<(), String> {
        let remote_server = self.remote_as(Side::Server).is_some();
        if !self.sim.models_server() && !remote_server {
            return Err("the model does not play the server".into());
        }
        let mut ops = Vec::new();
        for command in commands {
            match command {
                ServerCommand::Set(type_url, items) => {
                    for item in items {
                        let entry = self.entry_of(type_url, item);
                        ops.push(StoreOp::Set {
                            type_url: type_url.clone(),
                            entry,
                        });
                    }
                }
                ServerCommand::Remove(type_url, names) => {
                    ops.extend(names.iter().map(|name| StoreOp::Remove {
                        type_url: type_url.clone(),
                        name: name.clone(),
                    }));
                }
                ServerCommand::Publish(type_url) => ops.push(StoreOp::ServeType {
                    type_url: type_url.clone(),
                }),
                ServerCommand::Error { .. } | ServerCommand::ClearError(..) => {}
            }
        }
        let errors: Vec<&ServerCommand> = commands
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    ServerCommand::Error { .. } | ServerCommand::ClearError(..)
                )
            })
            .collect();
        if let Some(remote) = self.remote_as(Side::Server) {
            remote.publish_with_errors(&ops, &errors)?;
        }
        // The store a real server is given is mirrored here, for the server's view.
        self.sim.apply(ops).map_err(|e| e.to_string())?;
        // Errors are store calls of their own (`ResourceStore::set_error`), after the
        // line's operations.
        for error in errors.iter().filter_map(|c| super::timeline::error_of(c)) {
            match error {
                ErrorOp::Set {
                    type_url,
                    name,
                    status,
                } => {
                    self.sim
                        .set_error(&type_url, &name, status)
                        .map_err(|e| e.to_string())?;
                }
                ErrorOp::Clear { type_url, name } => {
                    self.sim.store.clear_error(&type_url, &name);
                }
            }
        }
        Ok(())
    }

    /// The store entry an item of `server set` stands for.
    fn entry_of(&mut self, type_url: &str, item: &Item) -> ResourceEntry {
        let body = self.body_for(type_url, item, "");
        let mut entry = ResourceEntry::new(item.name.clone(), body);
        if let Some(v) = &item.version {
            entry = entry.with_version(self.versions_of(type_url).input(v));
        }
        if let Some(ttl) = item.ttl {
            entry = entry.with_ttl(ttl);
        }
        if !item.aliases.is_empty() {
            entry = entry.with_aliases(item.aliases.clone());
        }
        entry
    }

    /// Advances time by `duration`, firing every deadline at its own time.
    fn wait(&mut self, duration: Duration) -> Result<(), String> {
        let until = self.sim.now() + duration;
        // The manager's deadlines (unsubscribe grace) fire at their own time, between the
        // stream's timers.
        for _ in 0..10_000 {
            let Some(at) = self
                .deps
                .as_ref()
                .and_then(|d| d.poll_timeout())
                .filter(|at| *at <= until)
            else {
                break;
            };
            self.sim
                .fire_timers_until(at)
                .map_err(|stuck| stuck.to_string())?;
            self.take_events();
            if let Some(deps) = self.deps.as_mut() {
                deps.handle_timeout(at);
            }
            self.pump_deps();
            self.sim.drain();
            self.take_events();
        }
        self.sim
            .fire_timers_until(until)
            .map_err(|stuck| stuck.to_string())?;
        match self.remote.as_deref_mut() {
            Some(remote) => remote.wait(duration),
            None => Ok(()),
        }
    }

    fn connect(&mut self) {
        self.first_request_sent = false;
        self.nonces = Symbols::default();
        self.latest_nonces.clear();
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
        left.extend(
            self.held_requests
                .iter()
                .map(|r| format!("C->S {}", notation::request(r))),
        );
        if let Some(remote) = self.remote.as_deref_mut() {
            match remote.quiet() {
                Ok(None) => {}
                Ok(Some(Wire::Request(r))) => left.push(format!("C->S {}", notation::request(&r))),
                Ok(Some(Wire::Response(r))) => {
                    left.push(format!("S->C {}", notation::response(&r)))
                }
                Err(e) => return Some(e),
            }
        }
        (!left.is_empty()).then(|| {
            format!(
                "messages the scenario does not account for: {}",
                left.join("; ")
            )
        })
    }
}

/// Which sides a line gives input to, the client's and the server's (an expectation gives
/// none, except `sends`, which lets time pass and delivers responses).
fn inputs_to(action: &Action) -> (bool, bool) {
    match action {
        Action::Message {
            direction: Direction::ClientToServer,
            ..
        }
        | Action::ServerBatch(_) => (false, true),
        Action::Message {
            direction: Direction::ServerToClient,
            ..
        }
        | Action::Responses(_)
        | Action::ClientBatch(_)
        | Action::Deps(_) => (true, false),
        Action::Wait(_)
        | Action::Disconnect
        | Action::Connect
        | Action::Expect(_, Expectation::Sends { .. }) => (true, true),
        Action::Expect(..)
        | Action::ExpectDeps(_)
        | Action::Session(_)
        | Action::ExpectSession(_) => (false, false),
    }
}
