use super::*;
use crate::transcript::notation::body;
use alloc::format;
use alloc::string::ToString;
use alloc::vec;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::message::{Request, Response, Variant};
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::types::{CLUSTER, ENDPOINT, RESOURCE_WRAPPER_TYPE_URL};

fn node() -> Option<Node> {
    Some(Node {
        id: "n".into(),
        ..Default::default()
    })
}

fn req(line: usize, v: &str, names: &[&str], n: &str, t: &str, nack: bool) -> Entry {
    Entry::Request {
        line,
        stream: 1,
        request: Request::Sotw(DiscoveryRequest {
            version_info: v.into(),
            node: if line == 1 { node() } else { None },
            resource_names: names.iter().map(|s| s.to_string()).collect(),
            type_url: t.into(),
            response_nonce: n.into(),
            error_detail: nack.then(|| Status {
                code: 13,
                message: "bad".into(),
                details: vec![],
            }),
            ..Default::default()
        }),
    }
}

fn resp(line: usize, v: &str, items: &[(&str, &str)], n: &str, t: &str) -> Entry {
    Entry::Response {
        line,
        stream: 1,
        response: Response::Sotw(DiscoveryResponse {
            version_info: v.into(),
            resources: items
                .iter()
                .map(|(name, tag)| Any {
                    type_url: t.into(),
                    value: body(name, tag),
                })
                .collect(),
            type_url: t.into(),
            nonce: n.into(),
            ..Default::default()
        }),
    }
}

const EDS: &str = ENDPOINT.type_url;
const CDS: &str = CLUSTER.type_url;

fn ids(violations: &[Violation]) -> Vec<(usize, &'static str)> {
    violations.iter().map(|v| (v.line, v.rule.id())).collect()
}

/// The protocol's "requests become stale" diagram, as a server that behaves would record it.
fn stale_story() -> Vec<Entry> {
    vec![
        req(1, "", &["foo"], "", EDS, false),
        resp(2, "X", &[("foo", "x")], "A", EDS),
        req(3, "X", &["foo"], "A", EDS, false),
        req(4, "X", &["foo", "bar"], "A", EDS, false),
        resp(5, "Y", &[("foo", "y"), ("bar", "y")], "B", EDS),
        req(6, "X", &["foo", "bar"], "A", EDS, false),
        req(7, "Y", &["foo", "bar"], "B", EDS, false),
        resp(8, "Z", &[("foo", "z"), ("bar", "z")], "C", EDS),
        req(9, "Z", &["foo", "bar"], "C", EDS, false),
    ]
}

#[test]
fn a_correct_conversation_has_no_violations() {
    let story = stale_story();
    assert_eq!(check(&story, CheckSide::Client), vec![]);
    assert_eq!(check(&story, CheckSide::Server), vec![]);
}

#[test]
fn ack_and_nack_rules() {
    let mut story = stale_story();
    // NACK of Y that moves the version to Y.
    story[6] = req(7, "Y", &["foo", "bar"], "B", EDS, true);
    assert_eq!(
        ids(&check(&story, CheckSide::Client)),
        [(7, "nack-moved-version")]
    );
    // An ACK of B carrying X.
    let mut story = stale_story();
    story[6] = req(7, "X", &["foo", "bar"], "B", EDS, false);
    assert_eq!(
        ids(&check(&story, CheckSide::Client)),
        [(7, "ack-version-mismatch")]
    );
    // A nonce never sent.
    let mut story = stale_story();
    story[6] = req(7, "Y", &["foo", "bar"], "Q", EDS, false);
    let found = ids(&check(&story, CheckSide::Client));
    assert_eq!(found[0], (7, "nonce-unknown"));
    // A later request at a version never accepted.
    let mut story = stale_story();
    story.push(req(10, "W", &["foo"], "C", EDS, false));
    assert_eq!(
        ids(&check(&story, CheckSide::Client)),
        [(10, "version-not-accepted")]
    );
    // NACK without nonce, node missing.
    let mut story = stale_story();
    story.push(req(10, "Z", &["foo"], "", EDS, true));
    assert_eq!(
        ids(&check(&story, CheckSide::Client)),
        [(10, "nack-without-nonce")]
    );
    let mut story = stale_story();
    story[0] = Entry::Request {
        line: 1,
        stream: 1,
        request: Request::Sotw(DiscoveryRequest {
            type_url: EDS.into(),
            resource_names: vec!["foo".into()],
            ..Default::default()
        }),
    };
    assert_eq!(
        ids(&check(&story, CheckSide::Client)),
        [(1, "node-missing")]
    );
}

#[test]
fn server_rules() {
    // A response to the stale request on line 6, repeating Y.
    let mut story = stale_story();
    story.insert(6, resp(60, "Y", &[("foo", "y"), ("bar", "y")], "B2", EDS));
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(60, "response-to-stale-request")]
    );
    // Duplicate names and a reused nonce.
    let mut story = stale_story();
    story[7] = resp(8, "Z", &[("foo", "z"), ("foo", "z")], "A", EDS);
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(8, "nonce-reused"), (8, "duplicate-names")]
    );
    // Resending a rejected version.
    let story = vec![
        req(1, "", &["foo"], "", EDS, false),
        resp(2, "X", &[("foo", "x")], "A", EDS),
        req(3, "", &["foo"], "A", EDS, true),
        resp(4, "X", &[("foo", "x")], "B", EDS),
    ];
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(4, "resent-rejected-version")]
    );
    assert_eq!(ids(&check(&story, CheckSide::Client)), []);
    // ...but after a subscription change it is allowed.
    let mut story = story;
    story.insert(3, req(30, "", &["foo", "bar"], "A", EDS, false));
    assert_eq!(ids(&check(&story, CheckSide::Server)), []);
}

#[test]
fn full_state_rules() {
    let story = vec![
        Entry::Store {
            line: 1,
            type_url: CDS.into(),
            name: "a".into(),
            version: Some("1".into()),
        },
        Entry::Store {
            line: 2,
            type_url: CDS.into(),
            name: "b".into(),
            version: Some("1".into()),
        },
        req(3, "", &[], "", CDS, false),
        resp(4, "1", &[("a", "1"), ("b", "1")], "A", CDS),
        req(5, "1", &[], "A", CDS, false),
        Entry::Store {
            line: 6,
            type_url: CDS.into(),
            name: "a".into(),
            version: Some("2".into()),
        },
        resp(7, "2", &[("a", "2")], "B", CDS),
    ];
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(7, "full-state-missing-resource")]
    );
    // Without store knowledge, only an omission at the same version is certain.
    let story = vec![
        req(1, "", &["a", "b"], "", CDS, false),
        resp(2, "1", &[("a", "1"), ("b", "1")], "A", CDS),
        req(3, "1", &["a", "b", "c"], "A", CDS, false),
        resp(4, "1", &[("a", "1")], "B", CDS),
    ];
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(4, "same-version-missing-resource")]
    );
    // ...and only for a name still subscribed: after dropping b, "1" without b is fine.
    let story = vec![
        req(1, "", &["a", "b"], "", CDS, false),
        resp(2, "1", &[("a", "1"), ("b", "1")], "A", CDS),
        req(3, "1", &["a"], "A", CDS, false),
        resp(4, "1", &[("a", "1")], "B", CDS),
    ];
    assert_eq!(ids(&check(&story, CheckSide::Server)), []);
}

/// `entry` moved to `stream`; a request gets the node `node_id`, if given.
fn on_stream(entry: Entry, stream: u64, node_id: Option<&str>) -> Entry {
    match entry {
        Entry::Request {
            line, mut request, ..
        } => {
            if let (Request::Sotw(r), Some(id)) = (&mut request, node_id) {
                r.node = Some(Node {
                    id: id.into(),
                    ..Default::default()
                });
            }
            Entry::Request {
                line,
                stream,
                request,
            }
        }
        Entry::Response { line, response, .. } => Entry::Response {
            line,
            stream,
            response,
        },
        store => store,
    }
}

#[test]
fn full_state_versions_are_remembered_across_streams_of_a_node() {
    let first = vec![
        req(1, "", &[], "", CDS, false),
        resp(2, "1", &[("a", "1"), ("b", "1")], "A", CDS),
        req(3, "1", &[], "A", CDS, false),
    ];
    // The client reconnects; the new stream is answered at "1" without b.
    let second = |node_id: &str| {
        vec![
            on_stream(req(4, "1", &[], "", CDS, false), 2, Some(node_id)),
            on_stream(resp(5, "1", &[("a", "1")], "A", CDS), 2, None),
        ]
    };
    let story: Vec<Entry> = first.iter().cloned().chain(second("n")).collect();
    let found = check(&story, CheckSide::Server);
    assert_eq!(ids(&found), [(5, "same-version-missing-resource")]);
    assert!(found[0].detail.contains("\"b\"") && found[0].detail.contains("line 2"));
    // Another node may number its own snapshots: "1" means something else there.
    let other: Vec<Entry> = first.into_iter().chain(second("other")).collect();
    assert_eq!(ids(&check(&other, CheckSide::Server)), []);
    // The empty version is no version; a server that never sets one is not judged by it.
    let unversioned = vec![
        req(1, "", &[], "", CDS, false),
        resp(2, "", &[("a", "1"), ("b", "1")], "A", CDS),
        req(3, "", &[], "A", CDS, false),
        resp(4, "", &[("a", "1")], "B", CDS),
    ];
    assert_eq!(ids(&check(&unversioned, CheckSide::Server)), []);
    // EDS is not full state: a response carries what changed.
    let eds = vec![
        req(1, "", &["a", "b"], "", EDS, false),
        resp(2, "1", &[("a", "1"), ("b", "1")], "A", EDS),
        req(3, "1", &["a", "b"], "A", EDS, false),
        resp(4, "1", &[("a", "2")], "B", EDS),
    ];
    assert_eq!(ids(&check(&eds, CheckSide::Server)), []);
}

#[test]
fn a_resource_of_another_type_is_reported() {
    let mut story = stale_story();
    if let Entry::Response {
        response: Response::Sotw(r),
        ..
    } = &mut story[4]
    {
        r.resources[1].type_url = CDS.into();
    }
    let found = check(&story, CheckSide::Server);
    assert_eq!(ids(&found), [(5, "type-mismatch")]);
    assert!(
        found[0].detail.contains("resource 1"),
        "{}",
        found[0].detail
    );
    // Inside a Resource wrapper.
    let wrapper = Resource {
        name: "foo".into(),
        version: "1".into(),
        resource: Some(Any {
            type_url: CDS.into(),
            value: body("foo", "x"),
        }),
        ..Default::default()
    };
    let mut story = stale_story();
    if let Entry::Response {
        response: Response::Sotw(r),
        ..
    } = &mut story[1]
    {
        r.resources[0] = Any {
            type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
            value: wrapper.encode_to_vec().into(),
        };
    }
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(2, "type-mismatch")]
    );
    // A heartbeat wrapper has no type to judge; the client side is not concerned.
    assert_eq!(ids(&check(&story, CheckSide::Client)), []);
}

#[test]
fn a_reused_nonce_is_the_servers_fault_only() {
    // The server answers the hint on line 4 with nonce A again.
    let mut story = stale_story();
    story[4] = resp(5, "Y", &[("foo", "y"), ("bar", "y")], "A", EDS);
    story[5] = req(6, "Y", &["foo", "bar"], "A", EDS, false);
    story[6] = req(7, "Y", &["foo", "bar"], "A", EDS, false);
    assert_eq!(
        ids(&check(&story, CheckSide::Server)),
        [(5, "nonce-reused")]
    );
    assert_eq!(ids(&check(&story, CheckSide::Client)), []);
    // Responses crossing: both sent before either is answered; each answer is fine, and a
    // NACK of one of them carries the version accepted before.
    let crossing = vec![
        req(1, "", &["foo"], "", EDS, false),
        resp(2, "X", &[("foo", "x")], "A", EDS),
        resp(3, "Y", &[("foo", "y")], "A", EDS),
        req(4, "X", &["foo"], "A", EDS, false),
        req(5, "X", &["foo"], "A", EDS, true),
    ];
    assert_eq!(
        ids(&check(&crossing, CheckSide::Server)),
        [(3, "nonce-reused")]
    );
    assert_eq!(ids(&check(&crossing, CheckSide::Client)), []);
    // Delta: the ACK of the second response is not a repeat.
    let dreq = |line: usize, n: &str| Entry::Request {
        line,
        stream: 1,
        request: Request::Delta(DeltaDiscoveryRequest {
            node: (line == 1).then(|| node().unwrap()),
            type_url: CDS.into(),
            resource_names_subscribe: if n.is_empty() {
                vec!["a".into()]
            } else {
                vec![]
            },
            response_nonce: n.into(),
            ..Default::default()
        }),
    };
    let dresp = |line: usize, v: &str| Entry::Response {
        line,
        stream: 1,
        response: Response::Delta(DeltaDiscoveryResponse {
            resources: vec![Resource {
                name: "a".into(),
                version: v.into(),
                resource: Some(Any {
                    type_url: CDS.into(),
                    value: body("a", v),
                }),
                ..Default::default()
            }],
            type_url: CDS.into(),
            nonce: "A".into(),
            ..Default::default()
        }),
    };
    let delta = vec![
        dreq(1, ""),
        dresp(2, "1"),
        dreq(3, "A"),
        dresp(4, "2"),
        dreq(5, "A"),
    ];
    assert_eq!(
        ids(&check(&delta, CheckSide::Server)),
        [(4, "nonce-reused")]
    );
    assert_eq!(ids(&check(&delta, CheckSide::Client)), []);
    // A third answer to two responses is a repeat.
    let mut repeated = delta;
    repeated.push(dreq(6, "A"));
    assert_eq!(
        ids(&check(&repeated, CheckSide::Client)),
        [(6, "delta-nonce-repeated")]
    );
}

#[test]
fn node_changed_names_the_field() {
    let mut story = stale_story();
    if let Entry::Request {
        request: Request::Sotw(r),
        ..
    } = &mut story[2]
    {
        r.node = Some(Node {
            id: "n".into(),
            cluster: "other".into(),
            locality: Some(Default::default()),
            ..Default::default()
        });
    }
    let found = check(&story, CheckSide::Client);
    assert_eq!(ids(&found), [(3, "node-changed")]);
    assert!(
        found[0].detail.contains("cluster (\"other\", first \"\")")
            && found[0].detail.contains("locality")
            && !found[0].detail.contains("id ("),
        "{}",
        found[0].detail
    );
}

#[test]
fn delta_rules() {
    let dreq =
        |line: usize, sub: &[&str], n: &str, initial: &[(&str, &str)], nack: bool| Entry::Request {
            line,
            stream: 1,
            request: Request::Delta(DeltaDiscoveryRequest {
                node: if line == 1 { node() } else { None },
                type_url: CDS.into(),
                resource_names_subscribe: sub.iter().map(|s| s.to_string()).collect(),
                initial_resource_versions: initial
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
                response_nonce: n.into(),
                error_detail: nack.then(Status::default),
                ..Default::default()
            }),
        };
    let dresp = |line: usize, items: &[(&str, &str)], removed: &[&str], n: &str| Entry::Response {
        line,
        stream: 1,
        response: Response::Delta(DeltaDiscoveryResponse {
            resources: items
                .iter()
                .map(|(name, v)| Resource {
                    name: name.to_string(),
                    version: v.to_string(),
                    resource: Some(Any {
                        type_url: CDS.into(),
                        value: body(name, v),
                    }),
                    ..Default::default()
                })
                .collect(),
            removed_resources: removed.iter().map(|s| s.to_string()).collect(),
            type_url: CDS.into(),
            nonce: n.into(),
            ..Default::default()
        }),
    };
    let good = vec![
        dreq(1, &["a", "b"], "", &[("a", "1")], false),
        dresp(2, &[("b", "1")], &[], "A"),
        dreq(3, &[], "A", &[], false),
        dresp(4, &[("a", "2")], &["b"], "B"),
        dreq(5, &[], "B", &[], true),
        dreq(6, &["a"], "", &[], false),
        dresp(7, &[("a", "2")], &[], "C"),
    ];
    assert_eq!(check(&good, CheckSide::Client), vec![]);
    assert_eq!(check(&good, CheckSide::Server), vec![]);
    let mut bad = good.clone();
    bad[2] = dreq(3, &[], "A", &[("a", "1")], false);
    bad[4] = dreq(5, &[], "A", &[], true);
    assert_eq!(
        ids(&check(&bad, CheckSide::Client)),
        [(3, "initial-versions-late"), (5, "delta-nonce-repeated")]
    );
    let mut bad = good.clone();
    bad[1] = dresp(2, &[("a", "1"), ("b", "1")], &["b"], "");
    assert_eq!(
        ids(&check(&bad, CheckSide::Server)),
        [
            (2, "nonce-missing"),
            (2, "removed-and-sent"),
            (2, "unchanged-resend")
        ]
    );
    let mut bad = good;
    bad.remove(5);
    assert_eq!(
        ids(&check(&bad, CheckSide::Server)),
        [(7, "resent-rejected-version")]
    );
}

#[test]
fn records_round_trip_through_json_lines() {
    let codec = JsonCodec::new();
    let story = stale_story();
    let text: Vec<String> = story.iter().map(|e| to_jsonl(e, &codec).unwrap()).collect();
    let parsed = parse_jsonl(&text.join("\n"), Variant::Sotw).unwrap();
    assert_eq!(parsed.len(), story.len());
    assert_eq!(check(&parsed, CheckSide::Client), vec![]);
    let err = parse_jsonl("{\"dir\":\"C->S\"}\nnot json", Variant::Sotw).unwrap_err();
    assert_eq!(err.line, 1);
    assert!(err.message.contains("message"));
}

#[test]
fn a_recording_has_an_optional_header_of_a_version_this_reader_knows() {
    let codec = JsonCodec::new();
    let story = stale_story();
    // Written with the header: read back the same, lines numbered as in the file.
    let text = write_jsonl(&story, Some(CheckSide::Client), &codec).unwrap();
    assert!(text.starts_with(r#"{"record":"xds-sansio","version":1,"view":"client"}"#));
    let parsed = parse_jsonl(&text, Variant::Sotw).unwrap();
    assert_eq!(parsed.len(), story.len());
    assert_eq!(
        parsed.first().map(|e| match e {
            Entry::Request { line, .. } | Entry::Response { line, .. } => *line,
            Entry::Store { line, .. } => *line,
        }),
        Some(2)
    );
    // Without it, the same lines are version 1.
    let body = text.split_once('\n').unwrap().1;
    assert_eq!(parse_jsonl(body, Variant::Sotw).unwrap().len(), story.len());
    // A newer version, a header further down, or another format: errors naming the line.
    let line_of = |text: &str| {
        let err = parse_jsonl(text, Variant::Sotw).unwrap_err();
        (err.line, err.message)
    };
    let (line, message) = line_of(&format!(
        "\n{{\"record\":\"xds-sansio\",\"version\":2}}\n{body}"
    ));
    assert_eq!(line, 2);
    assert!(
        message.contains("version 2") && message.contains("newer"),
        "{message}"
    );
    let (line, message) = line_of(&format!("{body}{}", header_jsonl(None)));
    assert_eq!(line, story.len() + 1);
    assert!(message.contains("first line"), "{message}");
    for bad in [
        r#"{"record":"other","version":1}"#,
        r#"{"record":"xds-sansio"}"#,
        r#"{"record":"xds-sansio","version":0}"#,
        r#"{"record":"xds-sansio","version":1,"view":"both"}"#,
    ] {
        assert_eq!(line_of(bad).0, 1, "{bad}");
    }
}

#[test]
fn envelope_values_of_the_wrong_shape_are_errors_not_defaults() {
    let ok = |line: &str| parse_jsonl(line, Variant::Sotw);
    // Streams: a whole number, or its digits in a string.
    let stream = |line: &str| match ok(line).unwrap().first() {
        Some(Entry::Response { stream, .. }) => *stream,
        other => panic!("{other:?}"),
    };
    assert_eq!(stream(r#"{"dir":"S->C","stream":"2","binary":""}"#), 2);
    assert_eq!(
        stream(r#"{"dir":"S->C","stream":3,"time":"2024-05-01T10:00:00Z","binary":""}"#),
        3
    );
    for bad in [
        r#"{"dir":"S->C","stream":-1,"binary":""}"#,
        r#"{"dir":"S->C","stream":1.5,"binary":""}"#,
        r#"{"dir":"S->C","stream":"two","binary":""}"#,
        r#"{"dir":"S->C","variant":1,"binary":""}"#,
        r#"{"dir":"S->C","time":true,"binary":""}"#,
        r#"{"dir":"S->C","binary":"","message":{}}"#,
        r#"{"dir":"S->C","binary":7}"#,
        r#"{"dir":"S->C","store":"set","type_url":"t","name":"a"}"#,
        r#"{"store":"set","type_url":"t","name":"a","version":1}"#,
    ] {
        assert_eq!(ok(bad).map_err(|e| e.line), Err(1), "{bad}");
    }
    // Base64 as proto3 JSON takes it: standard or URL-safe, padded or not.
    let version = |line: &str| match ok(line).unwrap().first() {
        Some(Entry::Response {
            response: Response::Sotw(r),
            ..
        }) => r.version_info.clone(),
        other => panic!("{other:?}"),
    };
    for encoded in ["CgI/Pg==", "CgI/Pg", "CgI_Pg==", "CgI_Pg"] {
        let line = format!(r#"{{"dir":"S->C","binary":"{encoded}"}}"#);
        assert_eq!(version(&line), "?>", "{encoded}");
    }
}

#[test]
fn every_rule_has_an_id_and_a_passage() {
    let mut seen = BTreeSet::new();
    for rule in ALL_RULES {
        assert!(seen.insert(rule.id()));
        assert!(rule.passage().contains('"'));
    }
}

#[test]
fn the_live_checker_finds_what_the_batch_checker_finds_as_each_entry_arrives() {
    let mut story = stale_story();
    story[6] = req(7, "Y", &["foo", "bar"], "B", EDS, true);
    story[7] = resp(8, "Z", &[("foo", "z"), ("foo", "z")], "A", EDS);
    let mut live = LiveCheck::new();
    let mut found: Vec<(CheckSide, usize, &'static str)> = Vec::new();
    for (index, entry) in story.iter().enumerate() {
        live.handle_entry(entry);
        while let Some((side, violation)) = live.poll_violation() {
            // Reported as soon as the offending entry arrives.
            assert_eq!(story[index].line(), violation.line);
            found.push((side, violation.line, violation.rule.id()));
        }
    }
    let mut batch: Vec<(CheckSide, usize, &'static str)> = Vec::new();
    for side in [CheckSide::Client, CheckSide::Server] {
        batch.extend(
            check(&story, side)
                .iter()
                .map(|v| (side, v.line, v.rule.id())),
        );
    }
    let key = |v: &(CheckSide, usize, &'static str)| (v.1, v.2, v.0 == CheckSide::Server);
    found.sort_by_key(key);
    batch.sort_by_key(key);
    assert_eq!(found, batch);
    assert!(found.contains(&(CheckSide::Client, 7, "nack-moved-version")));
    assert!(found.contains(&(CheckSide::Server, 8, "duplicate-names")));
}
