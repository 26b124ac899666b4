//! `conform client|server --fuzz N`: N cases generated from the model's state space
//! (`xds_sansio_conformance::script::generate`), each played to the real implementation like a
//! scenario; every divergence is sorted by kind, and the first case of each kind is
//! shrunk to a minimal scenario and written out.
//!
//! Decisions:
//! - **A divergence's kind** is the kind of its first failing line and its reason up to
//!   the first `:` (`Request R`, `Response the server sent nothing`), or `end` and the
//!   trailing failure's: what a maintainer would call one bug. Shrinking keeps the kind,
//!   so a case is not shrunk into another, easier divergence.
//! - **Known kinds do not fail a run** when `--known-divergences FILE` lists them for the
//!   peer (`--fuzz-label`); a kind the file does not list does, so a CI job catches a new
//!   disagreement and not the ones already written up. Without a file every divergence
//!   fails the run.
//! - **A new kind must show twice.** A case whose kind the file does not list is played
//!   again before it counts: if the second run differs (real time, a peer's own timers),
//!   the kind is reported as unsteady and does not fail the run.
//! - **One shrink per kind.** Shrinking replays a case up to `--fuzz-shrink` times against
//!   a real implementation in real time; once a kind has a minimal scenario, later cases
//!   of the kind are reported, not shrunk again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use xds_sansio_conformance::script::generate::{self, ClientOp, Profile, ServerOp, Shape};
use xds_sansio_conformance::script::{self, LineKind, Report, Side};

use super::Session;
use crate::diagram::print_diagram;
use crate::output::{complain, say};

/// What `--fuzz` was asked to do.
pub struct FuzzOptions {
    /// How many cases.
    pub cases: u64,
    /// The first case's seed (the next ones count up from it).
    pub seed: u64,
    /// Operations per case.
    pub len: usize,
    /// What the cases may use.
    pub profile: Profile,
    /// Where minimal reproducing scenarios are written.
    pub out: Option<PathBuf>,
    /// At most this many replays to shrink a case.
    pub shrink_budget: usize,
    /// The kinds already written up: `LABEL: KIND  # why` lines.
    pub known: Option<PathBuf>,
    /// The peer's label in the known-divergences file.
    pub label: Option<String>,
}

/// The operations of a case, of the side under test.
#[derive(Clone)]
enum Ops {
    Client(Vec<ClientOp>),
    Server(Vec<ServerOp>),
}

impl Ops {
    fn len(&self) -> usize {
        match self {
            Ops::Client(ops) => ops.len(),
            Ops::Server(ops) => ops.len(),
        }
    }

    fn scenario(&self, title: &str, shape: &Shape) -> String {
        match self {
            Ops::Client(ops) => generate::client_scenario(title, shape, ops),
            Ops::Server(ops) => generate::server_scenario(title, shape, ops),
        }
    }

    fn shrink(&self, budget: usize, mut still: impl FnMut(&Ops) -> bool) -> Ops {
        match self {
            Ops::Client(ops) => Ops::Client(generate::shrink(ops, budget, |c| {
                still(&Ops::Client(c.to_vec()))
            })),
            Ops::Server(ops) => Ops::Server(generate::shrink(ops, budget, |c| {
                still(&Ops::Server(c.to_vec()))
            })),
        }
    }
}

/// Plays a generated case; `None` when it does not even parse (a generator bug).
fn play(session: &mut Session<'_>, title: &str, shape: &Shape, ops: &Ops) -> Option<Report> {
    let text = ops.scenario(title, shape);
    let scenario = script::parse(&text, "fuzz").ok()?;
    Some(session.play(&scenario, title))
}

/// What kind of divergence a failing report shows (see the module's decisions); `None`
/// when it passed.
pub fn divergence(report: &Report) -> Option<String> {
    if report.passed() {
        return None;
    }
    let first = report.lines.iter().find_map(|l| match &l.result {
        Err(e) => Some(format!("{:?} {}", l.kind, e.split(':').next().unwrap_or(e))),
        Ok(()) => None,
    });
    let kind = first.unwrap_or_else(|| {
        let trailing = report.trailing.as_deref().unwrap_or_default();
        format!("end {}", trailing.split(':').next().unwrap_or(trailing))
    });
    Some(kind_of(&kind))
}

/// A reason cut before the words a peer chose: a quoted message (`unexpected
/// error_detail "..."`) or parentheses (why the server ended the stream).
fn kind_of(reason: &str) -> String {
    let cut = [" \"", " ("]
        .iter()
        .filter_map(|marker| reason.find(marker))
        .min()
        .unwrap_or(reason.len());
    reason.get(..cut).unwrap_or(reason).trim().to_string()
}

/// The first failing line of a report, as text: `line N: reason`.
fn first_failure(report: &Report) -> String {
    report
        .lines
        .iter()
        .find_map(|l| match &l.result {
            Err(e) => Some(format!("line {}: {}: {}", l.line, l.source.trim(), e)),
            Ok(()) => None,
        })
        .or_else(|| report.trailing.clone())
        .unwrap_or_default()
        .replace('\n', " ")
}

/// The kinds a known-divergences file lists for `label` (every label's when `None`).
fn known_kinds(path: &Path, label: Option<&str>) -> Result<BTreeSet<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut kinds = BTreeSet::new();
    for line in text.lines() {
        let line = line.split("  #").next().unwrap_or(line).trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((peer, kind)) = line.split_once(": ") else {
            return Err(format!(
                "{}: {line:?}: expected LABEL: KIND",
                path.display()
            ));
        };
        if label.is_none_or(|l| l == peer) {
            kinds.insert(kind.trim().to_string());
        }
    }
    Ok(kinds)
}

/// Runs the cases; prints each, the kinds found, and the closing line.
pub fn run(session: &mut Session<'_>, side: Side, options: &FuzzOptions) -> ExitCode {
    let known = match &options.known {
        Some(path) => match known_kinds(path, options.label.as_deref()) {
            Ok(kinds) => Some(kinds),
            Err(e) => {
                complain!("{e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let (mut passed, mut failed) = (0u64, 0u64);
    let mut kinds: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut unsteady: BTreeSet<String> = BTreeSet::new();
    for case in 0..options.cases {
        let seed = options.seed.wrapping_add(case);
        let title = format!("fuzz seed {seed}");
        let drawn = match side {
            Side::Client => generate::client_case(&options.profile, seed, options.len)
                .map(|(shape, ops)| (shape, Ops::Client(ops))),
            Side::Server => generate::server_case(&options.profile, seed, options.len)
                .map(|(shape, ops)| (shape, Ops::Server(ops))),
        };
        let Some((shape, ops)) = drawn else {
            complain!("the fuzz profile allows no case (no variant, transport or type)");
            return ExitCode::from(2);
        };
        let Some(report) = play(session, &title, &shape, &ops) else {
            complain!("{title}: the generated scenario does not parse");
            failed += 1;
            continue;
        };
        let Some(kind) = divergence(&report) else {
            passed += 1;
            let messages = report
                .lines
                .iter()
                .filter(|l| matches!(l.kind, LineKind::Request | LineKind::Response))
                .count();
            say!(
                "{title}: PASS ({} operations, {messages} messages)",
                ops.len()
            );
            continue;
        };
        failed += 1;
        let original = first_failure(&report);
        say!("{title}: diverges ({kind}) at {original}");
        let unknown = known.as_ref().is_some_and(|k| !k.contains(&kind));
        if unknown && !kinds.contains_key(&kind) {
            // A new kind must show twice: real time can make one run differ.
            let again = play(session, &title, &shape, &ops).and_then(|r| divergence(&r));
            if again.as_deref() != Some(kind.as_str()) {
                say!(
                    "{title}: played again, {}: an unsteady divergence",
                    again.as_deref().unwrap_or("it passed")
                );
                unsteady.insert(kind.clone());
            }
        }
        let first_of_kind = !kinds.contains_key(&kind);
        kinds.entry(kind.clone()).or_default().push(seed);
        if !first_of_kind {
            continue;
        }
        let shrunk = ops.shrink(options.shrink_budget, |candidate| {
            play(session, &title, &shape, candidate)
                .is_some_and(|r| divergence(&r).as_deref() == Some(kind.as_str()))
        });
        let text = shrunk.scenario(&title, &shape);
        let header = format!(
            "# xds-sansio conform {} --fuzz: seed {seed}, shrunk from {} to {} operations.\n\
             # Divergence kind: {kind}\n\
             # The model's lines are what the side under test must send; the first failing\n\
             # line is where it differs. Unshrunk, it diverged at {original}\n",
            match side {
                Side::Client => "client",
                Side::Server => "server",
            },
            ops.len(),
            shrunk.len()
        );
        let file = format!("fuzz-{seed}.xds");
        if let Some(dir) = &options.out {
            let written = std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(dir.join(&file), format!("{header}{text}")));
            if let Err(e) = written {
                complain!("{}: {e}", dir.display());
                return ExitCode::from(2);
            }
        }
        match script::parse(&text, "fuzz")
            .ok()
            .map(|scenario| session.play(&scenario, &title))
        {
            Some(report) => print_diagram(&file, &report),
            None => say!("{title}: FAIL (the minimal scenario does not parse)"),
        }
        if let Some(dir) = &options.out {
            say!("  written to {}", dir.join(&file).display());
        }
    }
    say!("\ndivergence kinds:");
    let mut new_kinds = 0;
    for (kind, seeds) in &kinds {
        let status = match &known {
            Some(known) if known.contains(kind) => "known",
            Some(_) if unsteady.contains(kind) => "unsteady",
            Some(_) => {
                new_kinds += 1;
                "NEW"
            }
            None => "found",
        };
        say!("  {status}: {kind} (seeds {seeds:?})");
    }
    say!("\n{passed} passed, {failed} failed, {} kinds", kinds.len());
    let ok = match &known {
        Some(_) => new_kinds == 0,
        None => failed == 0,
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        if new_kinds > 0 {
            complain!("{new_kinds} divergence kinds not in the known list");
        }
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_leaves_out_the_peers_words() {
        assert_eq!(
            kind_of("Request unexpected error_detail \"xDS response validation errors"),
            "Request unexpected error_detail"
        );
        assert_eq!(
            kind_of("Response expected the server to send this, it sent nothing (the server ended the stream"),
            "Response expected the server to send this, it sent nothing"
        );
        assert_eq!(kind_of("Request V"), "Request V");
    }

    #[test]
    fn the_known_list_is_read_per_label() {
        let dir = std::env::temp_dir().join(format!("xds-known-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("known.txt");
        std::fs::write(
            &path,
            "# comment\n\npeer-a: Response R  # why\npeer-b: Request V\npeer-a: end messages\n",
        )
        .unwrap();
        let a = known_kinds(&path, Some("peer-a")).unwrap();
        assert_eq!(
            a.into_iter().collect::<Vec<_>>(),
            ["Response R", "end messages"]
        );
        assert_eq!(known_kinds(&path, None).unwrap().len(), 3);
        std::fs::write(&path, "no label here\n").unwrap();
        assert!(known_kinds(&path, Some("peer-a")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
