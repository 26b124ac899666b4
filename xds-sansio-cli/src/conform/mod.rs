//! `xds-sansio conform client|server`: plays one side of scenarios for a real
//! implementation over gRPC, checks what it sends line by line, and prints the same
//! diagrams, verdicts and closing line as `replay` (docs/conform.md).
//!
//! Decisions:
//! - **Which scenarios.** `conform client` runs the scenarios in which the model plays the
//!   client (`model: client` or `both`; in `both` the model's server answers the real
//!   client), `conform server` those in which it plays the server. Others, and those of a
//!   variant or transport the implementation does not speak (`--variant`,
//!   `--transport`), are skipped and counted as skipped, never as passed.
//! - **Every scenario starts fresh.** The hook's `start` event comes before a scenario
//!   and `stop` after it: the implementation begins with no state, as the model does.
//! - **Real time is bounded.** A line that expects a message waits `--patience`; `quiet`
//!   listens `--quiet`; a `wait` longer than `--max-wait` fails its line rather than hold
//!   a CI job.

mod fuzz;
mod hook;
mod junit;
mod net;
mod remote;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::{Transport, Variant};
use xds_sansio_conformance::script::{self, Model, Report, Scenario, Side, TransportSpec};

use crate::diagram::{collect, print_diagram};
use crate::output::{complain, say};
pub use fuzz::FuzzOptions;
pub use hook::Hook;
use remote::{Bodies, RealClient, RealServer, Timing};

/// Which transports a real implementation speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TransportFilter {
    /// Only ADS.
    Ads,
    /// Only per-type streams.
    PerType,
}

/// What `conform` was asked to do.
pub struct Options {
    /// The side the real implementation plays.
    pub side: Side,
    /// `client`: where the real client connects.
    pub listen: Option<SocketAddr>,
    /// `server`: the real server.
    pub target: Option<String>,
    /// Scenario files or directories.
    pub paths: Vec<PathBuf>,
    /// The implementer's hook.
    pub hook: Hook,
    /// Real bodies (`--bodies`).
    pub bodies: Option<PathBuf>,
    /// Schemas for canonical JSON in `--bodies`.
    pub codec: JsonCodec,
    /// Timing limits.
    pub patience: Duration,
    /// Silence that counts as quiet.
    pub quiet: Duration,
    /// The longest real `wait`.
    pub max_wait: Duration,
    /// The pause before a hook event, so messages sent before it arrive first.
    pub settle: Duration,
    /// Only scenarios of this variant.
    pub variant: Option<Variant>,
    /// Only scenarios of this transport.
    pub transport: Option<TransportFilter>,
    /// JUnit XML report.
    pub junit: Option<PathBuf>,
    /// Differential fuzzing: generated cases instead of the scenarios.
    pub fuzz: Option<FuzzOptions>,
}

/// What every scenario of a run shares: the runtime, the real implementation's address and
/// hook, the limits.
struct Session<'a> {
    rt: &'a tokio::runtime::Runtime,
    /// `client`: the calls the real client opens.
    streams: Option<&'a mut tokio::sync::mpsc::UnboundedReceiver<net::Incoming>>,
    hook: &'a mut Hook,
    bodies: &'a Bodies,
    timing: Timing,
    address: &'a str,
    side_name: &'static str,
}

impl Session<'_> {
    /// Plays one scenario: the hook's `start`, the run, the hook's `stop`.
    fn play(&mut self, scenario: &Scenario, name: &str) -> Report {
        let start = hook::start(self.side_name, scenario, name, self.address);
        let report = match self.hook.send(&start) {
            Err(e) => Report {
                title: scenario.title.clone(),
                lines: Vec::new(),
                trailing: Some(format!("the hook's start failed: {e}")),
                client_view: Vec::new(),
                server_view: Vec::new(),
            },
            Ok(()) => match self.streams.as_deref_mut() {
                Some(streams) => {
                    let mut remote = RealClient {
                        rt: self.rt,
                        streams,
                        current: None,
                        hook: self.hook,
                        bodies: self.bodies,
                        timing: self.timing,
                        variant: scenario.variant,
                        transport: transport_of(scenario),
                        ended: None,
                    };
                    let report = script::run_against(scenario, &mut remote);
                    remote.end_stream();
                    report
                }
                None => {
                    let mut remote = RealServer {
                        rt: self.rt,
                        target: self.address,
                        call: None,
                        hook: self.hook,
                        bodies: self.bodies,
                        timing: self.timing,
                        variant: scenario.variant,
                        transport: transport_of(scenario),
                        ended: None,
                    };
                    let mut report = script::run_against(scenario, &mut remote);
                    if let (Some(ended), false) = (&remote.ended, report.passed()) {
                        let why = format!("(the server ended the stream: {ended})");
                        match report.lines.iter_mut().find(|l| l.result.is_err()) {
                            Some(line) => {
                                if let Err(e) = &mut line.result {
                                    e.push(' ');
                                    e.push_str(&why);
                                }
                            }
                            None => {
                                if let Some(t) = report.trailing.as_mut() {
                                    t.push(' ');
                                    t.push_str(&why);
                                }
                            }
                        }
                    }
                    report
                }
            },
        };
        let stopped = self.hook.send(&hook::stop());
        if let Some(streams) = self.streams.as_deref_mut() {
            // A stream opened after `stop` answered belongs to no scenario.
            while let Ok(incoming) = streams.try_recv() {
                let _ = incoming.responses.send(Err(tonic::Status::unavailable(
                    "conform: no scenario is running",
                )));
            }
        }
        let mut report = report;
        if let (Err(e), None) = (stopped, &report.trailing) {
            report.trailing = Some(format!("the hook's stop failed: {e}"));
        }
        report
    }
}

/// One scenario's outcome, for the closing line and JUnit.
pub enum Outcome {
    /// It ran (passed or failed).
    Ran(Box<Report>, Duration),
    /// It did not run, and why.
    Skipped(String),
    /// It could not be read.
    Broken(String),
}

/// The bodies file: `{"CDS": {"name:tag": <Any as canonical JSON>}}`, type names as in
/// scenarios.
fn read_bodies(path: &Path, codec: &JsonCodec) -> Result<Bodies, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bodies = Bodies::new();
    let Some(types) = value.as_object() else {
        return Err(format!("{}: expected an object of types", path.display()));
    };
    for (type_name, items) in types {
        let type_url = script::resolve_type(type_name)
            .ok_or_else(|| format!("{}: {type_name}: not a type", path.display()))?;
        let Some(items) = items.as_object() else {
            return Err(format!(
                "{}: {type_name}: expected an object",
                path.display()
            ));
        };
        for (key, any) in items {
            let Some((name, tag)) = key.rsplit_once(':') else {
                return Err(format!("{}: {key}: expected name:tag", path.display()));
            };
            let any: Any = codec
                .from_value(any.clone())
                .map_err(|e| format!("{}: {key}: {e}", path.display()))?;
            bodies.insert((type_url.clone(), name.into(), tag.into()), any.value);
        }
    }
    Ok(bodies)
}

fn why_skipped(
    scenario: &Scenario,
    side: Side,
    variant: Option<Variant>,
    transport: Option<TransportFilter>,
) -> Option<String> {
    let plays = match side {
        Side::Client => matches!(scenario.model, Model::Client | Model::Both),
        Side::Server => matches!(scenario.model, Model::Server | Model::Both),
    };
    if !plays {
        return Some(match side {
            Side::Client => "not a client scenario (the model does not play the client)".into(),
            Side::Server => "not a server scenario (the model does not play the server)".into(),
        });
    }
    let deps = scenario.steps.iter().any(|s| {
        matches!(
            s.action,
            script::Action::Deps(_) | script::Action::ExpectDeps(_)
        )
    });
    if side == Side::Client && deps {
        // `deps` steps are the model client's dependency manager: a real client's is
        // its own, and it is not driven through the hook.
        return Some(
            "it drives the model's dependency manager (deps), a real client's is its own".into(),
        );
    }
    if variant.is_some_and(|v| v != scenario.variant) {
        return Some(format!("a {:?} scenario (--variant)", scenario.variant));
    }
    let per_type = matches!(scenario.transport, TransportSpec::PerType(_));
    match transport {
        Some(TransportFilter::Ads) if per_type => Some("a per-type scenario (--transport)".into()),
        Some(TransportFilter::PerType) if !per_type => Some("an ADS scenario (--transport)".into()),
        _ => None,
    }
}

fn transport_of(scenario: &Scenario) -> Transport {
    match &scenario.transport {
        TransportSpec::Ads => Transport::Aggregated,
        TransportSpec::PerType(url) => Transport::PerType(url.clone()),
    }
}

/// Runs `conform`; prints every scenario and the closing line.
pub fn run(mut options: Options) -> ExitCode {
    let mut files = Vec::new();
    for path in &options.paths {
        if let Err(e) = collect(path, &mut files) {
            complain!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let bodies = match &options.bodies {
        Some(path) => match read_bodies(path, &options.codec) {
            Ok(bodies) => bodies,
            Err(e) => {
                complain!("{e}");
                return ExitCode::from(2);
            }
        },
        None => Bodies::new(),
    };
    let rt = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let timing = Timing {
        patience: options.patience,
        quiet: options.quiet,
        max_wait: options.max_wait,
        settle: options.settle,
    };
    // `client`: one server for the whole run; each scenario's client connects to it.
    let (address, mut streams) = match options.side {
        Side::Client => {
            let Some(listen) = options.listen else {
                complain!("conform client needs --listen ADDR");
                return ExitCode::from(2);
            };
            match net::serve(&rt, listen) {
                Ok((local, streams)) => {
                    say!("conform: serving the client's management server on {local}");
                    (local.to_string(), Some(streams))
                }
                Err(e) => {
                    complain!("{e}");
                    return ExitCode::from(2);
                }
            }
        }
        Side::Server => match &options.target {
            Some(target) => (target.clone(), None),
            None => {
                complain!("conform server needs --target ADDR");
                return ExitCode::from(2);
            }
        },
    };
    let side_name = match options.side {
        Side::Client => "client",
        Side::Server => "server",
    };
    let mut session = Session {
        rt: &rt,
        streams: streams.as_mut(),
        hook: &mut options.hook,
        bodies: &bodies,
        timing,
        address: &address,
        side_name,
    };
    if let Some(fuzz) = &options.fuzz {
        return fuzz::run(&mut session, options.side, fuzz);
    }
    let mut outcomes: Vec<(String, String, Outcome)> = Vec::new();
    for file in &files {
        let name = file.display().to_string();
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let scenario = match std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| script::parse(&text, &stem).map_err(|e| e.to_string()))
        {
            Ok(scenario) => scenario,
            Err(e) => {
                say!("\n{name}\n   ✗ {e}\n  => FAIL");
                outcomes.push((name, stem, Outcome::Broken(e)));
                continue;
            }
        };
        if let Some(why) = why_skipped(&scenario, options.side, options.variant, options.transport)
        {
            say!("\n{}  ({name})\n   – skipped: {why}", scenario.title);
            outcomes.push((name, scenario.title.clone(), Outcome::Skipped(why)));
            continue;
        }
        let started = Instant::now();
        let report = session.play(&scenario, &name);
        print_diagram(&name, &report);
        outcomes.push((
            name,
            scenario.title.clone(),
            Outcome::Ran(Box::new(report), started.elapsed()),
        ));
    }
    let passed = outcomes
        .iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Ran(r, _) if r.passed()))
        .count();
    let skipped = outcomes
        .iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Skipped(_)))
        .count();
    let failed = outcomes.len() - passed - skipped;
    if let Some(path) = &options.junit {
        let suite = format!("xds-sansio conform {side_name}");
        if let Err(e) = std::fs::write(path, junit::xml(&suite, &outcomes)) {
            complain!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if skipped > 0 {
        say!("\n{passed} passed, {failed} failed, {skipped} skipped");
    } else {
        say!("\n{passed} passed, {failed} failed");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
