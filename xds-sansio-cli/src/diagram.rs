//! The two-column diagrams of `replay` and `conform`: the client on the left, the server on
//! the right, a mark per line, and what differed under a failing line.

use std::path::{Path, PathBuf};

use xds_sansio_conformance::script::{LineKind, LineReport, Report};

use crate::output::say;

const WIDTH: usize = 78;

/// The scenario files under `path` (itself, or every `*.xds` below it, sorted).
pub fn collect(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for entry in entries {
            if entry.is_dir() || entry.extension().is_some_and(|e| e == "xds") {
                collect(&entry, out)?;
            }
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

fn arrow(text: &str, rightwards: bool) -> String {
    let body = format!(" {text} ");
    let len = body.chars().count();
    let dashes = WIDTH.saturating_sub(len + 4).max(2);
    let (left, right) = (dashes / 2, dashes - dashes / 2);
    if rightwards {
        format!("{}{}{}▶", "─".repeat(left), body, "─".repeat(right + 1))
    } else {
        format!("◀{}{}{}", "─".repeat(left + 1), body, "─".repeat(right))
    }
}

fn draw(line: &LineReport) -> String {
    let text = match line.kind {
        LineKind::Request => arrow(line.actual.as_deref().unwrap_or(&line.source), true),
        LineKind::Response => arrow(line.actual.as_deref().unwrap_or(&line.source), false),
        LineKind::Client => line.source.clone(),
        LineKind::Server => format!("{:>width$}", line.source, width = WIDTH - 1),
        LineKind::Both => format!(
            "{:^width$}",
            format!("·· {} ··", line.source),
            width = WIDTH - 1
        ),
    };
    let mark = match (&line.result, &line.note) {
        (Err(_), _) => "✗",
        (Ok(()), Some(_)) => "–",
        (Ok(()), None) => "✓",
    };
    let mut out = format!("{:>4} {mark} {text}", line.line);
    if let Some(note) = &line.note {
        out.push_str(&format!("\n       {note}"));
    }
    if let Err(why) = &line.result {
        out.push_str(&format!("\n       expected: {}", line.source));
        if let Some(actual) = &line.actual {
            out.push_str(&format!("\n       got:      {actual}"));
        }
        out.push_str(&format!("\n       {why}"));
    }
    out
}

/// Prints a scenario's report as a diagram, ending in `=> PASS` or `=> FAIL`.
pub fn print_diagram(name: &str, report: &Report) {
    say!("\n{}  ({name})", report.title);
    say!("     client{:>width$}", "server", width = WIDTH - 3);
    for line in &report.lines {
        say!("{}", draw(line));
    }
    if let Some(trailing) = &report.trailing {
        say!("   ✗ {trailing}");
    }
    say!("  => {}", if report.passed() { "PASS" } else { "FAIL" });
}
