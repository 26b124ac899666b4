//! Interop: our ads_server example (delta ADS) <-> junction-core 0.3.2 (crates.io).
//!
//! junction-core speaks incremental ADS only. It subscribes to a Listener named after the
//! URL authority (`host:port`), the RouteConfiguration it names, the Cluster
//! `<svc>.<ns>.svc.cluster.local:<port>` and the ClusterLoadAssignment of the same name
//! (EDS service name = cluster name). The resources are built with junction-api's own
//! `to_xds` conversions, so they are what junction expects.
//!
//! Story: a resolve through xDS; an endpoint change; an invalid Cluster (EDS name mismatch)
//! NACKed and held while resolves keep working; the fix; Cluster removal and restore;
//! Listener removal and restore; the server ends the stream and junction resumes with
//! `initial_resource_versions`; an endpoint change on the new stream. After each step the
//! client's dump (its CSDS view) is compared with what the server serves.
//!
//! With `XDS_TAP=<the xds-sansio binary>`, junction dials `xds-sansio tap` in front of the
//! server (its findings in WORKDIR/tap.txt, its recording in WORKDIR/tap.jsonl).
//!
//! usage: junction_flow ADS_SERVER_BINARY WORKDIR

#[path = "../common.rs"]
mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use common::{eventually, short, AdsServer, Report, Result};
use junction_api::backend::{Backend, BackendId, LbPolicy};
use junction_api::http::Route;
use junction_api::{Name, Service};
use prost013::Message;
use serde_json::json;
use xds_api::pb::envoy::config::core::v3 as xds_core;
use xds_api::pb::envoy::config::endpoint::v3 as xds_endpoint;
use xds_api::pb::envoy::config::listener::v3 as xds_listener;
use xds_api::pb::envoy::extensions::filters::network::http_connection_manager::v3 as xds_http;
use xds_api::pb::google::protobuf::Any;

const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const HCM: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const AUTHORITY: &str = "echo.default.svc.cluster.local:8080";

fn ads() -> xds_core::ConfigSource {
    xds_core::ConfigSource {
        config_source_specifier: Some(xds_core::config_source::ConfigSourceSpecifier::Ads(
            xds_core::AggregatedConfigSource {},
        )),
        resource_api_version: xds_core::ApiVersion::V3 as i32,
        ..Default::default()
    }
}

struct World {
    backend: Backend,
    route: Route,
}

impl World {
    fn new() -> Result<World> {
        let service = Service::kube("default", "echo").map_err(|e| e.to_string())?;
        Ok(World {
            backend: Backend {
                id: BackendId {
                    service: service.clone(),
                    port: 8080,
                },
                lb: LbPolicy::RoundRobin,
            },
            route: Route::passthrough_route(Name::from_static("echo-route"), service),
        })
    }

    fn listener(&self, stat_prefix: &str) -> (String, Vec<u8>) {
        let hcm = xds_http::HttpConnectionManager {
            stat_prefix: stat_prefix.into(),
            route_specifier: Some(xds_http::http_connection_manager::RouteSpecifier::Rds(
                xds_http::Rds {
                    config_source: Some(ads()),
                    route_config_name: self.route.to_xds().name,
                },
            )),
            ..Default::default()
        };
        let listener = xds_listener::Listener {
            name: AUTHORITY.into(),
            api_listener: Some(xds_listener::ApiListener {
                api_listener: Some(Any {
                    type_url: HCM.into(),
                    value: hcm.encode_to_vec(),
                }),
            }),
            ..Default::default()
        };
        (LDS.into(), listener.encode_to_vec())
    }

    /// The route. (junction also asks for a Listener `<host>.lb.jct:<port>` carrying the
    /// backend's hash policy and for the port-less Cluster of a passthrough route; both are
    /// optional for it, and the server answers them as not found.)
    fn routes(&self) -> Vec<(String, Vec<u8>)> {
        vec![(RDS.into(), self.route.to_xds().encode_to_vec())]
    }

    fn cluster(&self, valid: bool) -> (String, Vec<u8>) {
        let mut cluster = self.backend.to_xds();
        if !valid {
            if let Some(eds) = cluster.eds_cluster_config.as_mut() {
                eds.service_name = "not-the-cluster-name".into();
            }
        }
        (CDS.into(), cluster.encode_to_vec())
    }

    fn endpoints(&self, port: u16) -> (String, Vec<u8>) {
        use xds_core::address::Address as A;
        use xds_core::socket_address::PortSpecifier;
        let cla = xds_endpoint::ClusterLoadAssignment {
            cluster_name: self.backend.id.name(),
            endpoints: vec![xds_endpoint::LocalityLbEndpoints {
                lb_endpoints: vec![xds_endpoint::LbEndpoint {
                    host_identifier: Some(xds_endpoint::lb_endpoint::HostIdentifier::Endpoint(
                        xds_endpoint::Endpoint {
                            address: Some(xds_core::Address {
                                address: Some(A::SocketAddress(xds_core::SocketAddress {
                                    address: "127.0.0.1".into(),
                                    port_specifier: Some(PortSpecifier::PortValue(port.into())),
                                    ..Default::default()
                                })),
                            }),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        (EDS.into(), cla.encode_to_vec())
    }
}

async fn resolve(client: &junction_core::Client) -> std::result::Result<SocketAddr, String> {
    let url = junction_core::Url::from_str(&format!("http://{AUTHORITY}/")).unwrap();
    client
        .resolve_http(&http::Method::GET, &url, &http::HeaderMap::new())
        .await
        .map(|e| e.addr())
        .map_err(|e| e.to_string())
}

async fn resolves_to(client: &junction_core::Client, what: &str, port: u16) -> Result<()> {
    eventually(what, || async {
        matches!(resolve(client).await, Ok(a) if a.port() == port).then_some(())
    })
    .await
}

/// The client's dump against what is served: every served resource it subscribes to is
/// held with the very bytes served (names in `absent_ok` may be missing).
async fn compare(
    client: &junction_core::Client,
    served: &[(String, Vec<u8>)],
    absent_ok: &[&str],
    report: &mut Report,
    step: &str,
) -> Result<()> {
    let problems = eventually(step, || async {
        let dump = client.dump_xds(true);
        let mut problems = Vec::new();
        for (type_url, body) in served {
            let name = name_field_1(body);
            let held = dump
                .iter()
                .find(|c| c.type_url == *type_url && c.name == name);
            match held.and_then(|c| c.xds.as_ref()) {
                Some(any) if any.value == *body => {}
                Some(_) => problems.push(format!("{}/{name}: differs", short(type_url))),
                None if absent_ok.contains(&type_url.as_str()) => {}
                None => problems.push(format!("{}/{name}: not held", short(type_url))),
            }
        }
        problems.is_empty().then_some(problems)
    })
    .await;
    if let Err(e) = problems {
        let dump: Vec<_> = client
            .dump_xds(true)
            .iter()
            .map(|c| {
                format!(
                    "{}/{} v={:?} held={} err={:?}",
                    short(&c.type_url),
                    c.name,
                    c.version.as_deref(),
                    c.xds.is_some(),
                    c.last_error
                )
            })
            .collect();
        return Err(format!("{e}: dump {dump:?}"));
    }
    let view: Vec<String> = client
        .dump_xds(true)
        .iter()
        .map(|c| {
            format!(
                "{}/{}: {}{}",
                short(&c.type_url),
                c.name,
                if c.xds.is_some() { "held" } else { "not held" },
                c.last_error
                    .as_ref()
                    .map(|e| format!(" error {:?}", e.1))
                    .unwrap_or_default()
            )
        })
        .collect();
    report.step(step, json!({ "dump": view }));
    Ok(())
}

fn name_field_1(body: &[u8]) -> String {
    // Every resource here has its name in field 1 (tag 0x0a) first.
    if body.first() == Some(&0x0a) {
        let len = body.get(1).copied().unwrap_or(0) as usize;
        if let Some(name) = body.get(2..2 + len) {
            return String::from_utf8_lossy(name).into_owned();
        }
    }
    String::new()
}

async fn story(binary: &str, workdir: &PathBuf, report: &mut Report) -> Result<()> {
    let world = World::new()?;
    let mut served = vec![world.listener("echo")];
    served.extend(world.routes());
    served.push(world.cluster(true));
    served.push(world.endpoints(9001));
    let server = AdsServer::start(binary, workdir, &served)?;
    // With XDS_TAP, `xds-sansio tap` sits between junction and the server.
    let tap = common::Tap::start(&server.addr, workdir)?;
    let address = tap.as_ref().map_or(server.addr.clone(), |t| t.addr.clone());
    let client = junction_core::Client::build(
        format!("http://{address}"),
        "junction-interop".into(),
        "interop".into(),
    )
    .await
    .map_err(|e| format!("junction client: {e}"))?;

    // 1. A resolve through xDS.
    resolves_to(&client, "first resolve through xDS", 9001).await?;
    compare(&client, &served, &[], report, "first fetch").await?;

    // 2. An endpoint change.
    let eds = served.len() - 1;
    served[eds] = world.endpoints(9002);
    server.publish(&served)?;
    resolves_to(&client, "endpoint change", 9002).await?;
    compare(&client, &served, &[], report, "endpoint change").await?;

    // 3. An invalid Cluster is NACKed; the server holds it; resolves keep working.
    let cds = served.len() - 2;
    served[cds] = world.cluster(false);
    server.publish(&served)?;
    let (nack_at, nack) = server
        .wait_record("a CDS NACK", |_, l| {
            l["dir"] == "C->S"
                && l["message"]["typeUrl"] == CDS
                && l["message"].get("errorDetail").is_some()
        })
        .await?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
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
    let during = resolve(&client).await;
    if !matches!(during, Ok(a) if a.port() == 9002) {
        return Err(format!("resolves broke after the NACK: {during:?}"));
    }
    let errors: Vec<String> = client
        .dump_xds_errors()
        .iter()
        .map(|c| format!("{}/{}: {:?}", short(&c.type_url), c.name, c.last_error))
        .collect();
    if errors.is_empty() {
        report
            .deviations
            .push("the NACKed Cluster does not show in dump_xds_errors".into());
    }
    report.step(
        "NACK",
        json!({"error_detail": nack["message"]["errorDetail"], "resent": false, "errors": errors}),
    );

    // 4. The fix (the original Cluster again).
    served[cds] = world.cluster(true);
    server.publish(&served)?;
    server
        .wait_record("the ACK of the fixed cluster", |i, l| {
            i > nack_at
                && l["dir"] == "C->S"
                && l["message"]["typeUrl"] == CDS
                && l["message"].get("errorDetail").is_none()
                && l["message"].get("responseNonce").is_some()
        })
        .await?;
    compare(&client, &served, &[], report, "cluster fixed").await?;
    let stale: Vec<String> = client
        .dump_xds_errors()
        .iter()
        .map(|c| format!("{}/{}: {:?}", short(&c.type_url), c.name, c.last_error))
        .collect();
    if !stale.is_empty() {
        report.deviations.push(format!(
            "after the fixed Cluster was ACKed, the dump still reports the old rejection: {stale:?}"
        ));
    }

    // 5. Cluster removal and restore.
    let cluster = served.remove(cds);
    server.publish(&served)?;
    server
        .wait_record("a CDS removal", |_, l| {
            l["dir"] == "S->C"
                && l["message"]["typeUrl"] == CDS
                && l["message"]["removedResources"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
        })
        .await?;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let during = resolve(&client).await;
    report.step("cluster removed", json!({"resolve": format!("{during:?}")}));
    if matches!(during, Ok(a) if a.port() == 9002) {
        report.deviations.push(format!(
            "after the Cluster is removed, resolves still return its endpoints ({during:?})"
        ));
    }
    served.insert(cds, cluster);
    server.publish(&served)?;
    resolves_to(&client, "resolve after the cluster is restored", 9002).await?;
    compare(&client, &served, &[], report, "cluster restored").await?;

    // 6. Listener removal and restore (restored with a changed field).
    let listener = served.remove(0);
    server.publish(&served)?;
    server
        .wait_record("an LDS removal", |_, l| {
            l["dir"] == "S->C"
                && l["message"]["typeUrl"] == LDS
                && l["message"]["removedResources"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
        })
        .await?;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let during = resolve(&client).await;
    report.step(
        "listener removed",
        json!({"resolve": format!("{during:?}")}),
    );
    drop(listener);
    served.insert(0, world.listener("echo-restored"));
    server.publish(&served)?;
    compare(&client, &served, &[], report, "listener restored").await?;
    resolves_to(&client, "resolve after the listener is restored", 9002).await?;

    // 7. The server ends the stream; junction resumes with initial_resource_versions.
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
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mut first = serde_json::Map::new();
    for l in server.messages() {
        if l["dir"] == "C->S" && !streams.contains(&l["stream"].as_u64().unwrap_or(0)) {
            let t = l["message"]["typeUrl"].as_str().unwrap_or("").to_string();
            first.entry(short(&t).to_string()).or_insert_with(|| {
                json!({
                    "subscribe": l["message"]["resourceNamesSubscribe"],
                    "initial": l["message"]["initialResourceVersions"],
                })
            });
        }
    }
    report.step("reconnect", json!({ "first_requests": first }));
    for (t, r) in &first {
        if r["initial"].as_object().is_none_or(|m| m.is_empty()) {
            report.deviations.push(format!(
                "after reconnect the first {t} request has no initial_resource_versions"
            ));
        }
    }
    let last = served.len() - 1;
    served[last] = world.endpoints(9003);
    server.publish(&served)?;
    resolves_to(&client, "endpoint change on the new stream", 9003).await?;
    compare(&client, &served, &[], report, "after reconnect").await?;
    drop(tap);
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (binary, workdir) = (&args[1], PathBuf::from(&args[2]));
    let mut report = Report {
        peer: "junction-core 0.3.2".into(),
        ..Default::default()
    };
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(240),
        story(binary, &workdir, &mut report),
    )
    .await
    .unwrap_or_else(|_| Err("the story took more than 240 s".into()));
    report.finish(&workdir, result)
}
