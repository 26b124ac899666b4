//! Interop: our client (`XdsClient`, SotW on the per-type services, recorder on every
//! stream) <-> go-control-plane v0.9.7's envoy.api.v2 server (tests/interop/go-v2,
//! cmd/v2_server), with the v2 type URLs. The adapter's client picks the gRPC method from
//! the type URL it watches (the catalog, `xds_sansio::types`): a v2 type URL goes out on
//! `/envoy.api.v2.ClusterDiscoveryService/StreamClusters` and its EDS twin; over ADS it
//! always dials the v3 method, which a v2-only server does not serve, so ADS is not run.
//!
//! The story: watch v2 clusters c1, c2 and the v2 endpoints of c1; all arrive and are
//! ACKed; the server switches snapshots (SIGHUP): c2's connect timeout goes from 1 s to
//! 2 s; the change arrives and is ACKed. The conversation is recorded on our side; the
//! checker must find no violation of ours; the peer's are listed in the report.
//!
//! usage: v2_flow --server V2_SERVER_BINARY WORKDIR

#[path = "../common.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{Report, Result, STEP};
use serde_json::json;
use xds_sansio_conformance::check::{check, to_jsonl, CheckSide};
use xds_sansio::client::ResourceState;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio_conformance::transcript::Entry;
use xds_sansio::Request;
use xds_sansio_tonic::client::{BackoffConfig, Bootstrap, Watch, WatchEvent, XdsClient};
use xds_sansio_tonic::record::Recorder;

const CDS_V2: &str = "type.googleapis.com/envoy.api.v2.Cluster";
const EDS_V2: &str = "type.googleapis.com/envoy.api.v2.ClusterLoadAssignment";
/// The node v2_server's snapshots are for.
const NODE: &str = "client";

/// go-control-plane's v2 server as a child process on 127.0.0.1.
struct V2Server {
    child: Child,
    addr: String,
}

impl V2Server {
    fn start(binary: &str, workdir: &Path) -> Result<Self> {
        let log =
            std::fs::File::create(workdir.join("v2_server.log")).map_err(|e| e.to_string())?;
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--node", NODE])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{binary}: {e}"))?;
        let addr = common::listening_address(&mut child, "v2_server")?;
        Ok(V2Server { addr, child })
    }

    /// SIGHUP: the next snapshot (c2's connect timeout one second longer).
    fn next_snapshot(&self) -> Result<()> {
        let ok = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .map_err(|e| e.to_string())?
            .success();
        ok.then_some(()).ok_or("kill -HUP v2_server failed".into())
    }
}

impl Drop for V2Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A v2 Cluster's connect timeout in seconds (field 4 in v2 and v3 alike, so the v3
/// message reads it).
fn connect_timeout(body: &[u8]) -> Result<i64> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use prost::Message;
    let c = Cluster::decode(body).map_err(|e| format!("not a Cluster: {e}"))?;
    Ok(c.connect_timeout.map(|d| d.seconds).unwrap_or(-1))
}

/// Waits until every (type URL, name) in `want` has been delivered, giving the bodies.
async fn wait_for(
    label: &str,
    watches: &mut [((&str, &str), Watch)],
    want: &[(&str, &str)],
    accept: impl Fn(&str, &[u8]) -> bool,
) -> Result<BTreeMap<(String, String), Vec<u8>>> {
    let mut got = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + STEP;
    while want
        .iter()
        .any(|(t, n)| !got.contains_key(&(t.to_string(), n.to_string())))
    {
        let Some(((type_url, _), e)) = common::next_watch_event(watches, deadline).await else {
            return Err(format!("{label}: timed out; got {:?}", got.keys()));
        };
        match e {
            WatchEvent::Changed { name, body, .. } if accept(name.as_str(), &body) => {
                got.insert((type_url.to_string(), name.to_string()), body.to_vec());
            }
            WatchEvent::Changed { .. } => {}
            other => return Err(format!("{label}: our client reported {other:?}")),
        }
    }
    Ok(got)
}

/// Every body the client holds is ACKed.
async fn all_acked(label: &str, client: &XdsClient) -> Result<usize> {
    let dump = client.dump().await;
    for entry in &dump {
        if entry.body.is_some() && entry.status.status.state != ResourceState::Acked {
            return Err(format!("{label}: not ACKed: {entry:?}"));
        }
    }
    Ok(dump.iter().filter(|e| e.body.is_some()).count())
}

fn save(recorder: &Recorder, path: &Path) {
    let codec = JsonCodec::new();
    let lines: Vec<String> = recorder
        .entries()
        .iter()
        .map(|e| to_jsonl(e, &codec).unwrap())
        .collect();
    let _ = std::fs::write(path, lines.join("\n") + "\n");
}

async fn story(
    server: &V2Server,
    client: &XdsClient,
    recorder: &Recorder,
    report: &mut Report,
) -> Result<()> {
    let mut watches = Vec::new();
    for key in [(CDS_V2, "c1"), (CDS_V2, "c2"), (EDS_V2, "c1")] {
        watches.push((key, client.watch(key.0, key.1).map_err(|e| e.to_string())?));
    }
    let first = wait_for(
        "watch",
        &mut watches,
        &[(CDS_V2, "c1"), (CDS_V2, "c2"), (EDS_V2, "c1")],
        |_, _| true,
    )
    .await?;
    let c2 = &first[&(CDS_V2.to_string(), "c2".to_string())];
    if connect_timeout(c2)? != 1 {
        return Err(format!(
            "watch: c2's connect timeout is {} s, not 1 s",
            connect_timeout(c2)?
        ));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = all_acked("watch", client).await?;
    report.step(
        "watch",
        json!({"held_and_acked": held, "c2_connect_timeout_s": 1}),
    );

    server.next_snapshot()?;
    wait_for("change", &mut watches, &[(CDS_V2, "c2")], |name, body| {
        name == "c2" && connect_timeout(body).is_ok_and(|s| s == 2)
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    all_acked("change", client).await?;
    report.step(
        "change",
        json!("c2's connect timeout 2 s pushed, applied and ACKed"),
    );

    // The conversation used the v2 type URLs only.
    let urls: std::collections::BTreeSet<String> = recorder
        .entries()
        .iter()
        .filter_map(|e| match e {
            Entry::Request {
                request: Request::Sotw(r),
                ..
            } => Some(r.type_url.clone()),
            _ => None,
        })
        .collect();
    if urls.iter().any(|u| u != CDS_V2 && u != EDS_V2) {
        return Err(format!("requests with other type URLs: {urls:?}"));
    }
    Ok(())
}

async fn all(args: &[String], workdir: &Path, report: &mut Report) -> Result<()> {
    std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
    let binary = common::arg(args, "--server").ok_or("usage: v2_flow --server BINARY WORKDIR")?;
    let server = V2Server::start(&binary, workdir)?;
    let recorder = Arc::new(Recorder::new(None));
    let node = Node {
        id: NODE.into(),
        ..Node::default()
    };
    let client = XdsClient::builder(Bootstrap::single(format!("http://{}", server.addr), node))
        .per_type_streams(true)
        .backoff({
            let mut c = BackoffConfig::default();
            c.initial = Duration::from_millis(100);
            c.max = Duration::from_secs(1);
            c
        })
        .tap(recorder.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let result = story(&server, &client, &recorder, report).await;
    client.shutdown();
    save(&recorder, &workdir.join("record.jsonl"));
    result?;
    let entries = recorder.entries();
    let ours = check(&entries, CheckSide::Client);
    if !ours.is_empty() {
        return Err(format!(
            "the checker found violations of our client: {ours:#?}"
        ));
    }
    for v in check(&entries, CheckSide::Server) {
        report.deviations.push(format!(
            "checker: {}: line {}: {}",
            v.rule.id(),
            v.line,
            v.detail
        ));
    }
    report.step("checked", json!({"messages": entries.len()}));
    Ok(())
}

// One thread: the watches are all made before the driver task first runs.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = PathBuf::from(args.last().cloned().unwrap_or_default());
    let mut report = Report {
        peer: "go-control-plane-v2".into(),
        ..Default::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(120), all(&args, &workdir, &mut report))
        .await
        .unwrap_or_else(|_| Err("the story took more than 120 s".into()));
    report.finish(&workdir, result)
}
