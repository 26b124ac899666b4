//! Interop: our client (`XdsClient`, recorder on every stream) <-> rust-control-plane 0.1.2
//! (crates.io; tonic 0.8, Envoy types from data-plane-api) on 127.0.0.1, SotW over ADS
//! (by name and legacy wildcard) and on the per-type CDS service. rust-control-plane has
//! no incremental xDS (its delta methods are unimplemented), so delta is not tried.
//!
//! The story per run: the client watches two Clusters, one that does not exist and (ADS)
//! one ClusterLoadAssignment; it must receive exactly the snapshot's bodies, ACKed; then a
//! new snapshot changes c1, which the server pushes and the client must apply. The
//! conversation is recorded on our side; the checker must find no violation of ours; what
//! the peer breaks is listed.
//!
//! usage: rust_control_plane_flow WORKDIR

#[path = "../common.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{Report, Result, STEP};
use data_plane_api::envoy::config::cluster::v3::Cluster;
use data_plane_api::envoy::config::endpoint::v3::ClusterLoadAssignment;
use prost011::Message;
use rust_control_plane::cache::Cache;
use rust_control_plane::service::common::Service;
use rust_control_plane::snapshot::{Resource, Resources, Snapshot};
use serde_json::json;
use xds_sansio_conformance::check::{check, to_jsonl, CheckSide};
use xds_sansio::client::ResourceState;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::Variant;
use xds_sansio_tonic::client::{Bootstrap, Watch, WatchEvent, XdsClient};
use xds_sansio_tonic::record::Recorder;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const NODE: &str = "xds-sansio-client";

fn cluster(name: &str, note: &str) -> Cluster {
    Cluster {
        name: name.into(),
        alt_stat_name: note.into(),
        ..Default::default()
    }
}

fn snapshot(
    version: &str,
    c1_note: &str,
) -> (Snapshot, BTreeMap<(&'static str, &'static str), Vec<u8>>) {
    let mut served = BTreeMap::new();
    let mut clusters = Resources::new(version.into());
    for (name, note) in [("c1", c1_note), ("c2", "cluster two")] {
        let c = cluster(name, note);
        served.insert(
            (CDS, if name == "c1" { "c1" } else { "c2" }),
            c.encode_to_vec(),
        );
        clusters.items.insert(name.into(), Resource::Cluster(c));
    }
    let mut endpoints = Resources::new(version.into());
    let cla = ClusterLoadAssignment {
        cluster_name: "c1".into(),
        ..Default::default()
    };
    served.insert((EDS, "c1"), cla.encode_to_vec());
    endpoints.items.insert("c1".into(), Resource::Endpoint(cla));
    let mut snapshot = Snapshot::new();
    snapshot.insert(CDS.into(), clusters);
    snapshot.insert(EDS.into(), endpoints);
    (snapshot, served)
}

/// The next event of any watch (index, event), bounded.
async fn next_event(watches: &mut [(&'static str, Watch)]) -> Option<(&'static str, WatchEvent)> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        for (type_url, w) in watches.iter_mut() {
            if let Some(e) = w.try_next() {
                return Some((type_url, e));
            }
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_for(
    label: &str,
    watches: &mut [(&'static str, Watch)],
    mut want: BTreeMap<(String, String), Vec<u8>>,
) -> Result<()> {
    let mut seen = Vec::new();
    while !want.is_empty() {
        let Some((type_url, e)) = next_event(watches).await else {
            return Err(format!(
                "{label}: timed out; missing {:?}; seen {seen:#?}",
                want.keys().collect::<Vec<_>>()
            ));
        };
        match &e {
            WatchEvent::Changed { name, body, .. } => {
                let key = (type_url.to_string(), name.to_string());
                match want.get(&key) {
                    Some(b) if b[..] == body[..] => {
                        want.remove(&key);
                    }
                    // An older body still arriving is fine; a foreign one is not.
                    Some(_) => {}
                    None => return Err(format!("{label}: unexpected {e:?}")),
                }
            }
            WatchEvent::DoesNotExist { name } if name.as_str() != "c3" => {
                return Err(format!("{label}: {e:?}"))
            }
            WatchEvent::Error { .. } => return Err(format!("{label}: {e:?}")),
            _ => {}
        }
        seen.push(format!("{e:?}"));
    }
    Ok(())
}

async fn run(
    uri: &str,
    cache: &Arc<Cache>,
    per_type: bool,
    wildcard: bool,
    label: &str,
    report: &mut Report,
    workdir: &PathBuf,
) -> Result<()> {
    let (first, served) = snapshot("v1", "cluster one");
    cache.set_snapshot(NODE, first).await;
    let node = Node {
        id: NODE.into(),
        ..Node::default()
    };
    let recorder = Arc::new(Recorder::new(None));
    let client = XdsClient::builder(Bootstrap::single(uri, node))
        .variant(Variant::Sotw)
        .per_type_streams(per_type)
        .tap(recorder.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let mut watches: Vec<(&'static str, Watch)> = Vec::new();
    if wildcard {
        watches.push((CDS, client.watch_all(CDS).map_err(|e| e.to_string())?));
    } else {
        for name in ["c1", "c2", "c3"] {
            watches.push((CDS, client.watch(CDS, name).map_err(|e| e.to_string())?));
        }
    }
    if !per_type {
        watches.push((EDS, client.watch(EDS, "c1").map_err(|e| e.to_string())?));
    }
    let types: Vec<&str> = if per_type { vec![CDS] } else { vec![CDS, EDS] };
    let want = |served: &BTreeMap<(&'static str, &'static str), Vec<u8>>| {
        served
            .iter()
            .filter(|((t, _), _)| types.contains(t))
            .map(|((t, n), b)| ((t.to_string(), n.to_string()), b.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let save = |suffix: &str| {
        let codec = JsonCodec::new();
        let lines: Vec<String> = recorder
            .entries()
            .iter()
            .map(|e| to_jsonl(e, &codec).unwrap())
            .collect();
        let _ = std::fs::write(
            workdir.join(format!("{label}{suffix}.jsonl")),
            lines.join("\n") + "\n",
        );
    };
    if let Err(e) = wait_for(label, &mut watches, want(&served)).await {
        save("-failed");
        return Err(e);
    }
    // A new snapshot: the server pushes it.
    let (second, served2) = snapshot("v2", "cluster one, changed");
    cache.set_snapshot(NODE, second).await;
    let changed: BTreeMap<_, _> = want(&served2)
        .into_iter()
        .filter(|((t, n), _)| t == CDS && n == "c1")
        .collect();
    wait_for(&format!("{label} (update)"), &mut watches, changed).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for entry in client.dump().await {
        if entry.body.is_some() && entry.status.status.state != ResourceState::Acked {
            return Err(format!("{label}: not ACKed: {entry:?}"));
        }
        if entry.status.name.as_str() == "c3" && entry.body.is_some() {
            return Err(format!(
                "{label}: c3 does not exist but the client holds it"
            ));
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
    report.step(
        label,
        json!({"messages": entries.len(), "received": "every served resource, ACKed; the pushed update applied", "peer_violations": theirs}),
    );
    Ok(())
}

async fn story(workdir: &PathBuf, report: &mut Report) -> Result<()> {
    use data_plane_api::envoy::service::cluster::v3::cluster_discovery_service_server::ClusterDiscoveryServiceServer;
    use data_plane_api::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryServiceServer;
    std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
    report.deviations.push(
        "with an ADS cache (Cache::new(true)) the server never answers a request naming every \
         resource of its snapshot, nor a wildcard request (its ADS consistency check is \
         inverted); the flow uses Cache::new(false)"
            .into(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    drop(listener);
    let mut runs = Vec::new();
    for (per_type, wildcard, label) in [
        (false, false, "sotw-ads"),
        (false, true, "sotw-ads-wildcard"),
        (true, false, "sotw-cds"),
    ] {
        // A fresh server (its cache is per node, and each run starts from v1). The cache is
        // made with `ads = false` even for ADS: with `ads = true`, rust-control-plane 0.1.2
        // holds back every response whose request names all of its snapshot's resources
        // (and every wildcard request), its ADS consistency check being the inverse of
        // go-control-plane's, so an ADS client is never answered.
        let ads_cache = Arc::new(Cache::new(false));
        let server = tonic08::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(Service::new(
                ads_cache.clone(),
            )))
            .add_service(ClusterDiscoveryServiceServer::new(Service::new(
                ads_cache.clone(),
            )))
            .serve(addr);
        let serving = tokio::spawn(server);
        common::eventually("rust-control-plane listening", || async {
            tokio::net::TcpStream::connect(addr).await.ok().map(|_| ())
        })
        .await?;
        let uri = format!("http://{addr}");
        let result = run(&uri, &ads_cache, per_type, wildcard, label, report, workdir).await;
        serving.abort();
        let _ = serving.await;
        runs.push(label);
        result?;
    }
    Ok(())
}

// One thread: a run's watches are all made before the driver task first runs, so they
// ride on the stream's first request.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = PathBuf::from(&args[1]);
    let mut report = Report {
        peer: "rust-control-plane 0.1.2".into(),
        ..Default::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(120), story(&workdir, &mut report))
        .await
        .unwrap_or_else(|_| Err("the story took more than 120 s".into()));
    report.finish(&workdir, result)
}
