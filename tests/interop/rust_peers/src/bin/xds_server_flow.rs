//! Interop: our client (`XdsClient`, the client driver of `xds-sansio-tonic`, with a
//! recorder on every stream) <->
//! `xds-server` 0.1.0 (crates.io) on 127.0.0.1, SotW and delta over ADS, and SotW on the
//! per-type CDS service.
//!
//! xds-server answers requests from a snapshot but does not push a new snapshot to open
//! streams, so only first fetches are tested: our client subscribes to two Clusters and a
//! third that does not exist (or to every Cluster, legacy wildcard) and one
//! ClusterLoadAssignment through watches, must receive exactly the snapshot's bodies
//! (envoy-types resources) and ACK them (the status dump), and must not invent the missing
//! one. The conversation is recorded on our
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
use xds_cache::{Cache, ShardedCache, Snapshot};
use xds_core::{NodeHash, TypeUrl};
use xds_sansio_conformance::check::{check, to_jsonl, CheckSide};
use xds_sansio::client::ResourceState;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::Variant;
use xds_sansio_tonic::client::{Bootstrap, WatchEvent, XdsClient};
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

fn snapshot() -> (Snapshot, BTreeMap<(&'static str, &'static str), Vec<u8>>) {
    let mut served = BTreeMap::new();
    served.insert((CDS, "c1"), common::envoy_body(CDS, "c1", "cluster one"));
    served.insert((CDS, "c2"), common::envoy_body(CDS, "c2", "cluster two"));
    served.insert((EDS, "c1"), common::envoy_body(EDS, "c1", "endpoints one"));
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
    per_type: bool,
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
    let recorder = Arc::new(Recorder::new(None));
    let client = XdsClient::builder(Bootstrap::single(uri, node))
        .variant(variant)
        .per_type_streams(per_type)
        .tap(recorder.clone())
        .build()
        .map_err(|e| e.to_string())?;
    // Legacy wildcard (no names) or two existing names and one that does not exist.
    let mut watches = Vec::new();
    if wildcard {
        watches.push(client.watch_all(CDS).map_err(|e| e.to_string())?);
    } else {
        for name in ["c1", "c2", "c3"] {
            watches.push(client.watch(CDS, name).map_err(|e| e.to_string())?);
        }
    }
    if !per_type {
        watches.push(client.watch(EDS, "c1").map_err(|e| e.to_string())?);
    }
    let types: Vec<&str> = if per_type { vec![CDS] } else { vec![CDS, EDS] };
    // Every served resource of a watched type arrives with its body.
    let mut want: BTreeMap<(String, String), Vec<u8>> = served
        .iter()
        .filter(|((t, _), _)| types.contains(t))
        .map(|((t, n), b)| ((t.to_string(), n.to_string()), b.clone()))
        .collect();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + STEP;
    while !want.is_empty() {
        let next = async {
            loop {
                for (i, w) in watches.iter_mut().enumerate() {
                    if let Some(e) = w.try_next() {
                        return (i, e);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        match tokio::time::timeout_at(deadline, next).await {
            Ok((i, e)) => {
                let type_url = if !per_type && i == watches.len() - 1 {
                    EDS
                } else {
                    CDS
                };
                match &e {
                    WatchEvent::Changed { name, body, .. } => {
                        let key = (type_url.to_string(), name.to_string());
                        match want.get(&key) {
                            Some(b) if b[..] == body[..] => {
                                want.remove(&key);
                            }
                            _ => return Err(format!("{label}: unexpected {e:?}")),
                        }
                    }
                    WatchEvent::Error { .. } => {
                        return Err(format!("{label}: our client reported {e:?}"))
                    }
                    WatchEvent::DoesNotExist { name } if name.as_str() != "c3" => {
                        let codec = JsonCodec::new();
                        let lines: Vec<String> = recorder
                            .entries()
                            .iter()
                            .map(|e| to_jsonl(e, &codec).unwrap())
                            .collect();
                        let _ = std::fs::write(
                            workdir.join(format!("{label}-failed.jsonl")),
                            lines.join("\n") + "\n",
                        );
                        return Err(format!("{label}: {e:?}"));
                    }
                    _ => {}
                }
                seen.push(format!("{e:?}"));
            }
            Err(_) => {
                return Err(format!(
                    "{label}: timed out; still missing {:?}; events {seen:#?}",
                    want.keys().collect::<Vec<_>>()
                ))
            }
        }
    }
    // Let the ACKs leave and late responses arrive, then read the status and stop.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dump = client.dump().await;
    for entry in &dump {
        let held = entry.body.is_some();
        if entry.status.name.as_str() == "c3" && held {
            return Err(format!(
                "{label}: c3 does not exist but the client holds it"
            ));
        }
        if held && entry.status.status.state != ResourceState::Acked {
            return Err(format!("{label}: not ACKed: {entry:?}"));
        }
    }
    client.shutdown();
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
            xds_sansio_conformance::transcript::Entry::Response {
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
        let runs = [
            (Variant::Sotw, false, "sotw-ads", false),
            (Variant::Delta, false, "delta-ads", false),
            (Variant::Sotw, false, "sotw-ads-wildcard", true),
            (Variant::Delta, false, "delta-ads-wildcard", true),
            (Variant::Sotw, true, "sotw-cds", false),
        ];
        for (variant, per_type, label, wildcard) in runs {
            fetch(
                &uri, variant, per_type, &served, report, label, workdir, wildcard,
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

// One thread: the watches of a run are all made before the driver task first runs, so
// they ride on the stream's first request. xds-server 0.1.0 does not answer a SotW request
// that only adds names at an unchanged version (seen while writing this flow: a name added
// after the first response waited for the does-not-exist timer), so names added later
// would test that deviation instead of the fetch.
#[tokio::main(flavor = "current_thread")]
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
