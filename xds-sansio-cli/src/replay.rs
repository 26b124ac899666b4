//! `xds-sansio replay`: each scenario as a two-column diagram with a mark per line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use xds_sansio::check::{self, CheckSide};
use xds_sansio::script::{self, LineKind, LineReport, Report};

use crate::output::{complain, say};

const WIDTH: usize = 78;

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
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
    let mark = if line.result.is_ok() { "✓" } else { "✗" };
    let mut out = format!("{:>4} {mark} {text}", line.line);
    if let Err(why) = &line.result {
        out.push_str(&format!("\n       expected: {}", line.source));
        if let Some(actual) = &line.actual {
            out.push_str(&format!("\n       got:      {actual}"));
        }
        out.push_str(&format!("\n       {why}"));
    }
    out
}

fn print_diagram(name: &str, report: &Report) {
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

fn json_report(name: &str, report: Option<&Report>, error: Option<String>) -> serde_json::Value {
    let lines: Vec<serde_json::Value> = report
        .map(|r| {
            r.lines
                .iter()
                .map(|l| serde_json::json!({"line": l.line, "source": l.source, "actual": l.actual, "ok": l.result.is_ok(), "error": l.result.as_ref().err()}))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "file": name,
        "title": report.map(|r| r.title.clone()),
        "passed": report.is_some_and(Report::passed),
        "lines": lines,
        "error": error.or_else(|| report.and_then(|r| r.trailing.clone())),
    })
}

/// Writes both views of a scenario's conversation into `dir`, each a recording in the
/// `check` format (docs/record-format.md) behind its header line.
fn record(dir: &Path, file: &Path, report: &Report) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let codec = xds_sansio::json::JsonCodec::new();
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    for (side, name, view) in [
        (CheckSide::Client, "client", &report.client_view),
        (CheckSide::Server, "server", &report.server_view),
    ] {
        let text = check::write_jsonl(view, Some(side), &codec).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(format!("{stem}.{name}.jsonl")), text)?;
    }
    Ok(())
}

pub fn run(paths: &[PathBuf], json: bool, record_dir: Option<&Path>) -> ExitCode {
    let mut files = Vec::new();
    for path in paths {
        if let Err(e) = collect(path, &mut files) {
            complain!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let name = file.display().to_string();
        let outcome = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                let stem = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                script::parse(&text, &stem).map_err(|e| e.to_string())
            });
        match outcome {
            Ok(scenario) => {
                let report = script::run(&scenario);
                if let Some(dir) = record_dir {
                    if let Err(e) = record(dir, file, &report) {
                        complain!("{}: cannot record: {e}", dir.display());
                        return ExitCode::from(2);
                    }
                }
                if report.passed() {
                    passed += 1;
                } else {
                    failed += 1;
                }
                if json {
                    say!("{}", json_report(&name, Some(&report), None));
                } else {
                    print_diagram(&name, &report);
                }
            }
            Err(e) => {
                failed += 1;
                if json {
                    say!("{}", json_report(&name, None, Some(e)));
                } else {
                    say!("\n{name}\n   ✗ {e}\n  => FAIL");
                }
            }
        }
    }
    if !json {
        say!("\n{passed} passed, {failed} failed");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
