//! Expectations: assertions on one side's events, cache or store, per-resource status, and
//! what it has left to send.
//!
//! Decisions:
//! - `expect ... event` consumes the first matching event not consumed yet, so two lines
//!   expect two events; `no-event` looks at the events no line has consumed, however old;
//!   `no-new-event` at every event since the last input step, consumed or not.
//! - A protocol error or an ignored part of a request is named like a resource
//!   (`protocol-error node-changed`, `ignored CDS late-initial-resource-versions`).
//! - Event details (`version=X`, `nonce=A`) are symbols; a candidate event that does not
//!   match leaves no binding behind.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::matching::Seen;
use super::symbols::Symbols;
use super::{Logged, Runner};
use crate::script::ast::*;
use crate::transcript::notation;
use xds_sansio::client::{ClientEvent, RemovalReason, ResourceState};
use xds_sansio::server::{Ignored, ProtocolError, ServerEvent};

/// What an expectation can say about an event, whichever side emitted it.
struct Facts<'a> {
    kind: &'static str,
    /// `None` for events about the stream rather than a type.
    type_url: Option<&'a str>,
    names: Vec<&'a str>,
    version: Option<&'a str>,
    nonce: Option<&'a str>,
    reason: Option<&'static str>,
    /// A `google.rpc.Code` (`resource-error`).
    code: Option<i32>,
}

impl<'a> Facts<'a> {
    fn new(kind: &'static str, type_url: Option<&'a str>) -> Facts<'a> {
        Facts {
            kind,
            type_url,
            names: Vec::new(),
            version: None,
            nonce: None,
            reason: None,
            code: None,
        }
    }

    fn named(mut self, name: &'a str) -> Facts<'a> {
        self.names.push(name);
        self
    }

    fn version(mut self, version: &'a str) -> Facts<'a> {
        self.version = Some(version);
        self
    }

    fn nonce(mut self, nonce: &'a str) -> Facts<'a> {
        self.nonce = Some(nonce);
        self
    }

    /// Whether the event is the one described, binding the symbols of its details.
    fn matches(
        &self,
        kind: &str,
        type_url: &str,
        name: &Option<String>,
        details: &[(String, String)],
        versions: &mut Symbols,
        nonces: &mut Symbols,
    ) -> bool {
        if self.kind != kind || self.type_url.is_some_and(|t| t != type_url) {
            return false;
        }
        if name
            .as_ref()
            .is_some_and(|n| !self.names.contains(&n.as_str()))
        {
            return false;
        }
        details.iter().all(|(key, value)| match key.as_str() {
            "version" => self
                .version
                .is_some_and(|v| versions.check("version", value, v).is_ok()),
            "nonce" => self
                .nonce
                .is_some_and(|v| nonces.check("nonce", value, v).is_ok()),
            "reason" => self.reason == Some(value.as_str()),
            "code" => self.code.is_some() && self.code == notation::code_of(value),
            _ => false,
        })
    }
}

fn reason_name(reason: RemovalReason) -> &'static str {
    match reason {
        RemovalReason::ServerRemoved => "server-removed",
        RemovalReason::AbsentFromResponse => "absent",
        RemovalReason::Unsubscribed => "unsubscribed",
        RemovalReason::Expired => "expired",
    }
}

fn client_facts(event: &ClientEvent) -> Facts<'_> {
    match event {
        ClientEvent::Upserted {
            type_url,
            name,
            version,
            ..
        } => Facts::new("upserted", Some(type_url.as_str()))
            .named(name.as_str())
            .version(version.as_str()),
        ClientEvent::Removed {
            type_url,
            name,
            reason,
        } => Facts {
            reason: Some(reason_name(*reason)),
            ..Facts::new("removed", Some(type_url.as_str())).named(name.as_str())
        },
        ClientEvent::DoesNotExist { type_url, name } => {
            Facts::new("does-not-exist", Some(type_url.as_str())).named(name.as_str())
        }
        // The runner's simulation hands batches out as the events above.
        ClientEvent::Changed { type_url, .. } => Facts::new("changed", Some(type_url.as_str())),
        ClientEvent::DeletionIgnored { type_url, name } => {
            Facts::new("deletion-ignored", Some(type_url.as_str())).named(name.as_str())
        }
        ClientEvent::ResourceError {
            type_url,
            name,
            code,
            ..
        } => Facts {
            code: Some(*code),
            ..Facts::new("resource-error", Some(type_url.as_str())).named(name.as_str())
        },
        ClientEvent::Acked {
            type_url,
            version,
            nonce,
        } => Facts::new("acked", Some(type_url.as_str()))
            .version(version.as_str())
            .nonce(nonce.as_str()),
        ClientEvent::Nacked {
            type_url,
            version,
            nonce,
            ..
        } => Facts::new("nacked", Some(type_url.as_str()))
            .version(version.as_str())
            .nonce(nonce.as_str()),
        ClientEvent::Ready { type_url } => Facts::new("ready", Some(type_url.as_str())),
        ClientEvent::ValidationNeeded {
            type_url, version, ..
        } => Facts::new("validation-needed", Some(type_url.as_str())).version(version.as_str()),
        ClientEvent::Ignored {
            type_url, nonce, ..
        } => Facts::new("ignored", Some(type_url.as_str())).nonce(nonce.as_str()),
        // An event of a newer core than this runner: matches no expectation.
        _ => Facts::new("unknown", None),
    }
}

/// The notation of a protocol error: its variant in kebab case.
fn protocol_error_name(error: &ProtocolError) -> &'static str {
    match error {
        ProtocolError::NodeMissing => "node-missing",
        ProtocolError::NodeChanged => "node-changed",
        ProtocolError::TypeUrlMissing => "type-url-missing",
        ProtocolError::WrongTypeUrl { .. } => "wrong-type-url",
        ProtocolError::WrongVariant { .. } => "wrong-variant",
        ProtocolError::LimitExceeded(_) => "limit-exceeded",
        ProtocolError::ChangeLogOutrun { .. } => "change-log-outrun",
        _ => "unknown",
    }
}

fn ignored_name(ignored: Ignored) -> &'static str {
    match ignored {
        Ignored::LateInitialResourceVersions => "late-initial-resource-versions",
        Ignored::ErrorWithoutResponse => "error-without-response",
        _ => "unknown",
    }
}

fn typed<'a>(kind: &'static str, type_url: &'a str) -> Facts<'a> {
    Facts::new(kind, Some(type_url))
}

fn server_facts(event: &ServerEvent) -> Facts<'_> {
    match event {
        ServerEvent::NodeIdentified(_) => Facts::new("node", None),
        ServerEvent::Subscribed { type_url, names } => Facts {
            names: names.iter().map(|name| &**name).collect(),
            ..typed("subscribed", type_url)
        },
        ServerEvent::Unsubscribed { type_url, names } => Facts {
            names: names.iter().map(|name| &**name).collect(),
            ..typed("unsubscribed", type_url)
        },
        ServerEvent::Acked {
            type_url,
            nonce,
            version,
        } => typed("acked", type_url).version(version).nonce(nonce),
        ServerEvent::Nacked {
            type_url,
            nonce,
            version,
            ..
        } => typed("nacked", type_url).version(version).nonce(nonce),
        ServerEvent::StaleRequest { type_url, nonce } => typed("stale", type_url).nonce(nonce),
        ServerEvent::Held { type_url } => typed("held", type_url),
        ServerEvent::Ignored { type_url, what } => {
            typed("ignored", type_url).named(ignored_name(*what))
        }
        ServerEvent::ProtocolError(error) => {
            Facts::new("protocol-error", None).named(protocol_error_name(error))
        }
        _ => Facts::new("unknown", None),
    }
}

fn describe_client_event(event: &ClientEvent) -> String {
    let facts = client_facts(event);
    let mut out = format!(
        "{} {}",
        facts.kind,
        notation::type_name(facts.type_url.unwrap_or(""))
    );
    for name in &facts.names {
        out.push(' ');
        out.push_str(name);
    }
    match event {
        ClientEvent::Removed { reason, .. } => {
            out.push_str(&format!(" reason={}", reason_name(*reason)))
        }
        ClientEvent::ResourceError { code, .. } => out.push_str(&format!(" code={code}")),
        ClientEvent::Upserted { version, .. }
        | ClientEvent::Acked { version, .. }
        | ClientEvent::Nacked { version, .. } => {
            out.push_str(&format!(" version={}", version.as_str()))
        }
        _ => {}
    }
    out
}

fn state_name(state: Option<ResourceState>) -> &'static str {
    match state {
        None => "none",
        Some(ResourceState::Requested) => "requested",
        Some(ResourceState::DoesNotExist) => "does-not-exist",
        Some(ResourceState::Acked) => "acked",
        Some(ResourceState::Nacked) => "nacked",
        Some(ResourceState::Expired) => "expired",
        Some(ResourceState::ReceivedError) => "received-error",
        Some(ResourceState::TimedOut) => "timed-out",
    }
}

/// The first event not consumed yet that `matches`, trying each with a checkpoint of the
/// symbols and rolling back on a miss.
fn find<E>(
    events: &[Logged<E>],
    versions: &mut Symbols,
    nonces: &mut Symbols,
    mut matches: impl FnMut(&E, &mut Symbols, &mut Symbols) -> bool,
) -> Option<usize> {
    events.iter().position(|logged| {
        if logged.consumed {
            return false;
        }
        versions.checkpoint();
        nonces.checkpoint();
        let found = matches(&logged.event, versions, nonces);
        if !found {
            versions.rollback();
            nonces.rollback();
        }
        found
    })
}

fn pending<E>(events: &[Logged<E>]) -> impl Iterator<Item = &E> {
    in_scope(events, EventScope::Pending, 0)
}

/// The events a `no-event` (pending) or `no-new-event` (since the side's last input step)
/// looks at.
fn in_scope<E>(
    events: &[Logged<E>],
    scope: EventScope,
    last_input: usize,
) -> impl Iterator<Item = &E> {
    events
        .iter()
        .filter(move |l| match scope {
            EventScope::Pending => !l.consumed,
            EventScope::SinceLastInput => l.step >= last_input,
        })
        .map(|l| &l.event)
}

impl Runner<'_> {
    pub(super) fn expect(&mut self, side: Side, expectation: &Expectation) -> Result<(), String> {
        self.sim.drain();
        self.take_events();
        if self.remote_as(side).is_some() {
            return self.expect_remote(side, expectation);
        }
        match (side, expectation) {
            (Side::Client, Expectation::Quiet) => match self.sim.requests().next() {
                None => Ok(()),
                Some(r) => Err(format!(
                    "the client still has {} to send",
                    notation::request(r)
                )),
            },
            (Side::Server, Expectation::Quiet) => match self.sim.responses().next() {
                None => Ok(()),
                Some(r) => Err(format!(
                    "the server still has {} to send",
                    notation::response(r)
                )),
            },
            (
                side,
                Expectation::Event {
                    kind,
                    type_url,
                    name,
                    details,
                },
            ) => self.expect_event(side, kind, type_url, name, details),
            (
                side,
                Expectation::NoEvent {
                    kind,
                    type_url,
                    name,
                    scope,
                },
            ) => self.expect_no_event(side, kind, type_url, name, *scope),
            (_, Expectation::Sends { message, within }) => self.sends(message, *within).1,
            (Side::Client, Expectation::Cache(type_url, items)) => {
                let client = self
                    .sim
                    .client
                    .as_ref()
                    .ok_or("the model does not play the client")?;
                let seen: Vec<(String, Seen)> = client
                    .resource_names(type_url)
                    .into_iter()
                    .filter_map(|name| {
                        let cached = client.resource(type_url, name.as_str())?;
                        Some((
                            name.as_str().to_string(),
                            Seen {
                                version: Some(cached.version().to_string()),
                                body: Some(cached.body_bytes()),
                                ttl: None,
                                wrapped: None,
                                aliases: cached
                                    .aliases()
                                    .iter()
                                    .map(|a| a.as_str().to_string())
                                    .collect(),
                            },
                        ))
                    })
                    .collect();
                self.match_items(type_url, items, seen, "")
            }
            (Side::Server, Expectation::Cache(type_url, items)) => {
                let seen: Vec<(String, Seen)> = self
                    .sim
                    .store
                    .iter(type_url)
                    .map(|r| {
                        (
                            r.name().to_string(),
                            Seen {
                                version: Some(r.version().to_string()),
                                body: Some(r.body().clone()),
                                ttl: None,
                                wrapped: None,
                                aliases: r.aliases().to_vec(),
                            },
                        )
                    })
                    .collect();
                self.match_items(type_url, items, seen, "")
            }
            (Side::Client, Expectation::Status(type_url, name, expected)) => {
                let client = self
                    .sim
                    .client
                    .as_ref()
                    .ok_or("the model does not play the client")?;
                let actual = state_name(client.status(type_url, name).map(|s| s.state));
                if actual == expected {
                    Ok(())
                } else {
                    Err(format!(
                        "status of {name}: expected {expected}, got {actual}"
                    ))
                }
            }
            (Side::Server, Expectation::Status(..)) => Err("status is a client expectation".into()),
            (Side::Client, Expectation::ControlPlane(type_url, expected)) => {
                let client = self
                    .sim
                    .client
                    .as_ref()
                    .ok_or("the model does not play the client")?;
                let actual = client.control_plane(type_url).unwrap_or("-");
                if actual == expected {
                    Ok(())
                } else {
                    Err(format!(
                        "control plane of {}: expected {expected}, got {actual}",
                        notation::type_name(type_url)
                    ))
                }
            }
            (Side::Server, Expectation::ControlPlane(..)) => {
                Err("control-plane is a client expectation".into())
            }
        }
    }

    /// An expectation on the side a real implementation plays: its silence and what it
    /// sends can be observed, its state cannot (the line passes with a note).
    fn expect_remote(&mut self, side: Side, expectation: &Expectation) -> Result<(), String> {
        let who = match side {
            Side::Client => "client",
            Side::Server => "server",
        };
        match expectation {
            Expectation::Quiet => {
                let Some(remote) = self.remote_as(side) else {
                    return Ok(());
                };
                match remote.quiet()? {
                    None => Ok(()),
                    Some(super::Wire::Request(r)) => {
                        Err(format!("the real {who} sent {}", notation::request(&r)))
                    }
                    Some(super::Wire::Response(r)) => {
                        Err(format!("the real {who} sent {}", notation::response(&r)))
                    }
                }
            }
            Expectation::Sends { message, within } => self.sends(message, *within).1,
            _ => {
                self.note = Some(format!(
                    "not checked: the real {who}'s state cannot be observed"
                ));
                Ok(())
            }
        }
    }

    fn expect_event(
        &mut self,
        side: Side,
        kind: &str,
        type_url: &str,
        name: &Option<String>,
        details: &[(String, String)],
    ) -> Result<(), String> {
        let versions = self.versions.entry(type_url.into()).or_default();
        let nonces = &mut self.nonces;
        match side {
            Side::Client => {
                let at = find(&self.client_events, versions, nonces, |e, v, n| {
                    client_facts(e).matches(kind, type_url, name, details, v, n)
                });
                match at.and_then(|i| self.client_events.get_mut(i)) {
                    Some(logged) => {
                        logged.consumed = true;
                        Ok(())
                    }
                    None => Err(format!(
                        "no such client event; pending: [{}]",
                        pending(&self.client_events)
                            .map(describe_client_event)
                            .collect::<Vec<_>>()
                            .join("; ")
                    )),
                }
            }
            Side::Server => {
                let at = find(&self.server_events, versions, nonces, |e, v, n| {
                    server_facts(e).matches(kind, type_url, name, details, v, n)
                });
                match at.and_then(|i| self.server_events.get_mut(i)) {
                    Some(logged) => {
                        logged.consumed = true;
                        Ok(())
                    }
                    None => Err(format!(
                        "no such server event; pending: {:?}",
                        pending(&self.server_events).collect::<Vec<_>>()
                    )),
                }
            }
        }
    }

    fn expect_no_event(
        &mut self,
        side: Side,
        kind: &str,
        type_url: &str,
        name: &Option<String>,
        scope: EventScope,
    ) -> Result<(), String> {
        // No details: nothing is bound, whatever the symbols.
        let (mut versions, mut nonces) = (Symbols::default(), Symbols::default());
        let mut unexpected =
            |facts: Facts<'_>| facts.matches(kind, type_url, name, &[], &mut versions, &mut nonces);
        match side {
            Side::Client => {
                match in_scope(&self.client_events, scope, self.last_input.client)
                    .find(|e| unexpected(client_facts(e)))
                {
                    None => Ok(()),
                    Some(e) => Err(format!(
                        "unexpected client event {}",
                        describe_client_event(e)
                    )),
                }
            }
            Side::Server => {
                match in_scope(&self.server_events, scope, self.last_input.server)
                    .find(|e| unexpected(server_facts(e)))
                {
                    None => Ok(()),
                    Some(e) => Err(format!("unexpected server event {e:?}")),
                }
            }
        }
    }
}
