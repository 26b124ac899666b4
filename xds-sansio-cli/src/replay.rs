//! `xds-sansio replay`: each scenario as a two-column diagram with a mark per line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use xds_sansio_conformance::check::{self, CheckSide};
use xds_sansio_conformance::script::{self, Report};

use crate::diagram::{collect, print_diagram};
use crate::output::{complain, say};

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
    let codec = xds_sansio::codec::json::JsonCodec::new();
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
