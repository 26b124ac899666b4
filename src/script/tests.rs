use super::*;
use crate::types::{CLUSTER, ENDPOINT};
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

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
    assert_eq!(type_url, CLUSTER.type_url_v2);
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
        "line 2: field E is not allowed here (allowed: V, R, N, T, F)"
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
        Some(crate::client::NackPolicy::KeepValid)
    );
    assert_eq!(
        options.not_found,
        Some(crate::server::NotFoundReporting::BodylessResource)
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
