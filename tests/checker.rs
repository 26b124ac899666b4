//! The conformance checker against our own conversations: every scenario's transcript has
//! zero violations on the sides the model plays, and mutated copies of them are caught
//! with the right rule.

use std::path::Path;

use serde_json::{json, Value};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::message::{Request, Response, Variant};
use xds_sansio_conformance::check::{
    check, parse_jsonl, parse_jsonl_with, to_jsonl, CheckSide, Entry,
};
use xds_sansio_conformance::script::{self, Model};

/// The server's view of a scenario (client-side mutations work on it too: the client's
/// requests and the server's responses keep their relative order in these stories).
fn transcript(relative: &str) -> (Model, Vec<Entry>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(relative);
    let scenario = script::parse(&std::fs::read_to_string(&path).unwrap(), relative).unwrap();
    let report = script::run(&scenario);
    assert!(report.passed(), "{relative} does not pass");
    (scenario.model, report.server_view)
}

fn all_scenarios(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_scenarios(&path, out);
        } else if path.extension().is_some_and(|e| e == "xds") {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
            out.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

fn rules(entries: &[Entry], side: CheckSide) -> Vec<&'static str> {
    check(entries, side)
        .into_iter()
        .map(|v| v.rule.id())
        .collect()
}

#[test]
fn our_own_conversations_have_no_violations() {
    let mut names = Vec::new();
    all_scenarios(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"),
        &mut names,
    );
    names.sort();
    let codec = JsonCodec::new();
    let mut checked = 0;
    for name in names {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(&name);
        let scenario = script::parse(&std::fs::read_to_string(&path).unwrap(), &name).unwrap();
        let report = script::run(&scenario);
        if !report.passed() {
            continue; // tests/scenarios.rs reports it
        }
        let sides: &[CheckSide] = match scenario.model {
            Model::Both => &[CheckSide::Client, CheckSide::Server],
            Model::Client => &[CheckSide::Client],
            Model::Server => &[CheckSide::Server],
            // Several servers, each its own conversation: the session's rules are checked
            // by its scenarios' expectations, not by the single-stream checker.
            Model::Session => &[],
        };
        for side in sides {
            let view = match side {
                CheckSide::Client => &report.client_view,
                CheckSide::Server => &report.server_view,
            };
            // Through JSON lines and back, as other implementations will hand them in.
            let text: Vec<String> = view.iter().map(|e| to_jsonl(e, &codec).unwrap()).collect();
            let entries = parse_jsonl(&text.join("\n"), scenario.variant).unwrap();
            let violations = check(&entries, *side);
            assert!(
                violations.is_empty(),
                "{name} ({side:?}): {violations:#?}\n{}",
                text.join("\n")
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} transcripts checked");
}

fn find_request(entries: &mut [Entry], pred: impl Fn(&Request) -> bool) -> &mut Request {
    entries
        .iter_mut()
        .rev()
        .find_map(|e| match e {
            Entry::Request { request, .. } if pred(request) => Some(request),
            _ => None,
        })
        .expect("no such request")
}

#[test]
fn mutated_conversations_are_caught_with_the_right_rule() {
    // A wrong nonce in the client's ACK.
    let (_, mut entries) = transcript("seed/simple_ack.xds");
    if let Request::Sotw(r) = find_request(
        &mut entries,
        |r| matches!(r, Request::Sotw(r) if !r.response_nonce.is_empty()),
    ) {
        r.response_nonce = "never-sent".into();
    }
    assert_eq!(rules(&entries, CheckSide::Client), ["nonce-unknown"]);

    // A NACK that moves the version to the rejected one.
    let (_, mut entries) = transcript("seed/simple_nack.xds");
    let rejected = entries
        .iter()
        .find_map(|e| match e {
            Entry::Response {
                response: Response::Sotw(r),
                ..
            } => Some(r.version_info.clone()),
            _ => None,
        })
        .unwrap();
    if let Request::Sotw(r) = find_request(
        &mut entries,
        |r| matches!(r, Request::Sotw(r) if r.error_detail.is_some()),
    ) {
        r.version_info = rejected;
    }
    assert_eq!(rules(&entries, CheckSide::Client), ["nack-moved-version"]);

    // Duplicate names in a response.
    let (_, mut entries) = transcript("seed/simple_ack.xds");
    for e in &mut entries {
        if let Entry::Response {
            response: Response::Sotw(r),
            ..
        } = e
        {
            let first = r.resources[0].clone();
            r.resources.push(first);
        }
    }
    assert_eq!(rules(&entries, CheckSide::Server), ["duplicate-names"]);

    // A full-state (CDS) response that drops a subscribed, existing resource.
    let (_, mut entries) = transcript("seed/ads_multiplexing.xds");
    let last_cds = entries
        .iter_mut()
        .rev()
        .find_map(|e| match e {
            Entry::Response {
                response: Response::Sotw(r),
                ..
            } if r.type_url.ends_with("Cluster") && r.resources.len() > 1 => Some(r),
            _ => None,
        })
        .unwrap();
    last_cds.resources.pop();
    assert_eq!(
        rules(&entries, CheckSide::Server),
        ["full-state-missing-resource"]
    );

    // A response to a stale request: the server answers the stale hint with what it has
    // already sent.
    let (_, mut entries) = transcript("seed/requests_become_stale.xds");
    let stale_at = entries
        .iter()
        .position(|e| matches!(e, Entry::Request { request: Request::Sotw(r), .. } if r.response_nonce == "1" && r.resource_names.len() == 1))
        .expect("the stale ACK of X");
    let previous = entries[..stale_at]
        .iter()
        .rev()
        .find_map(|e| match e {
            Entry::Response {
                response: Response::Sotw(r),
                ..
            } => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    let mut resent = previous;
    resent.nonce = "resent".into();
    entries.insert(
        stale_at + 1,
        Entry::Response {
            line: 0,
            stream: 1,
            response: Response::Sotw(resent),
        },
    );
    assert_eq!(
        rules(&entries, CheckSide::Server),
        ["response-to-stale-request"]
    );
    let _ = Variant::Sotw;
}

/// One side's view of a scenario as JSON lines, as `xds-sansio replay --record` writes it.
fn recording(relative: &str, side: CheckSide) -> (Variant, Vec<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(relative);
    let scenario = script::parse(&std::fs::read_to_string(&path).unwrap(), relative).unwrap();
    let report = script::run(&scenario);
    assert!(report.passed(), "{relative} does not pass");
    let view = match side {
        CheckSide::Client => &report.client_view,
        CheckSide::Server => &report.server_view,
    };
    let codec = JsonCodec::new();
    let lines = view
        .iter()
        .map(|e| serde_json::from_str(&to_jsonl(e, &codec).unwrap()).unwrap())
        .collect();
    (scenario.variant, lines)
}

/// The violations of `side` in `lines`, as (line, rule id), read back as `check` reads them.
fn judge(lines: &[Value], variant: Variant, side: CheckSide) -> Vec<(usize, &'static str)> {
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    let entries = parse_jsonl(&text.join("\n"), variant).unwrap();
    check(&entries, side)
        .into_iter()
        .map(|v| (v.line, v.rule.id()))
        .collect()
}

/// The 0-based indexes of the lines travelling `dir` ("C->S" or "S->C").
fn lines_going(lines: &[Value], dir: &str) -> Vec<usize> {
    (0..lines.len())
        .filter(|&i| lines[i]["dir"] == dir)
        .collect()
}

#[test]
fn a_resource_of_another_type_is_caught_at_its_line() {
    // SotW: the first response's first resource becomes a Listener.
    let (variant, mut lines) = recording("seed/simple_ack.xds", CheckSide::Server);
    assert_eq!(judge(&lines, variant, CheckSide::Server), []);
    let at = lines_going(&lines, "S->C")[0];
    lines[at]["message"]["resources"][0]["@type"] =
        json!("type.googleapis.com/envoy.config.listener.v3.Listener");
    assert_eq!(
        judge(&lines, variant, CheckSide::Server),
        [(at + 1, "type-mismatch")]
    );

    // SotW inside a Resource wrapper.
    let (variant, mut lines) = recording("client/sotw/wrapped_resources.xds", CheckSide::Server);
    let at = lines_going(&lines, "S->C")[0];
    lines[at]["message"]["resources"][0]["resource"]["@type"] =
        json!("type.googleapis.com/envoy.config.cluster.v3.Cluster");
    assert_eq!(
        judge(&lines, variant, CheckSide::Server),
        [(at + 1, "type-mismatch")]
    );

    // Delta: the second update's resource is a RouteConfiguration.
    let (variant, mut lines) = recording("seed/incremental_session.xds", CheckSide::Server);
    assert_eq!(judge(&lines, variant, CheckSide::Server), []);
    let at = lines_going(&lines, "S->C")[1];
    lines[at]["message"]["resources"][0]["resource"]["@type"] =
        json!("type.googleapis.com/envoy.config.route.v3.RouteConfiguration");
    assert_eq!(
        judge(&lines, variant, CheckSide::Server),
        [(at + 1, "type-mismatch")]
    );
}

#[test]
fn a_full_state_version_presented_again_without_a_resource_is_caught_on_another_stream() {
    // The CDS story of the ADS example, recorded without store lines (as another server
    // records it), then the client reconnects: stream 2 is answered at the last CDS version
    // without one of its clusters.
    let (variant, lines) = recording("seed/ads_multiplexing.xds", CheckSide::Server);
    let mut lines: Vec<Value> = lines
        .into_iter()
        .filter(|l| l.get("store").is_none())
        .collect();
    assert_eq!(judge(&lines, variant, CheckSide::Server), []);
    let is_cds = |l: &Value| {
        l["message"]["typeUrl"] == "type.googleapis.com/envoy.config.cluster.v3.Cluster"
    };
    let first_request = lines
        .iter()
        .find(|l| l["dir"] == "C->S" && is_cds(l))
        .unwrap()
        .clone();
    let last_response = lines
        .iter()
        .rev()
        .find(|l| l["dir"] == "S->C" && is_cds(l))
        .unwrap()
        .clone();
    assert_eq!(
        last_response["message"]["resources"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let mut reconnect = first_request;
    reconnect["stream"] = json!(2);
    reconnect["message"]["versionInfo"] = last_response["message"]["versionInfo"].clone();
    let mut answer = last_response;
    answer["stream"] = json!(2);
    answer["message"]["nonce"] = json!("1");
    lines.push(reconnect.clone());
    lines.push(answer.clone());
    // Unchanged, the new stream is fine.
    assert_eq!(judge(&lines, variant, CheckSide::Server), []);
    let at = lines.len() - 1;
    lines[at]["message"]["resources"]
        .as_array_mut()
        .unwrap()
        .pop();
    assert_eq!(
        judge(&lines, variant, CheckSide::Server),
        [(at + 1, "same-version-missing-resource")]
    );
    // Another node's stream may have its own "version" of that name.
    lines[at - 1]["message"]["node"]["id"] = json!("another-node");
    assert_eq!(judge(&lines, variant, CheckSide::Server), []);
}

#[test]
fn a_reused_nonce_is_caught_at_the_server_and_the_clients_ack_is_not() {
    // (scenario, the response that reuses the nonce of the one before, the request that
    // ACKs it), counted from 0 among the lines of each direction.
    for (scenario, response, ack) in [
        // SotW: Y is sent with X's nonce after the NACK of X; the client ACKs Y with it.
        ("seed/ack_after_nack.xds", 1, 2),
        // Delta: the spontaneous "wc" update reuses the NACKed update's nonce.
        ("seed/incremental_session.xds", 2, 4),
    ] {
        for side in [CheckSide::Server, CheckSide::Client] {
            let (variant, mut lines) = recording(scenario, side);
            assert_eq!(judge(&lines, variant, CheckSide::Server), [], "{scenario}");
            assert_eq!(judge(&lines, variant, CheckSide::Client), [], "{scenario}");
            let responses = lines_going(&lines, "S->C");
            let requests = lines_going(&lines, "C->S");
            let reused = lines[responses[response - 1]]["message"]["nonce"].clone();
            let at = responses[response];
            let old = lines[at]["message"]["nonce"].clone();
            lines[at]["message"]["nonce"] = reused.clone();
            let ack_at = requests[ack];
            assert_eq!(lines[ack_at]["message"]["responseNonce"], old, "{scenario}");
            lines[ack_at]["message"]["responseNonce"] = reused;
            assert_eq!(
                judge(&lines, variant, CheckSide::Server),
                [(at + 1, "nonce-reused")],
                "{scenario} ({side:?} view)"
            );
            assert_eq!(
                judge(&lines, variant, CheckSide::Client),
                [],
                "{scenario} ({side:?} view)"
            );
        }
    }
}

/// A recording as Go's `protojson` writes it: resources as canonical JSON (their fields
/// beside `"@type"`), which only a schema can read.
const CANONICAL: &str = r#"{"dir":"C->S","stream":1,"message":{"node":{"id":"n"},"typeUrl":"type.googleapis.com/envoy.config.cluster.v3.Cluster"}}
{"dir":"S->C","stream":1,"message":{"versionInfo":"1","nonce":"A","typeUrl":"type.googleapis.com/envoy.config.cluster.v3.Cluster","resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"a","connectTimeout":"1s"},{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"b"}]}}
{"dir":"C->S","stream":1,"message":{"versionInfo":"1","responseNonce":"A","typeUrl":"type.googleapis.com/envoy.config.cluster.v3.Cluster"}}"#;

fn envoy_codec() -> JsonCodec {
    let set = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/envoy.desc"))
        .unwrap();
    let mut codec = JsonCodec::new();
    codec.add_file_descriptor_set(&set).unwrap();
    codec
}

#[test]
fn a_resource_without_schema_is_an_error_never_an_empty_resource() {
    let err = parse_jsonl(CANONICAL, Variant::Sotw).unwrap_err();
    assert_eq!(err.line, 2);
    assert!(
        err.message
            .contains("type.googleapis.com/envoy.config.cluster.v3.Cluster"),
        "{err}"
    );
    // With the schemas, the resources are read by their fields: two names, no violation;
    // the same name twice is caught (an empty reading would have seen "" twice either way).
    let codec = envoy_codec();
    let entries = parse_jsonl_with(CANONICAL, Variant::Sotw, &codec).unwrap();
    assert_eq!(check(&entries, CheckSide::Server), []);
    let twice = CANONICAL.replace(r#""name":"b""#, r#""name":"a""#);
    let entries = parse_jsonl_with(&twice, Variant::Sotw, &codec).unwrap();
    let found: Vec<_> = check(&entries, CheckSide::Server)
        .into_iter()
        .map(|v| (v.line, v.rule.id(), v.detail))
        .collect();
    assert_eq!(
        found,
        [(2, "duplicate-names", r#""a" appears twice"#.into())]
    );
    // Recordings in the base64 form read the same with the schemas as without.
    for scenario in ["seed/ads_multiplexing.xds", "seed/incremental_session.xds"] {
        let (variant, lines) = recording(scenario, CheckSide::Server);
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        let text = text.join("\n");
        assert_eq!(
            parse_jsonl_with(&text, variant, &codec).unwrap(),
            parse_jsonl(&text, variant).unwrap(),
            "{scenario}"
        );
    }
}
