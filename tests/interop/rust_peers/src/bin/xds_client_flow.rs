//! Interop: our ads_server example (SotW ADS) <-> hyperium `xds-client` 0.1.0-alpha.4
//! (crates.io, `default-features = false`, features `transport-tonic`, `codegen-prost`).
//!
//! The client watches a Listener, two Clusters and a ClusterLoadAssignment. Story: first
//! fetch; a cluster change; an invalid cluster (our validator rejects STATIC clusters)
//! NACKed and held; the fix; a cluster removal and restore; the server ends the stream and
//! the client reconnects with the versions it holds; an endpoint change on the new stream.
//! Each watcher event is checked against what the server serves.
//!
//! usage: xds_client_flow ADS_SERVER_BINARY WORKDIR

#[path = "../common.rs"]
mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{short, AdsServer, Report, Result, STEP};
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::cluster::v3::Cluster as ClusterProto;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment as ClaProto;
use envoy_types::pb::envoy::config::listener::v3::Listener as ListenerProto;
use prost::Message;
use serde_json::json;
use tokio::sync::mpsc;
use xds_client::resource::TypeUrl;
use xds_client::{
    ClientConfig, Node, ProstCodec, Resource, ResourceEvent, TokioRuntime, TonicTransportBuilder,
    XdsClient,
};

const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

#[derive(Debug)]
struct Listener(ListenerProto);
#[derive(Debug)]
struct Cluster(ClusterProto);
#[derive(Debug)]
struct Endpoints(ClaProto);

impl Resource for Listener {
    type Message = ListenerProto;
    const TYPE_URL: TypeUrl = TypeUrl::new(LDS);
    fn deserialize(bytes: Bytes) -> xds_client::Result<ListenerProto> {
        ListenerProto::decode(bytes).map_err(Into::into)
    }
    fn name(m: &ListenerProto) -> &str {
        &m.name
    }
    fn validate(m: ListenerProto) -> xds_client::Result<Self> {
        Ok(Listener(m))
    }
}

impl Resource for Cluster {
    type Message = ClusterProto;
    const TYPE_URL: TypeUrl = TypeUrl::new(CDS);
    fn deserialize(bytes: Bytes) -> xds_client::Result<ClusterProto> {
        ClusterProto::decode(bytes).map_err(Into::into)
    }
    fn name(m: &ClusterProto) -> &str {
        &m.name
    }
    fn validate(m: ClusterProto) -> xds_client::Result<Self> {
        if m.cluster_discovery_type
            == Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32))
        {
            return Err(xds_client::Error::Validation(
                "STATIC clusters are not supported".into(),
            ));
        }
        Ok(Cluster(m))
    }
}

impl Resource for Endpoints {
    type Message = ClaProto;
    const TYPE_URL: TypeUrl = TypeUrl::new(EDS);
    const ALL_RESOURCES_REQUIRED_IN_SOTW: bool = false;
    fn deserialize(bytes: Bytes) -> xds_client::Result<ClaProto> {
        ClaProto::decode(bytes).map_err(Into::into)
    }
    fn name(m: &ClaProto) -> &str {
        &m.cluster_name
    }
    fn validate(m: ClaProto) -> xds_client::Result<Self> {
        Ok(Endpoints(m))
    }
}

/// One watcher event, flattened: (type, name, Ok(body) | Err(kind and message)).
type Seen = (&'static str, String, std::result::Result<Vec<u8>, String>);

fn forward<T: Resource + std::fmt::Debug>(
    mut watcher: xds_client::ResourceWatcher<T>,
    type_url: &'static str,
    name: String,
    tx: mpsc::UnboundedSender<Seen>,
    encode: fn(&T) -> Vec<u8>,
) {
    tokio::spawn(async move {
        while let Some(event) = watcher.next().await {
            let seen = match event {
                ResourceEvent::ResourceChanged { result: Ok(r), .. } => Ok(encode(&r)),
                ResourceEvent::ResourceChanged { result: Err(e), .. } => {
                    Err(format!("changed: {e}"))
                }
                ResourceEvent::AmbientError { error, .. } => Err(format!("ambient: {error}")),
            };
            if tx.send((type_url, name.clone(), seen)).is_err() {
                return;
            }
        }
    });
}

fn listener(stat: &str) -> ListenerProto {
    ListenerProto {
        name: "l1".into(),
        stat_prefix: stat.into(),
        ..Default::default()
    }
}

fn cluster(name: &str, note: &str, valid: bool) -> ClusterProto {
    let kind = if valid {
        DiscoveryType::Eds
    } else {
        DiscoveryType::Static
    };
    ClusterProto {
        name: name.into(),
        alt_stat_name: note.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(kind as i32)),
        ..Default::default()
    }
}

fn endpoints(note: &str) -> ClaProto {
    let mut cla = ClaProto {
        cluster_name: "c1".into(),
        ..Default::default()
    };
    cla.endpoints.push(Default::default());
    cla.endpoints[0].locality = Some(envoy_types::pb::envoy::config::core::v3::Locality {
        region: note.into(),
        ..Default::default()
    });
    cla
}

struct State {
    l1: ListenerProto,
    c1: ClusterProto,
    c2: Option<ClusterProto>,
    e1: ClaProto,
}

impl State {
    fn served(&self) -> Vec<(String, Vec<u8>)> {
        let mut v = vec![
            (LDS.to_string(), self.l1.encode_to_vec()),
            (CDS.to_string(), self.c1.encode_to_vec()),
        ];
        if let Some(c2) = &self.c2 {
            v.push((CDS.to_string(), c2.encode_to_vec()));
        }
        v.push((EDS.to_string(), self.e1.encode_to_vec()));
        v
    }
}

struct Events {
    rx: mpsc::UnboundedReceiver<Seen>,
}

impl Events {
    /// Waits for an event of `type_url`/`name` matching `f`; returns the others seen.
    async fn wait(
        &mut self,
        what: &str,
        type_url: &str,
        name: &str,
        f: impl Fn(&std::result::Result<Vec<u8>, String>) -> bool,
    ) -> Result<(Vec<Seen>, Seen)> {
        let mut others = Vec::new();
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(seen)) => {
                    if seen.0 == type_url && seen.1 == name && f(&seen.2) {
                        return Ok((others, seen));
                    }
                    others.push(seen);
                }
                _ => {
                    let others: Vec<String> = others
                        .iter()
                        .map(|(t, n, r)| {
                            format!("{}/{n}: {:?}", short(t), r.as_ref().map(|b| b.len()))
                        })
                        .collect();
                    return Err(format!("timed out waiting for {what}; saw {others:?}"));
                }
            }
        }
    }
}

async fn story(binary: &str, workdir: &PathBuf, report: &mut Report) -> Result<()> {
    let mut state = State {
        l1: listener("l"),
        c1: cluster("c1", "a", true),
        c2: Some(cluster("c2", "a", true)),
        e1: endpoints("e1"),
    };
    let server = AdsServer::start(binary, workdir, &state.served())?;
    let node = Node::new("xds-sansio-interop", "0").with_id("xds-client-interop");
    let config = ClientConfig::new(node, format!("http://{}", server.addr));
    let client = XdsClient::builder(
        config,
        TonicTransportBuilder::new(),
        ProstCodec,
        TokioRuntime,
    )
    .build();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut events = Events { rx };
    forward(
        client.watch::<Listener>("l1").await,
        LDS,
        "l1".into(),
        tx.clone(),
        |r| r.0.encode_to_vec(),
    );
    for name in ["c1", "c2"] {
        forward(
            client.watch::<Cluster>(name).await,
            CDS,
            name.into(),
            tx.clone(),
            |r| r.0.encode_to_vec(),
        );
    }
    forward(
        client.watch::<Endpoints>("c1").await,
        EDS,
        "c1".into(),
        tx.clone(),
        |r| r.0.encode_to_vec(),
    );
    let _client = Arc::new(client);

    // 1. First fetch: every watcher gets exactly what is served.
    let mut pending = vec![
        (LDS, "l1", state.l1.encode_to_vec()),
        (CDS, "c1", state.c1.encode_to_vec()),
        (CDS, "c2", state.c2.as_ref().unwrap().encode_to_vec()),
        (EDS, "c1", state.e1.encode_to_vec()),
    ];
    let deadline = tokio::time::Instant::now() + STEP;
    while !pending.is_empty() {
        match tokio::time::timeout_at(deadline, events.rx.recv()).await {
            Ok(Some((t, n, r))) => {
                pending.retain(|(pt, pn, b)| !(*pt == t && *pn == n && r.as_ref() == Ok(b)))
            }
            _ => {
                return Err(format!(
                    "first fetch: still waiting for {:?}",
                    pending
                        .iter()
                        .map(|p| (short(p.0), p.1))
                        .collect::<Vec<_>>()
                ))
            }
        }
    }
    report.step(
        "first fetch",
        json!("every watcher got the served resource"),
    );

    // 2. A cluster change.
    state.c1 = cluster("c1", "b", true);
    server.publish(&state.served())?;
    let want = state.c1.encode_to_vec();
    let _ = events
        .wait("cluster change", CDS, "c1", |r| r.as_ref() == Ok(&want))
        .await?;
    report.step("cluster change", json!("delivered"));

    // 3. An invalid cluster is NACKed and held.
    state.c1 = cluster("c1", "bad", false);
    server.publish(&state.served())?;
    let (_, (_, _, error)) = events
        .wait("the rejection", CDS, "c1", |r| r.is_err())
        .await?;
    let (nack_at, nack) = server
        .wait_record("a CDS NACK", |_, l| {
            l["dir"] == "C->S"
                && l["message"]["typeUrl"] == CDS
                && l["message"].get("errorDetail").is_some()
        })
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resent = server
        .messages()
        .iter()
        .enumerate()
        .filter(|(i, l)| *i > nack_at && l["dir"] == "S->C" && l["message"]["typeUrl"] == CDS)
        .count();
    if resent > 0 {
        return Err(format!(
            "the server resent CDS {resent} times after the NACK"
        ));
    }
    report.step(
        "NACK",
        json!({"error_detail": nack["message"]["errorDetail"], "watcher": error.err(), "resent": false}),
    );
    if let Some(v) = nack["message"]["versionInfo"].as_str() {
        let acked = server
            .messages()
            .iter()
            .filter(|l| {
                l["dir"] == "C->S"
                    && l["message"]["typeUrl"] == CDS
                    && l["message"].get("errorDetail").is_none()
            })
            .filter_map(|l| l["message"]["versionInfo"].as_str().map(String::from))
            .last();
        if acked.as_deref() != Some(v) {
            report.deviations.push(format!(
                "the NACK carries version_info {v:?}, not the last accepted {acked:?}"
            ));
        }
    }

    // 4. The fix.
    state.c1 = cluster("c1", "c", true);
    server.publish(&state.served())?;
    let want = state.c1.encode_to_vec();
    let _ = events
        .wait("the fixed cluster", CDS, "c1", |r| r.as_ref() == Ok(&want))
        .await?;
    report.step("cluster fixed", json!("delivered"));

    // 5. Cluster removal and restore.
    let c2 = state.c2.take().unwrap();
    server.publish(&state.served())?;
    let (_, (_, _, gone)) = events.wait("c2 removal", CDS, "c2", |r| r.is_err()).await?;
    report.step("cluster removed", json!({"watcher": gone.err()}));
    state.c2 = Some(cluster("c2", "restored", true));
    server.publish(&state.served())?;
    let want = state.c2.as_ref().unwrap().encode_to_vec();
    let _ = events
        .wait("c2 restore", CDS, "c2", |r| r.as_ref() == Ok(&want))
        .await?;
    report.step("cluster restored", json!("delivered"));
    drop(c2);

    // 6. The server ends the stream; the client resumes with the versions it holds.
    server.settled().await?;
    let mut last = serde_json::Map::new();
    for l in server.messages() {
        let m = &l["message"];
        if l["dir"] == "C->S" && m.get("errorDetail").is_none() {
            if let (Some(t), Some(v)) = (m["typeUrl"].as_str(), m["versionInfo"].as_str()) {
                last.insert(short(t).into(), json!(v));
            }
        }
    }
    let streams: std::collections::BTreeSet<u64> = server
        .messages()
        .iter()
        .filter_map(|l| l["stream"].as_u64())
        .collect();
    server.end_streams()?;
    server
        .wait_record("requests on a new stream", |_, l| {
            l["dir"] == "C->S" && !streams.contains(&l["stream"].as_u64().unwrap_or(0))
        })
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut first = serde_json::Map::new();
    for l in server.messages() {
        if l["dir"] == "C->S" && !streams.contains(&l["stream"].as_u64().unwrap_or(0)) {
            let t = short(l["message"]["typeUrl"].as_str().unwrap_or("")).to_string();
            first
                .entry(t)
                .or_insert_with(|| l["message"]["versionInfo"].clone());
        }
    }
    report.step("reconnect", json!({"held": last, "first_requests": first}));
    for (t, v) in &last {
        let got = first.get(t).cloned().unwrap_or(serde_json::Value::Null);
        if &got != v {
            report.deviations.push(format!(
                "after reconnect the first {t} request carries version {got}, not the last ACKed {v}"
            ));
        }
    }
    state.e1 = endpoints("e2");
    server.publish(&state.served())?;
    let want = state.e1.encode_to_vec();
    let _ = events
        .wait("endpoint change on the new stream", EDS, "c1", |r| {
            r.as_ref() == Ok(&want)
        })
        .await?;
    report.step("endpoint change after reconnect", json!("delivered"));
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (binary, workdir) = (&args[1], PathBuf::from(&args[2]));
    let mut report = Report {
        peer: "xds-client 0.1.0-alpha.4".into(),
        ..Default::default()
    };
    let result = tokio::time::timeout(
        Duration::from_secs(240),
        story(binary, &workdir, &mut report),
    )
    .await
    .unwrap_or_else(|_| Err("the story took more than 240 s".into()));
    report.finish(&workdir, result)
}
