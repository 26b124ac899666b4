use super::*;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use xds_sansio::client::session::StreamEnd;
use xds_sansio::types::{CLUSTER, ENDPOINT};

const SIMPLE_ACK: &str = "\
title: Simple ACK
model: client
variant: sotw
transport: ads

client subscribe EDS foo bar
C->S (V=,R={foo,bar},N=,T=EDS)           # the first request
S->C (V=X,R={foo:a,bar:b},N=A,T=EDS)
C->S (V=X,R={foo,bar},N=A,T=EDS) [ack]
expect client event acked EDS version=X
";

#[test]
fn parses_the_simple_ack_diagram() {
    let scenario = parse(SIMPLE_ACK, "simple_ack").unwrap();
    assert_eq!(scenario.title, "Simple ACK");
    assert_eq!(scenario.model, Model::Client);
    assert_eq!(scenario.steps.len(), 5);
    assert_eq!(scenario.steps[1].line, 7);
    assert_eq!(
        scenario.steps[1].action,
        Action::Message {
            direction: Direction::ClientToServer,
            message: MessagePattern::SotwRequest {
                version: Some("".into()),
                names: Some(vec!["foo".into(), "bar".into()]),
                nonce: Some("".into()),
                type_url: ENDPOINT.type_url.into(),
                error: ErrorPattern::Absent,
                node: None,
            },
            tags: vec![],
        }
    );
    let Action::Message {
        message: MessagePattern::SotwResponse { resources, .. },
        ..
    } = &scenario.steps[2].action
    else {
        panic!("not a response")
    };
    assert_eq!(resources.as_ref().unwrap()[0].tag.as_deref(), Some("a"));
    assert!(matches!(&scenario.steps[3].action, Action::Message { tags, .. } if tags == &["ack"]));
    assert_eq!(
        scenario.steps[4].action,
        Action::Expect(
            Side::Client,
            Expectation::Event {
                kind: "acked".into(),
                type_url: ENDPOINT.type_url.into(),
                name: None,
                details: vec![("version".into(), "X".into())],
            }
        )
    );
}

#[test]
fn parses_delta_messages_with_attributes() {
    let text = "model: both\nvariant: delta\n\
        C->S (T=CDS,S={foo,\"xdstp://a/T/x\"},U={bar},I={foo@1},N=)\n\
        S->C (V=7,R={foo@2:t[ttl=1.5s][alias=f],baz@1[nobody]},X={bar},N=B,T=v2:CDS)\n\
        C->S (T=CDS,N=B,E=\"bad cluster\")\n";
    let scenario = parse(text, "t").unwrap();
    let Action::Message {
        message: MessagePattern::DeltaRequest {
            subscribe, initial, ..
        },
        ..
    } = &scenario.steps[0].action
    else {
        panic!()
    };
    assert_eq!(subscribe.as_ref().unwrap()[1], "xdstp://a/T/x");
    assert_eq!(initial.as_ref().unwrap()[0].version.as_deref(), Some("1"));
    let Action::Message {
        message:
            MessagePattern::DeltaResponse {
                resources,
                removed,
                type_url,
                ..
            },
        ..
    } = &scenario.steps[1].action
    else {
        panic!()
    };
    assert_eq!(Some(type_url.as_str()), CLUSTER.type_url_v2);
    let foo = &resources.as_ref().unwrap()[0];
    assert_eq!(foo.ttl, Some(core::time::Duration::from_millis(1500)));
    assert_eq!(foo.aliases, vec!["f".to_string()]);
    assert!(foo.wrapped);
    assert!(resources.as_ref().unwrap()[1].no_body);
    assert_eq!(removed.as_ref().unwrap(), &vec!["bar".to_string()]);
    assert!(matches!(
        &scenario.steps[2].action,
        Action::Message { message: MessagePattern::DeltaRequest { error: ErrorPattern::Contains(m), .. }, .. } if m == "bad cluster"
    ));
}

#[test]
fn parses_commands_and_assertions() {
    let text = "model: server\n\
        server set CDS foo:a bar@7:b\n\
        server remove CDS foo\n\
        client reject CDS foo \"too big\"\n\
        wait 15s\ndisconnect\nconnect\n\
        expect client cache CDS {bar@7}\n\
        expect client status EDS baz does-not-exist\n\
        expect server quiet\n\
        expect client no-event upserted CDS foo\n";
    let scenario = parse(text, "t").unwrap();
    let actions: Vec<_> = scenario.steps.iter().map(|s| s.action.clone()).collect();
    assert!(
        matches!(&actions[0], Action::ServerBatch(b) if matches!(&b[0], ServerCommand::Set(_, items) if items.len() == 2 && items[1].version.as_deref() == Some("7")))
    );
    assert_eq!(
        actions[2],
        Action::ClientBatch(vec![ClientCommand::Reject(
            CLUSTER.type_url.into(),
            vec!["foo".into()],
            "too big".into()
        )])
    );
    assert_eq!(
        actions[3],
        Action::Wait(core::time::Duration::from_secs(15))
    );
    assert_eq!(actions[4], Action::Disconnect);
    assert_eq!(actions[8], Action::Expect(Side::Server, Expectation::Quiet));
}

#[test]
fn errors_name_the_line_and_what_was_expected() {
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert_eq!(
        err("variant: sotw\n"),
        "a scenario needs a `model: client|server|both` header"
    );
    assert_eq!(
        err("model: client\n\nC->S (V=X,R={foo},N=A)\n"),
        "line 3: every message needs T=<type>"
    );
    assert_eq!(
        err("model: client\nC->S (V=X,R=foo,T=EDS)\n"),
        "line 2: field R takes a set, as in R={a,b}"
    );
    assert_eq!(
        err("model: client\nS->C (V=X,E=*,T=EDS)\n"),
        "line 2: field E is not allowed here (allowed: V, R, N, T, F, CP)"
    );
    assert_eq!(
        err("model: client\nC->S (V=X,T=QDS)\n"),
        "line 2: unknown type \"QDS\""
    );
    assert!(err("model: client\nC->S (V=X T=EDS)\n")
        .starts_with("line 2: expected ',' or ')' in a message, found 'T' (column 11)"));
    assert!(err("model: client\nC->S (V=X,R={foo,T=EDS)\n")
        .starts_with("line 2: expected ',' or '}' in a set"));
    assert_eq!(
        err("model: client\nwait soon\n"),
        "line 2: bad duration \"soon\""
    );
    assert!(err("model: client\nfly away\n").starts_with("line 2: unknown step \"fly\""));
    assert!(err("model: client\nS->C (T=EDS,R={a[colour=red]})\n")
        .contains("unknown attribute [colour]"));
    assert!(err("model: client\nconnect now\n").starts_with("line 2: expected the end of the line"));
}

#[test]
fn options_are_typed_at_parse_time() {
    let scenario = parse(
        "model: both\noption: dne-timeout=off\noption: nack-policy=keep-valid\n\
         option: not-found=bodyless\noption: sticky-legacy-wildcard=false\n\
         option: server-encoded=true\n",
        "t",
    )
    .unwrap();
    let options = &scenario.options;
    assert_eq!(options.does_not_exist_timeout, Some(None));
    assert_eq!(
        options.nack_policy,
        Some(xds_sansio::client::NackPolicy::KeepValid)
    );
    assert_eq!(
        options.not_found,
        Some(xds_sansio::server::NotFoundReporting::BodylessResource)
    );
    assert_eq!(options.sticky_legacy_wildcard, Some(false));
    assert_eq!(options.sotw_not_found_errors, None);
    assert!(options.server_encoded);
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert_eq!(
        err("model: client\n\noption: colour=red\n"),
        "line 3: unknown option \"colour\""
    );
    assert_eq!(
        err("model: client\noption: server-encoded=yes\n"),
        "line 2: bad value \"yes\" for option server-encoded"
    );
    assert_eq!(
        err("model: client\noption: dne-timeout=soon\n"),
        "line 2: bad value \"soon\" for option dne-timeout"
    );
}

#[test]
fn durations() {
    assert_eq!(
        parse_duration("500ms"),
        Some(core::time::Duration::from_millis(500))
    );
    assert_eq!(
        parse_duration("2m"),
        Some(core::time::Duration::from_secs(120))
    );
    assert_eq!(parse_duration("-1s"), None);
    assert_eq!(parse_duration("1e400s"), None);
    assert_eq!(parse_duration("10"), None);
}

quickcheck::quickcheck! {
    fn parser_never_panics(text: alloc::string::String) -> bool {
        let _ = parse(&text, "t");
        let _ = parse(&alloc::format!("model: client\n{text}"), "t");
        let _ = parse(&alloc::format!("model: client\nC->S {text}"), "t");
        true
    }
}

/// An xdstp name with context parameters: `=` and `&` inside, so it is written in quotes.
const XDSTP: &str = "xdstp://auth/envoy.config.cluster.v3.Cluster/a?k=v&j=w";
/// The same name as the store keeps it: canonical, context parameters sorted (xDS TP1,
/// cncf/xds `resource_name.proto`).
const XDSTP_CANONICAL: &str = "xdstp://auth/envoy.config.cluster.v3.Cluster/a?j=w&k=v";

fn replay(text: &str) -> Report {
    run(&parse(text, "t").unwrap())
}

/// What a report says, for assertion messages.
fn explain(report: &Report) -> alloc::string::String {
    let lines: Vec<_> = report
        .lines
        .iter()
        .map(|l| alloc::format!("{} {} {:?} {:?}", l.line, l.source, l.actual, l.result))
        .collect();
    alloc::format!("{}\n{:?}", lines.join("\n"), report.trailing)
}

#[track_caller]
fn passes(text: &str) -> Report {
    let report = replay(text);
    assert!(report.passed(), "{}", explain(&report));
    report
}

/// The scenario fails at `line`, with an error that contains `why`.
#[track_caller]
fn fails_at(text: &str, line: usize, why: &str) {
    let report = replay(text);
    let failed = report.lines.last().unwrap();
    assert_eq!(failed.line, line, "{}", explain(&report));
    let error = failed.result.as_ref().unwrap_err();
    assert!(error.contains(why), "{error:?} lacks {why:?}");
}

fn message_of(scenario: &Scenario, step: usize) -> MessagePattern {
    match &scenario.steps[step].action {
        Action::Message { message, .. } => message.clone(),
        other => panic!("not a message: {other:?}"),
    }
}

#[test]
fn parses_control_plane_no_node_exact_errors_latest_nonce_and_empty_type() {
    let text = "model: both\n\
        S->C (V=1,R={a},N=A,T=CDS,CP=\"cp 1\")\n\
        C->S (V=1,R={a},N=A,T=CDS,node=-,E==\"a: too big\")\n\
        C->S (V=1,R={a},N=A,T=CDS,E=\"too\")\n\
        C->S (V=1,R={a},N=^,T=-)\n";
    let scenario = parse(text, "t").unwrap();
    assert!(matches!(
        message_of(&scenario, 0),
        MessagePattern::SotwResponse { control_plane: Some(cp), .. } if cp == "cp 1"
    ));
    let MessagePattern::SotwRequest { node, error, .. } = message_of(&scenario, 1) else {
        panic!()
    };
    assert_eq!(node.as_deref(), Some(NO_NODE));
    assert_eq!(error, ErrorPattern::Exact("a: too big".into()));
    assert!(matches!(
        message_of(&scenario, 2),
        MessagePattern::SotwRequest { error: ErrorPattern::Contains(t), .. } if t == "too"
    ));
    let MessagePattern::SotwRequest {
        nonce, type_url, ..
    } = message_of(&scenario, 3)
    else {
        panic!()
    };
    assert_eq!(nonce.as_deref(), Some(LATEST_NONCE));
    assert_eq!(type_url, "");
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert_eq!(
        err("model: client\nS->C (T=CDS,CP==x)\n"),
        "line 2: field CP takes one =; only E== compares exactly"
    );
    assert_eq!(
        err("model: client\nC->S (T=CDS,E==x,E=y)\n"),
        "line 2: field E appears twice"
    );
    assert_eq!(
        err("model: client\nS->C (T=CDS,N=^)\n"),
        "line 2: N=^ (the latest nonce) is for requests"
    );
    assert_eq!(
        err("model: client\nC->S (T=CDS,CP=x)\n"),
        "line 2: field CP is not allowed here (allowed: V, R, N, T, E, node)"
    );
}

#[test]
fn quoted_names_may_hold_equals_and_ampersands() {
    let text = alloc::format!(
        "model: both\n\
         client subscribe CDS \"{XDSTP}\" ; unsubscribe CDS \"{XDSTP}\"\n\
         server set CDS \"{XDSTP}\"@1:x ; remove CDS \"{XDSTP}\"\n\
         C->S (V=,R={{\"{XDSTP}\"}},N=,T=CDS)\n\
         expect client event upserted CDS \"{XDSTP}\" version=1\n\
         expect client no-event upserted CDS \"k=v\"\n\
         expect client cache CDS {{\"{XDSTP}\"@1}}\n\
         expect client status CDS \"{XDSTP}\" acked\n"
    );
    let scenario = parse(&text, "t").unwrap();
    let name = alloc::string::String::from(XDSTP);
    assert_eq!(
        scenario.steps[0].action,
        Action::ClientBatch(vec![
            ClientCommand::Subscribe(CLUSTER.type_url.into(), vec![name.clone()]),
            ClientCommand::Unsubscribe(CLUSTER.type_url.into(), vec![name.clone()]),
        ])
    );
    let Action::ServerBatch(commands) = &scenario.steps[1].action else {
        panic!()
    };
    assert!(matches!(&commands[0], ServerCommand::Set(_, items) if items[0].name == XDSTP));
    assert_eq!(
        commands[1],
        ServerCommand::Remove(CLUSTER.type_url.into(), vec![name.clone()])
    );
    assert!(matches!(
        message_of(&scenario, 2),
        MessagePattern::SotwRequest { names: Some(n), .. } if n == [name.clone()]
    ));
    assert_eq!(
        scenario.steps[3].action,
        Action::Expect(
            Side::Client,
            Expectation::Event {
                kind: "upserted".into(),
                type_url: CLUSTER.type_url.into(),
                name: Some(name.clone()),
                details: vec![("version".into(), "1".into())],
            }
        )
    );
    // Quoted, `k=v` is a name; unquoted, a detail, which no-event does not take.
    assert!(matches!(
        &scenario.steps[4].action,
        Action::Expect(_, Expectation::NoEvent { name: Some(n), .. }) if n == "k=v"
    ));
    assert!(matches!(
        parse("model: client\nexpect client no-event upserted CDS k=v\n", "t"),
        Err(e) if e.message == "no-event takes a kind, a type and a name only"
    ));
    assert!(matches!(
        &scenario.steps[5].action,
        Action::Expect(Side::Client, Expectation::Cache(_, items)) if items[0].name == XDSTP
    ));
    assert_eq!(
        scenario.steps[6].action,
        Action::Expect(
            Side::Client,
            Expectation::Status(CLUSTER.type_url.into(), name, "acked".into())
        )
    );
}

#[test]
fn parses_unwrapped_and_responses_that_share_a_line() {
    let text = "model: client\n\
        S->C (V=1,R={a:x[unwrapped]},N=A,T=EDS) ; S->C (V=2,R={a:y},N=B,T=EDS) ; S->C (V=3,T=EDS)\n";
    let scenario = parse(text, "t").unwrap();
    let Action::Responses(messages) = &scenario.steps[0].action else {
        panic!("{:?}", scenario.steps[0].action)
    };
    assert_eq!(messages.len(), 3);
    assert!(matches!(
        &messages[0],
        MessagePattern::SotwResponse { resources: Some(r), .. } if r[0].unwrapped && !r[0].wrapped
    ));
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert!(
        err("model: client\nS->C (T=EDS,R={a[unwrapped][ttl=1s]})\n")
            .contains("[unwrapped] contradicts")
    );
    assert!(
        err("model: client\nS->C (T=EDS,R={a[nobody][unwrapped]})\n")
            .contains("[unwrapped] contradicts")
    );
    assert!(
        err("model: client\nvariant: delta\nS->C (T=EDS,R={a[unwrapped]})\n")
            .contains("[unwrapped] describes a resource of a SotW response only")
    );
    assert!(err("model: server\nserver set EDS a[unwrapped]\n").contains("[unwrapped] describes"));
    assert!(
        err("model: client\nexpect client cache EDS {a[unwrapped]}\n")
            .contains("[unwrapped] describes")
    );
    assert_eq!(
        err("model: client\nS->C (T=EDS) ; C->S (T=EDS)\n"),
        "line 2: only responses share a line: expected S->C after ';', found \"C->S\""
    );
    assert!(err("model: client\nC->S (T=EDS) ; C->S (T=EDS)\n")
        .starts_with("line 2: expected the end of the line"));
}

#[test]
fn parses_server_event_details_no_new_event_and_sends() {
    let text = "model: server\n\
        expect server event acked CDS version=X nonce=A\n\
        expect server event protocol-error node-changed\n\
        expect server event protocol-error EDS\n\
        expect server no-new-event nacked CDS\n\
        expect client no-event upserted CDS a\n\
        expect server sends (R={a@1[nobody][ttl=10s]},T=CDS) within 10s\n\
        expect server no-event protocol-error\n";
    let scenario = parse(text, "t").unwrap();
    let expectation = |i: usize| match &scenario.steps[i].action {
        Action::Expect(_, e) => e.clone(),
        other => panic!("{other:?}"),
    };
    assert!(matches!(
        expectation(0),
        Expectation::Event { details, .. } if details == [("version".into(), "X".into()), ("nonce".into(), "A".into())]
    ));
    assert_eq!(
        expectation(1),
        Expectation::Event {
            kind: "protocol-error".into(),
            type_url: "".into(),
            name: Some("node-changed".into()),
            details: vec![],
        }
    );
    assert!(matches!(
        expectation(2),
        Expectation::Event { type_url, name: None, .. } if type_url == ENDPOINT.type_url
    ));
    assert!(matches!(
        expectation(3),
        Expectation::NoEvent {
            scope: EventScope::SinceLastInput,
            ..
        }
    ));
    assert!(matches!(
        expectation(4),
        Expectation::NoEvent {
            scope: EventScope::Pending,
            ..
        }
    ));
    assert!(matches!(
        expectation(5),
        Expectation::Sends { within, message: MessagePattern::SotwResponse { .. } }
            if within == core::time::Duration::from_secs(10)
    ));
    assert!(matches!(
        expectation(6),
        Expectation::NoEvent { type_url, name: None, .. } if type_url.is_empty()
    ));
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert!(
        err("model: client\nexpect client sends (T=CDS) within 1s\n").contains(
            "expected event, no-event, no-new-event, cache, status, control-plane, quiet or (server) sends"
        )
    );
    assert_eq!(
        err("model: server\nexpect server sends (T=CDS) after 1s\n"),
        "line 2: expected within and a period after the message, found \"after\""
    );
    assert_eq!(
        err("model: server\nexpect server no-new-event acked CDS version=1\n"),
        "line 2: no-new-event takes a kind, a type and a name only"
    );
}

#[test]
fn control_plane_is_sent_and_checked() {
    // Built by the scenario: the client receives it.
    let report = passes(
        "model: client\nclient subscribe CDS a\nC->S (T=CDS)\n\
         S->C (V=1,R={a:x},N=A,T=CDS,CP=\"cp 1\")\nC->S (V=1,N=A,T=CDS)\n",
    );
    let received: Vec<_> = report
        .client_view
        .iter()
        .filter_map(|e| match e {
            crate::transcript::Entry::Response {
                response: xds_sansio::message::Response::Sotw(r),
                ..
            } => r.control_plane.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].identifier, "cp 1");
    assert!(report.lines[2]
        .actual
        .as_deref()
        .unwrap()
        .ends_with(",CP=\"cp 1\")"));
    // The client keeps it per type (a CSDS view says which server answered).
    passes(
        "model: client\nclient subscribe CDS a\nC->S (T=CDS)\n\
         expect client control-plane CDS -\n\
         S->C (V=1,R={a:x},N=A,T=CDS,CP=cp-1)\nC->S (V=1,N=A,T=CDS)\n\
         expect client control-plane CDS cp-1\n",
    );
    fails_at(
        "model: client\nclient subscribe CDS a\nC->S (T=CDS)\n\
         S->C (V=1,R={a:x},N=A,T=CDS,CP=cp-1)\nC->S (V=1,N=A,T=CDS)\n\
         expect client control-plane CDS cp-2\n",
        6,
        "control plane of CDS: expected cp-2, got cp-1",
    );
    // Checked when the model sends it: our server names no control plane.
    let server = "model: server\nvariant: delta\nserver set CDS a@1:x\n\
                  C->S (T=CDS,S={a})\nS->C (R={a@1:x},N=A,T=CDS,CP=CPX)\n";
    passes(&server.replace("CPX", "-"));
    fails_at(
        &server.replace("CPX", "cp"),
        5,
        "CP: expected \"cp\", got None",
    );
}

#[test]
fn no_node_is_built_and_checked() {
    // The client sends its node on the first request only.
    let client = "model: client\nclient subscribe EDS a\nC->S (T=EDS,node=FIRST)\n\
                  S->C (V=1,R={a:x},N=A,T=EDS)\nC->S (V=1,N=A,T=EDS,node=-)\n";
    passes(&client.replace("FIRST", "client"));
    fails_at(
        &client.replace("FIRST", "-"),
        3,
        "node: expected none, got \"client\"",
    );
    // Built: a first request without a node closes the stream.
    passes(
        "model: server\nC->S (V=,R={a},N=,T=EDS,node=-)\n\
         expect server event protocol-error node-missing\n",
    );
}

#[test]
fn exact_errors_are_checked_whole() {
    let text = "model: client\nclient defer EDS\nclient subscribe EDS a b\n\
                C->S (V=,R={a,b},N=,T=EDS)\nS->C (V=1,R={a:good,b:bad},N=A,T=EDS)\n\
                client reject EDS b \"bad endpoint\"\nC->S (N=A,T=EDS,EPATTERN)\n";
    let with = |pattern: &str| text.replace("PATTERN", pattern);
    passes(&with(r#"=="resource \"b\" rejected: bad endpoint""#));
    passes(&with("=\"bad endpoint\""));
    fails_at(
        &with("==\"bad endpoint\""),
        7,
        "is not exactly \"bad endpoint\"",
    );
    // Built: the server's NACK event carries the text as written.
    passes(
        "model: server\nserver set EDS a:x\nC->S (V=,R={a},N=,T=EDS)\n\
         S->C (V=1,R={a:x},N=A,T=EDS)\nC->S (V=,R={a},N=A,T=EDS,E==\"a \\\"quoted\\\" reason\") [nack]\n\
         expect server event nacked EDS version=1 nonce=A\n",
    );
}

#[test]
fn xdstp_names_with_parameters_run_end_to_end() {
    // The client sends, caches and reports the canonical name (context parameters
    // sorted, xDS TP1); the body names the resource as it was set.
    passes(&alloc::format!(
        "model: both\nserver set CDS \"{XDSTP}\"@1:x\n\
         client subscribe CDS \"{XDSTP}\"\n\
         C->S (V=,R={{\"{XDSTP_CANONICAL}\"}},N=,T=CDS)\n\
         S->C (R={{\"{XDSTP}\":x}},N=1,T=CDS)\n\
         C->S (R={{\"{XDSTP_CANONICAL}\"}},N=1,T=CDS)\n\
         expect client event upserted CDS \"{XDSTP_CANONICAL}\" version=V1\n\
         expect client cache CDS {{\"{XDSTP_CANONICAL}\"}}\n\
         expect client status CDS \"{XDSTP}\" acked\n\
         expect server cache CDS {{\"{XDSTP_CANONICAL}\"@1}}\n\
         client unsubscribe CDS \"{XDSTP}\"\n\
         C->S (R={{}},T=CDS)\n"
    ));
    // Unquoted, the name ends at its `=`... and is a detail, not a name.
    fails_at(
        &alloc::format!(
            "model: client\nclient subscribe CDS \"{XDSTP}\"\nC->S (T=CDS)\n\
             S->C (V=1,R={{\"{XDSTP}\":x}},N=A,T=CDS)\n\
             expect client event upserted CDS {XDSTP}\n"
        ),
        5,
        "no such client event",
    );
}

#[test]
fn an_empty_type_url_stands_for_the_stream_type() {
    let text = "model: server\ntransport: TRANSPORT\nserver set EDS a:x\n\
                C->S (V=,R={a},N=,T=-)\nS->C (V=1,R={a:x},N=A,T=EDS)\n\
                C->S (V=1,R={a},N=^,T=-) [ack]\nexpect server event acked EDS version=1 nonce=A\n";
    let report = passes(&text.replace("TRANSPORT", "EDS"));
    assert_eq!(report.lines[1].actual.as_deref(), Some("(V=,R={a},N=,T=)"));
    // On ADS a request without a type is a protocol error.
    let ads = "model: server\nC->S (V=,R={a},N=,T=-)\nexpect server event protocol-error type-url-missing\n";
    passes(ads);
    fails_at(
        &ads.replace("type-url-missing", "node-missing"),
        3,
        "no such server event",
    );
}

#[test]
fn wrapping_is_checked_in_sotw_responses() {
    let text = "model: server\nserver set EDS a:x\nC->S (V=,R={a},N=,T=EDS)\n\
                S->C (V=1,R={a:x[WRAP]},N=A,T=EDS)\n";
    passes(&text.replace("WRAP", "unwrapped"));
    fails_at(
        &text.replace("WRAP", "wrapped"),
        4,
        "a: expected a Resource wrapper",
    );
    let ttl = "model: server\nserver set EDS a:x[ttl=30s]\nC->S (V=,R={a},N=,T=EDS)\n\
               S->C (V=1,R={a:xATTR},N=A,T=EDS)\n";
    passes(&ttl.replace("ATTR", "[ttl=30s]"));
    passes(&ttl.replace("ATTR", "[wrapped]"));
    fails_at(
        &ttl.replace("ATTR", "[unwrapped]"),
        4,
        "a: expected no Resource wrapper",
    );
}

#[test]
fn responses_sharing_a_line_are_answered_once() {
    let responses = "S->C (V=1,R={a:x},N=A,T=EDS) ; S->C (V=2,R={a:y},N=B,T=EDS)";
    let text = alloc::format!(
        "model: client\nclient subscribe EDS a\nC->S (V=,R={{a}},N=,T=EDS)\n\
         {responses}\nC->S (R={{a}},N=^,T=EDS)\nexpect client quiet\n"
    );
    let report = passes(&text);
    assert_eq!(
        report.lines[2].actual.as_deref(),
        Some("(V=1,R={a:x},N=A,T=EDS) ; (V=2,R={a:y},N=B,T=EDS)")
    );
    // One line each: the client answers each, the first answer echoing A.
    fails_at(
        &text.replace(" ; S->C", "\nS->C"),
        6,
        "N: expected the latest nonce \"B\", got \"A\"",
    );
    // The model server's responses, taken in turn.
    passes(
        "model: server\nserver set EDS a:x\nserver set CDS c:x\n\
         C->S (V=,R={a},N=,T=EDS)\nC->S (V=,R={c},N=,T=CDS)\n\
         S->C (V=1,R={a:x},N=A,T=EDS) ; S->C (V=2,R={c:x},N=B,T=CDS)\n\
         C->S (V=1,R={a},N=^,T=EDS) [ack]\nC->S (V=2,R={c},N=^,T=CDS) [ack]\n",
    );
}

#[test]
fn server_events_carry_version_nonce_and_protocol_errors() {
    let text = "model: server\nserver set EDS a:x\nC->S (V=,R={a},N=,T=EDS,node=one)\n\
                S->C (V=X,R={a:x},N=A,T=EDS)\nC->S (V=X,R={a},N=A,T=EDS)\n\
                expect server event acked EDS version=X nonce=NONCE\n";
    passes(&text.replace("NONCE", "A"));
    fails_at(&text.replace("NONCE", "B"), 6, "no such server event");
    let changed = "model: server\nserver set EDS a\nC->S (V=,R={a},N=,T=EDS,node=one)\n\
                   S->C (V=X,R={a},N=A,T=EDS)\nC->S (V=X,R={a},N=A,T=EDS,node=two)\n\
                   expect server event protocol-error ERROR\n";
    passes(&changed.replace("ERROR", "node-changed"));
    fails_at(
        &changed.replace("ERROR", "node-missing"),
        6,
        "no such server event",
    );
    // The symbols of a candidate that does not match are not kept: X is still free for
    // the version of the NACK below.
    passes(
        "model: server\nserver set EDS a:x\nC->S (V=,R={a},N=,T=EDS)\n\
         S->C (V=X,R={a:x},N=A,T=EDS)\nC->S (V=,R={a},N=A,T=EDS,E=*)\n\
         expect server no-event acked EDS\nexpect server event nacked EDS version=X nonce=A\n",
    );
}

#[test]
fn no_new_event_looks_only_since_the_last_input() {
    let text = "model: client\nclient subscribe EDS a\nC->S (V=,R={a},N=,T=EDS)\n\
                S->C (V=1,R={a:x},N=A,T=EDS)\nC->S (V=1,R={a},N=A,T=EDS)\n\
                expect client event upserted EDS a\n";
    // Consumed: no-event no longer sees it; no-new-event does, until the next input.
    passes(&alloc::format!(
        "{text}expect client no-event upserted EDS a\n"
    ));
    fails_at(
        &alloc::format!("{text}expect client no-new-event upserted EDS a\n"),
        7,
        "unexpected client event upserted EDS a",
    );
    passes(&alloc::format!(
        "{text}wait 1s\nexpect client no-new-event upserted EDS a\n"
    ));
    // Not consumed, but older than the client's last input (the subscription; the
    // request lines only check what the client sent): no-event sees it, no-new-event not.
    let older = "model: client\nclient subscribe EDS a\nC->S (V=,R={a},N=,T=EDS)\n\
                 S->C (V=1,R={a:x},N=A,T=EDS)\nC->S (V=1,R={a},N=A,T=EDS)\n\
                 client subscribe EDS b\nC->S (V=1,R={a,b},N=A,T=EDS)\n";
    passes(&alloc::format!(
        "{older}expect client no-new-event upserted EDS a\n"
    ));
    fails_at(
        &alloc::format!("{older}expect client no-event upserted EDS a\n"),
        8,
        "unexpected client event upserted EDS a",
    );
}

#[test]
fn heartbeats_within_a_period_and_the_latest_nonce() {
    let text = "model: server\nvariant: delta\ntransport: CDS\nserver set CDS a@1:x[ttl=10s]\n\
                C->S (T=CDS,S={a},N=)\nS->C (R={a@1:x[ttl=10s]},N=A,T=CDS)\n\
                C->S (T=CDS,N=A) [ack]\n\
                expect server sends (R={a@1[nobody][ttl=10s]},T=CDS) within PERIOD\n\
                C->S (T=CDS,N=^) [ack]\n";
    let report = passes(&text.replace("PERIOD", "12s"));
    let sent = report.lines[4].actual.as_deref().unwrap();
    assert!(sent.matches("[nobody]").count() >= 2, "{sent}");
    fails_at(
        &text.replace("PERIOD", "1s"),
        8,
        "the server sent nothing within 1s",
    );
    fails_at(
        &text
            .replace("PERIOD", "12s")
            .replace("a@1[nobody]", "a@1:x"),
        8,
        "body of a: expected tag x",
    );
    // Without N=^ the answer must name the nonce, which heartbeats do not let a line know.
    fails_at(
        &text.replace("PERIOD", "12s").replace("N=^", "N=A"),
        9,
        "did not classify this request as [ack]",
    );
}

#[test]
fn parses_publish_and_store_lines() {
    let scenario = parse(
        "model: server\nserver set EDS a:x ; remove EDS b ; publish LDS\nserver publish CDS\n",
        "t",
    )
    .unwrap();
    let Action::ServerBatch(commands) = &scenario.steps[0].action else {
        panic!()
    };
    assert!(
        matches!(&commands[0], ServerCommand::Set(t, items) if t == ENDPOINT.type_url && items.len() == 1)
    );
    assert_eq!(
        commands[1],
        ServerCommand::Remove(ENDPOINT.type_url.into(), vec!["b".into()])
    );
    assert_eq!(
        commands[2],
        ServerCommand::Publish(xds_sansio::types::LISTENER.type_url.into())
    );
    assert_eq!(
        scenario.steps[1].action,
        Action::ServerBatch(vec![ServerCommand::Publish(CLUSTER.type_url.into())])
    );
    assert!(parse("model: server\nserver publish\n", "t")
        .unwrap_err()
        .message
        .starts_with("expected a type"));
}

#[test]
fn publish_answers_a_type_with_no_resources() {
    let text = "model: server\nC->S (V=,R={},N=,T=CDS)\nexpect server quiet\n\
                server PUBLISH\nS->C (V=EMPTY,R={},N=A,T=CDS)\n";
    passes(&text.replace("PUBLISH", "publish CDS"));
    // Publishing another type leaves CDS unanswered.
    fails_at(
        &text.replace("PUBLISH", "publish EDS"),
        5,
        "expected the server to send this, it sent nothing",
    );
}

#[test]
fn a_store_line_is_one_revision() {
    // Several types changed and published on one line: one poll sees all of it.
    passes(
        "model: server\nserver set EDS b:y\nC->S (V=,R={},N=,T=LDS)\nC->S (V=,R={a,b},N=,T=EDS)\n\
         S->C (V=1,R={b:y},N=A,T=EDS)\nC->S (V=1,R={a,b},N=A,T=EDS) [ack]\n\
         server set EDS a:x ; remove EDS b ; publish LDS\n\
         S->C (V=2,R={a:x},N=B,T=EDS)\nS->C (V=3,R={},N=C,T=LDS)\n\
         expect server cache EDS {a}\n",
    );
    // All or nothing: a bad operation leaves the store as it was, and nothing is recorded.
    let text = "model: server\nserver set EDS a:x ; set EDS \"xdstp://auth\":y\n";
    fails_at(text, 2, "xdstp://auth");
    let report = replay(text);
    assert!(report.server_view.is_empty(), "{:?}", report.server_view);
}

#[test]
fn parses_references_deps_commands_and_expectations() {
    use xds_sansio::types::{LISTENER, ROUTE};
    let text = "model: both\noption: deps-grace=5s\n\
        server set LDS l:t[ref=RDS:r]\n\
        deps watch l m\n\
        deps unwatch m\n\
        deps watch-all\n\
        expect deps snapshot\n\
        expect deps no-snapshot\n\
        expect deps waiting {RDS:r,CDS:a}\n\
        expect deps waiting {}\n\
        expect deps listener l ok\n\
        expect deps listener l error \"does not exist\"\n\
        expect deps cluster l agg {b,c}\n\
        expect deps cluster l agg error \"reaches itself\"\n";
    let scenario = parse(text, "t").unwrap();
    assert_eq!(
        scenario.options.deps_grace,
        Some(core::time::Duration::from_secs(5))
    );
    let Action::ServerBatch(commands) = &scenario.steps[0].action else {
        panic!()
    };
    let ServerCommand::Set(type_url, items) = &commands[0] else {
        panic!()
    };
    assert_eq!(type_url, LISTENER.type_url);
    assert_eq!(
        items[0].refs,
        [(ROUTE.type_url.to_string(), "r".to_string())]
    );
    let actions: Vec<&Action> = scenario.steps.iter().skip(1).map(|s| &s.action).collect();
    assert_eq!(
        actions,
        [
            &Action::Deps(DepsCommand::Watch(vec!["l".into(), "m".into()])),
            &Action::Deps(DepsCommand::Unwatch(vec!["m".into()])),
            &Action::Deps(DepsCommand::WatchAll),
            &Action::ExpectDeps(DepsExpectation::Snapshot),
            &Action::ExpectDeps(DepsExpectation::NoSnapshot),
            &Action::ExpectDeps(DepsExpectation::Waiting(vec![
                (ROUTE.type_url.into(), "r".into()),
                (CLUSTER.type_url.into(), "a".into())
            ])),
            &Action::ExpectDeps(DepsExpectation::Waiting(vec![])),
            &Action::ExpectDeps(DepsExpectation::Listener("l".into(), Outcome::Ok(vec![]))),
            &Action::ExpectDeps(DepsExpectation::Listener(
                "l".into(),
                Outcome::Error("does not exist".into())
            )),
            &Action::ExpectDeps(DepsExpectation::Cluster(
                "l".into(),
                "agg".into(),
                Outcome::Ok(vec!["b".into(), "c".into()])
            )),
            &Action::ExpectDeps(DepsExpectation::Cluster(
                "l".into(),
                "agg".into(),
                Outcome::Error("reaches itself".into())
            )),
        ]
    );
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert!(err("server set LDS l[ref=r]\n").contains("expected TYPE:name"));
    assert!(err("server set LDS l[ref=XDS:r]\n").contains("unknown type"));
    assert!(err("deps watch\n").contains("at least one listener"));
    assert!(err("deps follow l\n").contains("unknown deps command"));
    assert!(err("expect deps listener l maybe\n").contains("expected ok"));
    assert!(err("expect deps bogus\n").contains("expected snapshot"));
}

#[test]
fn deps_expectations_fail_with_what_differs() {
    let text = "model: both\nvariant: delta\n\
        server set LDS l[ref=RDS:r]\n\
        deps watch l\n\
        C->S (T=LDS,S={l},N=)\n\
        S->C (R={l},N=A,T=LDS)\n\
        expect deps snapshot\n";
    fails_at(text, 7, "no snapshot; waiting for RDS:r");
    fails_at(
        "model: client\nexpect deps snapshot\n",
        2,
        "no dependency manager",
    );
}

#[test]
fn parses_session_headers_steps_and_expectations() {
    let text = "\
model: session
servers: a b
authority: fed.example f
server-features: a ignore_resource_deletion
option: backoff-seed=9
session watch 1 CDS c1
up a
a C->S (V=,R={c1},N=,T=CDS)
down a \"refused\"
expect session event fell-back - a b
expect session watch 1 changed c1 version=1
expect session in-use - {a,b}
session unwatch 1
";
    let scenario = parse(text, "t").unwrap();
    assert_eq!(scenario.model, Model::Session);
    assert_eq!(scenario.session.servers, ["a", "b"]);
    assert_eq!(
        scenario.session.authorities,
        vec![("fed.example".to_string(), vec!["f".to_string()])]
    );
    assert_eq!(scenario.options.backoff_seed, Some(9));
    let actions: Vec<&Action> = scenario.steps.iter().map(|s| &s.action).collect();
    assert!(
        matches!(actions[0], Action::Session(SessionStep::Watch { id: 1, name: Some(n), .. }) if n == "c1")
    );
    assert!(
        matches!(actions[2], Action::Session(SessionStep::Message { server, direction: Direction::ClientToServer, .. }) if server == "a")
    );
    assert!(
        matches!(actions[3], Action::Session(SessionStep::Down(s, why)) if s == "a" && *why == StreamEnd::transport("refused"))
    );
    assert!(
        matches!(actions[4], Action::ExpectSession(SessionExpectation::Event(k, args)) if k == "fell-back" && args.len() == 3)
    );
    assert!(
        matches!(actions[6], Action::ExpectSession(SessionExpectation::InUse(a, s)) if a == "-" && s.len() == 2)
    );
    let err = |text: &str| parse(text, "t").unwrap_err().to_string();
    assert_eq!(
        err("model: session\nservers: a up\n"),
        "line 2: \"up\" is a step, not a server name"
    );
    assert!(err("model: session\nservers: a\nexpect session bogus\n")
        .starts_with("line 3: expected connect"));
}
