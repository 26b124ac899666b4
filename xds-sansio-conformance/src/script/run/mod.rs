//! Replaying a scenario through the model: the client state machine, the server state
//! machine, or both, on a simulated stream ([`Sim`]), with the scenario's lines as inputs
//! and expectations.
//!
//! The runner is the stream plus what a scenario adds: symbols (`symbols`), the messages of
//! the side the scenario plays (`build`), checks of what the model sent (`matching`),
//! expectations (`expect`), and the steps themselves (`driver`).

mod build;
mod deps;
mod driver;
mod expect;
mod matching;
mod remote;
mod session;
mod symbols;
mod timeline;
mod transcribe;

pub use remote::{Remote, Wire};
pub use timeline::{server_timeline, ErrorOp, ServerStep};
pub use transcribe::{Refused, Transcriber};

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use self::symbols::Symbols;
use super::ast::*;
use crate::testing::Sim;
use crate::transcript::Entry;
use xds_sansio::client::{Client, ClientConfig, ClientEvent, VerdictTicket};
use xds_sansio::message::Transport;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ServerConfig, ServerEvent};

/// What happened on one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineReport {
    /// The 1-based line number.
    pub line: usize,
    /// The line as written.
    pub source: String,
    /// What kind of step it was.
    pub kind: LineKind,
    /// The message that actually passed, in the notation (message lines only).
    pub actual: Option<String>,
    /// `Err` with what differed, when the line failed.
    pub result: Result<(), String>,
    /// Why a line that passed was not checked (an expectation on a real implementation's
    /// state, which cannot be observed), for [`run_against`].
    pub note: Option<String>,
}

/// The kinds of line, for drawing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// `C->S`.
    Request,
    /// `S->C`.
    Response,
    /// A client command or a client expectation.
    Client,
    /// A server command or a server expectation.
    Server,
    /// Time or the stream.
    Both,
}

/// The outcome of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The scenario's title.
    pub title: String,
    /// The lines that ran, in order; the last one failed if any did.
    pub lines: Vec<LineReport>,
    /// A failure that is not any line's: messages left over at the end.
    pub trailing: Option<String>,
    /// The conversation as the client saw it (requests when sent, responses when
    /// received): check the client's side on it.
    pub client_view: Vec<Entry>,
    /// The conversation as the server saw it (requests when received, responses when sent,
    /// store changes): check the server's side on it.
    pub server_view: Vec<Entry>,
}

impl Report {
    /// Whether every line passed and nothing was left over.
    pub fn passed(&self) -> bool {
        self.trailing.is_none() && self.lines.iter().all(|l| l.result.is_ok())
    }
}

/// One event a side emitted, the step it was taken in, and whether an expectation has
/// consumed it.
struct Logged<E> {
    event: E,
    /// The step (counted from 1) during which it was emitted.
    step: usize,
    consumed: bool,
}

/// The steps that gave each side input last (`no-new-event`).
#[derive(Default)]
struct LastInput {
    client: usize,
    server: usize,
}

/// The replay of one scenario: the simulated stream, the events the runner has taken from
/// it, and the scenario's symbols.
struct Runner<'r> {
    sim: Sim,
    /// The real implementation that plays one side ([`run_against`]).
    remote: Option<&'r mut dyn Remote>,
    /// Set by a step that passed without being checked.
    note: Option<String>,
    client_events: Vec<Logged<ClientEvent>>,
    server_events: Vec<Logged<ServerEvent>>,
    /// Responses awaiting a verdict (`client defer`), by type URL, with their names.
    tickets: BTreeMap<String, (VerdictTicket, Vec<String>)>,
    /// Version symbols, one namespace per type URL (versions are per type).
    versions: BTreeMap<String, Symbols>,
    /// Nonce symbols of the stream that is up.
    nonces: Symbols,
    /// Whether the scenario side has sent the stream's first request (for the node).
    first_request_sent: bool,
    /// The nonce of the latest response of each type the client received on this stream
    /// (`N=^`).
    latest_nonces: BTreeMap<String, String>,
    /// The type of a per-type stream: what an empty `type_url` (`T=-`) stands for.
    stream_type: Option<String>,
    /// Requests a real client sent before the line of their type came (`remote.rs`:
    /// requests of different types are matched per type).
    held_requests: Vec<xds_sansio::message::Request>,
    /// Steps run so far.
    steps: usize,
    /// The last step that gave each side input.
    last_input: LastInput,
    /// The client's dependency manager, from the first `deps` step on.
    deps: Option<xds_sansio::client::deps::DependencyManager>,
    /// Its snapshots, and whether an `expect deps snapshot` consumed each.
    snapshots: Vec<(xds_sansio::client::deps::Snapshot, bool)>,
    /// The scenario runs the dependency manager: listener, route and cluster bodies are
    /// real messages whose references it reads.
    refs_bodies: bool,
    /// `deps-grace=`.
    deps_grace: Option<core::time::Duration>,
}

/// The scenario's `option:` settings of the model's client, the one place they are read
/// (a session scenario's clients take them too).
pub(super) fn configure_client(options: &Options, config: &mut ClientConfig) {
    if options.resource_timer_is_transient_error == Some(true) {
        *config = config.clone().with_transient_resource_timer();
    }
    if let Some(timeout) = options.does_not_exist_timeout {
        config.does_not_exist_timeout = timeout;
    }
    if let Some(policy) = options.nack_policy {
        config.nack_policy = policy;
    }
    if let Some(on) = options.sotw_refetch_on_ttl_expiry {
        config.sotw_refetch_on_ttl_expiry = on;
    }
    if let Some(on) = options.ignore_resource_deletion {
        config.ignore_resource_deletion = on;
    }
    if let Some(policy) = options.data_errors {
        config.data_errors = policy;
    }
    if let Some(on) = options.node_on_every_request {
        config.node_on_every_request = on;
    }
    if let Some(shape) = options.client_event_shape {
        config.event_shape = shape;
    }
}

impl<'r> Runner<'r> {
    fn new(scenario: &Scenario, remote: Option<&'r mut dyn Remote>) -> Runner<'r> {
        let transport = match &scenario.transport {
            TransportSpec::Ads => Transport::Aggregated,
            TransportSpec::PerType(url) => Transport::PerType(url.clone()),
        };
        let node = Node {
            id: "client".into(),
            ..Node::default()
        };
        let options = &scenario.options;
        let mut client_config = ClientConfig::new(scenario.variant, transport.clone(), node);
        configure_client(options, &mut client_config);
        let stream_type = match &transport {
            Transport::PerType(url) => Some(url.clone()),
            Transport::Aggregated => None,
        };
        let mut server_config = ServerConfig::new(scenario.variant, transport);
        if let Some(on) = options.sticky_legacy_wildcard {
            server_config.sticky_legacy_wildcard = on;
        }
        if let Some(on) = options.sotw_not_found_errors {
            server_config.sotw_not_found_errors = on;
        }
        if let Some(reporting) = options.not_found {
            server_config.not_found = reporting;
        }
        let remote_side = remote.as_ref().map(|r| r.side());
        let client_modeled = matches!(scenario.model, Model::Client | Model::Both)
            && remote_side != Some(Side::Client);
        let server_modeled = matches!(scenario.model, Model::Server | Model::Both)
            && remote_side != Some(Side::Server);
        let mut sim = Sim::new(
            client_modeled.then(|| Client::new(client_config)),
            server_modeled.then_some(server_config),
        );
        if options.server_encoded {
            sim.encode_responses();
        }
        let mut runner = Runner {
            sim,
            remote,
            note: None,
            client_events: Vec::new(),
            server_events: Vec::new(),
            tickets: BTreeMap::new(),
            versions: BTreeMap::new(),
            nonces: Symbols::default(),
            first_request_sent: false,
            latest_nonces: BTreeMap::new(),
            held_requests: Vec::new(),
            stream_type,
            steps: 0,
            last_input: LastInput::default(),
            deps: None,
            snapshots: Vec::new(),
            refs_bodies: scenario
                .steps
                .iter()
                .any(|s| matches!(s.action, Action::Deps(_))),
            deps_grace: options.deps_grace,
        };
        runner.take_events();
        runner
    }

    /// The real implementation, if it plays `side`.
    fn remote_as(&mut self, side: Side) -> Option<&mut (dyn Remote + 'r)> {
        match self.remote.as_deref_mut() {
            Some(remote) if remote.side() == side => Some(remote),
            _ => None,
        }
    }

    /// The version symbols of a type.
    fn versions_of(&mut self, type_url: &str) -> &mut Symbols {
        self.versions.entry(type_url.into()).or_default()
    }

    /// The type a message is about: its own, or the stream's when it leaves `type_url`
    /// empty on a per-type stream.
    fn effective_type<'a>(&'a self, type_url: &'a str) -> &'a str {
        match &self.stream_type {
            Some(stream_type) if type_url.is_empty() => stream_type,
            _ => type_url,
        }
    }

    /// The nonce a request echoes when it says `N=^`.
    fn latest_nonce(&self, type_url: &str) -> &str {
        let type_url = self.effective_type(type_url);
        self.latest_nonces.get(type_url).map_or("", String::as_str)
    }
}

fn kind_of(action: &Action) -> LineKind {
    match action {
        Action::Message {
            direction: Direction::ClientToServer,
            ..
        } => LineKind::Request,
        Action::Message {
            direction: Direction::ServerToClient,
            ..
        }
        | Action::Responses(_)
        | Action::Expect(Side::Server, Expectation::Sends { .. })
        | Action::Session(SessionStep::Message {
            direction: Direction::ServerToClient,
            ..
        }) => LineKind::Response,
        Action::Session(SessionStep::Message {
            direction: Direction::ClientToServer,
            ..
        }) => LineKind::Request,
        Action::Session(SessionStep::Up(_) | SessionStep::Down(..)) => LineKind::Both,
        Action::Session(_) | Action::ExpectSession(_) => LineKind::Client,
        Action::ClientBatch(_)
        | Action::Expect(Side::Client, _)
        | Action::Deps(_)
        | Action::ExpectDeps(_) => LineKind::Client,
        Action::ServerBatch(_) | Action::Expect(Side::Server, _) => LineKind::Server,
        Action::Wait(_) | Action::Disconnect | Action::Connect => LineKind::Both,
    }
}

/// Replays `scenario` and reports every line; stops at the first failing line.
pub fn run(scenario: &Scenario) -> Report {
    run_with(scenario, None)
}

/// Replays `scenario` with a real implementation in the place of the model on one side
/// ([`Remote::side`]); the scenario must have the model play that side (`model: client` or
/// `both` for a real client, `server` or `both` for a real server), else the report fails
/// saying so. See [`Remote`] for what is checked and what is skipped.
pub fn run_against(scenario: &Scenario, remote: &mut dyn Remote) -> Report {
    let side = remote.side();
    let plays = match side {
        Side::Client => matches!(scenario.model, Model::Client | Model::Both),
        Side::Server => matches!(scenario.model, Model::Server | Model::Both),
    };
    if !plays {
        return Report {
            title: scenario.title.clone(),
            lines: Vec::new(),
            trailing: Some(alloc::format!(
                "the scenario does not have the model play the {}",
                match side {
                    Side::Client => "client",
                    Side::Server => "server",
                }
            )),
            client_view: Vec::new(),
            server_view: Vec::new(),
        };
    }
    run_with(scenario, Some(remote))
}

/// Runs the steps in order through `step` (what passed, whether the line held, why it was
/// not checked) and reports each line; stops at the first failing one.
fn play_steps(
    steps: &[Step],
    mut step: impl FnMut(&Action) -> (Option<String>, Result<(), String>, Option<String>),
) -> Vec<LineReport> {
    let mut lines = Vec::new();
    for s in steps {
        let (actual, result, note) = step(&s.action);
        let failed = result.is_err();
        lines.push(LineReport {
            line: s.line,
            source: s.source.clone(),
            kind: kind_of(&s.action),
            actual,
            result,
            note,
        });
        if failed {
            break;
        }
    }
    lines
}

fn run_with(scenario: &Scenario, remote: Option<&mut dyn Remote>) -> Report {
    if scenario.model == Model::Session {
        return session::run(scenario);
    }
    let mut runner = Runner::new(scenario, remote);
    let lines = play_steps(&scenario.steps, |action| {
        runner.note = None;
        let (actual, result) = runner.step(action);
        (actual, result, runner.note.take())
    });
    let failed = lines.iter().any(|l| l.result.is_err());
    let trailing = if failed { None } else { runner.leftovers() };
    let (client_view, server_view) = runner.sim.take_views();
    Report {
        title: scenario.title.clone(),
        lines,
        trailing,
        client_view,
        server_view,
    }
}
