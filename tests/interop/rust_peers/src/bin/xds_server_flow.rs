//! Interop: our client (the client driver of `xds-sansio-tonic`) <->
//! `xds-server` 0.1.0 (crates.io) on 127.0.0.1, SotW and delta over ADS, and SotW on the
//! per-type CDS service.
//!
//! xds-server answers requests from a snapshot but does not push a new snapshot to open
//! streams, so only first fetches are tested: our client subscribes to two Clusters and a
//! third that does not exist (or to every Cluster, legacy wildcard) and one
//! ClusterLoadAssignment, must receive exactly the snapshot's bodies (envoy-types
//! resources) and ACK them, and must not invent the missing one. The conversation is recorded on our
//! side; the checker must find no violation of ours; what the peer breaks is listed.
//!
//! usage: xds_server_flow WORKDIR

#[path = "../common.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{Report, Result, STEP};
use serde_json::json;
use tokio::sync::mpsc;
use xds_cache::{Cache, ShardedCache, Snapshot};
use xds_core::{NodeHash, TypeUrl};
use xds_sansio::check::{check, to_jsonl, CheckSide};
use xds_sansio::client::ClientEvent;
use xds_sansio::json::JsonCodec;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::time::StdClock;
use xds_sansio::{Client, ClientConfig, Transport, Variant};
use xds_sansio_tonic::client::{run_stream, Command, Io};
use xds_sansio_tonic::record::Recorder;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const NODE: &str = "xds-sansio-client";

/// A resource as xds-server stores it (its own `AnyResource` is not exported).
#[derive(Debug)]
struct Raw {
    name: String,
    any: prost_types::Any,
}

impl xds_core::Resource for Raw {
    fn type_url(&self) -> &str {
        &self.any.type_url
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn encode(
        &self,
    ) -> std::result::Result<prost_types::Any, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.any.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Real resources (envoy-types): a Cluster or a ClusterLoadAssignment named `name`.
fn body(type_url: &str, name: &str, note: &str) -> Vec<u8> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::core::v3::Locality;
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, LocalityLbEndpoints,
    };
    use prost::Message;
    if type_url == CDS {
        Cluster {
            name: name.into(),
            alt_stat_name: note.into(),
            ..Default::default()
        }
        .encode_to_vec()
    } else {
        ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![LocalityLbEndpoints {
                locality: Some(Locality {
                    region: note.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec()
    }
}

fn snapshot() -> (Snapshot, BTreeMap<(&'static str, &'static str), Vec<u8>>) {
    let mut served = BTreeMap::new();
    served.insert((CDS, "c1"), body(CDS, "c1", "cluster one"));
    served.insert((CDS, "c2"), body(CDS, "c2", "cluster two"));
    served.insert((EDS, "c1"), body(EDS, "c1", "endpoints one"));
    let mut builder = Snapshot::builder().version("v1");
    for ((type_url, name), body) in &served {
        let any = prost_types::Any {
            type_url: type_url.to_string(),
            value: body.clone(),
        };
        builder = builder.resource(
            TypeUrl::new(*type_url),
            Arc::new(Raw {
                name: name.to_string(),
                any,
            }),
        );
    }
    (builder.build(), served)
}

async fn fetch(
    uri: &str,
    variant: Variant,
    transport: Transport,
    served: &BTreeMap<(&'static str, &'static str), Vec<u8>>,
    report: &mut Report,
    label: &str,
    workdir: &PathBuf,
    wildcard: bool,
) -> Result<()> {
    let node = Node {
        id: NODE.into(),
        ..Node::default()
    };
    let per_type = matches!(transport, Transport::PerType(_));
    let mut client = Client::new(ClientConfig::new(variant, transport, node));
    // Legacy wildcard (no names) or two existing names and one that does not exist.
    let names: &[&str] = if wildcard { &[] } else { &["c1", "c2", "c3"] };
    client.subscribe(CDS, names).map_err(|e| e.to_string())?;
    if !per_type {
        client.subscribe(EDS, &["c1"]).map_err(|e| e.to_string())?;
    }
    let recorder = Arc::new(Recorder::new(None));
    let clock = StdClock::new();
    let (commands_tx, mut commands) = mpsc::unbounded_channel();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut on_event = move |_: &Client, e: ClientEvent| {
        let _ = events_tx.send(e);
    };
    let channel = tonic::transport::Endpoint::from_shared(uri.to_string())
        .map_err(|e| e.to_string())?
        .connect_timeout(STEP)
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let recorder_ref = recorder.clone();
    let run = tokio::spawn(async move {
        let io = Io {
            channel,
            clock: &clock,
            commands: &mut commands,
            on_event: &mut on_event,
            tap: Some(&recorder_ref.client(1)),
        };
        run_stream(&mut client, io).await;
        client
    });
    // Every served resource of a subscribed type arrives with its body, and is ACKed.
    let mut want: BTreeMap<(String, String), Vec<u8>> = served
        .iter()
        .filter(|((t, _), _)| !per_type || *t == CDS)
        .map(|((t, n), b)| ((t.to_string(), n.to_string()), b.clone()))
        .collect();
    let mut acked = std::collections::BTreeSet::new();
    let types = if per_type { 1 } else { 2 };
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + STEP;
    while !want.is_empty() || acked.len() < types {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(e)) => {
                match &e {
                    ClientEvent::Upserted {
                        type_url,
                        name,
                        body,
                        ..
                    } => {
                        let key = (type_url.to_string(), name.to_string());
                        match want.get(&key) {
                            Some(b) if b[..] == body[..] => {
                                want.remove(&key);
                            }
                            _ => return Err(format!("{label}: unexpected {e:?}")),
                        }
                    }
                    ClientEvent::Acked { type_url, .. } => {
                        acked.insert(type_url.to_string());
                    }
                    ClientEvent::Nacked { .. } => {
                        return Err(format!("{label}: our client NACKed: {e:?}"))
                    }
                    _ => {}
                }
                seen.push(format!("{e:?}"));
            }
            _ => {
                return Err(format!(
                    "{label}: timed out; still missing {:?}, ACKed {acked:?}; events {seen:#?}",
                    want.keys().collect::<Vec<_>>()
                ))
            }
        }
    }
    // Let late responses arrive, then stop.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = commands_tx.send(Command::Stop);
    let client = tokio::time::timeout(STEP, run)
        .await
        .map_err(|_| format!("{label}: the client did not stop"))?
        .map_err(|e| e.to_string())?;
    if client.resource(CDS, "c3").is_some() {
        return Err(format!(
            "{label}: c3 does not exist but the client holds it"
        ));
    }
    let entries = recorder.entries();
    let codec = JsonCodec::new();
    let lines: Vec<String> = entries
        .iter()
        .map(|e| to_jsonl(e, &codec).unwrap())
        .collect();
    std::fs::write(
        workdir.join(format!("{label}.jsonl")),
        lines.join("\n") + "\n",
    )
    .map_err(|e| e.to_string())?;
    let ours = check(&entries, CheckSide::Client);
    if !ours.is_empty() {
        return Err(format!(
            "{label}: the checker found violations of our client: {ours:#?}"
        ));
    }
    let theirs: Vec<String> = check(&entries, CheckSide::Server)
        .iter()
        .map(|v| format!("line {}: {}: {}", v.line, v.rule.id(), v.detail))
        .collect();
    for v in &theirs {
        report.deviations.push(format!("{label}: checker: {v}"));
    }
    // c3 does not exist: in delta the server should say so (removed_resources or a
    // Resource without body); SotW cannot.
    if variant == Variant::Delta && !wildcard {
        let told = entries.iter().any(|e| match e {
            xds_sansio::transcript::Entry::Response {
                response: xds_sansio::Response::Delta(r),
                ..
            } => {
                r.removed_resources.iter().any(|n| n == "c3")
                    || r.resources
                        .iter()
                        .any(|x| x.name == "c3" && x.resource.is_none())
            }
            _ => false,
        });
        if !told {
            report.deviations.push(format!(
                "{label}: the subscribed name c3 does not exist and is never reported as such \
                 (no removed_resources, no body-less Resource); clients fall back on their \
                 does-not-exist timer"
            ));
        }
    }
    report.step(
        label,
        json!({"messages": entries.len(), "received": "every served resource, ACKed", "peer_violations": theirs}),
    );
    Ok(())
}

async fn story(workdir: &PathBuf, report: &mut Report) -> Result<()> {
    std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
    let cache = Arc::new(ShardedCache::new());
    let (snapshot, served) = snapshot();
    cache.set_snapshot(NodeHash::from_id(NODE), snapshot);
    let server = xds_server::XdsServerBuilder::new()
        .cache(cache)
        .enable_sotw()
        .enable_delta()
        .build()
        .map_err(|e| format!("xds-server: {e}"))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let serving = tokio::spawn(server.serve_with_shutdown(addr, stop_rx));
    let uri = format!("http://{addr}");
    // Wait until it accepts connections.
    common::eventually("xds-server listening", || async {
        tokio::net::TcpStream::connect(addr).await.ok().map(|_| ())
    })
    .await?;
    let result = async {
        let cds = Transport::PerType(CDS.into());
        let runs = [
            (Variant::Sotw, Transport::Aggregated, "sotw-ads", false),
            (Variant::Delta, Transport::Aggregated, "delta-ads", false),
            (
                Variant::Sotw,
                Transport::Aggregated,
                "sotw-ads-wildcard",
                true,
            ),
            (
                Variant::Delta,
                Transport::Aggregated,
                "delta-ads-wildcard",
                true,
            ),
            (Variant::Sotw, cds, "sotw-cds", false),
        ];
        for (variant, transport, label, wildcard) in runs {
            fetch(
                &uri, variant, transport, &served, report, label, workdir, wildcard,
            )
            .await?;
        }
        Ok(())
    }
    .await;
    let _ = stop_tx.send(());
    serving.abort();
    result
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = PathBuf::from(&args[1]);
    let mut report = Report {
        peer: "xds-server 0.1.0".into(),
        ..Default::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(120), story(&workdir, &mut report))
        .await
        .unwrap_or_else(|_| Err("the story took more than 120 s".into()));
    report.finish(&workdir, result)
}
