//! `xds-sansio serve` as a child process, with a real gRPC client on 127.0.0.1: a
//! scenario's server lines played in time through a fault plan and the client judged at
//! the end; a directory of node groups with a refusal; a plan that does not parse.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::mpsc;
use xds_sansio::client::ClientEvent;
use xds_sansio::codec::{FileCodec, Format};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::time::StdClock;
use xds_sansio::types::CLUSTER;
use xds_sansio::{Client, ClientConfig, Transport, Variant};
use xds_sansio_tonic::client::{run_stream, Io, StreamCommand, StreamEnd};

const CDS: &str = CLUSTER.type_url;
const STEP: Duration = Duration::from_secs(10);

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xds-sansio-serve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `serve` as a child, its address and its output lines as they come.
struct Serve {
    child: Child,
    addr: String,
    first: String,
    lines: std_mpsc::Receiver<String>,
}

fn start(args: &[&str], path: &Path) -> Serve {
    let (child, lines) = support::spawn_with_lines(
        Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
            .arg("serve")
            .arg(path)
            .args(["--listen", "127.0.0.1:0", "--for", "30"])
            .args(args),
    );
    let first = lines.recv_timeout(STEP).unwrap();
    let addr = first
        .strip_prefix("serving on ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    Serve {
        child,
        addr,
        first,
        lines,
    }
}

impl Serve {
    /// Waits for the process to end; its exit code and every line it printed.
    fn finish(mut self) -> (Option<i32>, String) {
        let mut output = Vec::new();
        let deadline = std::time::Instant::now() + STEP * 4;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            output.push(line);
        }
        let status = self.child.wait().unwrap();
        (status.code(), output.join("\n"))
    }
}

/// One stream of the model client (it ACKs as the protocol says) subscribed to CDS
/// `name`: its events as they come, a sender that stops it, and its task.
fn model_stream(
    addr: &str,
    node: Node,
    name: &str,
) -> (
    mpsc::UnboundedReceiver<ClientEvent>,
    mpsc::UnboundedSender<StreamCommand>,
    tokio::task::JoinHandle<StreamEnd>,
) {
    let mut client = Client::new(ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        node,
    ));
    client.subscribe(CDS, &[name]).unwrap();
    let (events_tx, events) = mpsc::unbounded_channel();
    let (commands_tx, mut commands) = mpsc::unbounded_channel();
    let uri = format!("http://{addr}");
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
    (events, commands_tx, driver)
}

async fn acks(events: &mut mpsc::UnboundedReceiver<ClientEvent>, want: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + STEP;
    let mut versions = Vec::new();
    while versions.len() < want {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(ClientEvent::Acked { version, .. })) => versions.push(version.to_string()),
            Ok(Some(_)) => {}
            other => panic!("waiting for {want} ACKs, got {versions:?}: {other:?}"),
        }
    }
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_is_played_in_time_through_the_faults_and_the_client_judged() {
    let dir = scratch("scenario");
    let scenario = dir.join("story.xds");
    std::fs::write(
        &scenario,
        "title: a story\nmodel: server\nvariant: sotw\ntransport: ads\n\
         server set CDS a@1:x\nwait 1s\nserver set CDS a@2:y\n",
    )
    .unwrap();
    let record = dir.join("served.jsonl");
    let serve = start(
        &[
            "--fault",
            "duplicate type=cds nth=1",
            "--fault",
            "close after=3 status=UNAVAILABLE",
            "--exit-after-streams",
            "1",
            "--check",
            "--record",
            record.to_str().unwrap(),
        ],
        &scenario,
    );
    let node = Node {
        id: "under-test".into(),
        ..Node::default()
    };
    let (mut events, _stop, driver) = model_stream(&serve.addr, node, "a");
    // Version 1 twice (the duplicate), then version 2 a second later; the stream closes.
    let versions = acks(&mut events, 3).await;
    assert_eq!(versions[0], versions[1], "{versions:?}");
    assert_ne!(versions[1], versions[2], "{versions:?}");
    let end = tokio::time::timeout(STEP, driver).await.unwrap().unwrap();
    assert!(end.got_response, "{end:?}");
    let (code, text) = serve.finish();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("scenario line 5 published"), "{text}");
    assert!(text.contains("scenario line 7 published"), "{text}");
    assert!(text.contains("client: 0 violation(s)"), "{text}");
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert!(recorded.lines().count() > 6, "{recorded}");
}

/// A Cluster: name `c1`, type EDS, its EDS config from ADS (passes the body checks).
const CLUSTER_BODY: &[u8] = b"\x0a\x02c1\x10\x03\x1a\x04\x0a\x02\x1a\x00";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_is_served_by_group_and_a_refusal_is_a_status() {
    let dir = scratch("groups");
    let response = DiscoveryResponse {
        resources: vec![Any {
            type_url: CDS.into(),
            value: bytes::Bytes::from_static(CLUSTER_BODY),
        }],
        ..Default::default()
    };
    let text = FileCodec::new().encode(Format::Json, &response).unwrap();
    std::fs::write(dir.join("edge.json"), text).unwrap();
    let serve = start(
        &[
            "--fault",
            "refuse status=PERMISSION_DENIED message=\"not yet\" stream=1",
            "--exit-after-streams",
            "2",
        ],
        &dir,
    );
    let node = || Node {
        id: "n".into(),
        cluster: "edge".into(),
        ..Node::default()
    };
    let (_, _stop, first) = model_stream(&serve.addr, node(), "c1");
    let end = tokio::time::timeout(STEP, first).await.unwrap().unwrap();
    assert!(!end.got_response, "{end:?}");
    assert!(format!("{end:?}").contains("not yet"), "{end:?}");
    let (mut events, stop, second) = model_stream(&serve.addr, node(), "c1");
    acks(&mut events, 1).await;
    stop.send(StreamCommand::Stop).unwrap();
    tokio::time::timeout(STEP, second).await.unwrap().unwrap();
    assert!(
        serve.first.contains("(1 fault rule, seed 0)"),
        "{}",
        serve.first
    );
    let (code, text) = serve.finish();
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_plan_that_does_not_parse_is_refused_naming_its_line() {
    let dir = scratch("bad");
    let rules = dir.join("faults.txt");
    std::fs::write(&rules, "drop type=cds\nexplode\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
        .arg("serve")
        .arg(&dir)
        .args(["--listen", "127.0.0.1:0", "--faults"])
        .arg(&rules)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2") && err.contains("not a fault"),
        "{err}"
    );
}
