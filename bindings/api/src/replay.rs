//! `replay`: a scenario parsed and replayed on the model by the toolkit, with its diagram.

use serde::Serialize;
use xds_sansio_conformance::script;

use crate::error::{Error, ErrorKind};

/// One line of a replayed scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    /// Its 1-based line in the scenario.
    pub line: usize,
    /// The line as written.
    pub source: String,
    /// What the model actually did there, when it differs in form from the source.
    pub actual: Option<String>,
    /// Whether the line held.
    pub ok: bool,
    /// Why it did not.
    pub error: Option<String>,
    /// A note (e.g. what a real implementation does not show).
    pub note: Option<String>,
}

/// A replayed scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The scenario's title.
    pub title: String,
    /// Whether every line held.
    pub passed: bool,
    /// Every line, in order.
    pub lines: Vec<Line>,
    /// A failure after the last line (e.g. a livelock).
    pub trailing: Option<String>,
    /// The two-column diagram `xds-sansio replay` prints.
    pub diagram: String,
}

/// Parses `scenario` (the scenario language, `docs/scenario-language.md`) and replays it
/// on the model. `name` titles a scenario without a `title:` and heads the diagram. A
/// line that does not parse is an error naming it; a line that fails is in the report.
pub fn replay(scenario: &str, name: &str) -> Result<Report, Error> {
    let parsed = script::parse(scenario, name)
        .map_err(|e| Error::at(ErrorKind::Scenario, e.line, e.message))?;
    let report = script::run(&parsed);
    Ok(Report {
        title: report.title.clone(),
        passed: report.passed(),
        lines: report
            .lines
            .iter()
            .map(|l| Line {
                line: l.line,
                source: l.source.clone(),
                actual: l.actual.clone(),
                ok: l.result.is_ok(),
                error: l.result.as_ref().err().cloned(),
                note: l.note.clone(),
            })
            .collect(),
        trailing: report.trailing.clone(),
        diagram: script::diagram(name, &report),
    })
}
