//! Replaying a `model: session` scenario: the client's multi-server session
//! ([`Session`]) is the model, and the scenario plays every management server, each with
//! its own stream, in virtual time.
//!
//! Decisions:
//! - Each server keeps its own symbols (versions, nonces), as a single-stream scenario
//!   does: its messages are built and matched by the same code (`build`, `matching`), and
//!   its nonces start afresh when its stream comes up.
//! - A server is connected only when the session asked for it (`up a` needs a pending
//!   connection) and only until `down a`; responses go to the stream that is up.
//! - Connections, closes and events are consumed by the lines that match them, oldest
//!   first; requests must all be taken by `a C->S` lines, so a request no line accounts for
//!   fails the scenario at its end, as in a single-stream scenario.
//! - `wait` fires every deadline the session has on the way, in order, at its own time:
//!   a backoff delay ends when it ends, not when the wait does.
//! - Scenarios run over ADS: one stream per server, so `up a` is unambiguous.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use super::symbols::Symbols;
use super::{Logged, Report, Runner};
use crate::script::ast::*;
use crate::script::parse::resolve_type;
use crate::transcript::notation;
use xds_sansio::client::session::{
    BootstrapServers, ServerEntry, ServerId, Session, SessionCommand, SessionConfig, SessionEvent,
    StreamKey, WatchError, WatchEvent,
};
use xds_sansio::client::ClientConfig;
use xds_sansio::message::Request;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::time::Instant;

/// One management server the scenario plays.
struct Played {
    /// Its symbols: versions and nonces, built and matched as on a single stream.
    symbols: Runner<'static>,
    /// The stream the session asked for: its slot and number.
    stream: Option<(StreamKey, u64)>,
    open: bool,
    /// Requests the session sent on it that no line took yet.
    requests: VecDeque<Request>,
}

struct SessionRunner {
    session: Session,
    now: Instant,
    servers: BTreeMap<String, Played>,
    names: BTreeMap<ServerId, String>,
    connects: Vec<Logged<String>>,
    closes: Vec<Logged<String>>,
    events: Vec<Logged<SessionEvent>>,
    steps: usize,
}

/// Replays a `model: session` scenario.
pub(super) fn run(scenario: &Scenario) -> Report {
    let mut lines = Vec::new();
    let mut trailing = None;
    match SessionRunner::new(scenario) {
        Err(e) => trailing = Some(e),
        Ok(mut runner) => {
            lines = super::play_steps(&scenario.steps, |action| {
                let (actual, result) = runner.step(action);
                (actual, result, None)
            });
            if lines.iter().all(|l| l.result.is_ok()) {
                trailing = runner.leftovers();
            }
        }
    }
    Report {
        title: scenario.title.clone(),
        lines,
        trailing,
        client_view: Vec::new(),
        server_view: Vec::new(),
    }
}

/// Each client's configuration from the scenario's options.
fn client_options(options: &Options) -> impl Fn(&mut ClientConfig) + Send + Sync + 'static {
    let options = options.clone();
    move |config: &mut ClientConfig| super::configure_client(&options, config)
}

impl SessionRunner {
    fn new(scenario: &Scenario) -> Result<SessionRunner, String> {
        if scenario.transport != TransportSpec::Ads {
            return Err("a session scenario runs over ADS (one stream per server)".into());
        }
        let setup = &scenario.session;
        if setup.servers.is_empty() {
            return Err("a session scenario needs a `servers:` header".into());
        }
        let server = |name: &String| {
            let features = setup
                .features
                .iter()
                .filter(|(n, _)| n == name)
                .flat_map(|(_, f)| f.iter().cloned())
                .collect();
            let replicas = setup
                .replicas
                .iter()
                .filter(|(n, _)| n == name)
                .flat_map(|(_, r)| r.iter().cloned())
                .collect();
            ServerEntry::new(name.clone(), "insecure")
                .with_features(features)
                .with_replicas(replicas)
        };
        let mut bootstrap = BootstrapServers::new(setup.servers.iter().map(server).collect());
        for (authority, servers) in &setup.authorities {
            bootstrap =
                bootstrap.with_authority(authority.clone(), servers.iter().map(server).collect());
        }
        let node = Node {
            id: "client".into(),
            ..Node::default()
        };
        let seed = scenario.options.backoff_seed.unwrap_or(0);
        let mut config = SessionConfig::new(scenario.variant, node, seed);
        config.client_config = Some(Arc::new(client_options(&scenario.options)));
        if let Some(grace) = scenario.options.deps_grace {
            config.deps.unsubscribe_grace = grace;
        }
        let session = Session::new(bootstrap, config);
        let mut servers = BTreeMap::new();
        let mut names = BTreeMap::new();
        for id in session.server_ids() {
            let Some(name) = session.server(id).map(|s| s.server_uri.clone()) else {
                continue;
            };
            if servers.contains_key(&name) {
                return Err(format!("server {name} is listed with two sets of features"));
            }
            names.insert(id, name.clone());
            servers.insert(
                name,
                Played {
                    symbols: Runner::new(scenario, None),
                    stream: None,
                    open: false,
                    requests: VecDeque::new(),
                },
            );
        }
        Ok(SessionRunner {
            session,
            now: Instant::ZERO,
            servers,
            names,
            connects: Vec::new(),
            closes: Vec::new(),
            events: Vec::new(),
            steps: 0,
        })
    }

    fn played(&mut self, name: &str) -> Result<&mut Played, String> {
        self.servers
            .get_mut(name)
            .ok_or_else(|| format!("no server {name:?} in the scenario's servers"))
    }

    fn name_of(&self, id: ServerId) -> String {
        self.names.get(&id).cloned().unwrap_or_default()
    }

    fn step(&mut self, action: &Action) -> (Option<String>, Result<(), String>) {
        self.steps += 1;
        let outcome = match action {
            Action::Session(SessionStep::Message {
                server,
                direction: Direction::ServerToClient,
                message,
            }) => self.response(server, message),
            Action::Session(SessionStep::Message {
                server,
                direction: Direction::ClientToServer,
                message,
            }) => self.request(server, message),
            Action::Session(step) => (None, self.command(step)),
            Action::Wait(duration) => (None, {
                self.wait(*duration);
                Ok(())
            }),
            Action::ExpectSession(expectation) => (None, self.expect(expectation)),
            _ => (
                None,
                Err("not a step of a session scenario (session, up, down, a C->S, a S->C, wait, expect session)".into()),
            ),
        };
        self.drain();
        outcome
    }

    /// Takes what the session asks and tells.
    fn drain(&mut self) {
        let step = self.steps;
        while let Some(command) = self.session.poll_command() {
            match command {
                SessionCommand::Connect {
                    key,
                    stream,
                    address,
                    ..
                } => {
                    let name = self.name_of(key.server);
                    if let Some(played) = self.servers.get_mut(&name) {
                        played.stream = Some((key, stream));
                        played.open = false;
                    }
                    // A server with replicas says which one (`a@ADDRESS`).
                    let has_replicas = self
                        .session
                        .server(key.server)
                        .is_some_and(|s| !s.replicas.is_empty());
                    let shown = if has_replicas {
                        format!("{name}@{address}")
                    } else {
                        name
                    };
                    self.connects.push(logged(shown, step));
                }
                SessionCommand::Send {
                    key,
                    stream,
                    request,
                } => {
                    let name = self.name_of(key.server);
                    if let Some(played) = self.servers.get_mut(&name) {
                        if played.stream == Some((key, stream)) {
                            played.requests.push_back(request);
                        }
                    }
                }
                SessionCommand::Close { key, stream } => {
                    let name = self.name_of(key.server);
                    if let Some(played) = self.servers.get_mut(&name) {
                        if played.stream == Some((key, stream)) {
                            played.stream = None;
                            played.open = false;
                        }
                    }
                    self.closes.push(logged(name, step));
                }
                // A command of a newer core than this runner knows: not played.
                _ => {}
            }
        }
        while let Some(event) = self.session.poll_event() {
            self.events.push(logged(event, step));
        }
    }

    fn command(&mut self, step: &SessionStep) -> Result<(), String> {
        let now = self.now;
        match step {
            SessionStep::Watch { id, type_url, name } => self
                .session
                .watch(now, *id, type_url, name.as_deref())
                .map_err(|e| format!("watch refused: {e}")),
            SessionStep::Unwatch(id) => {
                self.session.unwatch(now, *id);
                Ok(())
            }
            SessionStep::Up(name) => {
                let played = self.played(name)?;
                let (key, stream) = match (played.stream, played.open) {
                    (Some(s), false) => s,
                    (Some(_), true) => return Err(format!("{name} is up already")),
                    (None, _) => {
                        return Err(format!("the session asked for no connection to {name}"))
                    }
                };
                played.open = true;
                // A new stream: its nonces start afresh (nonces belong to one stream).
                played.symbols.first_request_sent = false;
                played.symbols.nonces = Symbols::default();
                played.symbols.latest_nonces.clear();
                self.session.handle_connected(now, key, stream);
                Ok(())
            }
            SessionStep::Down(name, why) => {
                let played = self.played(name)?;
                let Some((key, stream)) = played.stream.take() else {
                    return Err(format!("{name} has no connection to lose"));
                };
                played.open = false;
                self.session.handle_ended(now, key, stream, why);
                Ok(())
            }
            SessionStep::Message { .. } => Ok(()),
        }
    }

    /// `a S->C (..)`: built from the line, delivered on `a`'s stream.
    fn response(
        &mut self,
        name: &str,
        pattern: &MessagePattern,
    ) -> (Option<String>, Result<(), String>) {
        let now = self.now;
        let played = match self.played(name) {
            Ok(played) => played,
            Err(e) => return (None, Err(e)),
        };
        let Some((key, stream)) = played.stream.filter(|_| played.open) else {
            return (None, Err(format!("{name} is not up")));
        };
        let response = played.symbols.build_response(pattern);
        let type_url = response.type_url().to_string();
        played
            .symbols
            .latest_nonces
            .insert(type_url.clone(), response.nonce().to_string());
        let shown = played
            .symbols
            .show(notation::response(&response), &type_url);
        self.session.handle_response(now, key, stream, response);
        (Some(shown), Ok(()))
    }

    /// `a C->S (..)`: the oldest request the session sent on `a` that no line took.
    fn request(
        &mut self,
        name: &str,
        pattern: &MessagePattern,
    ) -> (Option<String>, Result<(), String>) {
        let played = match self.played(name) {
            Ok(played) => played,
            Err(e) => return (None, Err(e)),
        };
        let Some(request) = played.requests.pop_front() else {
            return (
                None,
                Err(format!(
                    "expected the session to send this to {name}, it sent nothing"
                )),
            );
        };
        let shown = played
            .symbols
            .show(notation::request(&request), request.type_url());
        let result = played.symbols.match_request(pattern, &request);
        (Some(shown), result)
    }

    /// Lets `duration` pass, firing each deadline at its own time.
    fn wait(&mut self, duration: Duration) {
        let target = self.now.saturating_add(duration);
        for _ in 0..100_000 {
            match self.session.poll_timeout() {
                Some(at) if at <= target => {
                    self.now = self.now.max(at);
                    self.session.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
        self.now = target;
    }

    fn expect(&mut self, expectation: &SessionExpectation) -> Result<(), String> {
        match expectation {
            SessionExpectation::Connect(name) => take(&mut self.connects, |n| n == name)
                .ok_or_else(|| {
                    format!(
                        "the session asked for no connection to {name} (asked: {})",
                        pending(&self.connects)
                    )
                }),
            SessionExpectation::Close(name) => {
                take(&mut self.closes, |n| n == name).ok_or_else(|| {
                    format!(
                        "the session closed no stream to {name} (closed: {})",
                        pending(&self.closes)
                    )
                })
            }
            SessionExpectation::NoConnect => match self.connects.iter().any(|l| !l.consumed) {
                false => Ok(()),
                true => Err(format!("the session asked for {}", pending(&self.connects))),
            },
            SessionExpectation::Event(kind, args) => {
                let names = self.names.clone();
                let found = take(&mut self.events, |event| {
                    event_matches(event, kind, args, &names)
                });
                found.ok_or_else(|| {
                    format!(
                        "no {kind} {} event (events: {})",
                        args.join(" "),
                        self.shown_events()
                    )
                })
            }
            SessionExpectation::NoEvent(kind) => {
                let hit = self
                    .events
                    .iter()
                    .any(|l| !l.consumed && kind_of_event(&l.event) == kind);
                match hit {
                    false => Ok(()),
                    true => Err(format!("a {kind} event: {}", self.shown_events())),
                }
            }
            SessionExpectation::Watch {
                id,
                kind,
                name,
                details,
            } => {
                let found = take(&mut self.events, |event| match event {
                    SessionEvent::Watch { id: got, event } if got == id => {
                        watch_matches(event, kind, name.as_deref(), details)
                    }
                    _ => false,
                });
                found.ok_or_else(|| {
                    format!(
                        "watch {id} was not told {kind} {} (events: {})",
                        name.as_deref().unwrap_or(""),
                        self.shown_events()
                    )
                })
            }
            SessionExpectation::NoWatchEvent(id) => {
                let hit = self.events.iter().any(|l| {
                    !l.consumed
                        && matches!(&l.event, SessionEvent::Watch { id: got, .. } if got == id)
                });
                match hit {
                    false => Ok(()),
                    true => Err(format!(
                        "watch {id} was told something: {}",
                        self.shown_events()
                    )),
                }
            }
            SessionExpectation::InUse(authority, expected) => {
                let authority = if authority == "-" {
                    ""
                } else {
                    authority.as_str()
                };
                let in_use: Vec<String> = self
                    .session
                    .in_use(authority)
                    .ok_or_else(|| format!("no authority {authority:?}"))?
                    .into_iter()
                    .map(|id| self.name_of(id))
                    .collect();
                if in_use == *expected {
                    Ok(())
                } else {
                    Err(format!("in use: {{{}}}", in_use.join(",")))
                }
            }
            SessionExpectation::Quiet => match self.leftovers() {
                None => Ok(()),
                Some(left) => Err(left),
            },
        }
    }

    fn shown_events(&self) -> String {
        let shown: Vec<String> = self
            .events
            .iter()
            .filter(|l| !l.consumed)
            .map(|l| format!("{:?}", l.event))
            .collect();
        if shown.is_empty() {
            "none".into()
        } else {
            shown.join("; ")
        }
    }

    /// The requests no line took.
    fn leftovers(&mut self) -> Option<String> {
        let mut left = Vec::new();
        for (name, played) in &self.servers {
            for request in &played.requests {
                let shown = played
                    .symbols
                    .show(notation::request(request), request.type_url());
                left.push(format!("{name} C->S {shown}"));
            }
        }
        (!left.is_empty()).then(|| format!("sent but no line took it: {}", left.join(", ")))
    }
}

fn logged<E>(event: E, step: usize) -> Logged<E> {
    Logged {
        event,
        step,
        consumed: false,
    }
}

/// Consumes the oldest unconsumed entry that matches.
fn take<E>(log: &mut [Logged<E>], mut matches: impl FnMut(&E) -> bool) -> Option<()> {
    let hit = log.iter_mut().find(|l| !l.consumed && matches(&l.event))?;
    hit.consumed = true;
    Some(())
}

fn pending(log: &[Logged<String>]) -> String {
    let names: Vec<&str> = log
        .iter()
        .filter(|l| !l.consumed)
        .map(|l| l.event.as_str())
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn kind_of_event(event: &SessionEvent) -> &'static str {
    match event {
        SessionEvent::Watch { .. } => "watch",
        SessionEvent::Config { .. } => "config",
        SessionEvent::StreamFailed { .. } => "stream-failed",
        SessionEvent::StreamEnded { .. } => "stream-ended",
        SessionEvent::FellBack { .. } => "fell-back",
        SessionEvent::Reverted { .. } => "reverted",
        SessionEvent::DeletionIgnored { .. } => "deletion-ignored",
        _ => "unknown",
    }
}

/// `fell-back AUTHORITY FROM TO`, `reverted AUTHORITY TO`, `stream-failed SERVER`,
/// `stream-ended SERVER`, `deletion-ignored TYPE NAME`: the arguments given are checked.
fn event_matches(
    event: &SessionEvent,
    kind: &str,
    args: &[String],
    names: &BTreeMap<ServerId, String>,
) -> bool {
    if kind_of_event(event) != kind {
        return false;
    }
    let name = |id: &ServerId| names.get(id).cloned().unwrap_or_default();
    let authority = |a: &str| {
        if a.is_empty() {
            "-".to_string()
        } else {
            a.to_string()
        }
    };
    let actual: Vec<String> = match event {
        SessionEvent::FellBack {
            authority: a,
            from,
            to,
        } => alloc::vec![authority(a), name(from), name(to)],
        SessionEvent::Reverted { authority: a, to } => alloc::vec![authority(a), name(to)],
        SessionEvent::StreamFailed { key, .. } | SessionEvent::StreamEnded { key, .. } => {
            alloc::vec![name(&key.server)]
        }
        SessionEvent::DeletionIgnored { type_url, name } => {
            alloc::vec![type_url.to_string(), name.to_string()]
        }
        _ => Vec::new(),
    };
    args.iter().enumerate().all(|(i, arg)| {
        let arg = match (kind, i) {
            ("deletion-ignored", 0) => resolve_type(arg).unwrap_or_else(|| arg.clone()),
            _ => arg.clone(),
        };
        actual.get(i) == Some(&arg)
    })
}

fn watch_matches(
    event: &WatchEvent,
    kind: &str,
    name: Option<&str>,
    details: &[(String, String)],
) -> bool {
    let named = |got: Option<&str>| name.is_none_or(|n| got == Some(n));
    let version_ok = |got: &str| details.iter().all(|(k, v)| k != "version" || v == got);
    let code_ok = |got: i32| {
        details
            .iter()
            .all(|(k, v)| k != "status" || v.parse::<i32>() == Ok(got))
    };
    match (kind, event) {
        (
            "changed",
            WatchEvent::Changed {
                name: n, version, ..
            },
        ) => named(Some(n.as_str())) && version_ok(version.as_str()),
        ("does-not-exist", WatchEvent::DoesNotExist { name: n }) => named(Some(n.as_str())),
        (
            "unreachable",
            WatchEvent::Error {
                name: n,
                error: WatchError::Unreachable { .. },
            },
        ) => named(n.as_deref()),
        (
            "rejected",
            WatchEvent::Error {
                name: n,
                error: WatchError::Rejected { version, .. },
            },
        ) => named(n.as_deref()) && version_ok(version.as_str()),
        (
            "server-error",
            WatchEvent::Error {
                name: n,
                error: WatchError::Server { .. },
            },
        ) => named(n.as_deref()),
        (
            "refused",
            WatchEvent::Error {
                name: n,
                error: WatchError::Refused { code, .. },
            },
        ) => named(n.as_deref()) && code_ok(*code),
        (
            "protocol",
            WatchEvent::Error {
                name: n,
                error: WatchError::Protocol { code, .. },
            },
        ) => named(n.as_deref()) && code_ok(*code),
        ("reachable", WatchEvent::Reachable { .. }) => name.is_none(),
        _ => false,
    }
}
