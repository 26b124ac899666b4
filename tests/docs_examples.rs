//! The scenario language's reference page (`docs/scenario-language.md`) kept in step with
//! the parser and the runner:
//! - every `xds` block is a complete scenario, replayed through the library
//!   (`script::parse` + `script::run`), and must pass;
//! - every `xds-fails` block is a complete scenario that must fail, at the line marked
//!   with a `# fails:` comment (a parse error, a failing line, or, marked after the last
//!   step, messages left over at the end);
//! - every `xds-fragment` block (lines shown outside a scenario) must parse, as steps of a
//!   SotW or of a delta scenario;
//! - any other `xds-…` tag is an error, so no block is skipped by a typo;
//! - the complete examples together use every step, command, expectation, message field,
//!   resource attribute, option and event kind the language has: the `match`es below
//!   have no catch-all, so a new kind of step does not compile until it is counted here.
//!
//! `jsonl` blocks (recordings) must be read by the record reader, and the checker must find
//! no violation in them on either side.

use std::collections::BTreeSet;
use std::path::Path;

use xds_sansio::codec::json::JsonCodec;
use xds_sansio::message::Variant;
use xds_sansio_conformance::check::{check, parse_jsonl_with, CheckSide};
use xds_sansio_conformance::script::{
    self, Action, ClientCommand, DepsCommand, DepsExpectation, Direction, ErrorPattern, EventScope,
    Expectation, Item, MessagePattern, Model, Outcome, Scenario, ServerCommand, SessionExpectation,
    SessionStep, Side, TransportSpec, LATEST_NONCE, NO_NODE,
};

#[path = "support/markdown.rs"]
mod markdown;

const PAGE: &str = "docs/scenario-language.md";
const FAILS_MARK: &str = "# fails:";

fn page() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE)).unwrap()
}

/// The blocks of the page with an `xds` tag, checked; the complete scenarios that pass.
fn checked_blocks() -> Vec<Scenario> {
    let blocks = markdown::fenced_blocks(&page()).unwrap();
    let mut passing = Vec::new();
    let mut failures = Vec::new();
    let (mut fails, mut fragments) = (0, 0);
    for block in blocks {
        let at = format!("{PAGE}:{}", block.line);
        match block.info.as_str() {
            "xds" => match run(&block.text, &at) {
                Ok(scenario) => passing.push(scenario),
                Err(e) => failures.push(e),
            },
            "xds-fails" => {
                fails += 1;
                if let Err(e) = fails_where_marked(&block.text, &at) {
                    failures.push(e);
                }
            }
            "xds-fragment" => {
                fragments += 1;
                if let Err(e) = parses_as_steps(&block.text, &at) {
                    failures.push(e);
                }
            }
            "jsonl" => match parse_jsonl_with(&block.text, Variant::Sotw, &JsonCodec::new()) {
                Err(e) => failures.push(format!("{at}: not a recording: {e}")),
                Ok(entries) => {
                    for side in [CheckSide::Client, CheckSide::Server] {
                        let violations = check(&entries, side);
                        if !violations.is_empty() {
                            failures.push(format!("{at}: {side:?} violations {violations:?}"));
                        }
                    }
                }
            },
            other if other.starts_with("xds") => failures.push(format!(
                "{at}: unknown tag {other:?} (xds, xds-fails or xds-fragment)"
            )),
            _ => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} block(s) of {PAGE} do not hold:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!(
        "{PAGE}: {} scenarios passed, {fails} failed where marked, {fragments} fragments parsed",
        passing.len()
    );
    passing
}

/// Parses and replays a complete scenario; `Err` says where and why it did not pass.
fn run(text: &str, at: &str) -> Result<Scenario, String> {
    let scenario = script::parse(text, at).map_err(|e| format!("{at}: {e}"))?;
    let report = script::run(&scenario);
    if report.passed() {
        return Ok(scenario);
    }
    let lines: Vec<String> = report
        .lines
        .iter()
        .map(|l| {
            let mark = if l.result.is_ok() { "ok " } else { "ERR" };
            let why = match (&l.result, &l.actual) {
                (Err(e), Some(a)) => format!("\n        got {a}\n        {e}"),
                (Err(e), None) => format!("\n        {e}"),
                _ => String::new(),
            };
            format!("  {:>3} {mark} {}{why}", l.line, l.source)
        })
        .collect();
    Err(format!(
        "{at}: does not pass\n{}\n  {}",
        lines.join("\n"),
        report.trailing.unwrap_or_default()
    ))
}

/// A scenario that must fail at the line marked `# fails:` (messages left over: a mark on
/// a line after the last step).
fn fails_where_marked(text: &str, at: &str) -> Result<(), String> {
    let marked: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| line.contains(FAILS_MARK))
        .map(|(index, _)| index + 1)
        .collect();
    let [mark] = marked[..] else {
        return Err(format!(
            "{at}: an xds-fails block needs one {FAILS_MARK:?} comment"
        ));
    };
    let failed_at = match script::parse(text, at) {
        Err(e) => e.line,
        Ok(scenario) => {
            let report = script::run(&scenario);
            match report.lines.iter().find(|l| l.result.is_err()) {
                Some(line) => line.line,
                None if report.trailing.is_some() => {
                    let last = scenario.steps.last().map_or(0, |s| s.line);
                    if mark > last {
                        mark
                    } else {
                        return Err(format!(
                            "{at}: fails at the end ({}), but the mark is at line {mark}",
                            report.trailing.unwrap_or_default()
                        ));
                    }
                }
                None => {
                    return Err(format!(
                        "{at}: passes, but is marked to fail at line {mark}"
                    ))
                }
            }
        }
    };
    if failed_at == mark {
        Ok(())
    } else {
        Err(format!(
            "{at}: fails at line {failed_at}, marked at line {mark}"
        ))
    }
}

/// Lines shown outside a scenario: they parse as the steps (or headers) of a SotW or of
/// a delta scenario.
fn parses_as_steps(text: &str, at: &str) -> Result<(), String> {
    let mut errors = Vec::new();
    for variant in ["sotw", "delta"] {
        match script::parse(&format!("model: both\nvariant: {variant}\n{text}"), at) {
            Ok(_) => return Ok(()),
            Err(e) => errors.push(format!("as {variant}: {e}")),
        }
    }
    Err(format!(
        "{at}: the fragment does not parse ({}; line numbers count two header lines)",
        errors.join("; ")
    ))
}

#[test]
fn every_example_of_the_page_holds() {
    let passing = checked_blocks();
    assert!(
        passing.len() >= 40,
        "only {} complete examples",
        passing.len()
    );
}

/// What the complete examples use, by name.
#[derive(Default)]
struct Used(BTreeSet<String>);

impl Used {
    fn add(&mut self, what: impl Into<String>) {
        self.0.insert(what.into());
    }

    fn items(&mut self, items: &[Item]) {
        for item in items {
            self.add("item");
            let Item {
                name,
                version,
                tag,
                ttl,
                aliases,
                no_body,
                wrapped,
                unwrapped,
                any_type,
                refs,
            } = item;
            for (used, what) in [
                (version.is_some(), "@version"),
                (tag.is_some(), ":tag"),
                (ttl.is_some(), "[ttl=]"),
                (!aliases.is_empty(), "[alias=]"),
                (*no_body, "[nobody]"),
                (*wrapped && ttl.is_none(), "[wrapped]"),
                (*unwrapped, "[unwrapped]"),
                (any_type.is_some(), "[type=]"),
                (!refs.is_empty(), "[ref=]"),
                (
                    name.contains([' ', '"', '=', '&', ';', '@', ':']),
                    "quoted name",
                ),
            ] {
                if used {
                    self.add(what);
                }
            }
        }
    }

    fn type_url(&mut self, type_url: &str) {
        if type_url.is_empty() {
            self.add("T=-");
        } else if type_url.contains("/envoy.api.v2.") {
            self.add("v2 type");
        }
    }

    fn error(&mut self, error: &ErrorPattern) {
        self.add(match error {
            ErrorPattern::Absent => "no E=",
            ErrorPattern::Any => "E=*",
            ErrorPattern::Contains(_) => "E=\"text\"",
            ErrorPattern::Exact(_) => "E==\"text\"",
        });
    }

    fn node(&mut self, node: &Option<String>) {
        match node.as_deref() {
            None => {}
            Some(NO_NODE) => self.add("node=-"),
            Some(_) => self.add("node=ID"),
        }
    }

    fn nonce(&mut self, nonce: &Option<String>) {
        if nonce.as_deref() == Some(LATEST_NONCE) {
            self.add("N=^");
        }
    }

    fn response_extras(&mut self, errors: &Option<Vec<Item>>, control_plane: &Option<String>) {
        if errors.is_some() {
            self.add("F=");
        }
        match control_plane.as_deref() {
            None => {}
            Some("-") => self.add("CP=-"),
            Some(_) => self.add("CP=ID"),
        }
    }

    fn message(&mut self, message: &MessagePattern) {
        self.type_url(message.type_url());
        match message {
            MessagePattern::SotwRequest {
                version,
                names,
                nonce,
                error,
                node,
                ..
            } => {
                self.add("SotW request");
                if version.as_deref() == Some("") {
                    self.add("V= (empty)");
                }
                if names.is_none() {
                    self.add("field left out");
                }
                self.nonce(nonce);
                self.error(error);
                self.node(node);
            }
            MessagePattern::SotwResponse {
                resources,
                errors,
                control_plane,
                ..
            } => {
                self.add("SotW response");
                self.items(resources.as_deref().unwrap_or_default());
                self.response_extras(errors, control_plane);
            }
            MessagePattern::DeltaRequest {
                subscribe,
                unsubscribe,
                initial,
                nonce,
                error,
                node,
                ..
            } => {
                self.add("delta request");
                for (set, what) in [(subscribe, "S="), (unsubscribe, "U=")] {
                    if set.is_some() {
                        self.add(what);
                    }
                }
                if let Some(initial) = initial {
                    self.add("I=");
                    self.items(initial);
                }
                self.nonce(nonce);
                self.error(error);
                self.node(node);
            }
            MessagePattern::DeltaResponse {
                resources,
                removed,
                errors,
                control_plane,
                ..
            } => {
                self.add("delta response");
                self.items(resources.as_deref().unwrap_or_default());
                if removed.is_some() {
                    self.add("X=");
                }
                self.response_extras(errors, control_plane);
            }
        }
    }

    fn client_command(&mut self, command: &ClientCommand) {
        match command {
            ClientCommand::Subscribe(t, names) => {
                self.type_url(t);
                self.add(if names.is_empty() {
                    "client subscribe (legacy wildcard)"
                } else {
                    "client subscribe"
                });
            }
            ClientCommand::Unsubscribe(..) => self.add("client unsubscribe"),
            ClientCommand::Defer(_) => self.add("client defer"),
            ClientCommand::Reject(_, names, _) => self.add(if names.is_empty() {
                "client reject (all)"
            } else {
                "client reject (names)"
            }),
            ClientCommand::Accept(_) => self.add("client accept"),
        }
    }

    fn server_command(&mut self, command: &ServerCommand) {
        match command {
            ServerCommand::Set(t, items) => {
                self.type_url(t);
                self.add("server set");
                self.items(items);
            }
            ServerCommand::Remove(..) => self.add("server remove"),
            ServerCommand::Publish(_) => self.add("server publish"),
            ServerCommand::Error { .. } => self.add("server error"),
            ServerCommand::ClearError(..) => self.add("server clear-error"),
        }
    }

    fn expectation(&mut self, side: Side, expectation: &Expectation) {
        let side_name = match side {
            Side::Client => "client",
            Side::Server => "server",
        };
        match expectation {
            Expectation::Event {
                kind,
                name,
                details,
                ..
            } => {
                self.add(format!("{side_name} event {kind}"));
                if name.is_some() {
                    self.add("event name");
                }
                for (key, _) in details {
                    self.add(format!("detail {key}="));
                }
            }
            Expectation::NoEvent { kind, scope, .. } => {
                self.add(match scope {
                    EventScope::Pending => "no-event",
                    EventScope::SinceLastInput => "no-new-event",
                });
                self.add(format!("{side_name} event {kind}"));
            }
            Expectation::Sends { message, .. } => {
                self.add("sends within");
                self.message(message);
            }
            Expectation::Cache(_, items) => {
                self.add(format!("{side_name} cache"));
                self.items(items);
            }
            Expectation::Status(_, _, status) => self.add(format!("status {status}")),
            Expectation::ControlPlane(_, id) => self.add(if id == "-" {
                "control-plane -"
            } else {
                "control-plane ID"
            }),
            Expectation::Quiet => self.add(format!("{side_name} quiet")),
        }
    }

    fn scenario(&mut self, scenario: &Scenario) {
        self.add(match scenario.model {
            Model::Client => "model: client",
            Model::Server => "model: server",
            Model::Both => "model: both",
            Model::Session => "model: session",
        });
        self.add(match scenario.variant {
            Variant::Sotw => "variant: sotw",
            Variant::Delta => "variant: delta",
        });
        self.add(match scenario.transport {
            TransportSpec::Ads => "transport: ads",
            TransportSpec::PerType(_) => "transport: TYPE",
        });
        let o = &scenario.options;
        for (used, what) in [
            (o.does_not_exist_timeout.is_some(), "option dne-timeout"),
            (o.nack_policy.is_some(), "option nack-policy"),
            (
                o.node_on_every_request.is_some(),
                "option node-on-every-request",
            ),
            (
                o.sotw_refetch_on_ttl_expiry.is_some(),
                "option sotw-refetch-on-ttl-expiry",
            ),
            (
                o.ignore_resource_deletion.is_some(),
                "option ignore-resource-deletion",
            ),
            (
                o.sticky_legacy_wildcard.is_some(),
                "option sticky-legacy-wildcard",
            ),
            (
                o.sotw_not_found_errors.is_some(),
                "option sotw-not-found-errors",
            ),
            (o.not_found.is_some(), "option not-found"),
            (o.server_encoded, "option server-encoded"),
            (o.deps_grace.is_some(), "option deps-grace"),
            (o.backoff_seed.is_some(), "option backoff-seed"),
            (!scenario.session.servers.is_empty(), "servers:"),
            (!scenario.session.authorities.is_empty(), "authority:"),
            (!scenario.session.features.is_empty(), "server-features:"),
        ] {
            if used {
                self.add(what);
            }
        }
        for step in &scenario.steps {
            match &step.action {
                Action::Message {
                    direction,
                    message,
                    tags,
                } => {
                    self.add(match direction {
                        Direction::ClientToServer => "C->S",
                        Direction::ServerToClient => "S->C",
                    });
                    self.message(message);
                    for tag in tags {
                        self.add(format!("[{tag}]"));
                    }
                }
                Action::Responses(messages) => {
                    self.add("S->C ; S->C");
                    for message in messages {
                        self.message(message);
                    }
                }
                Action::ClientBatch(commands) => {
                    if commands.len() > 1 {
                        self.add("client ; command");
                    }
                    for command in commands {
                        self.client_command(command);
                    }
                }
                Action::ServerBatch(commands) => {
                    if commands.len() > 1 {
                        self.add("server ; command");
                    }
                    for command in commands {
                        self.server_command(command);
                    }
                }
                Action::Wait(_) => self.add("wait"),
                Action::Disconnect => self.add("disconnect"),
                Action::Connect => self.add("connect"),
                Action::Expect(side, expectation) => self.expectation(*side, expectation),
                Action::Deps(command) => self.add(match command {
                    DepsCommand::Watch(_) => "deps watch",
                    DepsCommand::Unwatch(_) => "deps unwatch",
                    DepsCommand::WatchAll => "deps watch-all",
                }),
                Action::Session(step) => self.add(match step {
                    SessionStep::Watch { .. } => "session watch",
                    SessionStep::Unwatch(_) => "session unwatch",
                    SessionStep::Up(_) => "up",
                    SessionStep::Down(..) => "down",
                    SessionStep::Message {
                        direction: Direction::ClientToServer,
                        ..
                    } => "SERVER C->S",
                    SessionStep::Message {
                        direction: Direction::ServerToClient,
                        ..
                    } => "SERVER S->C",
                }),
                Action::ExpectSession(expectation) => match expectation {
                    SessionExpectation::Connect(_) => self.add("expect session connect"),
                    SessionExpectation::Close(_) => self.add("expect session close"),
                    SessionExpectation::NoConnect => self.add("expect session no-connect"),
                    SessionExpectation::Event(kind, _) => {
                        self.add(format!("expect session event {kind}"))
                    }
                    SessionExpectation::NoEvent(_) => self.add("expect session no-event"),
                    SessionExpectation::Watch { .. } => self.add("expect session watch"),
                    SessionExpectation::NoWatchEvent(_) => {
                        self.add("expect session no-watch-event")
                    }
                    SessionExpectation::InUse(..) => self.add("expect session in-use"),
                    SessionExpectation::Quiet => self.add("expect session quiet"),
                },
                Action::ExpectDeps(expectation) => self.add(match expectation {
                    DepsExpectation::Snapshot => "expect deps snapshot",
                    DepsExpectation::NoSnapshot => "expect deps no-snapshot",
                    DepsExpectation::Waiting(_) => "expect deps waiting",
                    DepsExpectation::Listener(_, Outcome::Ok(_)) => "expect deps listener ok",
                    DepsExpectation::Listener(_, Outcome::Error(_)) => "expect deps listener error",
                    DepsExpectation::Cluster(_, _, Outcome::Ok(_)) => "expect deps cluster leaves",
                    DepsExpectation::Cluster(_, _, Outcome::Error(_)) => {
                        "expect deps cluster error"
                    }
                }),
            }
        }
    }
}

#[test]
fn the_complete_examples_use_every_part_of_the_language() {
    let mut used = Used::default();
    for scenario in checked_blocks() {
        used.scenario(&scenario);
    }
    let client_events = [
        "upserted",
        "removed",
        "does-not-exist",
        "deletion-ignored",
        "resource-error",
        "acked",
        "nacked",
        "ready",
        "validation-needed",
        "ignored",
    ];
    let server_events = [
        "node",
        "subscribed",
        "unsubscribed",
        "acked",
        "nacked",
        "stale",
        "ignored",
        "protocol-error",
    ];
    let statuses = [
        "requested",
        "acked",
        "nacked",
        "does-not-exist",
        "expired",
        "received-error",
        "none",
    ];
    let mut expected: Vec<String> = [
        "model: client",
        "model: server",
        "model: both",
        "variant: sotw",
        "variant: delta",
        "transport: ads",
        "transport: TYPE",
        "option dne-timeout",
        "option nack-policy",
        "option node-on-every-request",
        "option sotw-refetch-on-ttl-expiry",
        "option ignore-resource-deletion",
        "option sticky-legacy-wildcard",
        "option sotw-not-found-errors",
        "option not-found",
        "option server-encoded",
        "option deps-grace",
        "model: session",
        "option backoff-seed",
        "servers:",
        "authority:",
        "server-features:",
        "session watch",
        "session unwatch",
        "up",
        "down",
        "SERVER C->S",
        "SERVER S->C",
        "expect session connect",
        "expect session close",
        "expect session no-connect",
        "expect session event fell-back",
        "expect session event reverted",
        "expect session event stream-failed",
        "expect session event stream-ended",
        "expect session event deletion-ignored",
        "expect session no-event",
        "expect session watch",
        "expect session no-watch-event",
        "expect session in-use",
        "expect session quiet",
        "[ref=]",
        "deps watch",
        "deps unwatch",
        "deps watch-all",
        "expect deps snapshot",
        "expect deps no-snapshot",
        "expect deps waiting",
        "expect deps listener ok",
        "expect deps listener error",
        "expect deps cluster leaves",
        "expect deps cluster error",
        "C->S",
        "S->C",
        "S->C ; S->C",
        "SotW request",
        "SotW response",
        "delta request",
        "delta response",
        "V= (empty)",
        "field left out",
        "N=^",
        "T=-",
        "v2 type",
        "no E=",
        "E=*",
        "E=\"text\"",
        "E==\"text\"",
        "node=ID",
        "node=-",
        "F=",
        "CP=ID",
        "CP=-",
        "S=",
        "U=",
        "I=",
        "X=",
        "[ack]",
        "[nack]",
        "[stale]",
        "item",
        "@version",
        ":tag",
        "[ttl=]",
        "[alias=]",
        "[nobody]",
        "[wrapped]",
        "[unwrapped]",
        "[type=]",
        "quoted name",
        "client subscribe",
        "client subscribe (legacy wildcard)",
        "client unsubscribe",
        "client defer",
        "client accept",
        "client reject (all)",
        "client reject (names)",
        "client ; command",
        "server set",
        "server remove",
        "server publish",
        "server error",
        "server clear-error",
        "server ; command",
        "wait",
        "disconnect",
        "connect",
        "no-event",
        "no-new-event",
        "sends within",
        "client cache",
        "server cache",
        "control-plane ID",
        "control-plane -",
        "client quiet",
        "server quiet",
        "event name",
        "detail version=",
        "detail nonce=",
        "detail reason=",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    expected.extend(client_events.iter().map(|k| format!("client event {k}")));
    expected.extend(server_events.iter().map(|k| format!("server event {k}")));
    expected.extend(statuses.iter().map(|s| format!("status {s}")));
    let missing: Vec<&String> = expected.iter().filter(|e| !used.0.contains(*e)).collect();
    assert!(
        missing.is_empty(),
        "no complete example of {PAGE} uses {missing:?}"
    );
}
