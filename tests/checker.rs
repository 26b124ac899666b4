//! The conformance checker against our own conversations: every scenario's transcript has
//! zero violations on the sides the model plays, and mutated copies of them are caught
//! with the right rule.
#![cfg(feature = "check")]

use std::path::Path;

use xds_sansio::check::{check, parse_jsonl, to_jsonl, CheckSide, Entry};
use xds_sansio::json::JsonCodec;
use xds_sansio::message::{Request, Response, Variant};
use xds_sansio::script::{self, Model};

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
