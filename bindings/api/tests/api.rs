//! The bindings' API on the toolkit: each call against what the toolkit says directly.

use xds_sansio_bindings::{
    check, replay, wire, CheckOptions, ControlPlane, ControlPlaneOptions, ErrorKind, Role, Stepper,
    StepperOptions,
};

const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// A client that ACKs with a nonce the server never sent (`nonce-unknown`, line 4).
fn record_with_unknown_nonce() -> String {
    [
        r#"{"record":"xds-sansio","version":1}"#,
        r#"{"dir":"C->S","stream":1,"message":{"node":{"id":"c"},"resourceNames":["foo"],"typeUrl":"TYPE"}}"#,
        r#"{"dir":"S->C","stream":1,"message":{"versionInfo":"1","nonce":"A","resources":[{"@type":"TYPE","value":"CgNmb28SAWE="}],"typeUrl":"TYPE"}}"#,
        r#"{"dir":"C->S","stream":1,"message":{"versionInfo":"1","resourceNames":["foo"],"responseNonce":"Z","typeUrl":"TYPE"}}"#,
    ]
    .join("\n")
    .replace("TYPE", EDS)
}

#[test]
fn check_reports_the_rule_side_line_and_passage() {
    let findings = check(&record_with_unknown_nonce(), &CheckOptions::default()).unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(
        (f.rule.as_str(), f.side.as_str(), f.line),
        ("nonce-unknown", "client", 4)
    );
    assert!(!f.passage.is_empty());
}

#[test]
fn a_malformed_record_line_is_an_error_naming_it() {
    let text = format!("{}\n{{not json", record_with_unknown_nonce());
    let error = check(&text, &CheckOptions::default()).unwrap_err();
    assert_eq!((error.kind, error.line), (ErrorKind::Record, Some(5)));
    let answer: serde_json::Value = serde_json::from_str(&wire::check(&text, "")).unwrap();
    assert_eq!(answer["error"]["line"], 5);
}

#[test]
fn replay_passes_a_scenario_and_draws_it() {
    let scenario = "title: Simple ACK\nmodel: both\nvariant: sotw\n\nclient subscribe EDS foo\nserver set EDS foo:a\nC->S (V=,R={foo},N=,T=EDS)\nS->C (V=X,R={foo:a},N=A,T=EDS)\nC->S (V=X,R={foo},N=A,T=EDS) [ack]\n";
    let report = replay(scenario, "ack").unwrap();
    assert!(report.passed, "{}", report.diagram);
    assert!(report.diagram.contains("=> PASS"));
    let wrong = scenario.replace("[ack]", "[nack]");
    assert!(!replay(&wrong, "ack").unwrap().passed);
}

#[test]
fn an_unknown_scenario_step_is_an_error_naming_its_line() {
    let error = replay("model: both\n\nclient frobnicate EDS foo\n", "bad").unwrap_err();
    assert_eq!((error.kind, error.line), (ErrorKind::Scenario, Some(3)));
}

#[test]
fn the_stepper_answers_as_the_model_does() {
    use prost::Message;
    use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
    let mut server = Stepper::new(&StepperOptions {
        role: Role::Server,
        ..StepperOptions::default()
    })
    .unwrap();
    // An encoded ClusterLoadAssignment named "foo".
    server.set(EDS, b"\x0a\x03foo".to_vec()).unwrap();
    let mut client = Stepper::new(&StepperOptions::default()).unwrap();
    client.subscribe(EDS, &["foo"]).unwrap();
    let first = client.connected().unwrap();
    assert_eq!(first.messages.len(), 1);
    let answer = server.handle(&first.messages[0].bytes).unwrap();
    assert_eq!(answer.messages.len(), 1);
    let response = DiscoveryResponse::decode(answer.messages[0].bytes.as_slice()).unwrap();
    assert_eq!(response.resources.len(), 1);
    let ack = client.handle(&answer.messages[0].bytes).unwrap();
    assert!(
        ack.events.iter().any(|e| e.kind == "Upserted"),
        "{:?}",
        ack.events
    );
    let request = DiscoveryRequest::decode(ack.messages[0].bytes.as_slice()).unwrap();
    assert_eq!(request.response_nonce, response.nonce);
    let acked = server.handle(&ack.messages[0].bytes).unwrap();
    assert!(
        acked.events.iter().any(|e| e.kind == "Acked"),
        "{:?}",
        acked.events
    );
    // Not a request: an error, never a crash.
    assert_eq!(
        server.handle(b"\xff\xff").unwrap_err().kind,
        ErrorKind::Message
    );
}

#[test]
fn the_control_plane_listens_serves_and_stops() {
    let resources = format!(r#"{{"resources":[{{"@type":"{EDS}","value":"CgNmb28="}}]}}"#);
    let mut plane = ControlPlane::start(&ControlPlaneOptions {
        resources: Some(resources),
        ..ControlPlaneOptions::default()
    })
    .unwrap();
    assert_ne!(plane.port(), 0);
    std::net::TcpStream::connect(plane.address()).unwrap();
    assert!(plane.findings(None).unwrap().is_empty());
    plane.stop();
    let error = ControlPlane::start(&ControlPlaneOptions {
        resources: Some("{\"resources\": [1]}".into()),
        ..ControlPlaneOptions::default()
    })
    .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Resources);
}

#[test]
fn the_control_plane_reads_a_directory_of_resources() {
    let dir = std::env::temp_dir().join(format!("xds-sansio-bindings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Two files in two of the core's formats, each a DiscoveryResponse of resources.
    std::fs::write(
        dir.join("a.json"),
        format!(r#"{{"resources":[{{"@type":"{EDS}","value":"CgNmb28="}}]}}"#),
    )
    .unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        format!("resources:\n- '@type': {EDS}\n  value: CgNiYXI=\n"),
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a resource file").unwrap();
    let plane = ControlPlane::start(&ControlPlaneOptions {
        resources_path: Some(dir.to_string_lossy().into_owned()),
        ..ControlPlaneOptions::default()
    })
    .unwrap();
    let records = plane.records().unwrap();
    for name in ["\"foo\"", "\"bar\""] {
        assert!(records.contains(name), "{name} not served: {records}");
    }
    std::fs::write(dir.join("c.json"), "{\"resources\": 7}").unwrap();
    let error = ControlPlane::start(&ControlPlaneOptions {
        resources_path: Some(dir.to_string_lossy().into_owned()),
        ..ControlPlaneOptions::default()
    })
    .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Resources);
    assert!(error.message.contains("c.json"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_control_plane_refuses_a_bad_fault_plan_or_scenario_naming_the_line() {
    let error = ControlPlane::start(&ControlPlaneOptions {
        faults: Some("drop type=cds\nexplode\n".into()),
        ..ControlPlaneOptions::default()
    })
    .unwrap_err();
    assert_eq!((error.kind, error.line), (ErrorKind::Usage, Some(2)));
    assert!(error.message.contains("not a fault"), "{error}");
    let error = ControlPlane::start(&ControlPlaneOptions {
        scenario: Some("model: server\nvariant: sotw\ntransport: ads\nserver frobnicate\n".into()),
        ..ControlPlaneOptions::default()
    })
    .unwrap_err();
    assert_eq!((error.kind, error.line), (ErrorKind::Scenario, Some(4)));
}

#[test]
fn the_control_plane_plays_a_scenario_through_its_faults() {
    let mut plane = ControlPlane::start(&ControlPlaneOptions {
        faults: Some("duplicate\nclose after=2 status=UNAVAILABLE\n".into()),
        seed: 3,
        scenario: Some(
            "model: server\nvariant: sotw\ntransport: ads\nserver set CDS a@1:x\n".into(),
        ),
        ..ControlPlaneOptions::default()
    })
    .unwrap();
    // The scenario's first line is published at once: the recording has the store change.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !plane.records().unwrap().contains("\"a\"") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            plane.records().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    plane.stop();
}
