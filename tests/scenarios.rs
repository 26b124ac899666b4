//! Replays every scenario under `scenarios/` through the model; each must pass.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "xds") {
            out.push(path);
        }
    }
}

#[test]
fn every_scenario_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut paths = Vec::new();
    files(&root, &mut paths);
    assert!(!paths.is_empty());
    let mut failures = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        match xds_sansio_conformance::script::parse(&text, &name) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(scenario) => {
                let report = xds_sansio_conformance::script::run(&scenario);
                if !report.passed() {
                    let detail: Vec<String> = report
                        .lines
                        .iter()
                        .map(|l| {
                            format!(
                                "  {:>3} {} {}{}",
                                l.line,
                                if l.result.is_ok() { "ok " } else { "ERR" },
                                l.source,
                                match (&l.result, &l.actual) {
                                    (Err(e), Some(a)) => format!("\n        got {a}\n        {e}"),
                                    (Err(e), None) => format!("\n        {e}"),
                                    _ => String::new(),
                                }
                            )
                        })
                        .collect();
                    failures.push(format!(
                        "{name}:\n{}\n  {}",
                        detail.join("\n"),
                        report.trailing.unwrap_or_default()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n\n")
    );
    eprintln!("{} scenarios passed", paths.len());
}

/// A scenario with a wrong expectation fails at that line, saying what differed.
#[test]
fn a_wrong_expectation_fails_with_the_line_and_the_difference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/seed/simple_ack.xds");
    let text = std::fs::read_to_string(root).unwrap();
    let wrong = text.replace(
        "C->S (V=X,R={foo,bar},N=A,T=EDS) [ack]",
        "C->S (V=Y,R={foo,bar},N=A,T=EDS) [ack]",
    );
    assert_ne!(text, wrong, "the scenario changed under this test");
    let scenario = xds_sansio_conformance::script::parse(&wrong, "wrong").unwrap();
    let report = xds_sansio_conformance::script::run(&scenario);
    assert!(!report.passed());
    let failed = report.lines.last().unwrap();
    assert_eq!(failed.line, 11);
    let why = failed.result.as_ref().unwrap_err();
    assert!(why.contains("V:") && why.contains("Y"), "{why}");
    assert!(
        failed.actual.as_deref().unwrap().contains("V=X"),
        "{:?}",
        failed.actual
    );
}

/// Replays every scenario of the corpus that `runs` picks, changed by `change`; the names
/// of those that fail, and how many ran.
fn replay_corpus_with(
    runs: impl Fn(xds_sansio_conformance::script::Model) -> bool,
    change: impl Fn(&mut xds_sansio_conformance::script::Scenario),
) -> (usize, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut paths = Vec::new();
    files(&root, &mut paths);
    let (mut ran, mut failures) = (0, Vec::new());
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        let mut scenario = xds_sansio_conformance::script::parse(&text, &name).unwrap();
        if !runs(scenario.model) {
            continue;
        }
        change(&mut scenario);
        ran += 1;
        if !xds_sansio_conformance::script::run(&scenario).passed() {
            failures.push(name);
        }
    }
    (ran, failures)
}

/// Every scenario in which the model plays the server, again with the server drained by
/// `poll_response_encoded` (option `server-encoded=true`): the encoded path sends the same
/// conversation.
#[test]
fn every_server_scenario_passes_through_the_encoded_path() {
    use xds_sansio_conformance::script::Model;
    let (ran, failures) = replay_corpus_with(
        |model| matches!(model, Model::Server | Model::Both),
        |scenario| scenario.options.server_encoded = true,
    );
    assert!(ran >= 20, "only {ran} server scenarios");
    assert!(failures.is_empty(), "encoded path failed: {failures:?}");
    eprintln!("{ran} server scenarios passed through the encoded path");
}

/// Every scenario in which the model plays the client, again with batched events
/// (option `client-events=batched`): the batches stand for exactly the per-resource events
/// the scenarios expect, and the client sends the same conversation.
#[test]
fn every_client_scenario_passes_with_batched_events() {
    use xds_sansio::client::EventShape;
    use xds_sansio_conformance::script::Model;
    let (ran, failures) = replay_corpus_with(
        |model| matches!(model, Model::Client | Model::Both),
        |scenario| scenario.options.client_event_shape = Some(EventShape::Batched),
    );
    assert!(ran >= 40, "only {ran} client scenarios");
    assert!(failures.is_empty(), "batched events failed: {failures:?}");
    eprintln!("{ran} client scenarios passed with batched events");
}
