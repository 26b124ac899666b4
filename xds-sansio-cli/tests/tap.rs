//! `xds-sansio tap` between the adapter's client driver and the adapter's server, over real
//! gRPC on 127.0.0.1: the conversation passes unchanged (first fetch, a change, ACKs), the
//! recording checks clean on both sides, and a client that breaks a rule (a first request
//! without a node) is reported live, with its stream, line and rule.

mod support;

use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tonic::codegen::http::uri::PathAndQuery;
use xds_sansio::client::ClientEvent;
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::time::StdClock;
use xds_sansio::types::{ADS_SOTW_METHOD, CLUSTER, ENDPOINT};
use xds_sansio::{Client, ClientConfig, Transport, Variant};
use xds_sansio_tonic::client::{run_stream, Io, StreamCommand};
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
const STEP: Duration = Duration::from_secs(10);

fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

/// The tap as a child process, its address and its output lines as they come.
struct Tap {
    child: Child,
    addr: String,
    lines: std_mpsc::Receiver<String>,
}

fn start_tap(upstream: &str, record: &Path, streams: u64) -> Tap {
    let (child, lines) = support::spawn_with_lines(
        Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
            .args(["tap", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .arg("--record")
            .arg(record)
            .args(["--exit-after-streams", &streams.to_string()]),
    );
    let first = lines.recv_timeout(STEP).unwrap();
    let addr = first
        .strip_prefix("tap listening on ")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    Tap { child, addr, lines }
}

async fn wait_acks(
    want: usize,
    acks: &mut usize,
    events: &mut mpsc::UnboundedReceiver<ClientEvent>,
) {
    let deadline = tokio::time::Instant::now() + STEP;
    while *acks < want {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(ClientEvent::Acked { .. })) => *acks += 1,
            Ok(Some(_)) => {}
            other => panic!("waiting for {want} ACKs, got {acks}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tap_forwards_records_and_reports_live() {
    let server = XdsServer::builder()
        .body_checks(xds_sansio::server::BodyChecks::Off) // placeholder bodies
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap().to_string();
    tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    server.update(DEFAULT_GROUP, |s| {
        s.set(CDS, "c1", body("c1", "a")).unwrap();
        s.set(CDS, "c2", body("c2", "a")).unwrap();
        s.set(EDS, "c1", body("c1", "e")).unwrap();
    });
    let dir = std::env::temp_dir().join(format!("xds-sansio-tap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("tap.jsonl");
    let mut tap = start_tap(&upstream, &record, 2);

    // Stream 1: the adapter's client through the tap: first fetch, a change, ACKs.
    let node = Node {
        id: "tapped".into(),
        ..Node::default()
    };
    let mut client = Client::new(ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        node,
    ));
    client.subscribe(CDS, &["c1", "c2"]).unwrap();
    client.subscribe(EDS, &["c1"]).unwrap();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (commands_tx, mut commands) = mpsc::unbounded_channel();
    let uri = format!("http://{}", tap.addr);
    let driver = tokio::spawn(async move {
        let clock = StdClock::new();
        let mut on_event = move |_: &Client, e: ClientEvent| {
            let _ = events_tx.send(e);
        };
        let channel = tonic::transport::Endpoint::from_shared(uri)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let io = Io::new(channel, &clock, &mut commands, &mut on_event);
        run_stream(&mut client, io).await
    });
    let mut acks = 0;
    wait_acks(2, &mut acks, &mut events).await;
    server.update(DEFAULT_GROUP, |s| {
        s.set(CDS, "c1", body("c1", "b")).unwrap()
    });
    wait_acks(3, &mut acks, &mut events).await;
    commands_tx.send(StreamCommand::Stop).unwrap();
    let end = tokio::time::timeout(STEP, driver).await.unwrap().unwrap();
    assert!(end.stopped && end.got_response, "{end:?}");

    // Stream 2: a client whose first request has no node (xDS protocol, "Basic Protocol
    // Overview"): the tap reports it as it passes; the server ends the stream.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", tap.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let first = DiscoveryRequest {
        type_url: CDS.into(),
        resource_names: vec!["c1".into()],
        ..Default::default()
    };
    let call = grpc
        .streaming(
            tonic::Request::new(tokio_stream::iter(vec![first])),
            PathAndQuery::from_static(ADS_SOTW_METHOD),
            tonic_prost::ProstCodec::<DiscoveryRequest, DiscoveryResponse>::default(),
        )
        .await;
    if let Ok(response) = call {
        let mut inbound = response.into_inner();
        let _ = tokio::time::timeout(STEP, inbound.message()).await;
    }

    // The tap stops after the two streams; its output and its recording.
    let mut output = Vec::new();
    let deadline = std::time::Instant::now() + STEP;
    while let Ok(line) = tap
        .lines
        .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        output.push(line);
    }
    let status = tap.child.wait().unwrap();
    let text = output.join("\n");
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(text.contains("stream 1 opened: /envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources (SotW ADS)"), "{text}");
    assert!(text.contains("stream 1 ended"), "{text}");
    assert!(text.contains("stream 2 line "), "{text}");
    assert!(text.contains("client broke node-missing"), "{text}");
    assert!(!text.contains("server broke"), "{text}");
    assert!(text.contains(" messages checked, 1 violations"), "{text}");

    let check = |side: &str| {
        Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
            .args(["check", "--side", side])
            .arg(&record)
            .output()
            .unwrap()
    };
    let server_side = check("server");
    assert!(
        server_side.status.success(),
        "{}",
        String::from_utf8_lossy(&server_side.stdout)
    );
    let client_side = String::from_utf8_lossy(&check("client").stdout).into_owned();
    assert!(client_side.contains(": node-missing:"), "{client_side}");
    assert!(client_side.contains(", 1 violations"), "{client_side}");
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert!(
        recorded.starts_with("{\"record\":\"xds-sansio\""),
        "{recorded}"
    );
    // Three ACKs and what they answer, at least, on stream 1.
    assert!(recorded.lines().count() >= 8, "{recorded}");
    let _ = std::fs::remove_dir_all(&dir);
}
