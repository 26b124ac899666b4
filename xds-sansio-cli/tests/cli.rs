//! The command-line tool as a user runs it: replay (diagrams, exit status, --json,
//! --record), check on what replay recorded and on other tools' recordings, rules.

use std::path::Path;
use std::process::Command;

fn tool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
}

/// The workspace root, where `scenarios/` and `examples/` are.
fn root() -> &'static Path {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    cli.parent().unwrap_or(cli)
}

#[test]
fn replay_prints_diagrams_and_a_closing_line() {
    let out = tool()
        .arg("replay")
        .arg(root().join("scenarios/seed"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("◀") && text.contains("▶") && text.contains("✓"));
    let last = text.lines().last().unwrap();
    assert!(last.ends_with(" passed, 0 failed"), "{last}");
}

#[test]
fn a_failing_scenario_fails_the_run_and_json_says_why() {
    let dir = std::env::temp_dir().join(format!("xds-sansio-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(root().join("scenarios/seed/simple_ack.xds")).unwrap();
    let wrong = dir.join("wrong.xds");
    std::fs::write(
        &wrong,
        text.replace(
            "(V=X,R={foo,bar},N=A,T=EDS) [ack]",
            "(V=Y,R={foo,bar},N=A,T=EDS) [ack]",
        ),
    )
    .unwrap();
    let out = tool().arg("replay").arg(&wrong).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 passed, 1 failed"));
    let out = tool()
        .args(["replay", "--json"])
        .arg(&wrong)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], false);
    let failed = report["lines"].as_array().unwrap().last().unwrap();
    assert_eq!(failed["line"], 11);
    assert!(failed["error"].as_str().unwrap().contains("V:"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_accepts_what_replay_recorded_and_catches_a_mutation() {
    let dir = std::env::temp_dir().join(format!("xds-sansio-rec-{}", std::process::id()));
    let out = tool()
        .args(["replay", "--record"])
        .arg(&dir)
        .arg(root().join("scenarios/seed/simple_nack.xds"))
        .output()
        .unwrap();
    assert!(out.status.success());
    for side in ["client", "server"] {
        let file = dir.join(format!("simple_nack.{side}.jsonl"));
        let out = tool()
            .args(["check", "--side", side])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // The NACK moved to the rejected version: the client broke a rule.
    let client = dir.join("simple_nack.client.jsonl");
    let text = std::fs::read_to_string(&client).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Line 1 is the header: the format, its version, whose view.
    assert_eq!(
        lines[0],
        serde_json::json!({"record": "xds-sansio", "version": 1, "view": "client"})
    );
    let rejected = lines[2]["message"]["versionInfo"].clone();
    lines[3]["message"]["versionInfo"] = rejected;
    let mutated = dir.join("mutated.jsonl");
    std::fs::write(
        &mutated,
        lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let out = tool()
        .args(["check", "--side", "client"])
        .arg(&mutated)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nack-moved-version"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_pipe_ends_the_tool_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // More output than a pipe holds, so the tool is still writing when the reader leaves
    // (`xds-sansio replay scenarios | head -1`).
    let scenarios = root().join("scenarios");
    let mut child = tool()
        .arg("replay")
        .args([&scenarios, &scenarios, &scenarios])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    assert!(out.status.success(), "{:?}", out.status);
}

#[test]
fn a_record_without_messages_says_so() {
    let dir = std::env::temp_dir().join(format!("xds-sansio-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    let out = tool()
        .args(["check", "--side", "server"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no messages"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_reads_canonical_resources_with_descriptors_and_names_the_line_without() {
    let dir = std::env::temp_dir().join(format!("xds-sansio-desc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    let record = dir.join("protojson.jsonl");
    let lines = [
        serde_json::json!({"dir": "C->S", "stream": 1, "message": {"node": {"id": "n"}, "typeUrl": cluster}}),
        serde_json::json!({"dir": "S->C", "stream": 1, "message": {"versionInfo": "1", "nonce": "A", "typeUrl": cluster,
            "resources": [{"@type": cluster, "name": "a", "connectTimeout": "1s"}]}}),
    ];
    std::fs::write(
        &record,
        lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let out = tool()
        .args(["check", "--side", "server"])
        .arg(&record)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2") && stderr.contains(cluster),
        "{stderr}"
    );
    let out = tool()
        .args(["check", "--side", "server", "--descriptors"])
        .arg(root().join("examples/data/envoy.desc"))
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("2 messages checked, 0 violations"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rules_lists_every_rule_with_its_passage() {
    let out = tool().arg("rules").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for (id, passage) in [
        (
            "type-mismatch",
            "discovery.proto, DiscoveryResponse.type_url",
        ),
        (
            "same-version-missing-resource",
            "xDS protocol, ACK/NACK and resource type instance version",
        ),
        ("node-changed", "xDS protocol, Basic Protocol Overview"),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id} missing:\n{text}"));
        assert!(line.contains(passage), "{line}");
    }
    assert_eq!(
        text.lines().count(),
        xds_sansio_conformance::check::ALL_RULES.len()
    );
}

/// The same conversation as other tools write it (`tests/fixtures/records/` of the core):
/// every shape checks clean with the schemas, and names the resource type without them.
#[test]
fn check_reads_every_shape_from_the_command_line() {
    const FIXTURES: [&str; 5] = [
        "python_json_format.jsonl",
        "python_json_format_proto_names.jsonl",
        "java_jsonformat.jsonl",
        "go_protojson.jsonl",
        "go_protojson_unpopulated.jsonl",
    ];
    const MESSAGES: usize = 13;
    let cluster = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    let descriptors = root().join("examples/data/envoy.desc");
    for name in FIXTURES {
        let file = root().join("tests/fixtures/records").join(name);
        for side in ["client", "server"] {
            let out = tool()
                .args(["check", "--side", side, "--descriptors"])
                .arg(&descriptors)
                .arg(&file)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{name} ({side}): {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                stdout.contains(&format!("{MESSAGES} messages checked, 0 violations")),
                "{name}: {stdout}"
            );
        }
        let out = tool()
            .args(["check", "--side", "server"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(cluster), "{name}: {stderr}");
    }
}
